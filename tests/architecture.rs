//! The workspace's layering, checked on `cargo metadata` (ARCHITECTURE.md, "Invariants").
//! Each rule is a function of the dependency graph, so the rules are also tested on graphs
//! that break them: a check that cannot fail checks nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// The stage crates: each knows nothing of the others.
const STAGES: &[&str] = &[
    "voxlat-audio",
    "voxlat-vad",
    "voxlat-asr",
    "voxlat-llm",
    "voxlat-tts",
];

/// Normal (non-dev, non-build) dependencies by package name.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn graph_from_metadata(m: &serde_json::Value) -> Graph {
    let names: BTreeMap<&str, &str> = m["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut g = Graph::new();
    for node in m["resolve"]["nodes"].as_array().expect("resolve.nodes") {
        let from = names[node["id"].as_str().unwrap()].to_string();
        let deps = g.entry(from).or_default();
        for d in node["deps"].as_array().unwrap() {
            let normal = d["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            if normal {
                deps.insert(names[d["pkg"].as_str().unwrap()].to_string());
            }
        }
    }
    g
}

/// Everything `root` links, itself excluded.
fn closure(g: &Graph, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(p) = todo.pop() {
        for d in g.get(&p).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

/// Every broken rule, in words.
fn violations(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    let server = closure(g, "voxlat-server");
    for p in ["voxlat-asr", "whisper-rs", "whisper-rs-sys"] {
        if server.contains(p) {
            out.push(format!(
                "voxlat-server links {p}: whisper.cpp and llama.cpp must never share a process"
            ));
        }
    }
    for s in STAGES {
        for other in closure(g, s).intersection(&STAGES.iter().map(|x| x.to_string()).collect()) {
            out.push(format!("stage crate {s} depends on stage crate {other}"));
        }
    }
    for (p, deps) in g {
        if deps.contains("voxlat-testkit") {
            out.push(format!(
                "{p} has voxlat-testkit as a normal dependency (tests only)"
            ));
        }
    }
    if closure(g, "voxlat").contains("voxlat-server") {
        out.push("voxlat depends on voxlat-server: the LLM server runs as its own process".into());
    }
    // The two kinds of remote client share voxlat-net, never each other: an ASR failure is
    // a network failure, not an LLM one.
    for (a, b) in [
        ("voxlat-speech-api", "voxlat-llm"),
        ("voxlat-llm", "voxlat-speech-api"),
    ] {
        if closure(g, a).contains(b) {
            out.push(format!(
                "{a} depends on {b}: both build on voxlat-net alone"
            ));
        }
    }
    for d in closure(g, "voxlat-net") {
        if d.starts_with("voxlat-") && d != "voxlat-core" {
            out.push(format!(
                "voxlat-net depends on {d}: it sits under every client"
            ));
        }
    }
    for p in ["voxlat-llm", "voxlat-pipeline"] {
        if closure(g, p).contains("voxlat-bench") {
            out.push(format!("{p} links the benchmark (voxlat-bench)"));
        }
    }
    out
}

#[test]
fn the_workspace_keeps_its_layering() {
    // Only the host's graph: the whole one names Windows- and macOS-only crates, which a
    // registry cache filled by a Linux build does not hold, and --offline cannot fetch.
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host");
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let g = graph_from_metadata(&m);
    for p in [
        "voxlat-server",
        "voxlat-pipeline",
        "voxlat-speech-api",
        "voxlat-net",
    ] {
        assert!(g.contains_key(p), "{p} is not in the graph");
    }
    let v = violations(&g);
    assert!(v.is_empty(), "layering broken:\n{}", v.join("\n"));
}

#[test]
fn each_rule_catches_the_graph_that_breaks_it() {
    let edge = |g: &mut Graph, a: &str, b: &str| {
        g.entry(a.into()).or_default().insert(b.into());
    };
    let mut ok = Graph::new();
    edge(&mut ok, "voxlat", "voxlat-pipeline");
    edge(&mut ok, "voxlat-pipeline", "voxlat-asr");
    edge(&mut ok, "voxlat-pipeline", "voxlat-llm");
    edge(&mut ok, "voxlat-asr", "whisper-rs");
    edge(&mut ok, "voxlat-server", "llama-cpp-2");
    edge(&mut ok, "voxlat-llm", "voxlat-net");
    edge(&mut ok, "voxlat-speech-api", "voxlat-net");
    edge(&mut ok, "voxlat-net", "voxlat-core");
    assert!(violations(&ok).is_empty(), "{:?}", violations(&ok));
    let broken: [(&str, &str, &str); 8] = [
        (
            "voxlat-speech-api",
            "voxlat-llm",
            "voxlat-speech-api depends on voxlat-llm",
        ),
        (
            "voxlat-net",
            "voxlat-llm",
            "voxlat-net depends on voxlat-llm",
        ),
        (
            "voxlat-server",
            "voxlat-asr",
            "voxlat-server links voxlat-asr",
        ),
        (
            "voxlat-tts",
            "voxlat-llm",
            "stage crate voxlat-tts depends on stage crate voxlat-llm",
        ),
        (
            "voxlat-pipeline",
            "voxlat-testkit",
            "voxlat-pipeline has voxlat-testkit",
        ),
        (
            "voxlat-pipeline",
            "voxlat-server",
            "voxlat depends on voxlat-server",
        ),
        (
            "voxlat-llm",
            "voxlat-bench",
            "voxlat-llm links the benchmark",
        ),
        ("voxlat-core", "whisper-rs", "whisper-rs"),
    ];
    for (a, b, said) in broken {
        let mut g = ok.clone();
        edge(&mut g, a, b);
        if a == "voxlat-core" {
            // Reached only through another crate: the server linking core must now fail.
            edge(&mut g, "voxlat-server", "voxlat-core");
        }
        let v = violations(&g);
        assert!(
            v.iter().any(|m| m.contains(said)),
            "{a} → {b} not caught: {v:?}"
        );
    }
}

// ---- Modules inside a crate -------------------------------------------------------------

/// The top-level module a source file of a crate belongs to (`src/session/mod.rs` →
/// `session`); `None` for the crate root.
fn top_module(src: &std::path::Path, file: &std::path::Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The top-level modules a file's code (comments and `#[cfg(test)]` parts left out) names
/// through `crate::`.
fn modules_named(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let code = code.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .map(|n| n.trim().split("::").next().unwrap_or(""))
                    .collect(),
                None => vec![rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap_or("")],
            };
            out.extend(
                names
                    .into_iter()
                    .filter(|n| !n.is_empty())
                    .map(str::to_string),
            );
        }
    }
    out
}

