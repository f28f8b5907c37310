//! The server sees the measured client leave: voxlat-llm's direct transport (the plain
//! HTTP/1.1 stack every local benchmark uses) against the real server with its scripted
//! engine, rather than a stand-in client or a stand-in server. A reply dropped mid-body must
//! close its socket (not go back to the pool, where the next request would find it still
//! streaming) and free the slot it held.

use axum::serve::Listener;
use serde_json::Value;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use voxlat_core::{RequestId, Timeline};
use voxlat_llm::{ChatRequest, ClientOptions, Endpoint, LlmClient, Message};
use voxlat_net::connection::TransportKind;
use voxlat_server::engine::Engine;
use voxlat_server::fake::{FakeEngine, FakeModel};
use voxlat_server::http::AppState;
use voxlat_server::sched::Scheduler;

/// One accepted connection: whether it carried chat requests (the test's /health calls come
/// on connections of their own), and how it ended, as the server's side of the socket saw it.
#[derive(Default)]
struct ConnEnd {
    chat: std::sync::atomic::AtomicBool,
    end: Mutex<Option<String>>,
}

impl ConnEnd {
    fn note(&self, how: String) {
        if let Ok(mut g) = self.end.lock() {
            g.get_or_insert(how);
        }
    }
    fn get(&self) -> Option<String> {
        self.end.lock().ok().and_then(|g| g.clone())
    }
}

/// The connections that carried chat requests, in accept order.
fn chat_conns(conns: &Mutex<Vec<Arc<ConnEnd>>>) -> Vec<Arc<ConnEnd>> {
    let all = conns.lock().unwrap();
    all.iter()
        .filter(|c| c.chat.load(Ordering::Acquire))
        .cloned()
        .collect()
}

/// The server's listener, noting every connection it accepts.
struct Watched {
    inner: TcpListener,
    conns: Arc<Mutex<Vec<Arc<ConnEnd>>>>,
}

impl Listener for Watched {
    type Io = WatchedIo;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (WatchedIo, std::net::SocketAddr) {
        loop {
            if let Ok((tcp, addr)) = self.inner.accept().await {
                // As voxlat_server::serve sets it.
                let _ = tcp.set_nodelay(true);
                let end = Arc::new(ConnEnd::default());
                self.conns.lock().unwrap().push(end.clone());
                return (WatchedIo { tcp, end }, addr);
            }
        }
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
}

/// A server-side socket that notes the end of its stream: a read of nothing (the client's
/// FIN), or a read or write the client's reset broke.
struct WatchedIo {
    tcp: TcpStream,
    end: Arc<ConnEnd>,
}

impl AsyncRead for WatchedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.tcp).poll_read(cx, buf);
        match &r {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                this.end.note("eof".into())
            }
            Poll::Ready(Ok(())) if buf.filled()[before..].starts_with(b"POST /v1/chat/") => {
                this.end.chat.store(true, Ordering::Release)
            }
            Poll::Ready(Err(e)) => this.end.note(format!("read: {:?}", e.kind())),
            _ => {}
        }
        r
    }
}

impl AsyncWrite for WatchedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.tcp).poll_write(cx, buf);
        if let Poll::Ready(Err(e)) = &r {
            this.end.note(format!("write: {:?}", e.kind()));
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

struct Server {
    base: String,
    conns: Arc<Mutex<Vec<Arc<ConnEnd>>>>,
    produced: Arc<AtomicU64>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// voxlat-server's router and scheduler on one slot, its scripted engine sending `n` tokens
/// 5 ms apart.
async fn start(n: usize) -> Server {
    let produced = Arc::new(AtomicU64::new(0));
    let p = produced.clone();
    let sched = Scheduler::start(1, 4, move |_| {
        Ok(Box::new(FakeEngine {
            pieces: vec!["tok ".to_string(); n],
            token_delay: Duration::from_millis(5),
            prefill_per_token: Duration::from_micros(100),
            produced: p.clone(),
        }) as Box<dyn Engine>)
    })
    .unwrap();
    let state = AppState::new(Arc::new(FakeModel::new(200)), Arc::new(sched));
    let inner = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = inner.local_addr().unwrap();
    let conns = Arc::new(Mutex::new(Vec::new()));
    let listener = Watched {
        inner,
        conns: conns.clone(),
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, voxlat_server::http::router(state))
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
    });
    Server {
        base: format!("http://{addr}"),
        conns,
        produced,
        _stop: tx,
    }
}

