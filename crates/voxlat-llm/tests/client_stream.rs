//! The streaming client against the scripted server: every SSE quirk and every error class,
//! with the client's stamps checked against the server's own send times.

mod common;

use common::request;
use std::time::Duration;
use voxlat_core::{EventKind, Nanos, RequestId, Timeline};
use voxlat_llm::record::TokenSource;
use voxlat_llm::{
    ClientOptions, Endpoint, ErrorClass, LlmClient, LlmError, NetError, StreamOutcome, TimeoutKind,
};
use voxlat_testkit::{Builder, ReasoningStyle, Script, ScriptedServer};

async fn run_with(
    server_base: &str,
    key: Option<&str>,
    opts: ClientOptions,
) -> (Timeline, StreamOutcome, Option<LlmError>, Vec<String>) {
    let client = LlmClient::new(Endpoint::new(server_base, key), opts).unwrap();
    let tl = Timeline::new(RequestId::new());
    let mut seen = Vec::new();
    let (out, err) = client
        .stream_chat(&request(), &tl, |d| seen.push(d.text.to_string()))
        .await;
    (tl, out, err, seen)
}

async fn run(script: Script) -> (ScriptedServer, Timeline, StreamOutcome, Option<LlmError>) {
    let server = Builder::fixed(script).start().await;
    let (tl, out, err, _) = run_with(&server.base_url(), None, ClientOptions::default()).await;
    (server, tl, out, err)
}

fn at(tl: &Timeline, k: EventKind) -> Nanos {
    tl.get(k).unwrap_or_else(|| panic!("{k} not stamped"))
}

