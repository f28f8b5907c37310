//! Replay results: JSON (the shared versioned header, every event of every turn, the
//! aggregates) and a CSV of one row per turn, both rewritten atomically after every turn so
//! Ctrl-C or a crash keeps what was measured.

use crate::record::{Aggregate, TurnRecord};
use crate::sweep::SweepRow;
use crate::turn::PipelineConfig;
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
    pub threads: ThreadBudget,
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
            stages,
            timing_note: timing_note.into(),
            scenarios: Vec::new(),
            skipped: Vec::new(),
            aggregate: Aggregate::from_turns(&[]),
            turns: Vec::new(),
            sweep: Vec::new(),
        }
    }

    pub fn load(path: &Path) -> Result<ReplayResults, String> {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        let h =
            voxlat_core::report::read_header(&v).map_err(|e| format!("{}: {e}", path.display()))?;
        if h.kind != "replay" {
            return Err(format!(
                "{} holds `{}` results, not replay results",
                path.display(),
                h.kind
            ));
        }
        serde_json::from_value(v)
            .map_err(|e| format!("{}: invalid replay results: {e}", path.display()))
    }
}

pub struct ResultsWriter {
    pub json: PathBuf,
    pub csv: PathBuf,
    pub results: ReplayResults,
}

impl ResultsWriter {
    /// Checks the directory is writable before anything is measured.
    pub fn new(dir: &Path, results: ReplayResults) -> Result<ResultsWriter, WriteError> {
        ResultsWriter::with_prefix(dir, "replay", results)
    }

    /// Files named `<prefix>-<time>.json`/`.csv` (live mode writes `live-…`).
    pub fn with_prefix(
        dir: &Path,
        prefix: &str,
        results: ReplayResults,
    ) -> Result<ResultsWriter, WriteError> {
        fsio::ensure_writable_dir(dir)?;
        let stem = format!("{prefix}-{}", voxlat_core::clock::wall_label_compact());
        let mut w = ResultsWriter {
            json: dir.join(format!("{stem}.json")),
            csv: dir.join(format!("{stem}.csv")),
            results,
        };
        w.flush()?;
        Ok(w)
    }

    pub fn push(&mut self, t: TurnRecord) -> Result<(), WriteError> {
        self.results.turns.push(t);
        self.flush()
    }

    pub fn flush(&mut self) -> Result<(), WriteError> {
        self.results.aggregate = Aggregate::from_turns(&self.results.turns);
        let json = serde_json::to_vec_pretty(&self.results).map_err(|e| WriteError::Io {
            path: self.json.clone(),
            source: std::io::Error::other(e),
        })?;
        fsio::write_atomic(&self.json, &json)?;
        fsio::write_atomic(&self.csv, csv(&self.results.turns).as_bytes())
    }

    pub fn finish(&mut self, interrupted: bool) -> Result<(), WriteError> {
        self.results.header.interrupted = interrupted;
        self.flush()
    }

    /// Marks the run as stopped early, and why, then writes the file.
    pub fn finish_stopped(&mut self, reason: &str) -> Result<(), WriteError> {
        self.results.header.stop_reason = Some(reason.to_string());
        self.finish(true)
    }
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
    let mut out = String::from("scenario,turn,repeat,warmup,request_id,outcome,wer");
    for s in VOICE_TO_VOICE.steps {
        out.push(',');
        out.push_str(s.name);
        out.push_str("_ms");
    }
    out.push_str(",total_ms,overhead_ms,underruns,transcript,reply,error\n");
    for t in turns {
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
    }
    out
}
