//! Replay results: JSON (the shared versioned header, every event of every turn, the
//! aggregates) and a CSV of one row per turn.
//!
//! A run writes as it goes without rewriting anything: each finished turn is appended as one
//! line of JSON to `<stem>.jsonl` (the same record as an entry of the summary's `turns`) and
//! one row to the CSV, so a turn costs its own bytes, not the whole run's, and a run of 1000
//! turns writes O(n) bytes, not O(n²). The summary JSON is written at the start (no turns
//! yet, pointing at the JSONL) and rendered whole at the end or on Ctrl-C. Should the process
//! die before that, [`ReplayResults::load`] rebuilds the summary from the JSONL, so what was
//! measured is never lost.

use crate::config::PipelineConfig;
use crate::levels::{levels, Level};
use crate::record::{Aggregate, TurnRecord};
use crate::sweep::SweepRow;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use voxlat_core::fsio::{self, WriteError};
use voxlat_core::report::ResultsHeader;
use voxlat_core::segments::VOICE_TO_VOICE;
use voxlat_core::threads::ThreadBudget;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReplayResults {
    pub header: ResultsHeader,
    pub config: PipelineConfig,
    /// The budget for one caller; with `--sessions`, each level records its callers' share.
    pub threads: ThreadBudget,
    /// What the embedded LLM server was started with (`llm` threads to decode, `llm_prefill`
    /// to prefill); absent when the LLM was elsewhere (`--llm-url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_server_threads: Option<ThreadBudget>,
    /// What each stage ran on (model files, LLM endpoint).
    pub stages: serde_json::Value,
    /// How `speech_end` and `endpoint` were timed.
    pub timing_note: String,
    pub scenarios: Vec<String>,
    /// Scenario files or turns that could not be loaded, with why.
    pub skipped: Vec<String>,
    pub aggregate: Aggregate,
    pub turns: Vec<TurnRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<SweepRow>,
    /// A `--sessions` replay's levels ([`crate::levels`]), recomputed with the aggregate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<Level>,
    /// The JSON Lines file the turns were appended to as they finished, by file name (it lies
    /// beside this file). Absent in files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns_jsonl: Option<String>,
    /// False in the summary written when the run starts; true once it is rendered at the end
    /// (or on Ctrl-C). A file still false is from a run that died: its turns are in the JSONL.
    #[serde(default = "finished_default")]
    pub finished: bool,
}

/// Files from before `finished` existed were only ever complete summaries.
fn finished_default() -> bool {
    true
}

impl ReplayResults {
    pub fn new(
        config: PipelineConfig,
        threads: ThreadBudget,
        stages: serde_json::Value,
    ) -> ReplayResults {
        let timing_note = if config.fast {
            "unpaced (--fast): audio was fed as fast as possible, so endpointing is in audio time (speech_end is mapped onto the process clock at the endpointer's decision); every other segment is on the process clock"
        } else {
            "paced: audio was fed in real time in 20 ms frames; speech_end is the scenario's annotated end of speech at the moment that sample entered the pipeline; endpoint is when the endpointer's decision reached the pipeline"
        };
        ReplayResults {
            header: ResultsHeader::new("replay", env!("CARGO_PKG_VERSION")),
            config,
            threads,
            llm_server_threads: None,
            stages,
            timing_note: timing_note.into(),
            scenarios: Vec::new(),
            skipped: Vec::new(),
            aggregate: Aggregate::from_turns(&[]),
            turns: Vec::new(),
            sweep: Vec::new(),
            levels: Vec::new(),
            turns_jsonl: None,
            finished: false,
        }
    }

    pub fn load(path: &Path) -> Result<ReplayResults, LoadError> {
        let invalid = |detail: String| LoadError::Invalid {
            path: path.to_path_buf(),
            detail,
        };
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let v: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| invalid(format!("not JSON: {e}")))?;
        let h = voxlat_core::report::read_header(&v).map_err(|e| invalid(e.to_string()))?;
        if h.kind != "replay" {
            return Err(LoadError::Kind {
                path: path.to_path_buf(),
                kind: h.kind,
            });
        }
        let mut r: ReplayResults = serde_json::from_value(v)
            .map_err(|e| invalid(format!("invalid replay results: {e}")))?;
        if !r.finished {
            // The run died before rendering its summary: its turns are in the JSONL.
            if let Some(name) = r.turns_jsonl.clone() {
                let jsonl = path.with_file_name(name);
                r.turns = read_jsonl(&jsonl)?;
                r.aggregate = Aggregate::from_turns(&r.turns);
                r.levels = levels(&r.turns, &r.threads);
                r.header.interrupted = true;
                if r.header.stop_reason.is_none() {
                    r.header.stop_reason = Some(
                        "the run ended without writing its summary; turns recovered from its JSONL"
                            .into(),
                    );
                }
            }
        }
        Ok(r)
    }
}

