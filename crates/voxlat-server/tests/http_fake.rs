//! The HTTP surface, queue and cancellation against a scripted engine: fast and
//! deterministic. The llama.cpp path has its own tests in `llama_e2e.rs`.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use voxlat_server::engine::Engine;
use voxlat_server::fake::{FakeEngine, FakeModel};
use voxlat_server::http::AppState;
use voxlat_server::sched::{Scheduler, StartError};

struct Server {
    base: String,
    produced: Arc<AtomicU64>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(slots: usize, queue: usize, pieces: &[&str], token_delay_ms: u64) -> Server {
    let produced = Arc::new(AtomicU64::new(0));
    let p = produced.clone();
    let pieces: Vec<String> = pieces.iter().map(|s| s.to_string()).collect();
    let sched = Scheduler::start(slots, queue, move |_| {
        Ok(Box::new(FakeEngine {
            pieces: pieces.clone(),
            token_delay: Duration::from_millis(token_delay_ms),
            prefill_per_token: Duration::from_micros(100),
            produced: p.clone(),
        }) as Box<dyn Engine>)
    })
    .unwrap();
    let state = AppState::new(Arc::new(FakeModel::new(200)), Arc::new(sched));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(voxlat_server::serve(listener, state, async {
        let _ = rx.await;
    }));
    Server {
        base: format!("http://{addr}"),
        produced,
        _stop: tx,
    }
}

fn body(content: &str, extra: Value) -> Value {
    let mut b = json!({"messages": [{"role": "user", "content": content}]});
    if let (Value::Object(b), Value::Object(e)) = (&mut b, extra) {
        b.extend(e);
    }
    b
}

async fn post(base: &str, b: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(b)
        .send()
        .await
        .unwrap()
}

/// Every `data:` payload of a complete SSE response.
async fn events(resp: reqwest::Response) -> Vec<String> {
    let text = resp.text().await.unwrap();
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

fn content(evs: &[String]) -> String {
    evs.iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

async fn health(base: &str) -> Value {
    reqwest::get(format!("{base}/health"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn error_of(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    (status, resp.json::<Value>().await.unwrap())
}

#[tokio::test]
async fn client_errors_get_status_and_a_message_naming_the_problem() {
    let s = start(1, 1, &["ok"], 1).await;
    let c = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", s.base);

    let r = c.post(&url).body("{\"messages\": [").send().await.unwrap();
    let (st, e) = error_of(r).await;
    assert_eq!(st, 400);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));

    let (st, e) = error_of(post(&s.base, &json!({"model": "fake-model"})).await).await;
    assert_eq!(st, 400);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`messages`"),
        "{e}"
    );

    let (st, e) = error_of(post(&s.base, &body("hi", json!({"max_tokens": "ten"}))).await).await;
    assert_eq!(st, 400);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`max_tokens`"));

    let (st, e) = error_of(post(&s.base, &body("hi", json!({"model": "gpt-4o"}))).await).await;
    assert_eq!(st, 404);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("gpt-4o") && msg.contains("fake-model"),
        "{msg}"
    );

    // The file name is an accepted alias of the loaded model.
    let r = post(&s.base, &body("hi", json!({"model": "fake.gguf"}))).await;
    assert_eq!(r.status(), 200);

    let long = "x".repeat(250);
    let (st, e) = error_of(post(&s.base, &body(&long, json!({}))).await).await;
    assert_eq!(st, 400);
    assert_eq!(e["error"]["n_prompt_tokens"], 250);
    assert_eq!(e["error"]["n_ctx"], 200);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("250 tokens"));

    let r = c.get(format!("{}/v1/nope", s.base)).send().await.unwrap();
    assert_eq!(r.status(), 404);

    // Nothing above reached a slot.
    assert_eq!(health(&s.base).await["completed"], 1);
}

#[tokio::test]
async fn stream_has_role_content_finish_usage_timings_and_echoes_the_request_id() {
    let s = start(1, 1, &["Hel", "lo", " wor", "ld<e", "ot>", "never"], 1).await;
    let r = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", s.base))
        .header("X-Request-Id", "turn-42")
        .json(&body(
            "hi",
            json!({"stream": true, "stream_options": {"include_usage": true}}),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "turn-42");
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let evs = events(r).await;
    assert_eq!(evs.last().unwrap(), "[DONE]");
    let first: Value = serde_json::from_str(&evs[0]).unwrap();
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(first["id"], "chatcmpl-turn-42");
    // The stop string split over two tokens never reaches the client.
    assert_eq!(content(&evs), "Hello world");
    let fin: Value = serde_json::from_str(&evs[evs.len() - 3]).unwrap();
    assert_eq!(fin["choices"][0]["finish_reason"], "stop");
    let usage: Value = serde_json::from_str(&evs[evs.len() - 2]).unwrap();
    assert_eq!(usage["choices"].as_array().unwrap().len(), 0);
    assert_eq!(usage["usage"]["prompt_tokens"], 2);
    assert_eq!(usage["usage"]["completion_tokens"], 5);
    assert_eq!(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let t = &usage["timings"];
    let f = |k: &str| t[k].as_f64().unwrap();
    assert_eq!(f("prompt_n"), 2.0);
    assert_eq!(f("predicted_n"), 5.0);
    assert!(f("prompt_ms") <= f("first_token_ms"), "{t}");
    assert!(f("queue_ms") + f("prompt_ms") <= f("first_token_ms"), "{t}");
    assert!(f("first_token_ms") <= f("total_ms"), "{t}");
    assert!(
        f("predicted_ms") > 0.0 && f("predicted_ms") <= f("total_ms"),
        "{t}"
    );
}

#[tokio::test]
async fn max_tokens_and_request_stop_strings_and_per_token_timings() {
    let s = start(1, 1, &["a", "b", "c", "d", "e"], 1).await;
    let evs = events(
        post(
            &s.base,
            &body(
                "hi",
                json!({"stream": true, "max_tokens": 3, "timings_per_token": true}),
            ),
        )
        .await,
    )
    .await;
    assert_eq!(content(&evs), "abc");
    let chunks: Vec<Value> = evs
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect();
    let with_text: Vec<&Value> = chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
        })
        .collect();
    assert_eq!(with_text.len(), 3);
    for (i, c) in with_text.iter().enumerate() {
        assert_eq!(c["timings"]["predicted_n"], (i + 1) as u64, "{c}");
    }
    let fin = chunks
        .iter()
        .find(|c| !c["choices"][0]["finish_reason"].is_null())
        .unwrap();
    assert_eq!(fin["choices"][0]["finish_reason"], "length");

    let evs = events(post(&s.base, &body("hi", json!({"stream": true, "stop": "c"}))).await).await;
    assert_eq!(content(&evs), "ab");
}

#[tokio::test]
async fn non_streaming_reply_is_one_json_body() {
    let s = start(1, 1, &["Hi", " there"], 1).await;
    let r = post(&s.base, &body("hello", json!({"max_tokens": 8}))).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("x-request-id"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "Hi there");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["completion_tokens"], 2);
    assert_eq!(v["timings"]["prompt_n"], 5);
    let m: Value = reqwest::get(format!("{}/v1/models", s.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(m["data"][0]["id"], "fake-model");
}

#[tokio::test]
async fn beyond_slots_plus_queue_one_request_gets_503_and_queue_time_is_measured() {
    // 1 slot + 2 queued: the 4th concurrent request is refused.
    let s = start(1, 2, &["x"; 40], 10).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        let r = post(&s.base, &body("hi", json!({"stream": true}))).await;
        assert_eq!(r.status(), 200);
        open.push(r);
    }
    let r = post(&s.base, &body("hi", json!({"stream": true}))).await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let (_, e) = error_of(r).await;
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("busy") && msg.contains("--queue 2"), "{msg}");
    let h = health(&s.base).await;
    assert_eq!(
        (
            h["busy"].as_u64(),
            h["queued"].as_u64(),
            h["rejected"].as_u64()
        ),
        (Some(1), Some(2), Some(1))
    );

