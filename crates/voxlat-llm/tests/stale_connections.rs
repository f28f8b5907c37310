//! Pooled connections that the server has already given up on: retried once on a new
//! connection, counted, and timed from the retry. And model lists longer than the display
//! limit, which must be parsed whole.

mod common;

use common::request;
use std::time::Duration;
use voxlat_core::{EventKind, RequestId, Timeline};
use voxlat_llm::{ClientOptions, Endpoint, ErrorClass, LlmClient, StreamOutcome};
use voxlat_testkit::keepalive::{KeepAliveServer, Retire};

fn tokens() -> Vec<String> {
    ["Hel", "lo", "."].map(String::from).to_vec()
}

fn client(base: &str) -> LlmClient {
    LlmClient::new(Endpoint::new(base, None), ClientOptions::default()).unwrap()
}

async fn one(c: &LlmClient) -> (Timeline, StreamOutcome, Option<voxlat_llm::LlmError>) {
    let tl = Timeline::new(RequestId::new());
    let (out, err) = c.stream_chat(&request(), &tl, |_| {}).await;
    (tl, out, err)
}

#[tokio::test]
async fn a_keep_alive_limit_loses_no_request_and_the_retries_are_counted() {
    let server = KeepAliveServer::start(
        Retire {
            after_requests: Some(2),
            idle: None,
            close_after: None,
        },
        tokens(),
        String::new(),
    )
    .await;
    let c = client(&server.base_url());
    let mut retried = 0;
    for i in 0..9 {
        let (tl, out, err) = one(&c).await;
        assert!(err.is_none(), "request {i}: {err:?}");
        assert_eq!(out.text, "Hello.");
        if let Some(r) = &out.retry {
            retried += 1;
            assert!(r.first_error.contains("closed"), "{}", r.first_error);
            // The retry went out on a new connection, after the first attempt, and its
            // connection became ready after the retry was sent.
            assert!(out.connection.new_connection);
            assert!(r.sent > tl.get(EventKind::LlmSent).unwrap());
            assert!(out.connection.ready_at.unwrap() >= r.sent);
            assert!(tl.get(EventKind::LlmFirstToken).unwrap() > r.sent);
        }
    }
    // Every third request on a connection hits the retired connection.
    assert!(retried >= 3, "retried {retried}");
    assert_eq!(retried, server.dropped(), "one retry per dropped request");
    assert_eq!(server.answered(), 9);
}

#[tokio::test]
async fn an_idle_timeout_is_retried_on_a_new_connection() {
    let server = KeepAliveServer::start(
        Retire {
            after_requests: None,
            idle: Some(Duration::from_millis(50)),
            close_after: None,
        },
        tokens(),
        String::new(),
    )
    .await;
    let c = client(&server.base_url());
    let (_, out, err) = one(&c).await;
    assert!(err.is_none() && out.retry.is_none(), "{err:?}");
    tokio::time::sleep(Duration::from_millis(120)).await;
    let (_, out, err) = one(&c).await;
    assert!(err.is_none(), "{err:?}");
    assert!(
        out.retry.is_some(),
        "the idle connection was reused and retried"
    );
    assert_eq!((server.dropped(), server.answered()), (1, 2));
    assert_eq!(server.connections(), 2);
}

/// A server that closes each connection after its answer (as an idle timeout does): the
/// close has reached the client before the next request, so the pool sees it and the request
/// goes out on a new connection at once, with nothing lost and nothing to retry.
#[tokio::test]
async fn a_connection_closed_while_idle_is_not_reused() {
    let server = KeepAliveServer::start(
        Retire {
            after_requests: None,
            idle: None,
            close_after: Some(1),
        },
        tokens(),
        String::new(),
    )
    .await;
    let c = client(&server.base_url());
    for i in 0..4 {
        let (_, out, err) = one(&c).await;
        assert!(err.is_none(), "request {i}: {err:?}");
        assert_eq!(out.text, "Hello.");
        assert!(
            out.retry.is_none(),
            "request {i} went out on the closed connection"
        );
        assert!(
            out.connection.new_connection,
            "request {i} reused a closed connection"
        );
        // Time for the server's close to arrive.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!((server.dropped(), server.answered()), (0, 4));
    assert_eq!(server.connections(), 4);
}

#[tokio::test]
async fn a_close_on_a_new_connection_is_its_own_class_with_a_hint() {
    let server = KeepAliveServer::start(
        Retire {
            after_requests: Some(0),
            idle: None,
            close_after: None,
        },
        tokens(),
        String::new(),
    )
    .await;
    let (_, out, err) = one(&client(&server.base_url())).await;
    let err = err.expect("every request is dropped");
    assert_eq!(err.class(), ErrorClass::ConnectionClosed, "{err}");
    assert_eq!(err.class().name(), "connection_closed");
    assert!(err.to_string().contains("new connection"), "{err}");
    // Not a reused connection, so nothing to retry.
    assert!(out.retry.is_none());
    assert_eq!(server.dropped(), 1);
}

#[tokio::test]
async fn a_model_list_of_several_kib_is_parsed_whole() {
    let ids: Vec<String> = (0..80)
        .map(|i| format!("org/model-number-{i:03}-instruct"))
        .collect();
    let data: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| serde_json::json!({"id": id, "object": "model", "owned_by": "llamacpp"}))
        .collect();
    let body = serde_json::json!({"object": "list", "data": data}).to_string();
    assert!(body.len() > 5 * 1024, "{} bytes", body.len());
    let server = KeepAliveServer::start(Retire::default(), tokens(), body).await;
    let got = client(&server.base_url()).list_models().await.unwrap();
    assert_eq!(got, ids);
}

