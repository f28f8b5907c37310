//! The house rules as tests, after rust-analyzer's `tidy`: each failure names the file and the
//! rule, so a cap that lapses is caught by the commit that breaks it, not by a later review.

use std::path::{Path, PathBuf};

/// Source files allowed past [`MAX_LINES`], each with why it is one job. An entry whose file
/// is back under the cap fails too, so the list only shrinks.
const LONG_FILES: &[(&str, &str)] = &[
    (
        "crates/voxlat-vad/src/endpointer.rs",
        "one state machine and its unit tests (two thirds of the file)",
    ),
    (
        "crates/voxlat-tts/src/chunker.rs",
        "the sentence rules and their table of cases",
    ),
    (
        "crates/voxlat-pipeline/src/scenario.rs",
        "the scenario file format: parsing, validation and its error cases",
    ),
    (
        "crates/voxlat-bench/src/runner.rs",
        "the bench-llm request loop and its tests",
    ),
    (
        "crates/voxlat-audio/src/wav.rs",
        "WAV reading and resampling, with the format's edge cases as tests",
    ),
    (
        "crates/voxlat-pipeline/src/results.rs",
        "the results files: writer, reader, CSV and their tests",
    ),
    (
        "crates/voxlat-testkit/src/lib.rs",
        "scripted fakes of the LLM server for tests",
    ),
    (
        "crates/voxlat-llm/src/client.rs",
        "the streaming chat client: request, SSE parse and timeouts",
    ),
    (
        "crates/voxlat-vad/src/energy.rs",
        "the energy gate and its noise-floor tracking, with tests",
    ),
    (
        "crates/voxlat-asr/src/engine.rs",
        "the Whisper engine: decode, fallback and abort, with tests",
    ),
    (
        "crates/voxlat-pipeline/src/workers.rs",
        "the ASR and TTS worker threads and their tests",
    ),
    (
        "crates/voxlat-net/src/h1.rs",
        "the HTTP/1.1 client connection and its tests",
    ),
    (
        "crates/voxlat-bench/src/config.rs",
        "the bench-llm config file: fields, defaults and validation",
    ),
    (
        "crates/voxlat-net/src/config/keys.rs",
        "where an API key comes from, and which URLs it may go to",
    ),
    (
        "crates/voxlat-pipeline/src/record/mod.rs",
        "the turn record: its fields, derived figures and their tests",
    ),
    (
        "crates/voxlat-llm/src/chunk/fast.rs",
        "the fast first-chunk rules and their table of cases",
    ),
    (
        "crates/voxlat-core/src/cutoff.rs",
        "cut-off verdicts and the setting chooser, with their tests",
    ),
    (
        "crates/voxlat-audio/src/capture.rs",
        "the microphone stream: open, convert, hand over without allocating",
    ),
    (
        "crates/voxlat-models/src/manifest.rs",
        "the manifest format: parsing and validating each field",
    ),
    (
        "crates/voxlat-net/src/arrival.rs",
        "kernel receive stamps on a TCP stream, and their tests",
    ),
    (
        "crates/voxlat-bench/src/analysis/mod.rs",
        "the first-token diagnosis and its tests",
    ),
];
const MAX_LINES: usize = 400;

/// Byte caps of the documents a newcomer reads whole.
const DOC_CAPS: &[(&str, usize)] = &[
    ("README.md", 20_000),
    ("docs/latency-model.md", 30_000),
    ("docs/benchmarks.md", 40_000),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target" || n == ".git") {
                continue;
            }
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `.rs` file of the workspace: the CLI, each crate, their tests and benches.
fn all_rust() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in ["src", "tests", "crates"] {
        rust_files(&root().join(d), &mut out);
    }
    out.sort();
    out
}

/// The product's sources: `src/` of the CLI and of every crate.
fn sources() -> Vec<PathBuf> {
    all_rust()
        .into_iter()
        .filter(|p| {
            let rel = rel(p);
            rel.starts_with("src/") || rel.split('/').nth(2) == Some("src")
        })
        .collect()
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The text before the file's unit tests: the rules are about the product, not its tests.
fn product_part(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |i| &text[..i])
}