    // The third request waited for the two before it: ~2 × 40 tokens × 10 ms.
    let third = open.pop().unwrap();
    let evs = events(third).await;
    let last_timed: Value = evs
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .rfind(|v| v.get("timings").is_some())
        .unwrap();
    let q = last_timed["timings"]["queue_ms"].as_f64().unwrap();
    assert!(q >= 600.0, "queue_ms {q}");
    assert!(q <= last_timed["timings"]["first_token_ms"].as_f64().unwrap());
}

#[tokio::test]
async fn a_client_that_disconnects_cancels_its_generation_and_frees_the_slot() {
    let s = start(1, 4, &["tok "; 2000], 5).await;
    let mut r = post(&s.base, &body("hi", json!({"stream": true}))).await;
    // Read until some content arrived, then hang up.
    let mut seen = String::new();
    while !seen.contains("tok") {
        let chunk = r.chunk().await.unwrap().unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(r);
    let t0 = Instant::now();
    loop {
        if health(&s.base).await["cancelled"] == 1 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "generation was not cancelled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let produced = s.produced.load(Ordering::Relaxed);
    assert!(produced < 2000, "the whole reply was generated: {produced}");
    // The slot is free: the next request starts at once.
    let v: Value = post(&s.base, &body("hi", json!({"max_tokens": 2})))
        .await
        .json()
        .await
        .unwrap();
    assert!(v["timings"]["queue_ms"].as_f64().unwrap() < 100.0, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "tok tok ");
    // The slot's bookkeeping ends just after the reply is written, so the counters may lag the
    // body by a moment (seen once in CI: busy 1, completed 0).
    let t0 = Instant::now();
    let mut h = health(&s.base).await;
    while h["busy"].as_u64() != Some(0) && t0.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        h = health(&s.base).await;
    }
    assert_eq!(
        (h["completed"].as_u64(), h["busy"].as_u64()),
        (Some(1), Some(0))
    );
}

#[tokio::test]
async fn a_request_whose_client_left_while_queued_never_runs() {
    let s = start(1, 4, &["y"; 30], 10).await;
    let first = post(&s.base, &body("first", json!({"stream": true}))).await;
    let second = post(&s.base, &body("second", json!({"stream": true}))).await;
    drop(second);
    let evs = events(first).await;
    assert_eq!(content(&evs), "y".repeat(30));
    let t0 = Instant::now();
    while health(&s.base).await["cancelled"] != 1 {
        assert!(t0.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Only the first request produced tokens.
    assert_eq!(s.produced.load(Ordering::Relaxed), 30);
}

/// Sends `prompt`, which makes the fake engine give up, and returns the error message the
/// stream ended with, after checking that the slot serves the next request and counted one
/// failure.
async fn fails_that_request_only(prompt: &str) -> String {
    let s = start(1, 1, &["fine"], 1).await;
    let evs = events(post(&s.base, &body(prompt, json!({"stream": true}))).await).await;
    let err: Value = serde_json::from_str(&evs[evs.len() - 2]).unwrap();
    let v: Value = post(&s.base, &body("hi", json!({})))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "fine");
    assert_eq!(health(&s.base).await["failed"], 1);
    err["error"]["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn an_engine_panic_fails_that_request_only() {
    let msg = fails_that_request_only("please PANIC now").await;
    assert!(msg.contains("panic"), "{msg}");
}

#[tokio::test]
async fn an_engine_failure_fails_that_request_naming_the_step() {
    let msg = fails_that_request_only("please FAIL now").await;
    assert_eq!(
        msg,
        "generation failed: the scripted step failed: asked to fail"
    );
}

#[test]
fn a_slot_whose_engine_cannot_be_built_stops_the_start_naming_the_slot() {
    let started = Scheduler::start(2, 0, |slot| {
        if slot == 1 {
            return Err("out of memory for the KV cache".into());
        }
        Ok(Box::new(FakeEngine {
            pieces: vec![],
            token_delay: Duration::ZERO,
            prefill_per_token: Duration::ZERO,
            produced: Arc::default(),
        }) as Box<dyn Engine>)
    });
    let err = started.err().expect("slot 1 cannot start");
    assert!(matches!(err, StartError::Engine { slot: 1, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "slot 1 could not build its engine: out of memory for the KV cache"
    );
}