#[tokio::test]
async fn role_only_chunk_does_not_end_ttft() {
    let script = Script {
        ttft: Duration::from_millis(150),
        itl: Duration::from_millis(300),
        ..Script::default()
    };
    let (server, tl, out, err) = run(script).await;
    assert!(err.is_none(), "{err:?}");
    let served = &server.requests()[0];
    let first_sent = served.content_sent[0];
    let first_token = at(&tl, EventKind::LlmFirstToken);
    // Causality: TTFT cannot end before the server sent content...
    assert!(
        first_token >= first_sent,
        "client stamped first token before the server sent it"
    );
    // ...and must end with the first content, not the second (sent 300 ms later).
    assert!(first_token < served.content_sent[1]);
    // The role chunk arrived as the first event, long before content was even sent.
    assert!(at(&tl, EventKind::LlmFirstEvent) < first_sent);
    assert_eq!(tl.get(EventKind::LlmFirstAnswerToken), Some(first_token));
    assert!(at(&tl, EventKind::LlmSent) <= at(&tl, EventKind::LlmHeaders));
    assert!(first_token <= at(&tl, EventKind::LlmDone));
    assert_eq!(out.text, "Hello, world.");
    assert_eq!(out.deltas.len(), 4);
    assert!(out.done_marker);
    assert_eq!(out.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn events_split_at_every_byte_with_crlf_comments_and_multiline_data() {
    let script = Script {
        split_every: Some(1),
        crlf: true,
        keepalive: true,
        multiline_data: true,
        ttft: Duration::ZERO,
        itl: Duration::ZERO,
        ..Script::default()
    };
    let (_server, tl, out, err) = run(script).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(out.text, "Hello, world.");
    // role + 4 tokens + usage + [DONE]
    assert_eq!(out.events, 7);
    assert_eq!(out.comments, 7);
    assert!(tl.get(EventKind::LlmFirstToken).is_some());
}

#[tokio::test]
async fn usage_chunk_with_empty_choices_gives_the_token_count() {
    let (_s, _tl, out, err) = run(Script::with_tokens(9)).await;
    assert!(err.is_none());
    assert_eq!(out.output_tokens, Some(9));
    assert_eq!(out.output_tokens_source, Some(TokenSource::Usage));
    assert_eq!(out.usage.as_ref().unwrap().prompt_tokens, Some(10));
}

#[tokio::test]
async fn without_usage_deltas_are_counted_and_it_says_so() {
    let (_s, _tl, out, err) = run(Script {
        usage: false,
        ..Script::with_tokens(6)
    })
    .await;
    assert!(err.is_none());
    assert_eq!(out.output_tokens, Some(6));
    assert_eq!(out.output_tokens_source, Some(TokenSource::DeltaCount));
}

#[tokio::test]
async fn stream_ending_without_done_is_accepted_and_flagged() {
    let (_s, tl, out, err) = run(Script {
        done: false,
        ..Script::default()
    })
    .await;
    assert!(err.is_none(), "{err:?}");
    assert!(!out.done_marker);
    assert_eq!(out.text, "Hello, world.");
    assert!(tl.get(EventKind::LlmDone).is_some());
}

async fn reasoning_case(style: ReasoningStyle) {
    let script = Script {
        reasoning: vec!["Let".into(), " me".into(), " think".into()],
        reasoning_style: style,
        itl: Duration::from_millis(40),
        ..Script::default()
    };
    let (server, tl, out, err) = run(script).await;
    assert!(err.is_none(), "{style:?}: {err:?}");
    let sent = &server.requests()[0].content_sent;
    let first = at(&tl, EventKind::LlmFirstToken);
    let answer = at(&tl, EventKind::LlmFirstAnswerToken);
    assert!(
        first >= sent[0] && first < sent[1],
        "{style:?}: TTFT must end at the first reasoning token"
    );
    assert!(
        answer >= sent[3],
        "{style:?}: first answer token is the 4th content event"
    );
    assert_eq!(
        out.text, "Hello, world.",
        "{style:?}: reasoning must not leak into the answer"
    );
    assert_eq!(out.reasoning_chars, "Let me think".len() as u64);
    assert_eq!(out.deltas.iter().filter(|d| d.reasoning).count(), 3);
}

#[tokio::test]
async fn reasoning_content_field() {
    reasoning_case(ReasoningStyle::ReasoningContent).await;
}

#[tokio::test]
async fn reasoning_field() {
    reasoning_case(ReasoningStyle::Reasoning).await;
}

#[tokio::test]
async fn think_tags_inside_content() {
    reasoning_case(ReasoningStyle::ThinkTags).await;
}

#[tokio::test]
async fn error_event_mid_stream_keeps_partial_timings() {
    let (_s, tl, out, err) = run(Script {
        error_event_after: Some(2),
        ..Script::default()
    })
    .await;
    let err = err.expect("error event must fail the request");
    assert_eq!(err.class(), ErrorClass::StreamError);
    assert!(err.to_string().contains("scripted overload"), "{err}");
    assert!(
        tl.get(EventKind::LlmFirstToken).is_some(),
        "partial timings kept"
    );
    assert_eq!(out.text, "Hello,");
    assert!(tl.get(EventKind::LlmDone).is_none());
}

#[tokio::test]
async fn invalid_json_in_a_chunk() {
    let (_s, _tl, _out, err) = run(Script {
        invalid_json_after: Some(1),
        ..Script::default()
    })
    .await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::InvalidChunk);
    assert!(err.to_string().contains("not json"), "{err}");
}

#[tokio::test]
async fn mid_stream_disconnect() {
    let (_s, tl, out, err) = run(Script {
        disconnect_after: Some(2),
        ..Script::default()
    })
    .await;
    assert_eq!(err.unwrap().class(), ErrorClass::Disconnected);
    assert_eq!(out.deltas.len(), 2);
    assert!(tl.get(EventKind::LlmFirstToken).is_some());
}

#[tokio::test]
async fn http_500_shows_the_body() {
    let (_s, tl, out, err) = run(Script::error(
        500,
        r#"{"error":{"message":"model crashed"}}"#,
    ))
    .await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::HttpStatus);
    assert_eq!(err.status(), Some(500));
    assert!(err.to_string().contains("model crashed"), "{err}");
    assert_eq!(out.status, Some(500));
    assert!(tl.get(EventKind::LlmHeaders).is_some());
}

#[tokio::test]
async fn http_429_reports_retry_after() {
    let script = Script {
        retry_after: Some("7".into()),
        ..Script::error(429, "slow down")
    };
    let (_s, _tl, _out, err) = run(script).await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::RateLimited);
    assert!(err.to_string().contains("Retry-After: 7"), "{err}");
}

#[tokio::test]
async fn unauthorized_without_key_and_with_a_wrong_key() {
    let server = Builder::fixed(Script::default())
        .require_key("sk-right-key")
        .start()
        .await;
    let (_tl, _o, err, _) = run_with(&server.base_url(), None, ClientOptions::default()).await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::Unauthorized);
    assert!(err.to_string().contains("No API key was set"), "{err}");

    let (_tl, _o, err, _) = run_with(
        &server.base_url(),
        Some("sk-wrong-secret-1234"),
        ClientOptions::default(),
    )
    .await;
    let msg = err.unwrap().to_string();
    assert!(msg.contains("Bearer"), "{msg}");
    // The server echoes the key it got; the message must not.
    assert!(!msg.contains("sk-wrong-secret-1234"), "{msg}");
    assert!(msg.contains("<redacted>"), "{msg}");

    // A pasted "Bearer " prefix still authenticates.
    let (_tl, out, err, _) = run_with(
        &server.base_url(),
        Some("Bearer sk-right-key"),
        ClientOptions::default(),
    )
    .await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(out.text, "Hello, world.");
    assert_eq!(
        server.requests()[2].authorization.as_deref(),
        Some("Bearer sk-right-key")
    );
}

