//! Shared by the CLI tests.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::process::Command;

/// Variables that would point voxlat at another server or through a proxy: a test's
/// environment must not leak into the command under test.
const ENDPOINT_AND_PROXY_VARS: &[&str] = &[
    "VOXLAT_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "VOXLAT_API_KEY",
    "OPENAI_API_KEY",
    "VOXLAT_ASR_URL",
    "VOXLAT_TTS_URL",
    "VOXLAT_ASR_API_KEY",
    "VOXLAT_TTS_API_KEY",
    "VOXLAT_MODEL",
    "OPENAI_MODEL",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// The voxlat binary under test, with a clean endpoint and proxy environment.
pub fn voxlat() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_voxlat"));
    for v in ENDPOINT_AND_PROXY_VARS {
        c.env_remove(v);
    }
    c
}

/// Writes a scenario of one turn, `wav` from the bundled `scenarios/audio/`, into `dir`.
pub fn one_turn_scenario(
    dir: &std::path::Path,
    wav: &str,
    transcript: &str,
    speech_end_ms: Option<u32>,
) -> std::path::PathBuf {
    // A bundled clip by name, or a WAV the test wrote, by its path.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/audio")
        .join(wav);
    let id = path.file_stem().unwrap().to_string_lossy();
    let end = speech_end_ms.map_or(String::new(), |ms| format!("speech_end_ms = {ms}\n"));
    let p = dir.join(format!("{id}.toml"));
    let toml = format!(
        "name = \"{id}\"\n[[turn]]\nid = \"{id}\"\nwav = \"{}\"\ntranscript = \"{transcript}\"\n{end}",
        path.display()
    );
    std::fs::write(&p, toml).unwrap();
    p
}

/// A finished command's stdout, then its stderr, as text.
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The direct children of `pid`, from every thread's `children` list in /proc.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// The command name of a process (`/proc/<pid>/comm`), if it still exists.
pub fn comm(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Every file under `dir`, read as text (lossily), with its path: for "never appears in any
/// output" checks.
pub fn all_files_text(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push((p, String::from_utf8_lossy(&b).into_owned()));
            }
        }
    }
    out
}

/// SIGKILLs the one `voxlat-server` child of `parent` (the embedded server, any build: the
/// kernel cuts `voxlat-server-avx512` to 15 characters), returning its pid.
pub fn kill_embedded_server(parent: u32) -> u32 {
    let server: Vec<u32> = children_of(parent)
        .into_iter()
        .filter(|p| comm(*p).is_some_and(|c| c.starts_with("voxlat-server")))
        .collect();
    assert_eq!(server.len(), 1, "one embedded server: {server:?}");
    // SAFETY: kill(2) on a process we just found; no memory is involved.
    unsafe { libc::kill(server[0] as i32, libc::SIGKILL) };
    server[0]
}

/// How many embedded-server logs `dir` holds: one per server started.
pub fn server_logs(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("voxlat-server-")
        })
        .count()
}

/// The summary JSON a replay wrote into `dir` (its one `.json` file), parsed.
pub fn results_json(dir: &std::path::Path) -> serde_json::Value {
    let path = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("results file");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// A chat request body's messages, as (role, content in lower case), in order.
pub fn said(body: &serde_json::Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| {
                    (
                        m["role"].as_str().unwrap_or_default().to_string(),
                        m["content"].as_str().unwrap_or_default().to_lowercase(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}
