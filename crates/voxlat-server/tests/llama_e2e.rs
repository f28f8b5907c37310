//! The real llama.cpp path, against the bundled Gemma 3 270M (`voxlat models fetch
//! gemma-3-270m`). Each test starts its own `voxlat-server`; they run one at a time so that
//! two servers never fight over the cores.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(args: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_voxlat-server"))
        .args(["--port", "0", "--threads", "2"])
        // Pinned, not the manifest default: these tests exercise Gemma 3's fallback template
        // and sliding-window cache.
        .args(["--model", "gemma-3-270m"])
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start voxlat-server");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
    let Some(url) = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .map(|u| u.trim_end_matches("/v1").to_string())
    else {
        let _ = child.kill();
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        panic!(
            "voxlat-server did not start. If the model is missing, run `voxlat models fetch gemma-3-270m` \
             (scripts/test.sh does). Its output:\n{line}\n{err}"
        );
    };
    // Keep draining stderr so the child never blocks on a full pipe.
    let mut stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = stderr.read_to_end(&mut sink);
    });
    Server { child, base: url }
}

fn chat(base: &str, body: &Value) -> reqwest::blocking::Response {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
        .post(format!("{base}/v1/chat/completions"))
        .json(body)
        .send()
        .unwrap()
}

/// A greedy streamed reply: its text and the final timings/usage chunk.
fn ask(base: &str, content: &str, max_tokens: u32) -> (String, Value) {
    let r = chat(
        base,
        &json!({"messages": [{"role": "user", "content": content}], "stream": true,
                "temperature": 0, "max_tokens": max_tokens,
                "stream_options": {"include_usage": true}}),
    );
    assert_eq!(r.status(), 200);
    let text = r.text().unwrap();
    let mut out = String::new();
    let mut last = Value::Null;
    for data in text.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
        if data == "[DONE]" {
            break;
        }
        let v: Value = serde_json::from_str(data).unwrap();
        if let Some(t) = v["choices"][0]["delta"]["content"].as_str() {
            out.push_str(t);
        }
        if v.get("usage").is_some() {
            last = v;
        }
    }
    assert!(!last.is_null(), "no usage chunk in {text}");
    (out, last)
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{path:?} missing in {v}"))
}

/// Distinct filler sentences: about 7 tokens each.
fn filler(from: usize, n: usize) -> String {
    const W: [&str; 8] = [
        "river", "stone", "lamp", "garden", "window", "paper", "cloud", "bridge",
    ];
    (from..from + n)
        .map(|i| {
            format!(
                "Note {i}: the {} is near the {}. ",
                W[i % 8],
                W[(i * 3 + 1) % 8]
            )
        })
        .collect()
}

#[test]
fn real_model_streams_with_consistent_timings_and_refuses_bad_input() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = start(&["--ctx", "256"]);

    let r = reqwest::blocking::Client::new()
        .post(format!("{}/v1/chat/completions", s.base))
        .header("X-Request-Id", "e2e-1")
        .json(
            &json!({"messages": [{"role": "user", "content": "Say hello."}],
                      "stream": true, "max_tokens": 6, "temperature": 0,
                      "stream_options": {"include_usage": true}}),
        )
        .send()
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "e2e-1");
    drop(r);

    let (text, last) = ask(&s.base, "Write one sentence about the sea.", 8);
    assert!(!text.is_empty());
    let t = &last["timings"];
    let prompt_tokens = num(&last, &["usage", "prompt_tokens"]);
    assert!(prompt_tokens > 5.0, "{last}");
    assert_eq!(num(t, &["prompt_n"]) + num(t, &["cache_n"]), prompt_tokens);
    assert_eq!(
        num(t, &["predicted_n"]),
        num(&last, &["usage", "completion_tokens"])
    );
    assert!(num(t, &["predicted_n"]) <= 8.0);
    let (prefill, first, total) = (
        num(t, &["prompt_ms"]),
        num(t, &["first_token_ms"]),
        num(t, &["total_ms"]),
    );
    assert!(prefill > 0.0 && prefill <= first && first <= total, "{t}");
    assert!(num(t, &["queue_ms"]) + prefill <= first, "{t}");

    // Non-streaming, same server.
    let v: Value = chat(
        &s.base,
        &json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}),
    )
    .json()
    .unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert!(v["timings"]["first_token_ms"].as_f64().unwrap() > 0.0);

    // Too long for --ctx 256: refused with both counts, before it queues.
    let long = filler(0, 60);
    let r = chat(
        &s.base,
        &json!({"messages": [{"role": "user", "content": long}]}),
    );
    assert_eq!(r.status(), 400);
    let e: Value = r.json().unwrap();
    assert!(e["error"]["n_prompt_tokens"].as_u64().unwrap() > 256, "{e}");
    assert_eq!(e["error"]["n_ctx"], 256);
    assert!(e["error"]["message"].as_str().unwrap().contains("--ctx"));

    let r = chat(
        &s.base,
        &json!({"model": "llama-70b", "messages": [{"role": "user", "content": "x"}]}),
    );
    assert_eq!(r.status(), 404);
    let msg = r.json::<Value>().unwrap()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("llama-70b") && msg.contains("gemma-3-270m"),
        "{msg}"
    );

    let r = reqwest::blocking::Client::new()
        .post(format!("{}/v1/chat/completions", s.base))
        .body("{\"messages\": 5}")
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().unwrap().contains("`messages` must be an array"));

    let h: Value = reqwest::blocking::get(format!("{}/health", s.base))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(h["failed"], 0);
    assert_eq!(h["model"], "gemma-3-270m");
}