/// Which top-level module of the crate at `src` uses which.
fn module_graph(src: &std::path::Path) -> Graph {
    let mut files = Vec::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).expect("source dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut g = Graph::new();
    for f in files {
        let Some(from) = top_module(src, &f) else {
            continue;
        };
        let text = std::fs::read_to_string(&f).expect("source file");
        let deps = g.entry(from.clone()).or_default();
        deps.extend(modules_named(&text).into_iter().filter(|m| *m != from));
    }
    g
}

/// A cycle of modules, each using the next and the last the first; `None` when there is
/// none.
fn a_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        m: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            return Some(path[i..].to_vec());
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(g, d, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(g, m, &mut Vec::new(), &mut done))
}

#[test]
fn the_pipeline_crate_has_no_module_cycle() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/voxlat-pipeline/src");
    let g = module_graph(&src);
    assert!(
        g.contains_key("session") && g.contains_key("record"),
        "{g:?}"
    );
    if let Some(c) = a_cycle(&g) {
        panic!(
            "modules of voxlat-pipeline use each other in a cycle: {} → {}",
            c.join(" → "),
            c[0]
        );
    }
}

#[test]
fn the_cycle_check_finds_a_cycle_and_reads_grouped_imports() {
    let named = modules_named(
        "use crate::record::{Stage, TurnRecord};\nuse crate::{output::Output, pace};\n// crate::docs\nlet x = crate::clock::now();\n#[cfg(test)]\nuse crate::fake;",
    );
    let want: BTreeSet<String> = ["record", "output", "pace", "clock"]
        .into_iter()
        .map(str::to_string)
        .collect();
    assert_eq!(named, want);
    let mut g = Graph::new();
    for (a, b) in [
        ("output", "record"),
        ("record", "pace"),
        ("pace", "record"),
        ("session", "output"),
    ] {
        g.entry(a.to_string()).or_default().insert(b.to_string());
    }
    assert_eq!(
        a_cycle(&g),
        Some(vec!["record".to_string(), "pace".to_string()])
    );
    g.get_mut("pace").unwrap().clear();
    assert_eq!(a_cycle(&g), None);
}
