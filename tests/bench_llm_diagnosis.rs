//! `voxlat bench-llm` sweeps, probes and diagnosis against scripted servers whose behaviour
//! is known: linear prefill, a bimodal queue, a prefix cache, a reasoning stream, TTFT that
//! grows with max_tokens, server-reported timings. Delays are tens of milliseconds so they
//! dominate scheduling noise; assertions compare structure, not machine speed.

mod common;

use common::voxlat;
use std::path::Path;
use std::process::Output;
use std::sync::Mutex;
use std::time::Duration;
use voxlat_testkit::{Builder, ReasoningStyle, Script, ScriptedServer};

struct Run {
    out: Output,
    json: serde_json::Value,
}

impl Run {
    fn text(&self) -> String {
        format!(
            "{}{}",
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr)
        )
    }

    fn causes(&self) -> Vec<String> {
        self.json["analysis"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["cause"].as_str().unwrap().to_string())
            .collect()
    }
}

/// Runs bench-llm against `s` with `args`, and reads the results file.
async fn bench(s: &ScriptedServer, args: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let mut cmd = voxlat();
    cmd.env("VOXLAT_BASE_URL", s.base_url())
        .args(["bench-llm", "--quiet", "-o"])
        .arg(&file)
        .args(args)
        .current_dir(dir.path());
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("run voxlat"))
        .await
        .unwrap();
    let json = read_json(&file, &out);
    Run { out, json }
}

