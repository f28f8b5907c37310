//! bench-llm against endpoints and inputs that must not hurt it: a refusing port, bad config
//! values, a server whose prompt cache would flatter the run; and prompts new on every run.

mod common;

use common::voxlat;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use voxlat_testkit::{Builder, Script};

async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run voxlat"))
        .await
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refusing_port_stops_the_run_and_keeps_a_valid_file() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let mut cmd = voxlat();
    cmd.args(["bench-llm", "--base-url"])
        .arg(format!("http://127.0.0.1:{port}/v1"))
        .args(["--model", "m", "--warmup", "0", "--requests", "1000000"])
        .args(["--quiet", "-o"])
        .arg(&file)
        .current_dir(dir.path());
    let started = Instant::now();
    let o = output(cmd).await;
    let took = started.elapsed();
    let all = text(&o);
    assert!(!o.status.success(), "{all}");
    assert!(!all.contains("panicked"), "{all}");
    assert!(all.contains("connection_refused"), "{all}");
    // Generous for a loaded machine; the run it replaces went on for ever.
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let r = read_json(&file);
    let n = r["requests"].as_array().unwrap().len();
    assert!((1..1000).contains(&n), "{n} requests recorded");
    let reason = r["header"]["stop_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("connection_refused"), "{reason}");
}

#[tokio::test(flavor = "multi_thread")]
async fn config_errors_name_the_file_and_key_and_absurd_durations_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bench.toml");
    std::fs::write(&cfg, "concurrency = [0]\n").unwrap();
    let mut cmd = voxlat();
    cmd.args([
        "bench-llm",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--config",
    ])
    .arg(&cfg)
    .current_dir(dir.path());
    let o = output(cmd).await;
    let all = text(&o);
    assert!(!o.status.success());
    assert!(
        all.contains("bench.toml: concurrency = [0]: levels must be at least 1"),
        "{all}"
    );

    std::fs::write(&cfg, "connect_timeout_s = 1e300\n").unwrap();
    let mut cmd = voxlat();
    cmd.args([
        "bench-llm",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--config",
    ])
    .arg(&cfg)
    .current_dir(dir.path());
    let o = output(cmd).await;
    let all = text(&o);
    assert_ne!(o.status.code(), Some(101), "panicked: {all}");
    assert!(
        all.contains("bench.toml: connect_timeout_s = 1e300: must be positive"),
        "{all}"
    );

    // The flag overrides the file, and then the flag is what is named.
    let mut cmd = voxlat();
    cmd.args([
        "bench-llm",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--config",
    ])
    .arg(&cfg)
    .args(["--concurrency", "0", "--connect-timeout", "2s"])
    .current_dir(dir.path());
    let all = text(&output(cmd).await);
    assert!(
        all.contains("--concurrency 0: levels must be at least 1"),
        "{all}"
    );

    for v in ["1e300s", "1e300", "100000000years"] {
        let mut cmd = voxlat();
        cmd.args(["bench-llm", "--idle-timeout", v]);
        let o = output(cmd).await;
        let all = text(&o);
        assert_eq!(o.status.code(), Some(2), "{v}: {all}");
        assert!(all.contains("--idle-timeout"), "{v}: {all}");
        assert!(!all.contains("panicked"), "{v}: {all}");
    }
}

/// Runs bench-llm with synthetic prompts; returns the prompts the server saw and the results.
async fn prompts_of_a_run(extra: &[&str], script: Script) -> (Vec<String>, serde_json::Value) {
    let s = Builder::fixed(script).start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let mut cmd = voxlat();
    cmd.env("VOXLAT_BASE_URL", s.base_url())
        .args(["bench-llm", "--prompt-tokens", "40", "--requests", "3"])
        .args(["--warmup", "1", "--quiet"])
        .args(extra)
        .arg("-o")
        .arg(&file)
        .current_dir(dir.path());
    let o = output(cmd).await;
    assert!(o.status.success(), "{}", text(&o));
    let prompts = s
        .requests()
        .iter()
        .filter(|q| q.path.ends_with("chat/completions"))
        .map(|q| Script::prompt_text(&q.body))
        .collect();
    let mut r = read_json(&file);
    r["stdout"] = text(&o).into();
    (prompts, r)
}

#[tokio::test(flavor = "multi_thread")]
async fn synthetic_prompts_are_new_on_every_run_unless_seeded() {
    let (a, ra) = prompts_of_a_run(&[], Script::default()).await;
    let (b, rb) = prompts_of_a_run(&[], Script::default()).await;
    assert_eq!(a.len(), 4);
    assert!(
        a.iter().all(|p| !b.contains(p)),
        "a prompt came back in the next run"
    );
    let (sa, sb) = (&ra["config"]["prompt_seed"], &rb["config"]["prompt_seed"]);
    assert!(sa.is_u64() && sa != sb, "{sa} {sb}");

    let (c, rc) = prompts_of_a_run(&["--seed", "5"], Script::default()).await;
    let (d, _) = prompts_of_a_run(&["--seed", "5"], Script::default()).await;
    assert_eq!(c, d, "the same --seed sends the same prompts");
    assert_eq!(rc["config"]["prompt_seed"], 5);
    // A recorded seed repeats a run on purpose.
    let seed = sa.as_u64().unwrap().to_string();
    let (e, _) = prompts_of_a_run(&["--prompt-seed", &seed], Script::default()).await;
    assert_eq!(a, e);
}

#[tokio::test(flavor = "multi_thread")]
async fn cached_prompts_on_a_cold_run_are_called_out() {
    // The server says nearly the whole prompt came from its cache.
    let hot = Script {
        usage_prompt_tokens: Some(60),
        usage_cached_tokens: Some(58),
        ..Script::default()
    };
    let (_, r) = prompts_of_a_run(&[], hot).await;
    let out = r["stdout"].as_str().unwrap();
    assert!(out.contains("prompt cache flatters TTFT"), "{out}");
    assert!(out.contains("flattered by the server's cache"), "{out}");
    let causes: Vec<&str> = r["analysis"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["cause"].as_str())
        .collect();
    assert!(causes.contains(&"prompt-cache"), "{causes:?}");

    let cold = Script {
        usage_prompt_tokens: Some(60),
        usage_cached_tokens: Some(2),
        ..Script::default()
    };
    let (_, r) = prompts_of_a_run(&[], cold).await;
    assert!(!r["stdout"]
        .as_str()
        .unwrap()
        .contains("prompt cache flatters"));
}

#[tokio::test(flavor = "multi_thread")]
async fn help_defines_both_ttft_figures() {
    let mut cmd = voxlat();
    cmd.args(["bench-llm", "--help"]);
    let o = output(cmd).await;
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains("request written to a ready connection"),
        "{all}"
    );
    assert!(
        all.contains("TTFT+connect  request handed to the HTTP stack"),
        "{all}"
    );
}