#[test]
fn source_files_stay_under_the_line_cap() {
    let mut over = Vec::new();
    for p in sources() {
        let rel = rel(&p);
        let lines = read(&p).lines().count();
        let allowed = LONG_FILES.iter().any(|(f, _)| *f == rel);
        if lines > MAX_LINES && !allowed {
            over.push(format!(
                "{rel}: {lines} lines (cap {MAX_LINES}); split it by job"
            ));
        }
        if lines <= MAX_LINES && allowed {
            over.push(format!("{rel}: {lines} lines; take it off LONG_FILES"));
        }
    }
    for (f, _) in LONG_FILES {
        if !root().join(f).exists() {
            over.push(format!("{f}: listed in LONG_FILES but gone"));
        }
    }
    assert!(over.is_empty(), "\n{}", over.join("\n"));
}

#[test]
fn documents_stay_readable() {
    let mut over = Vec::new();
    for (f, cap) in DOC_CAPS {
        let len = std::fs::metadata(root().join(f))
            .unwrap_or_else(|e| panic!("{f}: {e}"))
            .len();
        if len > *cap as u64 {
            over.push(format!("{f}: {len} bytes (cap {cap}); history goes to git"));
        }
    }
    assert!(over.is_empty(), "\n{}", over.join("\n"));
}

#[test]
fn milliseconds_are_converted_in_the_clock_module_only() {
    let clock = "crates/voxlat-core/src/clock.rs";
    let found: Vec<String> = all_rust()
        .into_iter()
        .filter(|p| rel(p) != clock)
        .flat_map(|p| {
            let text = read(&p);
            let rel = rel(&p);
            text.lines()
                .enumerate()
                .filter(|(_, l)| {
                    let l = l.trim_start();
                    // Spelt in two halves, so that this file does not match itself.
                    let def = concat!("fn ", "ms");
                    !l.starts_with("//")
                        && ["(", "<", " ("]
                            .iter()
                            .any(|t| l.contains(&format!("{def}{t}")))
                })
                .map(|(i, _)| format!("{rel}:{}", i + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        found.is_empty(),
        "`fn ms` outside {clock}; use voxlat_core::clock (ms, ns_to_ms, samples_to_ms, \
         Nanos::from_ms):\n{}",
        found.join("\n")
    );
}

#[test]
fn libraries_do_not_print() {
    const PRINTS: &[&str] = &["println!(", "eprintln!(", "print!(", "eprint!(", "dbg!("];
    let found: Vec<String> = sources()
        .into_iter()
        .filter(|p| {
            let rel = rel(p);
            // A crate's binary is an edge of its own, like the CLI.
            rel.starts_with("crates/") && !rel.ends_with("/main.rs") && !rel.contains("/bin/")
        })
        .flat_map(|p| {
            let text = read(&p);
            let rel = rel(&p);
            product_part(&text)
                .lines()
                .enumerate()
                .filter(|(_, l)| {
                    let l = l.trim_start();
                    !l.starts_with("//") && PRINTS.iter().any(|m| l.contains(m))
                })
                .map(|(i, _)| format!("{rel}:{}", i + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        found.is_empty(),
        "a library prints; return the fact, or log it with tracing:\n{}",
        found.join("\n")
    );
}

#[test]
fn model_file_names_are_spelt_in_their_module_only() {
    let home = "crates/voxlat-models/src/known.rs";
    // voxlat-asr's tests cannot use voxlat-models: voxlat-models depends on voxlat-asr.
    let allowed = ["crates/voxlat-asr/tests/common/mod.rs"];
    let mut found = Vec::new();
    for p in all_rust() {
        let rel = rel(&p);
        if rel == home || allowed.contains(&rel.as_str()) {
            continue;
        }
        let text = read(&p);
        for f in voxlat_models::known::ALL {
            let quoted = format!("\"{}\"", f.file);
            for (i, l) in text.lines().enumerate() {
                if l.contains(&quoted) {
                    found.push(format!("{rel}:{}: {}", i + 1, f.file));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a model file name outside {home}; use voxlat_models::known:\n{}",
        found.join("\n")
    );
}