fn read_json(p: &Path, out: &Output) -> serde_json::Value {
    let bytes = std::fs::read(p).unwrap_or_else(|e| {
        panic!(
            "no results file ({e}):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_slice(&bytes).unwrap()
}

fn millis(n: f64) -> Duration {
    Duration::from_secs_f64(n / 1000.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_sweep_fits_the_servers_prefill_line_and_diagnoses_prefill() {
    // TTFT = 20 ms + 0.05 ms per prompt token: slope 50 ms per 1k, intercept 20 ms.
    let s = Builder::per_request(|body, _| {
        let words = Script::prompt_words(body);
        Script {
            ttft: millis(20.0 + 0.05 * words as f64),
            usage_prompt_tokens: Some(words as u64),
            ..Script::with_tokens(3)
        }
    })
    .start()
    .await;
    let r = bench(
        &s,
        &[
            "--sweep",
            "prompt-tokens=100,1000,3000",
            "--requests",
            "4",
            "--warmup",
            "1",
        ],
    )
    .await;
    assert!(r.out.status.success(), "{}", r.text());
    let fit = &r.json["analysis"]["sweeps"][0]["fit"];
    let slope = fit["slope_ms_per_1k"].as_f64().unwrap();
    let intercept = fit["intercept_ms"].as_f64().unwrap();
    assert!((slope - 50.0).abs() < 5.0, "slope {slope}\n{}", r.text());
    // The client and loopback add a little to the fixed cost, never take from it.
    assert!(
        (18.0..40.0).contains(&intercept),
        "intercept {intercept}\n{}",
        r.text()
    );
    assert!(fit["r2"].as_f64().unwrap() > 0.95);
    let causes = r.causes();
    assert!(
        causes.contains(&"prefill".into()),
        "{causes:?}\n{}",
        r.text()
    );
    assert!(!causes.contains(&"queueing".into()), "{causes:?}");
    let text = r.text();
    assert!(text.contains("ms per 1k prompt tokens"), "{text}");
    assert!(
        text.contains("Diagnosis:") && text.contains("- prefill"),
        "{text}"
    );
    // Each point's prompt is its own size, and different per request.
    let served = s.requests();
    let sizes: Vec<usize> = served
        .iter()
        .map(|q| Script::prompt_words(&q.body))
        .collect();
    assert!(
        sizes.iter().any(|&w| (3000..3020).contains(&w)),
        "{sizes:?}"
    );
    let big: Vec<String> = served
        .iter()
        .filter(|q| Script::prompt_words(&q.body) > 2000)
        .map(|q| Script::prompt_text(&q.body))
        .collect();
    assert_eq!(big.len(), 4);
    assert_ne!(big[0], big[1]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bimodal_queue_is_diagnosed_as_queueing_not_prefill() {
    // Every third request waits 150 ms for a slot before its headers.
    let s = Builder::per_request(|_, i| Script {
        headers_delay: if i % 3 == 0 {
            millis(150.0)
        } else {
            Duration::ZERO
        },
        ttft: millis(10.0),
        ..Script::with_tokens(2)
    })
    .start()
    .await;
    let r = bench(&s, &["--requests", "30", "--warmup", "0"]).await;
    assert!(r.out.status.success(), "{}", r.text());
    let causes = r.causes();
    assert!(
        causes.contains(&"queueing".into()),
        "{causes:?}\n{}",
        r.text()
    );
    assert!(!causes.contains(&"prefill".into()), "{causes:?}");
    assert!(r.text().contains("bimodal"), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steady_server_gets_no_queueing_or_prefill_diagnosis() {
    // 40 ms, so a scheduling hiccup on a busy machine cannot make a 3x tail by itself.
    let s = Builder::fixed(Script {
        ttft: millis(40.0),
        ..Script::with_tokens(2)
    })
    .start()
    .await;
    let r = bench(&s, &["--requests", "25", "--warmup", "1"]).await;
    assert!(r.out.status.success(), "{}", r.text());
    let causes = r.causes();
    for c in ["queueing", "prefill", "no-prefix-cache", "reasoning"] {
        assert!(!causes.contains(&c.into()), "{causes:?}\n{}", r.text());
    }
}

/// A server whose prefill costs 0.05 ms per token it has not cached, caching (like llama.cpp
/// with one slot) the previous request's prompt. Without a cache every token is paid.
fn cache_server(caching: bool) -> Builder {
    let last: Mutex<Vec<String>> = Mutex::new(Vec::new());
    Builder::per_request(move |body, _| {
        let words: Vec<String> = Script::prompt_text(body)
            .split_whitespace()
            .map(String::from)
            .collect();
        let mut prev = last.lock().unwrap();
        let common = if caching {
            prev.iter().zip(&words).take_while(|(a, b)| a == b).count()
        } else {
            0
        };
        *prev = words.clone();
        let uncached = words.len() - common;
        Script {
            ttft: millis(5.0 + 0.05 * uncached as f64),
            usage_prompt_tokens: Some(words.len() as u64),
            usage_cached_tokens: Some(common as u64),
            ..Script::with_tokens(2)
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn prefix_cache_probe_tells_a_prefix_cache_from_none() {
    let s = cache_server(true).start().await;
    let args = [
        "--probe",
        "prefix-cache",
        "--prompt-tokens",
        "2000",
        "--requests",
        "2",
        "--warmup",
        "1",
    ];
    let r = bench(&s, &args).await;
    assert!(r.out.status.success(), "{}", r.text());
    let cache = &r.json["analysis"]["cache"][0];
    assert_eq!(cache["verdict"], "prefix-cache", "{}", r.text());
    // The server's cached_tokens are reported per step: most of the prompt on a repeat.
    let cached: Vec<(String, f64)> = cache["cached_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().into(), p[1].as_f64().unwrap()))
        .collect();
    let repeat = cached.iter().find(|(k, _)| k == "repeat").unwrap().1;
    let start = cached.iter().find(|(k, _)| k == "change-start").unwrap().1;
    assert!(repeat > 1900.0 && start < 10.0, "{cached:?}");
    assert!(!r.causes().contains(&"no-prefix-cache".into()));
    assert!(
        r.text().contains("the server caches prefixes"),
        "{}",
        r.text()
    );

    let s = cache_server(false).start().await;
    let r = bench(&s, &args).await;
    assert!(r.out.status.success(), "{}", r.text());
    assert_eq!(r.json["analysis"]["cache"][0]["verdict"], "no-reuse");
    assert!(
        r.causes().contains(&"no-prefix-cache".into()),
        "{}",
        r.text()
    );
    assert!(r.text().contains("stable content"), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn reasoning_streams_report_thinking_and_time_to_first_answer() {
    for style in [ReasoningStyle::ReasoningContent, ReasoningStyle::ThinkTags] {
        let s = Builder::fixed(Script {
            ttft: millis(10.0),
            itl: millis(10.0),
            reasoning: (0..10).map(|i| format!(" step{i}")).collect(),
            reasoning_style: style,
            ..Script::with_tokens(3)
        })
        .start()
        .await;
        let r = bench(&s, &["--requests", "3", "--warmup", "1"]).await;
        assert!(r.out.status.success(), "{}", r.text());
        let cell = &r.json["cells"][0];
        let ttft = cell["ttft_ms"]["p50"].as_f64().unwrap();
        let answer = cell["ttfat_ms"]["p50"].as_f64().unwrap();
        let thinking = cell["thinking_ms"]["p50"].as_f64().unwrap();
        // Ten reasoning deltas 10 ms apart come before the answer.
        assert!(
            thinking >= 80.0 && answer > ttft + 80.0,
            "{style:?}: {cell}"
        );
        assert_eq!(
            cell["reasoning_tokens"]["p50"].as_f64(),
            Some(10.0),
            "{style:?}"
        );
        assert!(
            r.causes().contains(&"reasoning".into()),
            "{style:?}\n{}",
            r.text()
        );
        let text = r.text();
        assert!(
            text.contains("first answer") && text.contains("thinking"),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn max_tokens_sweep_flags_ttft_that_grows_with_max_tokens() {
    // A server that pre-allocates: 0.05 ms per requested token before the first one.
    let s = Builder::per_request(|body, _| Script {
        ttft: millis(10.0 + 0.05 * body["max_tokens"].as_f64().unwrap_or(0.0)),
        ..Script::with_tokens(40)
    })
    .start()
    .await;
    let args = [
        "--sweep",
        "max-tokens=16,4000",
        "--requests",
        "5",
        "--warmup",
        "0",
    ];
    let r = bench(&s, &args).await;
    assert!(r.out.status.success(), "{}", r.text());
    assert!(
        r.causes().contains(&"max-tokens-not-flat".into()),
        "{}",
        r.text()
    );
    // Streams are closed at the first answer token: only TTFT matters here.
    let reqs = r.json["requests"].as_array().unwrap();
    assert!(
        reqs.iter().all(|q| q["cut_at_first_token"] == true),
        "{reqs:?}"
    );
    let maxes: Vec<u64> = s
        .requests()
        .iter()
        .filter_map(|q| q.body["max_tokens"].as_u64())
        .collect();
    assert!(maxes.contains(&16) && maxes.contains(&4000), "{maxes:?}");

    let s = Builder::fixed(Script {
        ttft: millis(40.0),
        ..Script::with_tokens(40)
    })
    .start()
    .await;
    let r = bench(&s, &args).await;
    assert!(r.out.status.success(), "{}", r.text());
    assert!(
        !r.causes().contains(&"max-tokens-not-flat".into()),
        "{}",
        r.text()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_probe_measures_cold_and_warm_over_http1_and_http2() {
    let s = Builder::fixed(Script::with_tokens(2)).start().await;
    let r = bench(
        &s,
        &["--probe", "connections", "--requests", "3", "--warmup", "1"],
    )
    .await;
    assert!(r.out.status.success(), "{}", r.text());
    let conns = r.json["analysis"]["connections"].as_array().unwrap();
    let protocols: Vec<&str> = conns
        .iter()
        .map(|c| c["protocol"].as_str().unwrap())
        .collect();
    assert_eq!(protocols, ["HTTP/1.1", "HTTP/2"], "{}", r.text());
    for c in conns {
        assert_eq!(c["errors"], 0, "{c}");
        assert!(c["connect_p50_ms"].as_f64().is_some(), "{c}");
        assert!(c["warm_ttfb_p50_ms"].as_f64().is_some(), "{c}");
    }
    let reqs = r.json["requests"].as_array().unwrap();
    for q in reqs.iter().filter(|q| q["warmup"] == false) {
        let v = &q["variant"];
        if v["kind"] != "connection" {
            continue;
        }
        let new = q["outcome"]["connection"]["new_connection"] == true;
        assert_eq!(new, v["cold"] == true, "cold means a new connection: {q}");
        let version = q["outcome"]["http_version"].as_str().unwrap();
        assert_eq!(version == "HTTP/2.0", v["http2"] == true, "{q}");
    }
    assert!(r.text().contains("cold TTFB"), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn server_view_sets_server_timings_beside_client_ttft() {
    // llama.cpp-style timings: the server saw 30 ms of prefill; Ollama durations alike.
    let s = Builder::fixed(Script {
        ttft: millis(40.0),
        timings_value: Some(serde_json::json!({"prompt_n": 50, "prompt_ms": 30.0, "predicted_n": 3, "predicted_ms": 10.0, "cache_n": 0})),
        ..Script::with_tokens(3)
    })
    .start()
    .await;
    let r = bench(&s, &["--requests", "3", "--warmup", "0"]).await;
    assert!(r.out.status.success(), "{}", r.text());
    let v = &r.json["cells"][0]["server_view"];
    assert_eq!(v["convention"], "llama.cpp");
    assert_eq!(v["joined_by_request_id"], 3, "{v}");
    let outside = v["outside_server_ms"]["p50"].as_f64().unwrap();
    // Client TTFT ≈ 40 ms scripted; the server accounts for 30 of it.
    assert!((8.0..40.0).contains(&outside), "{v}");
    assert!(r.text().contains("Server view"), "{}", r.text());
    // 30 of 40 ms is prefill, but 40 ms is not slow: no stage is blamed.
    assert!(!r.causes().contains(&"prefill".into()), "{:?}", r.causes());

    // The same share of a slow TTFT is a prefill finding.
    let s = Builder::fixed(Script {
        ttft: millis(300.0),
        timings_value: Some(serde_json::json!({"prompt_n": 900, "prompt_ms": 280.0, "predicted_n": 3, "predicted_ms": 10.0, "cache_n": 0})),
        ..Script::with_tokens(3)
    })
    .start()
    .await;
    let r = bench(&s, &["--requests", "3", "--warmup", "0"]).await;
    assert!(
        r.causes().contains(&"prefill".into()),
        "{:?}\n{}",
        r.causes(),
        r.text()
    );

    let mut extra = serde_json::Map::new();
    extra.insert("prompt_eval_duration".into(), 30_000_000u64.into());
    extra.insert("eval_duration".into(), 9_000_000u64.into());
    let s = Builder::fixed(Script {
        ttft: millis(40.0),
        final_chunk_extra: extra,
        ..Script::with_tokens(3)
    })
    .start()
    .await;
    let r = bench(&s, &["--requests", "2", "--warmup", "0"]).await;
    let v = &r.json["cells"][0]["server_view"];
    assert_eq!(v["convention"], "ollama", "{}", r.text());
    assert_eq!(v["prefill_ms"]["p50"].as_f64(), Some(30.0));
    assert_eq!(v["decode_ms"]["p50"].as_f64(), Some(9.0));
}

#[tokio::test(flavor = "multi_thread")]
async fn sweep_and_probe_flags_explain_mistakes() {
    let s = Builder::fixed(Script::with_tokens(2)).start().await;
    for (args, needle) in [
        (vec!["--sweep", "temperature=1,2"], "cannot sweep"),
        (
            vec!["--sweep", "prompt-tokens=100,x"],
            "not a positive whole number",
        ),
        (
            vec!["--probe", "cache-warmth"],
            "prefix-cache or connections",
        ),
        (
            vec!["--sweep", "prompt-tokens=100", "--prompt", "hi"],
            "makes its own prompts",
        ),
    ] {
        let mut cmd = voxlat();
        cmd.env("VOXLAT_BASE_URL", s.base_url())
            .arg("bench-llm")
            .args(&args);
        let o = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(
            !o.status.success() && text.contains(needle),
            "{args:?}: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn prompt_sizes_beyond_the_context_are_skipped_with_a_message() {
    let s = Builder::fixed(Script::with_tokens(2)).start().await;
    let r = bench(
        &s,
        &[
            "--sweep",
            "prompt-tokens=50,5000",
            "--context-tokens",
            "1024",
            "--requests",
            "1",
            "--warmup",
            "0",
        ],
    )
    .await;
    assert!(r.out.status.success(), "{}", r.text());
    assert!(
        r.text().contains("skipping prompt-tokens [5000]"),
        "{}",
        r.text()
    );
    assert!(s
        .requests()
        .iter()
        .all(|q| Script::prompt_words(&q.body) < 1000));
}
