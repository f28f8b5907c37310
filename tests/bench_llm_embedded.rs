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
