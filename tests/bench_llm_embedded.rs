//! bench-llm's sweeps and probes against the embedded server (`voxlat-server` with
//! gemma-3-270m from the model cache), at sizes small enough to stay fast. The server binary
//! must be built beside voxlat (`cargo build --workspace`, as scripts/test.sh does) and the
//! model fetched (`voxlat models fetch gemma-3-270m`).

mod common;

use common::voxlat;
use std::path::Path;
use std::process::Output;

fn text(o: &Output) -> String {
    format!(
        "{}{}\n(if the model is missing: run `voxlat models fetch gemma-3-270m`; if voxlat-server is: `cargo build --workspace`)",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs bench-llm with no base URL, so it starts the embedded server.
fn bench(dir: &Path, args: &[&str]) -> (Output, serde_json::Value) {
    let bin = Path::new(env!("CARGO_BIN_EXE_voxlat")).with_file_name("voxlat-server");
    assert!(
        bin.is_file(),
        "{} is missing: build it with `cargo build --workspace`",
        bin.display()
    );
    let file = dir.join("r.json");
    let o = voxlat()
        .args(["bench-llm", "--quiet", "-o"])
        .arg(&file)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let json = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    (o, json)
}

#[test]
fn prompt_sweep_and_probes_run_against_the_embedded_server() {
    let d = tempfile::tempdir().unwrap();
    let (o, r) = bench(
        d.path(),
        &[
            "--sweep",
            "prompt-tokens=16,150",
            "--probe",
            "prefix-cache,connections",
            "--prompt-tokens",
            "200",
            "--requests",
            "2",
            "--warmup",
            "1",
            "--max-tokens",
            "2",
        ],
    );
    let all = text(&o);
    let sweep = &r["analysis"]["sweeps"][0];
    assert_eq!(sweep["points"].as_array().unwrap().len(), 2, "{all}");
    // The server counts the prompt itself: the template adds tokens, never removes them.
    let tokens = sweep["points"][1]["prompt_tokens"].as_f64().unwrap();
    assert!(tokens >= 150.0, "{all}");
    assert!(sweep["fit"]["slope_ms_per_1k"].as_f64().is_some(), "{all}");

    // llama.cpp prefills a 200-token prompt in far more time than it reuses one.
    assert_eq!(
        r["analysis"]["cache"][0]["verdict"], "prefix-cache",
        "{all}"
    );

    let conns = r["analysis"]["connections"].as_array().unwrap();
    let h1 = conns.iter().find(|c| c["protocol"] == "HTTP/1.1").unwrap();
    assert!(h1["connect_p50_ms"].as_f64().is_some(), "{all}");

    // The embedded server's own fields, joined by request ID.
    let view = &r["cells"][0]["server_view"];
    assert_eq!(view["convention"], "voxlat-server", "{all}");
    assert_eq!(view["joined_by_request_id"], view["requests"], "{all}");
    for needle in [
        "Sweep prompt-tokens",
        "Prefix-cache probe",
        "Server view",
        "Diagnosis:",
    ] {
        assert!(all.contains(needle), "no {needle}:\n{all}");
    }
}

#[test]
fn max_tokens_sweep_runs_against_the_embedded_server() {
    let d = tempfile::tempdir().unwrap();
    let (o, r) = bench(
        d.path(),
        &[
            "--sweep",
            "max-tokens=4,256",
            "--requests",
            "2",
            "--warmup",
            "0",
        ],
    );
    let all = text(&o);
    let sweep = &r["analysis"]["sweeps"][0];
    assert_eq!(sweep["param"], "max-tokens", "{all}");
    assert!(sweep["spread"].as_f64().is_some(), "{all}");
    assert!(
        all.contains("spread of TTFT P50 across max_tokens"),
        "{all}"
    );
}

#[test]
fn a_crash_of_the_embedded_server_ends_the_run_with_the_reason_and_keeps_the_results() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("r.json");
    let mut child = voxlat()
        .args([
            "bench-llm",
            "--quiet",
            "--requests",
            "1000",
            "--warmup",
            "0",
            "--max-tokens",
            "8",
            "-o",
        ])
        .arg(&file)
        .current_dir(d.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let flushed = || -> usize {
        std::fs::read(&file)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["requests"].as_array().map(Vec::len))
            .unwrap_or(0)
    };
    let mut seen = 0;
    for _ in 0..1200 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        seen = flushed();
        if seen >= 2 || child.try_wait().unwrap().is_some() {
            break;
        }
    }
    assert!(seen >= 2, "no requests were flushed");
    let server = common::kill_embedded_server(child.id());
    let o = child.wait_with_output().unwrap();
    let all = text(&o);
    // Exit status 2: the run ended in an error (1 is "finished, with failed requests").
    assert_eq!(o.status.code(), Some(2), "{all}");
    assert!(
        all.contains("exited mid-run")
            && all.contains("killed by signal 9")
            && all.contains("not restarted"),
        "{all}"
    );
    assert!(!all.contains("panicked"), "{all}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(r["header"]["interrupted"], true);
    let reason = r["header"]["stop_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("killed by signal 9"), "{reason}");
    let kept = r["requests"].as_array().unwrap();
    assert!(kept.len() >= seen && kept.len() < 1000, "{}", kept.len());
    // Only the request in flight when the server died fails (partial timings kept); nothing
    // is sent to the dead server after that.
    let failed: Vec<_> = kept.iter().filter(|r| !r["error"].is_null()).collect();
    assert!(failed.len() <= 1, "{failed:?}");
    for f in &failed {
        assert!(f["events"]["llm_sent"].is_u64(), "{f}");
    }
    // Not restarted: one server log only, and no server process left behind.
    assert_eq!(
        common::server_logs(d.path()),
        1,
        "a second server was started"
    );
    assert!(common::comm(server).is_none_or(|c| c != "voxlat-server"));
}