/// The turns of a JSONL file. A last line cut short (the process died mid-write) is dropped;
/// a bad line anywhere else means the file is not ours, and is an error.
pub fn read_jsonl(path: &Path) -> Result<Vec<TurnRecord>, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut turns = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<TurnRecord>(line) {
            Ok(t) => turns.push(t),
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => {
                return Err(LoadError::Invalid {
                    path: path.to_path_buf(),
                    detail: format!("line {}: invalid turn: {e}", i + 1),
                })
            }
        }
    }
    Ok(turns)
}

/// Why a results file cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {detail}")]
    Invalid { path: PathBuf, detail: String },
    #[error("{path} holds `{kind}` results, not replay results")]
    Kind { path: PathBuf, kind: String },
}

pub struct ResultsWriter {
    pub json: PathBuf,
    pub csv: PathBuf,
    /// One finished turn per line, appended as it finishes.
    pub jsonl: PathBuf,
    pub results: ReplayResults,
    jsonl_file: std::fs::File,
    csv_file: std::fs::File,
}

impl ResultsWriter {
    /// Checks the directory is writable before anything is measured.
    pub fn new(dir: &Path, results: ReplayResults) -> Result<ResultsWriter, WriteError> {
        ResultsWriter::with_prefix(dir, "replay", results)
    }

    /// Files named `<prefix>-<time>.json`/`.jsonl`/`.csv` (live mode writes `live-…`).
    pub fn with_prefix(
        dir: &Path,
        prefix: &str,
        mut results: ReplayResults,
    ) -> Result<ResultsWriter, WriteError> {
        fsio::ensure_writable_dir(dir)?;
        let stem = format!("{prefix}-{}", voxlat_core::clock::wall_label_compact());
        let json = dir.join(format!("{stem}.json"));
        let csv_path = dir.join(format!("{stem}.csv"));
        let jsonl = dir.join(format!("{stem}.jsonl"));
        results.turns_jsonl = Some(format!("{stem}.jsonl"));
        results.finished = false;
        let create = |p: &Path| {
            std::fs::File::create(p).map_err(|source| WriteError::Io {
                path: p.to_path_buf(),
                source,
            })
        };
        let jsonl_file = create(&jsonl)?;
        let csv_file = create(&csv_path)?;
        let mut w = ResultsWriter {
            json,
            csv: csv_path,
            jsonl,
            results,
            jsonl_file,
            csv_file,
        };
        append(&mut w.csv_file, &w.csv, csv_header().as_bytes())?;
        w.write_summary()?;
        Ok(w)
    }