#[tokio::test]
async fn not_found_suggests_v1() {
    let server = Builder::fixed(Script::default()).start().await;
    let base = format!("http://{}", server.addr);
    let (_tl, _o, err, _) = run_with(&base, None, ClientOptions::default()).await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::NotFound);
    assert!(err.to_string().contains(&format!("{base}/v1")), "{err}");
}

#[tokio::test]
async fn non_sse_response() {
    let script = Script {
        content_type: "application/json".into(),
        body: Some(r#"{"choices":[{"message":{"content":"hi"}}]}"#.into()),
        ..Script::default()
    };
    let (_s, _tl, _o, err) = run(script).await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::NotSse);
    assert!(err.to_string().contains("application/json"), "{err}");
}

#[tokio::test]
async fn connection_refused() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (_tl, _o, err, _) = run_with(
        &format!("http://127.0.0.1:{port}/v1"),
        None,
        ClientOptions::default(),
    )
    .await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::ConnectionRefused, "{err}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
}

#[tokio::test]
async fn dns_failure() {
    let (_tl, _o, err, _) = run_with(
        "http://no-such-host.invalid/v1",
        None,
        ClientOptions::default(),
    )
    .await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::Dns, "{err}");
    assert!(err.to_string().contains("no-such-host.invalid"), "{err}");
}

#[tokio::test]
async fn tls_to_a_plain_http_server() {
    let server = Builder::fixed(Script::default()).start().await;
    let (_tl, _o, err, _) = run_with(
        &format!("https://{}/v1", server.addr),
        None,
        ClientOptions::default(),
    )
    .await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::Tls, "{err}");
    assert!(err.to_string().contains("http://"), "{err}");
}

