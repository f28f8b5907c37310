//! A server that drops keep-alive connections the way real ones do, at the worst moment: it
//! reads the next request on a connection it has decided to retire and closes without
//! answering. That is the race a client loses against llama.cpp's server, a keep-alive limit
//! or a proxy's idle timeout: the request crossed the server's close on the wire.
//!
//! Speaks just enough HTTP/1.1 by hand: hyper-based servers announce their closes with
//! `Connection: close`, which is exactly what this must not do.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// When a connection is retired.
#[derive(Clone, Copy, Debug, Default)]
pub struct Retire {
    /// Answer this many requests on a connection, then close on the next one.
    pub after_requests: Option<usize>,
    /// Close on a request that arrives after the connection was idle this long.
    pub idle: Option<Duration>,
    /// Close the connection 20 ms after answering this many requests on it, without a
    /// `Connection: close`: the close reaches the client while the connection sits idle in
    /// its pool, not with the answer.
    pub close_after: Option<usize>,
}

#[derive(Debug, Default)]
pub struct Counts {
    pub connections: AtomicUsize,
    pub answered: AtomicUsize,
    /// Requests read and then dropped by closing the connection.
    pub dropped: AtomicUsize,
}

pub struct KeepAliveServer {
    addr: SocketAddr,
    pub counts: Arc<Counts>,
    task: tokio::task::JoinHandle<()>,
}

impl KeepAliveServer {
    /// Every chat request gets a short SSE stream of `tokens`, each its own chunk; `GET
    /// /v1/models` gets `models_body`. No `X-Request-Id` is echoed, as llama.cpp does not.
    pub async fn start(
        retire: Retire,
        tokens: Vec<String>,
        models_body: String,
    ) -> KeepAliveServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                c.connections.fetch_add(1, Ordering::Relaxed);
                let (c, tokens, models) = (c.clone(), tokens.clone(), models_body.clone());
                tokio::spawn(async move {
                    let _ = serve(sock, retire, &c, &tokens, &models).await;
                });
            }
        });
        KeepAliveServer { addr, counts, task }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn answered(&self) -> usize {
        self.counts.answered.load(Ordering::Relaxed)
    }

    pub fn dropped(&self) -> usize {
        self.counts.dropped.load(Ordering::Relaxed)
    }

    pub fn connections(&self) -> usize {
        self.counts.connections.load(Ordering::Relaxed)
    }
}

impl Drop for KeepAliveServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request (headers, then as much body as Content-Length announces); returns its
/// request line, or `None` at a clean EOF. The raw fault server reads requests with it too.
pub(crate) async fn read_request(sock: &mut TcpStream) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head_end, length) = loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (i + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf[..head_end]);
    Ok(Some(line.lines().next().unwrap_or("").to_string()))
}

async fn serve(
    mut sock: TcpStream,
    retire: Retire,
    counts: &Counts,
    tokens: &[String],
    models: &str,
) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    let mut served = 0usize;
    let mut last = Instant::now();
    while let Some(line) = read_request(&mut sock).await? {
        let too_many = retire.after_requests.is_some_and(|n| served >= n);
        let too_idle = retire.idle.is_some_and(|d| last.elapsed() >= d);
        if too_many || too_idle {
            counts.dropped.fetch_add(1, Ordering::Relaxed);
            return Ok(()); // drop: FIN with the request unanswered
        }
        if line.contains("/models") {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                models.len()
            );
            sock.write_all(head.as_bytes()).await?;
            sock.write_all(models.as_bytes()).await?;
        } else {
            // The head goes out with the first event in one write, as llama.cpp's server does:
            // the client reads both in one packet.
            let mut head = String::from(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
            );
            let mut events: Vec<String> = tokens
                .iter()
                .map(|t| {
                    let c = serde_json::json!({"choices": [{"index": 0, "delta": {"content": t}}]});
                    format!("data: {c}\n\n")
                })
                .collect();
            events.push("data: [DONE]\n\n".into());
            for e in events {
                head.push_str(&format!("{:x}\r\n{e}\r\n", e.len()));
                sock.write_all(head.as_bytes()).await?;
                head.clear();
            }
            sock.write_all(b"0\r\n\r\n").await?;
        }
        sock.flush().await?;
        served += 1;
        counts.answered.fetch_add(1, Ordering::Relaxed);
        last = Instant::now();
        if retire.close_after.is_some_and(|n| served >= n) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            return Ok(());
        }
    }
    Ok(())
}
