//! A server that ignores `max_tokens` and keeps streaming: the client cuts the request at its
//! documented text cap instead of growing one request's text without bound.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use voxlat_core::{RequestId, Timeline};
use voxlat_llm::client::{stream_text_cap, STREAM_TEXT_CAP};
use voxlat_llm::{ChatRequest, ClientOptions, Endpoint, ErrorClass, LlmClient, LlmError, Message};

/// Far past any cap: a client without one reads all of it and succeeds.
const SERVER_LIMIT: usize = 64 << 20;

/// Reads the request head and its Content-Length body.
async fn read_request(sock: &mut TcpStream) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < i + 4 + length {
                let n = sock.read(&mut chunk).await?;
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Ok(());
        }
    }
}

/// Streams 1 KiB content deltas until [`SERVER_LIMIT`] or until the client hangs up; `sent`
/// counts the text bytes it managed to write.
async fn stream_forever(mut sock: TcpStream, sent: Arc<AtomicUsize>) -> std::io::Result<()> {
    read_request(&mut sock).await?;
    sock.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    .await?;
    let word = "x".repeat(1024);
    let event =
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{word}\"}}}}]}}\n\n");
    let chunk = format!("{:x}\r\n{event}\r\n", event.len());
    while sent.load(Ordering::Relaxed) < SERVER_LIMIT {
        sock.write_all(chunk.as_bytes()).await?;
        sent.fetch_add(word.len(), Ordering::Relaxed);
    }
    let done = "data: [DONE]\n\n";
    sock.write_all(format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len()).as_bytes())
        .await
}

#[tokio::test]
async fn a_server_streaming_past_max_tokens_is_cut_at_the_cap() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let server = {
        let sent = sent.clone();
        tokio::spawn(async move {
            let (sock, _) = listener.accept().await.unwrap();
            let _ = stream_forever(sock, sent).await;
        })
    };
    let client = LlmClient::new(
        Endpoint::new(&format!("http://{addr}/v1"), None),
        ClientOptions::default(),
    )
    .unwrap();
    let req = ChatRequest {
        model: "m".into(),
        messages: vec![Message::new("user", "hi")],
        max_tokens: Some(16),
        ..ChatRequest::default()
    };
    let cap = stream_text_cap(req.max_tokens);
    assert_eq!(cap, STREAM_TEXT_CAP, "16 tokens get the floor");
    let tl = Timeline::new(RequestId::new());
    let mut handed_on = 0usize;
    let (out, err) = client
        .stream_chat(&req, &tl, |d| handed_on += d.text.len())
        .await;
    let err = err.expect("a runaway stream must end in an error");
    assert_eq!(err.class(), ErrorClass::Runaway, "{err}");
    assert!(
        matches!(err, LlmError::Runaway { cap_bytes, max_tokens: Some(16) } if cap_bytes == cap),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("max_tokens = 16") && msg.contains("ignores max_tokens"),
        "{msg}"
    );
    // Cut at the cap, overshooting by at most one network read; the partial text is kept.
    assert!(out.text.len() > cap, "{}", out.text.len());
    assert!(out.text.len() < cap + (1 << 20), "{}", out.text.len());
    assert_eq!(handed_on, out.text.len());
    // The client hung up: the server's writes fail long before it runs out of text.
    drop(client);
    server.await.unwrap();
    assert!(sent.load(Ordering::Relaxed) < SERVER_LIMIT);
}

#[test]
fn the_cap_grows_with_max_tokens_and_never_falls_under_the_floor() {
    assert_eq!(stream_text_cap(None), STREAM_TEXT_CAP);
    assert_eq!(stream_text_cap(Some(0)), STREAM_TEXT_CAP);
    assert_eq!(
        stream_text_cap(Some(100_000)),
        100_000 * voxlat_llm::client::STREAM_TEXT_BYTES_PER_TOKEN
    );
}
