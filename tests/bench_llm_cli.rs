//! `voxlat bench-llm` end to end, against the scripted server.

mod common;

use common::voxlat;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use voxlat_testkit::{Builder, Script, ScriptedServer};

async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run voxlat"))
        .await
        .unwrap()
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

async fn server(script: Script) -> ScriptedServer {
    Builder::fixed(script).start().await
}

#[tokio::test(flavor = "multi_thread")]
async fn one_env_var_points_it_at_a_server_and_results_are_complete() {
    let s = server(Script::with_tokens(8)).await;
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("r.json");
    let mut cmd = voxlat();
    cmd.env("VOXLAT_BASE_URL", s.base_url())
        .env("VOXLAT_API_KEY", "sk-never-shown-0001")
        .args([
            "bench-llm",
            "--requests",
            "6",
            "--warmup",
            "2",
            "--concurrency",
            "1,3",
            "--quiet",
            "-o",
        ])
        .arg(&out_file)
        .current_dir(dir.path());
    let o = output(cmd).await;
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains("scripted-model c=1") && all.contains("scripted-model c=3"),
        "{all}"
    );
    assert!(
        all.contains("TTFT") && all.contains("TPOT") && all.contains("ITL"),
        "{all}"
    );
    assert!(!all.contains("sk-never-shown-0001"));

    let raw = std::fs::read_to_string(&out_file).unwrap();
    assert!(
        !raw.contains("sk-never-shown-0001"),
        "API key leaked into the results file"
    );
    let r: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(r["header"]["schema_version"], 1);
    assert_eq!(r["header"]["interrupted"], false);
    // Two warm-ups at c=1, three more opening the pool to c=3, then the cells.
    assert_eq!(r["requests"].as_array().unwrap().len(), 2 + 3 + 6 + 6);
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        assert_eq!(c["ok"], 6);
        // Every measured request rode a ready connection.
        assert_eq!(c["new_connections"], 0, "{}", c["cell"]);
        assert_eq!(c["ttft_ms"]["n"], 6);
        assert_eq!(c["tokens_from_usage"], 6);
        assert!(c["ttft_ms"]["p50"].as_f64().unwrap() > 0.0);
    }
    let req = &r["requests"][3];
    assert!(
        req["events"]["llm_first_token"].as_u64().unwrap()
            > req["events"]["llm_sent"].as_u64().unwrap()
    );
    assert_eq!(r["endpoint"]["api_key"]["value"], "<redacted>");
    // Every request the server saw carried the request ID the results file holds.
    let ids: Vec<String> = s
        .requests()
        .iter()
        .filter_map(|q| q.request_id.clone())
        .collect();
    for rec in r["requests"].as_array().unwrap() {
        assert!(ids.contains(&rec["request_id"].as_str().unwrap().to_string()));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn config_file_and_open_loop_rate() {
    let s = server(Script {
        ttft: Duration::from_millis(5),
        ..Script::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bench.toml");
    std::fs::write(&cfg, format!("base_url = \"{}\"\nrate = [20.0]\nrequests = 8\nwarmup = 1\nmax_tokens = 7\n[prompt]\ntokens = 50\n", s.base_url())).unwrap();
    let mut cmd = voxlat();
    cmd.args(["bench-llm", "--quiet", "--config"])
        .arg(&cfg)
        .arg("--output-dir")
        .arg(dir.path());
    let o = output(cmd).await;
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("send lag"), "{}", text(&o));
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    assert!(file
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("bench-llm-"));
    let r = read_json(&file);
    assert_eq!(r["config"]["rate"][0], 20.0);
    assert_eq!(r["cells"][0]["load"], "rate=20/s");
    assert_eq!(r["cells"][0]["send_lag_ms"]["n"], 8);
    assert!(r["requests"][1]["scheduled"].is_u64());
    assert_eq!(s.requests()[0].body["max_tokens"], 7);
    let prompt = s.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prompt.split(' ').count() >= 50, "{prompt}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_key_stops_at_the_first_request_with_the_fix_and_no_key() {
    let s = Builder::fixed(Script::default())
        .require_key("sk-good")
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = voxlat();
    cmd.env("VOXLAT_BASE_URL", s.base_url())
        .env("OPENAI_API_KEY", "sk-bad-key-9876")
        .args(["bench-llm", "--requests", "50", "--quiet", "--output-dir"])
        .arg(dir.path());
    let o = output(cmd).await;
    let all = text(&o);
    assert!(!o.status.success());
    assert!(
        all.contains("401") && all.contains("OPENAI_API_KEY"),
        "{all}"
    );
    assert!(!all.contains("sk-bad-key-9876"), "key printed: {all}");
    assert_eq!(s.requests().len(), 1, "stopped after the first request");
    for e in std::fs::read_dir(dir.path()).unwrap() {
        assert!(!std::fs::read_to_string(e.unwrap().path())
            .unwrap()
            .contains("sk-bad-key-9876"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn proxy_from_the_environment_is_named_in_the_error() {
    let s = server(Script::default()).await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = voxlat();
    cmd.env("HTTP_PROXY", format!("http://user:pw@127.0.0.1:{dead}"))
        .args([
            "bench-llm",
            "--quiet",
            "--model",
            "m",
            "--base-url",
            &s.base_url(),
            "--output-dir",
        ])
        .arg(dir.path());
    let o = output(cmd).await;
    let all = text(&o);
    assert!(!o.status.success());
    assert!(
        all.contains("proxy") && all.contains("NO_PROXY=127.0.0.1"),
        "{all}"
    );
    assert!(!all.contains("user:pw"), "proxy credentials printed: {all}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_a_clear_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    // Without any base URL bench-llm starts the embedded server (tests/serve_cli.rs); a
    // malformed one is a configuration error that names its source.
    let mut cmd = voxlat();
    cmd.args(["bench-llm", "--quiet", "--base-url", "ftp://127.0.0.1:9/v1"])
        .current_dir(dir.path());
    let o = output(cmd).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("--base-url") && text(&o).contains("http://"),
        "{}",
        text(&o)
    );

    let mut cmd = voxlat();
    cmd.args([
        "bench-llm",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--messages-file",
        "nope.json",
    ])
    .current_dir(dir.path());
    let o = output(cmd).await;
    assert!(text(&o).contains("nope.json"), "{}", text(&o));
    assert!(!text(&o).contains("panicked"));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_keeps_every_completed_request() {
    signal_keeps_every_completed_request(libc::SIGINT, 130, "SIGINT").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_keeps_every_completed_request() {
    signal_keeps_every_completed_request(libc::SIGTERM, 143, "SIGTERM").await;
}

async fn signal_keeps_every_completed_request(sig: i32, code: i32, name: &str) {
    let s = server(Script {
        itl: Duration::from_millis(40),
        ..Script::with_tokens(5)
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let child = voxlat()
        .env("VOXLAT_BASE_URL", s.base_url())
        .args([
            "bench-llm",
            "--requests",
            "1000",
            "--warmup",
            "0",
            "--quiet",
            "-o",
        ])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until some requests have completed and been flushed.
    let mut seen = 0;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Ok(b) = std::fs::read(&file) {
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&b) {
                seen = v["requests"].as_array().map_or(0, |a| a.len());
                if seen >= 3 {
                    break;
                }
            }
        }
    }
    assert!(seen >= 3, "no requests flushed");
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, sig) };
    let o = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(code), "{}", text(&o));
    let r = read_json(&file);
    assert_eq!(r["header"]["interrupted"], true);
    assert_eq!(r["header"]["stop_reason"], name);
    let n = r["requests"].as_array().unwrap().len();
    assert!(n >= seen, "{n} < {seen}");
    assert!(n < 1000);
    assert_eq!(r["cells"][0]["ok"].as_u64().unwrap() as usize, n);
    assert!(text(&o).contains("interrupted"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_key_never_leaks_from_error_paths_or_trace_logs() {
    const KEY: &str = "sk-trace-secret-5150";
    // A gateway that echoes the credentials it was sent in its 500 body, and (on every
    // other request) fails mid-stream: the paths where a key most often escapes.
    let s = Builder::per_request(|_, i| {
        if i % 2 == 0 {
            Script::error(
                500,
                &format!(
                    r#"{{"error":{{"message":"upstream rejected Authorization: Bearer {KEY}"}}}}"#
                ),
            )
        } else {
            Script {
                disconnect_after: Some(1),
                ..Script::default()
            }
        }
    })
    .start()
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("r.json");
    let mut cmd = voxlat();
    cmd.env("VOXLAT_BASE_URL", s.base_url())
        .env("OPENAI_API_KEY", KEY)
        // Every log line of voxlat and its HTTP stack.
        .env("RUST_LOG", "trace")
        .args(["bench-llm", "--requests", "4", "--warmup", "0", "-o"])
        .arg(&out_file)
        .current_dir(dir.path());
    let o = output(cmd).await;
    let all = text(&o);
    assert!(all.contains("HTTP 500"), "{all}");
    assert!(all.contains("disconnected"), "{all}");
    assert!(
        s.requests()
            .iter()
            .all(|r| r.authorization.as_deref() == Some(&*format!("Bearer {KEY}"))),
        "the key was really sent"
    );
    assert!(!all.contains(KEY), "key on the terminal or in the logs");
    let files = common::all_files_text(dir.path());
    assert!(files.len() >= 2, "results and report: {files:?}");
    for (p, t) in files {
        assert!(!t.contains(KEY), "key in {}", p.display());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unwritable_output_is_reported_before_any_request() {
    let s = server(Script::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let mut cmd = voxlat();
    cmd.env("VOXLAT_BASE_URL", s.base_url())
        .args(["bench-llm", "--requests", "3", "-o"])
        .arg(file.join("r.json"))
        .current_dir(dir.path());
    let o = output(cmd).await;
    let all = text(&o);
    assert!(!o.status.success(), "{all}");
    assert!(all.contains("plain-file"), "{all}");
    assert!(!all.contains("panicked"), "{all}");
    assert_eq!(s.requests().len(), 0, "requests were sent before the check");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_fault_is_recorded_as_a_failed_request_with_its_partial_timings() {
    // One fault per request, in order; request 0 is healthy.
    let s = Builder::per_request(|_, i| match i % 6 {
        1 => Script {
            disconnect_after: Some(1),
            ..Script::default()
        },
        2 => Script {
            retry_after: Some("2".into()),
            ..Script::error(429, "slow down")
        },
        3 => Script::error(503, "overloaded"),
        4 => Script {
            invalid_json_after: Some(1),
            ..Script::default()
        },
        5 => Script {
            itl: Duration::from_secs(5),
            ..Script::default()
        },
        _ => Script::default(),
    })
    .start()
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let mut cmd = voxlat();
    cmd.env("VOXLAT_BASE_URL", s.base_url())
        .args([
            "bench-llm",
            "--requests",
            "6",
            "--warmup",
            "0",
            "--idle-timeout",
            "300ms",
            "--quiet",
            "-o",
        ])
        .arg(&file)
        .current_dir(dir.path());
    let o = output(cmd).await;
    let all = text(&o);
    assert!(!all.contains("panicked"), "{all}");
    let r = read_json(&file);
    let reqs = r["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 6, "{all}");
    let expected = [
        None,
        Some("disconnected"),
        Some("rate_limited"),
        Some("http_status"),
        Some("invalid_chunk"),
        Some("timeout"),
    ];
    for (i, (req, want)) in reqs.iter().zip(expected).enumerate() {
        assert_eq!(req["error_class"].as_str(), want, "request {i}: {req}");
        let ev = &req["events"];
        assert!(
            ev["llm_sent"].is_u64() && ev["llm_headers"].is_u64(),
            "request {i}: {ev}"
        );
        // Streams that broke after content keep the time of their first token.
        if matches!(i, 0 | 1 | 4 | 5) {
            assert!(ev["llm_first_token"].is_u64(), "request {i}: {ev}");
        } else {
            assert!(ev["llm_first_token"].is_null(), "request {i}: {ev}");
        }
    }
    assert!(reqs[2]["error"]
        .as_str()
        .unwrap()
        .contains("Retry-After: 2"));
    assert_eq!(r["cells"][0]["ok"], 1);
    assert_eq!(
        r["cells"][0]["ttft_ms"]["n"], 1,
        "failed requests are not in the percentiles"
    );
}
