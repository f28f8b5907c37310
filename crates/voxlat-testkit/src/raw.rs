//! Faults below HTTP, which a well-behaved HTTP stack cannot script: a TCP reset in the middle
//! of a stream. The server speaks just enough HTTP/1.1 by hand to get there.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// Answers every request with SSE headers and `events` (each sent as one chunk, `gap` apart),
/// then resets the connection: `SO_LINGER` 0 makes the close send RST instead of FIN, which
/// is what a crashing gateway or a killed backend behind a load balancer looks like.
pub struct ResettingServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl ResettingServer {
    pub async fn start(events: Vec<String>, gap: Duration) -> ResettingServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let events = events.clone();
                tokio::spawn(async move {
                    let _ = serve_then_reset(sock, &events, gap).await;
                });
            }
        });
        ResettingServer { addr, task }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for ResettingServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn read_request(sock: &mut TcpStream) -> std::io::Result<()> {
    crate::keepalive::read_request(sock)
        .await?
        .map(drop)
        .ok_or_else(|| std::io::ErrorKind::UnexpectedEof.into())
}

async fn serve_then_reset(
    mut sock: TcpStream,
    events: &[String],
    gap: Duration,
) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    read_request(&mut sock).await?;
    sock.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    .await?;
    for e in events {
        let payload = format!("data: {e}\n\n");
        sock.write_all(format!("{:x}\r\n{payload}\r\n", payload.len()).as_bytes())
            .await?;
        sock.flush().await?;
        tokio::time::sleep(gap).await;
    }
    sock.set_zero_linger()?;
    drop(sock);
    Ok(())
}