    /// Appends the turn to the JSONL and the CSV (each write is one whole line, flushed to the
    /// kernel, so a crash loses at most the turn being written) and keeps it for the summary.
    pub fn push(&mut self, t: TurnRecord) -> Result<(), WriteError> {
        let mut line = serde_json::to_vec(&t).map_err(|e| WriteError::Io {
            path: self.jsonl.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push(b'\n');
        append(&mut self.jsonl_file, &self.jsonl, &line)?;
        append(&mut self.csv_file, &self.csv, csv_row(&t).as_bytes())?;
        self.results.turns.push(t);
        Ok(())
    }

    fn write_summary(&mut self) -> Result<(), WriteError> {
        self.results.aggregate = Aggregate::from_turns(&self.results.turns);
        self.results.levels = levels(&self.results.turns, &self.results.threads);
        let json = serde_json::to_vec_pretty(&self.results).map_err(|e| WriteError::Io {
            path: self.json.clone(),
            source: std::io::Error::other(e),
        })?;
        fsio::write_atomic(&self.json, &json)
    }

    pub fn finish(&mut self, interrupted: bool) -> Result<(), WriteError> {
        self.results.header.interrupted = interrupted;
        self.results.finished = true;
        self.write_summary()
    }

    /// Marks the run as stopped early, and why, then writes the file.
    pub fn finish_stopped(&mut self, reason: &str) -> Result<(), WriteError> {
        self.results.header.stop_reason = Some(reason.to_string());
        self.finish(true)
    }
}

fn append(f: &mut std::fs::File, path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    use std::io::Write;
    f.write_all(bytes).map_err(|source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One row per turn; segment columns in ms.
pub fn csv(turns: &[TurnRecord]) -> String {
    let mut out = csv_header();
    for t in turns {
        out.push_str(&csv_row(t));
    }
    out
}

fn csv_header() -> String {
    let mut out = String::from("scenario,turn,repeat,warmup,request_id,outcome,wer");
    for s in VOICE_TO_VOICE.steps {
        out.push(',');
        out.push_str(s.name);
        out.push_str("_ms");
    }
    out.push_str(",total_ms,overhead_ms,underruns,transcript,reply,error\n");
    out
}

fn csv_row(t: &TurnRecord) -> String {
    let mut out = String::new();
    let mut row = vec![
        csv_field(&t.scenario),
        csv_field(&t.turn),
        t.repeat.to_string(),
        t.warmup.to_string(),
        t.request_id.clone(),
        format!("{:?}", t.outcome).to_lowercase(),
        t.wer.map(|w| format!("{w:.3}")).unwrap_or_default(),
    ];
    for s in VOICE_TO_VOICE.steps {
        row.push(
            t.breakdown
                .as_ref()
                .and_then(|b| b.segment_ns(s.name))
                .map(|ns| format!("{:.3}", ns as f64 / 1e6))
                .unwrap_or_default(),
        );
    }
    row.push(
        t.breakdown
            .as_ref()
            .map(|b| format!("{:.3}", b.total_ns as f64 / 1e6))
            .unwrap_or_default(),
    );
    row.push(t.overhead_ms.map(|v| format!("{v:.3}")).unwrap_or_default());
    row.push(t.underruns.to_string());
    row.push(csv_field(&t.transcript));
    row.push(csv_field(&t.reply_text));
    row.push(csv_field(t.error.as_deref().unwrap_or("")));
    out.push_str(&row.join(","));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn results() -> ReplayResults {
        ReplayResults::new(
            PipelineConfig::default(),
            ThreadBudget::detect(),
            serde_json::json!({}),
        )
    }

    #[test]
    fn turns_are_appended_and_a_run_that_died_is_recovered_from_its_jsonl() {
        let d = tempfile::tempdir().unwrap();
        let mut w = ResultsWriter::new(d.path(), results()).unwrap();
        let started = std::fs::read(&w.json).unwrap();
        for i in 0..3 {
            let t = TurnRecord::blank("s", &format!("t{i}"), &format!("r{i}"), "hello");
            w.push(t).unwrap();
        }
        let lines = std::fs::read_to_string(&w.jsonl).unwrap();
        assert_eq!(lines.lines().count(), 3);
        assert_eq!(
            std::fs::read_to_string(&w.csv).unwrap().lines().count(),
            4,
            "header and a row per turn"
        );
        // The summary is not rewritten per turn: that was O(n²) bytes over a long run.
        assert_eq!(std::fs::read(&w.json).unwrap(), started);

        // The process dies here, mid-way through writing a fourth turn: loading the summary
        // finds every finished turn in the JSONL.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&w.jsonl)
            .unwrap()
            .write_all(b"{\"scenario\":\"s\",\"tu")
            .unwrap();
        let got = ReplayResults::load(&w.json).unwrap();
        let ids: Vec<&str> = got.turns.iter().map(|t| t.turn.as_str()).collect();
        assert_eq!(ids, ["t0", "t1", "t2"]);
        assert!(got.header.interrupted && got.header.stop_reason.is_some());
        assert_eq!(
            serde_json::to_value(&got.aggregate).unwrap(),
            serde_json::to_value(Aggregate::from_turns(&got.turns)).unwrap()
        );

        // Finished, the summary holds the turns itself and says the run was complete.
        w.finish(false).unwrap();
        let done = ReplayResults::load(&w.json).unwrap();
        assert!(done.finished && !done.header.interrupted);
        assert_eq!(done.turns.len(), 3);
        assert_eq!(
            done.turns_jsonl.as_deref(),
            w.jsonl.file_name().unwrap().to_str()
        );
    }

    #[test]
    fn a_corrupt_line_before_the_last_is_an_error_not_a_silent_loss() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.jsonl");
        let t = serde_json::to_string(&TurnRecord::blank("s", "t", "r", "x")).unwrap();
        std::fs::write(&p, format!("{t}\nnot json\n{t}\n")).unwrap();
        let e = read_jsonl(&p).unwrap_err();
        assert!(e.to_string().contains("x.jsonl: line 2"), "{e}");
    }

    #[test]
    fn summaries_written_before_the_jsonl_still_load_as_finished() {
        let mut v = serde_json::to_value(results()).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("finished");
        o.remove("turns_jsonl");
        let r: ReplayResults = serde_json::from_value(v).unwrap();
        assert!(r.finished && r.turns_jsonl.is_none());
    }
}
