//! `voxlat compare a.json b.json` on two bench-llm runs against scripted servers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use voxlat_testkit::{Builder, Script};

fn voxlat() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_voxlat"));
    for v in [
        "VOXLAT_BASE_URL",
        "OPENAI_BASE_URL",
        "VOXLAT_API_KEY",
        "OPENAI_API_KEY",
        "VOXLAT_MODEL",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ] {
        c.env_remove(v);
    }
    c
}

/// One bench-llm run against a server with this TTFT, results in `dir/name`.
async fn run_with_ttft(dir: &Path, name: &str, ttft_ms: u64) -> PathBuf {
    let s = Builder::fixed(Script {
        ttft: Duration::from_millis(ttft_ms),
        ..Script::with_tokens(3)
    })
    .start()
    .await;
    let file = dir.join(name);
    let mut cmd = voxlat();
    cmd.env("VOXLAT_BASE_URL", s.base_url())
        .args([
            "bench-llm",
            "--quiet",
            "--requests",
            "12",
            "--warmup",
            "1",
            "-o",
        ])
        .arg(&file)
        .current_dir(dir);
    let o = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    file
}

fn compare(a: &Path, b: &Path, html: &Path) -> String {
    let o = voxlat()
        .arg("compare")
        .arg(a)
        .arg(b)
        .arg("--html")
        .arg(html)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    text
}

fn ttft_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("TTFT "))
        .unwrap_or_else(|| panic!("no TTFT row:\n{text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_slowdown_is_significant_and_no_difference_is_not() {
    let d = tempfile::tempdir().unwrap();
    let fast = run_with_ttft(d.path(), "fast.json", 20).await;
    // The same samples under another name: two separate runs could differ for real on a
    // busy machine, and the test must not depend on that.
    let fast2 = d.path().join("fast2.json");
    std::fs::copy(&fast, &fast2).unwrap();
    let slow = run_with_ttft(d.path(), "slow.json", 80).await;

    let html = d.path().join("report.html");
    let text = compare(&fast, &slow, &html);
    let row = ttft_line(&text);
    assert!(row.contains(" significant"), "{text}");
    assert!(text.contains("Mann-Whitney"), "{text}");
    // B − A of the P50 is about +60 ms.
    let delta: f64 = row
        .split_whitespace()
        .find(|w| w.starts_with('+'))
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no delta in {row}"));
    assert!((45.0..75.0).contains(&delta), "{row}");

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.matches("<svg").count() >= 2, "histogram and CDF");
    assert!(!page.contains("<script"), "no JavaScript");
    for attr in ["src=", "href=", "@import", "url("] {
        assert!(!page.contains(attr), "no external resource ({attr})");
    }

    let text = compare(&fast, &fast2, &d.path().join("same.html"));
    let row = ttft_line(&text);
    assert!(row.contains("not significant"), "{text}");

    // bench-llm writes its own report beside the results.
    assert!(fast.with_extension("html").is_file());
}

#[test]
fn a_file_that_is_not_results_is_named_in_the_error() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("notes.json");
    std::fs::write(&bad, "{\"hello\": 1}").unwrap();
    let o = voxlat()
        .arg("compare")
        .arg(&bad)
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("notes.json") && err.contains("not a bench-llm results file"),
        "{err}"
    );
}
