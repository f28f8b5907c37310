//! `voxlat serve` and the embedded server's lifecycle under `voxlat bench-llm`, with the real
//! model (`voxlat models fetch smollm2-135m-instruct`). The server binary must be built beside voxlat:
//! `cargo build --workspace` (scripts/test.sh does).

mod common;

use common::voxlat;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn server_bin_present() {
    let bin = Path::new(env!("CARGO_BIN_EXE_voxlat")).with_file_name("voxlat-server");
    assert!(
        bin.is_file(),
        "{} is missing: build it with `cargo build --workspace` (or -p voxlat-server)",
        bin.display()
    );
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn model_hint(all: &str) -> String {
    format!("{all}\n(if the model is missing: run `voxlat models fetch smollm2-135m-instruct`)")
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn alive(pid: u32) -> bool {
    // A zombie is dead for our purposes; its parent has not reaped it yet.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// The server's pid, from the line it prints when it is listening.
fn pid_in(line: &str) -> Option<u32> {
    let rest = line.split("(pid ").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn server_log(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("voxlat-server-") && n.ends_with(".log"))
        })
}

fn wait_gone(pid: u32) {
    let t0 = Instant::now();
    while alive(pid) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "embedded server {pid} outlived voxlat"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serve_runs_the_server_in_place_and_sigterm_stops_it() {
    server_bin_present();
    let mut child = voxlat()
        .args(["serve", "--port", "0", "--threads", "1", "--ctx", "512"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !line.contains("listening") {
        let _ = child.kill();
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        panic!("{}", model_hint(&format!("{line}{err}")));
    }
    // `voxlat serve` replaced itself with the server: same process, nothing left behind.
    assert_eq!(pid_in(&line), Some(child.id()), "{line}");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_string();
    let models = http_get(&addr, "/v1/models");
    assert!(
        models.starts_with("HTTP/1.1 200") && models.contains("smollm2-135m-instruct"),
        "{models}"
    );
    assert!(http_get(&addr, "/health").contains("\"status\":\"ok\""));
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "SIGTERM ignored");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

#[test]
fn serve_explains_a_missing_model_file_and_a_missing_server_binary() {
    server_bin_present();
    let o = voxlat()
        .args(["serve", "--model", "/nonexistent/model.gguf"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("no such file"), "{}", text(&o));
    assert!(!text(&o).contains("panicked"));

    // A voxlat with no voxlat-server beside it says what to build.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let lone = dir.path().join("voxlat");
    std::fs::hard_link(env!("CARGO_BIN_EXE_voxlat"), &lone)
        .or_else(|_| std::fs::copy(env!("CARGO_BIN_EXE_voxlat"), &lone).map(|_| ()))
        .unwrap();
    let o = Command::new(&lone).args(["serve"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let all = text(&o);
    assert!(
        all.contains("voxlat-server") && all.contains("cargo build -p voxlat-server"),
        "{all}"
    );
}

#[test]
fn bench_llm_without_a_base_url_measures_the_embedded_server_and_stops_it() {
    server_bin_present();
    let dir = tempfile::tempdir().unwrap();
    let o = voxlat()
        .args([
            "bench-llm",
            "--requests",
            "2",
            "--warmup",
            "1",
            "--max-tokens",
            "4",
            "--quiet",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let all = text(&o);
    assert!(o.status.success(), "{}", model_hint(&all));
    // Client and server views in one table.
    for row in [
        "TTFT",
        "server queue_ms",
        "server prompt_ms",
        "server first_token_ms",
    ] {
        assert!(all.contains(row), "no {row} row:\n{all}");
    }
    let results = dir.path().join("results");
    let log = server_log(&results).expect("server log beside the results");
    let log_text = std::fs::read_to_string(&log).unwrap();
    let pid = pid_in(&log_text).expect("server pid in its log");
    wait_gone(pid);
    let file = std::fs::read_dir(&results)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let req = &r["requests"][1];
    assert!(
        req["outcome"]["server_timings"]["prompt_ms"]
            .as_f64()
            .is_some(),
        "{req}"
    );
}

#[test]
fn ctrl_c_ends_bench_llm_and_its_embedded_server() {
    server_bin_present();
    let dir = tempfile::tempdir().unwrap();
    let mut child = voxlat()
        .args([
            "bench-llm",
            "--requests",
            "100000",
            "--warmup",
            "0",
            "--max-tokens",
            "4",
            "--quiet",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let results = dir.path().join("results");
    let t0 = Instant::now();
    // A few of the run's own requests done (its ids start `vx-`; the server's first request,
    // a check of a CPU-family build, does not count): the run is past its start-up.
    let pid = loop {
        let log = server_log(&results).and_then(|l| std::fs::read_to_string(l).ok());
        if let Some(pid) = log
            .as_deref()
            .filter(|t| t.matches("done request_id=vx-").count() >= 3)
            .and_then(pid_in)
        {
            break pid;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let o = child.wait_with_output().unwrap();
            panic!(
                "{}",
                model_hint(&format!("exited early ({status}): {}", text(&o)))
            );
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "embedded server never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    wait_gone(pid);
}

/// A build for a CPU family that cannot serve (here a stand-in whose server refuses every
/// prompt, as one dying of SIGILL at its first prefill would fail it) is passed over for the
/// portable build, and the user is told why; the run goes on. On a CPU without AVX-512 the
/// stand-in is never tried, and the portable build runs all the same.
#[test]
fn a_server_build_that_fails_its_first_request_gives_way_to_the_portable_build() {
    server_bin_present();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_voxlat"));
    for name in ["voxlat", "voxlat-server"] {
        let to = dir.path().join(name);
        std::fs::hard_link(exe.with_file_name(name), &to)
            .or_else(|_| std::fs::copy(exe.with_file_name(name), &to).map(|_| ()))
            .unwrap();
    }
    // Its context is too small for any chat prompt: it loads, then refuses the first request.
    let variant = dir.path().join("voxlat-server-avx512");
    std::fs::write(
        &variant,
        "#!/bin/sh\nexec \"$(dirname \"$0\")/voxlat-server\" \"$@\" --ctx 16\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&variant, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = Command::new(dir.path().join("voxlat"))
        .args([
            "bench-llm",
            "--requests",
            "1",
            "--warmup",
            "0",
            "--max-tokens",
            "2",
            "--quiet",
        ])
        .env_remove("VOXLAT_SERVER_BUILD")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let all = text(&o);
    assert!(o.status.success(), "{}", model_hint(&all));
    assert!(all.contains("(portable build;"), "{all}");
    let variant_tried = all.contains("voxlat-server-avx512 failed");
    let passed_over = all.contains("note: using the portable voxlat-server: this CPU lacks");
    assert!(variant_tried != passed_over, "{all}");
}