#[tokio::test]
async fn stalled_stream_hits_the_idle_timeout() {
    let server = Builder::fixed(Script {
        itl: Duration::from_secs(5),
        ..Script::default()
    })
    .start()
    .await;
    let opts = ClientOptions {
        idle_timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    };
    let (tl, out, err, _) = run_with(&server.base_url(), None, opts).await;
    let err = err.unwrap();
    assert_eq!(err.class(), ErrorClass::Timeout);
    assert!(
        matches!(
            err,
            LlmError::Net(NetError::Timeout {
                kind: TimeoutKind::Idle,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("idle timeout"), "{err}");
    assert_eq!(out.deltas.len(), 1);
    assert!(tl.get(EventKind::LlmFirstToken).is_some());
}

/// The idle timeout is a limit on silence, not on the whole stream: one timer serves the
/// stream and is pushed back by every read, so a stream that keeps talking runs past it.
#[tokio::test]
async fn a_stream_longer_than_the_idle_timeout_that_keeps_talking_completes() {
    let server = Builder::fixed(Script {
        itl: Duration::from_millis(100),
        ..Script::with_tokens(8)
    })
    .start()
    .await;
    let opts = ClientOptions {
        idle_timeout: Duration::from_millis(400),
        ..ClientOptions::default()
    };
    let (tl, out, err, _) = run_with(&server.base_url(), None, opts).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(out.deltas.len(), 8);
    assert!(out.done_marker);
    let span = at(&tl, EventKind::LlmDone).0 - at(&tl, EventKind::LlmFirstToken).0;
    assert!(
        span > 400_000_000,
        "the stream outlasted the timeout: {span} ns"
    );
}

/// The request's write is stamped between its send and its headers, and on a connection it
/// opened, after that connection became ready: TTFT starts there (docs/bench-llm.md).
#[tokio::test]
async fn the_write_to_a_ready_connection_is_stamped() {
    let server = Builder::fixed(Script::default()).start().await;
    let client = LlmClient::new(
        Endpoint::new(&server.base_url(), None),
        ClientOptions::default(),
    )
    .unwrap();
    for expect_new in [true, false] {
        let tl = Timeline::new(RequestId::new());
        let (out, err) = client.stream_chat(&request(), &tl, |_| {}).await;
        assert!(err.is_none(), "{err:?}");
        let c = &out.connection;
        assert_eq!(c.new_connection, expect_new);
        let written = c.written_at.expect("written_at stamped");
        assert!(written >= at(&tl, EventKind::LlmSent));
        assert!(written <= at(&tl, EventKind::LlmHeaders));
        if expect_new {
            assert!(written >= c.ready_at.expect("a new connection is ready at some time"));
        }
        // The server read the request after it was written.
        let served = server.requests();
        assert!(served.last().unwrap().received >= written);
    }
}

#[tokio::test]
async fn headers_never_arriving_hit_the_headers_timeout() {
    let server = Builder::fixed(Script {
        headers_delay: Duration::from_secs(5),
        ..Script::default()
    })
    .start()
    .await;
    let opts = ClientOptions {
        headers_timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    };
    let (tl, _o, err, _) = run_with(&server.base_url(), None, opts).await;
    assert!(err.unwrap().to_string().contains("response headers"));
    assert!(tl.get(EventKind::LlmSent).is_some());
    assert!(tl.get(EventKind::LlmHeaders).is_none());
}

#[tokio::test]
async fn request_id_is_sent_and_echo_recorded() {
    let server = Builder::fixed(Script::default()).start().await;
    let (tl, out, _e, _) = run_with(&server.base_url(), None, ClientOptions::default()).await;
    assert_eq!(
        server.requests()[0].request_id.as_deref(),
        Some(tl.id().as_str())
    );
    assert_eq!(out.server_request_id.as_deref(), Some(tl.id().as_str()));
    // The same request as a W3C trace: the trace is the request's, the parent its LLM span.
    let tp = server.requests()[0]
        .traceparent
        .clone()
        .expect("traceparent sent");
    assert_eq!(
        tp,
        format!(
            "00-{:032x}-{:016x}-01",
            voxlat_core::trace::trace_id(tl.id()),
            voxlat_core::trace::span_id(tl.id(), voxlat_core::trace::LLM_REQUEST_SPAN)
        )
    );
    assert_eq!(server.requests()[0].body["stream"], true);
    assert_eq!(
        server.requests()[0].body["stream_options"]["include_usage"],
        true
    );
}

#[tokio::test]
async fn pooled_requests_reuse_the_connection_and_fresh_ones_do_not() {
    let server = Builder::fixed(Script {
        ttft: Duration::ZERO,
        ..Script::default()
    })
    .start()
    .await;
    for (fresh, expect_second_new) in [(false, false), (true, true)] {
        let opts = ClientOptions {
            fresh_connections: fresh,
            ..ClientOptions::default()
        };
        let client = LlmClient::new(Endpoint::new(&server.base_url(), None), opts).unwrap();
        let mut news = Vec::new();
        for _ in 0..2 {
            let tl = Timeline::new(RequestId::new());
            let (out, err) = client.stream_chat(&request(), &tl, |_| {}).await;
            assert!(err.is_none(), "{err:?}");
            news.push(out.connection.new_connection);
            if out.connection.new_connection {
                assert!(out.connection.connect_ns.is_some());
                assert_eq!(out.connection.dns_ns, None, "IP literal: no DNS");
            }
        }
        assert!(news[0], "first request opens a connection (fresh={fresh})");
        assert_eq!(news[1], expect_second_new, "fresh={fresh}");
    }
}

#[tokio::test]
async fn http2_prior_knowledge() {
    let server = Builder::fixed(Script::default()).start().await;
    let opts = ClientOptions {
        http2: true,
        ..ClientOptions::default()
    };
    let (tl, out, err, seen) = run_with(&server.base_url(), None, opts).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(out.http_version.as_deref(), Some("HTTP/2.0"));
    assert_eq!(seen.concat(), "Hello, world.");
    assert!(tl.get(EventKind::LlmFirstToken).is_some());
}

#[tokio::test]
async fn server_timings_are_kept() {
    let (_s, _tl, out, err) = run(Script {
        timings: true,
        ..Script::default()
    })
    .await;
    assert!(err.is_none());
    assert_eq!(out.server_timings.unwrap()["prompt_n"], 10);
}

#[tokio::test]
async fn list_models() {
    let server = Builder::fixed(Script::default()).start().await;
    let client = LlmClient::new(
        Endpoint::new(&server.base_url(), None),
        ClientOptions::default(),
    )
    .unwrap();
    assert_eq!(
        client.list_models().await.unwrap(),
        vec!["scripted-model".to_string()]
    );
}
