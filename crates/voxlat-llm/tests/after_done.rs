//! What follows `data: [DONE]`: the body's end in the same read, the body's end a moment
//! later, or no end at all. The first two return the connection to the pool; the last ends
//! the stream after the short grace, not the idle timeout, and the connection is dropped.

mod common;

use common::request;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use voxlat_core::{RequestId, Timeline};
use voxlat_llm::{ClientOptions, Endpoint, LlmClient};

/// How the server ends each response after its `[DONE]` event.
#[derive(Clone, Copy)]
enum End {
    /// The chunked terminator in the same write as `[DONE]`.
    Together,
    /// The terminator 50 ms later, in a write of its own.
    Later,
    /// Never: the connection stays open, the body unfinished.
    Never,
}

fn chunk(data: &str) -> String {
    let event = format!("data: {data}\n\n");
    format!("{:X}\r\n{event}\r\n", event.len())
}

/// A keep-alive HTTP/1.1 server that answers every request with one content event and
/// `[DONE]`; returns its base URL and the count of connections it accepted.
async fn server(end: End) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // One request: its head, then as many body bytes as it says.
                    let mut read = [0u8; 4096];
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        match sock.read(&mut read).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&read[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < head_end + length {
                        match sock.read(&mut read).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&read[..n]),
                        }
                    }
                    buf.drain(..head_end + length);
                    let content = r#"{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#;
                    let mut out = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{}{}",
                        chunk(content),
                        chunk("[DONE]")
                    );
                    if matches!(end, End::Together) {
                        out.push_str("0\r\n\r\n");
                    }
                    if sock.write_all(out.as_bytes()).await.is_err() {
                        return;
                    }
                    match end {
                        End::Together => {}
                        End::Later => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            if sock.write_all(b"0\r\n\r\n").await.is_err() {
                                return;
                            }
                        }
                        End::Never => {
                            tokio::time::sleep(Duration::from_secs(120)).await;
                            return;
                        }
                    }
                }
            });
        }
    });
    (base, accepted)
}

async fn two_requests(end: End) -> (Vec<bool>, usize, Duration) {
    let (base, accepted) = server(end).await;
    let client = LlmClient::new(Endpoint::new(&base, None), ClientOptions::default()).unwrap();
    let mut new_connection = Vec::new();
    let started = Instant::now();
    for i in 0..2 {
        let tl = Timeline::new(RequestId::new());
        let (out, err) = client.stream_chat(&request(), &tl, |_| {}).await;
        assert!(err.is_none(), "request {i}: {err:?}");
        assert_eq!(out.text, "hi", "request {i}");
        assert!(out.done_marker, "request {i}");
        new_connection.push(out.connection.new_connection);
    }
    (
        new_connection,
        accepted.load(Ordering::SeqCst),
        started.elapsed(),
    )
}

#[tokio::test]
async fn a_body_that_ends_with_done_or_soon_after_keeps_its_connection() {
    for end in [End::Together, End::Later] {
        let (new_connection, accepted, _) = two_requests(end).await;
        assert_eq!(new_connection, [true, false]);
        assert_eq!(accepted, 1);
    }
}

#[tokio::test]
async fn a_body_that_never_ends_after_done_ends_the_stream_after_the_grace() {
    let (new_connection, accepted, took) = two_requests(End::Never).await;
    // Each stream ended after the grace (a second), far inside the idle timeout (a minute).
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // The unfinished body's connection is not reused.
    assert_eq!(new_connection, [true, true]);
    assert_eq!(accepted, 2);
}