#[test]
fn real_servers_model_list_shapes() {
    use voxlat_llm::client::parse_model_list;
    // llama.cpp's llama-server: `models` (its own) beside OpenAI's `data`.
    let llama = r#"{"models":[{"name":"gemma-3-270m.gguf","model":"gemma-3-270m.gguf","modified_at":"","size":"","digest":"","type":"model","description":"","tags":[""],"capabilities":["completion"],"parameters":"","details":{"parent_model":"","format":"gguf","family":"","families":[""],"parameter_size":"","quantization_level":""}}],"object":"list","data":[{"id":"gemma-3-270m.gguf","object":"model","created":1764540000,"owned_by":"llamacpp","meta":{"vocab_type":1,"n_vocab":262144,"n_ctx_train":32768,"n_embd":640,"n_params":268098176,"size":291545088}}]}"#;
    assert_eq!(parse_model_list(llama).unwrap(), ["gemma-3-270m.gguf"]);
    // Ollama's /v1/models.
    let ollama = r#"{"object":"list","data":[{"id":"llama3.2:latest","object":"model","created":1764540000,"owned_by":"library"},{"id":"qwen3:0.6b","object":"model","created":1764540000,"owned_by":"library"}]}"#;
    assert_eq!(
        parse_model_list(ollama).unwrap(),
        ["llama3.2:latest", "qwen3:0.6b"]
    );
    // Ollama's own /api/tags: only `models`, named by `name`/`model`.
    let tags = r#"{"models":[{"name":"qwen3:0.6b","model":"qwen3:0.6b","size":522653767}]}"#;
    assert_eq!(parse_model_list(tags).unwrap(), ["qwen3:0.6b"]);
    // vLLM.
    let vllm = r#"{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model","created":1764540000,"owned_by":"vllm","root":"Qwen/Qwen3-0.6B","parent":null,"max_model_len":40960,"permission":[{"id":"modelperm-1","object":"model_permission","allow_sampling":true}]}]}"#;
    assert_eq!(parse_model_list(vllm).unwrap(), ["Qwen/Qwen3-0.6B"]);
    let err = parse_model_list(r#"{"object":"list"}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("data"), "{err}");
}

/// `--fresh-connections`: every request opens its own connection, none is reused.
#[tokio::test]
async fn fresh_connections_open_one_per_request() {
    let server = KeepAliveServer::start(Retire::default(), tokens(), String::new()).await;
    let c = LlmClient::new(
        Endpoint::new(&server.base_url(), None),
        ClientOptions {
            fresh_connections: true,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    for i in 0..3 {
        let (_, out, err) = one(&c).await;
        assert!(err.is_none(), "request {i}: {err:?}");
        assert!(
            out.connection.new_connection,
            "request {i} reused a connection"
        );
    }
    assert_eq!(server.connections(), 3);
}

/// A head that arrives in one packet with the first event is stamped no later than that
/// event, which carries the packet's arrival: the events stay in order.
#[tokio::test]
async fn a_head_that_comes_with_the_first_event_is_not_stamped_after_it() {
    let server = KeepAliveServer::start(Retire::default(), tokens(), String::new()).await;
    let c = client(&server.base_url());
    for i in 0..5 {
        let (tl, _, err) = one(&c).await;
        assert!(err.is_none(), "request {i}: {err:?}");
        let at = |k| {
            tl.get(k)
                .unwrap_or_else(|| panic!("request {i}: {k} not stamped"))
        };
        let order = [
            EventKind::LlmSent,
            EventKind::LlmHeaders,
            EventKind::LlmFirstEvent,
            EventKind::LlmFirstToken,
            EventKind::LlmDone,
        ];
        for w in order.windows(2) {
            assert!(
                at(w[0]) <= at(w[1]),
                "request {i}: {} at {:?} after {} at {:?}",
                w[0],
                at(w[0]),
                w[1],
                at(w[1])
            );
        }
    }
}