fn request(max_tokens: Option<u32>) -> ChatRequest {
    ChatRequest {
        model: "fake.gguf".into(),
        messages: vec![Message::new("user", "hi")],
        max_tokens,
        ..ChatRequest::default()
    }
}

async fn health(base: &str) -> Value {
    reqwest::get(format!("{base}/health"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls `f` until it holds; a deadline only for a server that never gets there.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    let t0 = Instant::now();
    while !f().await {
        assert!(t0.elapsed() < Duration::from_secs(10), "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_direct_stream_mid_body_closes_its_socket_and_frees_the_only_slot() {
    const TOKENS: usize = 2000;
    let s = start(TOKENS).await;
    let client = LlmClient::new(
        Endpoint::new(&format!("{}/v1", s.base), None),
        ClientOptions::default(),
    )
    .unwrap();

    // A short reply read to its end: its connection goes back to the pool.
    let (out, err) = client
        .stream_chat(&request(Some(2)), &Timeline::new(RequestId::new()), |_| {})
        .await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(out.connection.transport, Some(TransportKind::Direct));
    assert!(out.connection.new_connection);
    assert_eq!(out.text, "tok tok ");
    eventually("the first reply's slot is idle", || async {
        health(&s.base).await["busy"] == 0
    })
    .await;

    // A long one, on that pooled connection, dropped as soon as content arrived.
    let got = Arc::new(tokio::sync::Notify::new());
    let notify = got.clone();
    let tl = Timeline::new(RequestId::new());
    let req = request(Some(TOKENS as u32));
    let stream = client.stream_chat(&req, &tl, move |d| {
        if !d.text.is_empty() {
            notify.notify_one();
        }
    });
    tokio::select! {
        _ = stream => panic!("the long reply ended before it was dropped"),
        () = got.notified() => {}
    }
    let first = {
        let conns = chat_conns(&s.conns);
        assert_eq!(
            conns.len(),
            1,
            "the long reply went out on the pooled connection"
        );
        conns[0].clone()
    };

    // The server's socket ended (the client's FIN, or its reset: the client closed with
    // tokens still unread), rather than staying open as a pooled connection would.
    eventually("the server sees the connection end", || {
        let ended = first.get().is_some();
        async move { ended }
    })
    .await;
    let how = first.get().unwrap_or_default();
    eprintln!("the server's side of the dropped connection ended by {how}");
    assert!(
        how == "eof" || how.contains("ConnectionReset") || how.contains("BrokenPipe"),
        "{how}"
    );

    // The one slot was freed: the generation was cancelled, not run to its end.
    eventually("the generation is cancelled and the slot idle", || async {
        let h = health(&s.base).await;
        h["cancelled"] == 1 && h["busy"] == 0
    })
    .await;
    let produced = s.produced.load(Ordering::Relaxed);
    assert!(
        produced < 2 + TOKENS as u64,
        "the whole reply was generated: {produced}"
    );

    // The next request opens a new connection (the dropped one was not pooled) and the
    // same single slot serves it.
    let (out, err) = client
        .stream_chat(&request(Some(2)), &Timeline::new(RequestId::new()), |_| {})
        .await;
    assert!(err.is_none(), "{err:?}");
    assert!(
        out.connection.new_connection,
        "the next request reused the dropped connection"
    );
    assert_eq!(chat_conns(&s.conns).len(), 2);
    assert_eq!(out.text, "tok tok ");
    assert!(out.done_marker);
    let h = health(&s.base).await;
    assert_eq!(h["cancelled"], 1, "{h}");
}
