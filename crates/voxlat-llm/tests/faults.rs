//! Fault injection: what real gateways and crashing backends do, each ending in the right error
//! class, no panic, and the partial timings of the request kept.

mod common;

use common::request;
use std::time::Duration;
use voxlat_core::{EventKind, RequestId, Timeline};
use voxlat_llm::sse::MAX_EVENT_BYTES;
use voxlat_llm::{
    ClientOptions, Endpoint, ErrorClass, LlmClient, LlmError, NetError, StreamOutcome,
};
use voxlat_testkit::raw::ResettingServer;
use voxlat_testkit::{Builder, Script};

async fn stream(base: &str, opts: ClientOptions) -> (Timeline, StreamOutcome, Option<LlmError>) {
    let client = LlmClient::new(Endpoint::new(base, None), opts).unwrap();
    let tl = Timeline::new(RequestId::new());
    let (out, err) = client.stream_chat(&request(), &tl, |_| {}).await;
    (tl, out, err)
}

fn content_chunk(text: &str) -> String {
    serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        .to_string()
}

#[tokio::test]
async fn tcp_reset_mid_stream_is_a_disconnect_with_partial_timings() {
    let events = vec![
        serde_json::json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}).to_string(),
        content_chunk("Hello"),
        content_chunk(" there"),
    ];
    let server = ResettingServer::start(events, Duration::from_millis(20)).await;
    let (tl, out, err) = stream(&server.base_url(), ClientOptions::default()).await;
    let err = err.expect("a reset stream must fail");
    assert_eq!(err.class(), ErrorClass::Disconnected, "{err}");
    // What arrived before the reset is kept, and so are its stamps.
    assert_eq!(out.text, "Hello there");
    assert_eq!(out.deltas.len(), 2);
    assert!(tl.get(EventKind::LlmHeaders).is_some());
    assert!(tl.get(EventKind::LlmFirstToken).is_some());
    assert!(
        tl.get(EventKind::LlmDone).is_none(),
        "a failed stream is not done"
    );
}

#[tokio::test]
async fn overload_statuses_with_and_without_retry_after() {
    for status in [429u16, 500, 503] {
        for retry_after in [None, Some("3")] {
            let server = Builder::fixed(Script {
                retry_after: retry_after.map(str::to_string),
                ..Script::error(status, r#"{"error":{"message":"busy"}}"#)
            })
            .start()
            .await;
            let (tl, out, err) = stream(&server.base_url(), ClientOptions::default()).await;
            let err = err.unwrap_or_else(|| panic!("HTTP {status} must fail"));
            let expected = if status == 429 {
                ErrorClass::RateLimited
            } else {
                ErrorClass::HttpStatus
            };
            assert_eq!(err.class(), expected, "HTTP {status}");
            assert_eq!(err.status(), Some(status));
            assert_eq!(out.status, Some(status));
            let msg = err.to_string();
            assert!(msg.contains("busy"), "{msg}");
            assert_eq!(
                msg.contains("Retry-After: 3"),
                retry_after.is_some(),
                "HTTP {status}: {msg}"
            );
            assert!(tl.get(EventKind::LlmHeaders).is_some());
            assert!(tl.get(EventKind::LlmFirstToken).is_none());
        }
    }
}

#[tokio::test]
async fn a_huge_error_body_is_read_only_as_far_as_it_is_shown() {
    let body = "x".repeat(8 * 1024 * 1024);
    let server = Builder::fixed(Script::error(502, &body)).start().await;
    let (_tl, _out, err) = stream(&server.base_url(), ClientOptions::default()).await;
    let msg = err.unwrap().to_string();
    assert!(msg.contains("HTTP 502"), "{}", &msg[..200.min(msg.len())]);
    assert!(msg.len() < 4096, "{} bytes of message", msg.len());
}

#[tokio::test]
async fn a_two_mib_single_event_arrives_whole() {
    let big = "a".repeat(2 * 1024 * 1024);
    let server = Builder::fixed(Script {
        tokens: vec!["Start ".into(), big.clone(), " end.".into()],
        ..Script::default()
    })
    .start()
    .await;
    // Enough tokens asked for that 2 MiB of text is within the runaway cap: the event's size
    // is what is under test here, not the cap.
    let client = LlmClient::new(
        Endpoint::new(&server.base_url(), None),
        ClientOptions::default(),
    )
    .unwrap();
    let tl = Timeline::new(RequestId::new());
    let req = voxlat_llm::ChatRequest {
        max_tokens: Some((big.len() / voxlat_llm::client::STREAM_TEXT_BYTES_PER_TOKEN) as u32 * 2),
        ..request()
    };
    let (out, err) = client.stream_chat(&req, &tl, |_| {}).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(out.text.len(), big.len() + "Start  end.".len());
    assert_eq!(out.deltas.len(), 3);
    assert!(tl.get(EventKind::LlmDone).is_some());
}

#[tokio::test]
async fn an_event_that_never_ends_is_cut_off_at_the_cap() {
    // One `data:` line well past the cap (the check runs after each network read, so it may
    // overshoot by one read): a server streaming an endless line would otherwise be buffered
    // until memory ran out.
    let server = Builder::fixed(Script {
        tokens: vec!["ok".into(), "b".repeat(MAX_EVENT_BYTES + 4 * 1024 * 1024)],
        ..Script::default()
    })
    .start()
    .await;
    let (tl, out, err) = stream(&server.base_url(), ClientOptions::default()).await;
    let err = err.expect("an oversized event must fail");
    assert_eq!(err.class(), ErrorClass::InvalidChunk, "{err}");
    assert!(err.to_string().contains("MiB"), "{err}");
    assert_eq!(out.text, "ok", "the tokens before it are kept");
    assert!(tl.get(EventKind::LlmFirstToken).is_some());
}

#[tokio::test]
async fn the_idle_timeout_is_configurable_and_keeps_what_arrived() {
    for ms in [200u64, 600] {
        let server = Builder::fixed(Script {
            itl: Duration::from_secs(30),
            ..Script::default()
        })
        .start()
        .await;
        let opts = ClientOptions {
            idle_timeout: Duration::from_millis(ms),
            ..ClientOptions::default()
        };
        let (tl, out, err) = stream(&server.base_url(), opts).await;
        match err {
            Some(LlmError::Net(NetError::Timeout { after, .. })) => {
                assert_eq!(after, Duration::from_millis(ms))
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert_eq!(out.text, "Hello");
        assert!(tl.get(EventKind::LlmFirstToken).is_some());
    }
}