#[test]
fn prefix_reuse_hits_misses_and_keeps_output_correct() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The window-sized SWA cache makes the sliding-window fallback reachable.
    let s = start(&["--ctx", "4096", "--small-swa-cache"]);

    let short = "List three colours.";
    let (cold_out, cold) = ask(&s.base, short, 10);
    assert_eq!(
        num(&cold, &["timings", "cache_n"]),
        0.0,
        "first request: nothing cached"
    );

    let prefix = filler(0, 80); // ~600 tokens
    let (_, a) = ask(&s.base, &format!("{prefix}Question: where is the lamp?"), 4);
    let (_, b) = ask(
        &s.base,
        &format!("{prefix}Question: where is the cloud?"),
        4,
    );
    let (a_prefill, b_prefill) = (
        num(&a, &["timings", "prompt_ms"]),
        num(&b, &["timings", "prompt_ms"]),
    );
    let b_cached = num(&b, &["timings", "cache_n"]);
    assert!(
        b_cached > 500.0,
        "second request with the same long prefix: {b}"
    );
    assert_eq!(
        b_cached,
        num(&b, &["usage", "prompt_tokens_details", "cached_tokens"])
    );
    assert!(num(&b, &["timings", "prompt_n"]) < 20.0, "{b}");
    assert!(
        b_prefill < a_prefill,
        "reuse must make prefill cheaper: {a_prefill} -> {b_prefill}"
    );

    // Diverging right after the chat template's first tokens: little reused, same answer.
    let (again_out, again) = ask(&s.base, short, 10);
    assert!(num(&again, &["timings", "cache_n"]) < 8.0, "{again}");
    assert_eq!(again_out, cold_out);

    // A prompt sharing its start with a long cached one, diverging further back than the
    // sliding-window cache still covers: nothing can be reused, and the answer is unchanged.
    let head = filler(0, 10);
    let probe = format!("{head}Question: what is near the river?");
    let (probe_cold_out, _) = ask(&s.base, &probe, 8);
    let (_, _) = ask(
        &s.base,
        &format!("{head}{}Question: and the paper?", filler(500, 180)),
        2,
    );
    let (probe_out, probe_again) = ask(&s.base, &probe, 8);
    assert_eq!(
        num(&probe_again, &["timings", "cache_n"]),
        0.0,
        "{probe_again}"
    );
    assert_eq!(probe_out, probe_cold_out);
}

#[test]
fn disconnect_cancels_generation_and_the_queue_is_bounded() {
    let _g = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = start(&["--slots", "1", "--queue", "1"]);
    let long_body = json!({"messages": [{"role": "user", "content": "Count from 1 to 500: 1, 2, 3,"}],
                           "stream": true, "max_tokens": 1500, "temperature": 0});
    let mut a = chat(&s.base, &long_body);
    assert_eq!(a.status(), 200);
    let b_base = s.base.clone();
    let b = std::thread::spawn(move || {
        let t0 = Instant::now();
        let out = ask(&b_base, "Hi", 3);
        (out, t0.elapsed())
    });
    // Wait until B is queued, then a third request finds the queue full.
    let t0 = Instant::now();
    loop {
        let h: Value = reqwest::blocking::get(format!("{}/health", s.base))
            .unwrap()
            .json()
            .unwrap();
        if h["queued"] == 1 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{h}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let c = chat(
        &s.base,
        &json!({"messages": [{"role": "user", "content": "x"}]}),
    );
    assert_eq!(c.status(), 503);
    assert!(c.text().unwrap().contains("--queue 1"));

    // Read some of A's tokens, then hang up.
    let mut buf = [0u8; 4096];
    let mut got = 0;
    while got < 3 {
        let n = a.read(&mut buf).unwrap();
        assert!(n > 0, "stream ended early");
        got += String::from_utf8_lossy(&buf[..n])
            .matches("\"content\"")
            .count();
    }
    drop(a);
    let ((_, b_last), b_elapsed) = b.join().unwrap();
    // 1500 tokens would take far longer than this; B started when A was cancelled.
    assert!(b_elapsed < Duration::from_secs(20), "{b_elapsed:?}");
    assert!(num(&b_last, &["timings", "queue_ms"]) > 0.0);
    let h: Value = reqwest::blocking::get(format!("{}/health", s.base))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(h["cancelled"], 1, "{h}");
    assert_eq!(
        (h["busy"].as_u64(), h["rejected"].as_u64()),
        (Some(0), Some(1))
    );
}
