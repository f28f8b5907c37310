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
//!
//! While the run goes on, the writer keeps only what the aggregate reads of each turn
//! ([`summary_view`]: its numbers, without the transcript, reply, token stamps and the like),
//! so a live run of days does not hold every whole record. The whole turns are read back
//! from the JSONL once, when the summary is rendered.

use crate::aggregate::Aggregate;
use crate::config::PipelineConfig;
use crate::levels::{levels, Level};
use crate::record::TurnRecord;
use crate::setup::Stages;
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
    /// Which build of the embedded LLM server ran: `portable` (AVX2) or the CPU family it was
    /// built for (`avx512`); their prefill differs by about 1.4×. Absent when the LLM was
    /// elsewhere, and in files from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_server_build: Option<String>,
    /// What each stage ran on (model files, LLM endpoint; live, the devices).
    #[serde(default)]
    pub stages: Stages,
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
    pub fn new(config: PipelineConfig, threads: ThreadBudget, stages: Stages) -> ReplayResults {
        let timing_note = if config.fast {
            "unpaced (--fast): speech was fed as fast as possible and the silence after each provisional end in real time, so endpointing is in audio time (speech_end is mapped onto the process clock at the endpointer's decision); every other segment is on the process clock"
        } else {
            "paced: audio was fed in real time in 20 ms frames; speech_end is the scenario's end of speech (annotated, or the energy estimate where it has none) at the moment that sample entered the pipeline; endpoint is when the endpointer's decision reached the pipeline"
        };
        ReplayResults {
            header: ResultsHeader::new("replay", env!("CARGO_PKG_VERSION")),
            config,
            threads,
            llm_server_threads: None,
            llm_server_build: None,
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
    /// `results.turns` stays empty until [`ResultsWriter::finish`] reads the turns back from
    /// the JSONL: they are on disk, and the run keeps only [`summary_view`]s in `kept`.
    pub results: ReplayResults,
    kept: Vec<TurnRecord>,
    jsonl_file: std::fs::File,
    csv_file: csv::Writer<std::fs::File>,
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
        let csv_file = csv::Writer::from_writer(create(&csv_path)?);
        let mut w = ResultsWriter {
            json,
            csv: csv_path,
            jsonl,
            results,
            kept: Vec::new(),
            jsonl_file,
            csv_file,
        };
        w.append_csv(&csv_header())?;
        w.write_summary()?;
        Ok(w)
    }

    /// Appends the turn to the JSONL and the CSV (each write is one whole line, flushed to the
    /// kernel, so a crash loses at most the turn being written) and keeps what the aggregate
    /// needs of it.
    pub fn push(&mut self, t: TurnRecord) -> Result<(), WriteError> {
        let mut line = serde_json::to_vec(&t).map_err(|e| WriteError::Io {
            path: self.jsonl.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push(b'\n');
        append(&mut self.jsonl_file, &self.jsonl, &line)?;
        self.append_csv(&csv_row(&t))?;
        self.kept.push(summary_view(t));
        Ok(())
    }

    /// One whole CSV line, flushed to the kernel like the JSONL's.
    fn append_csv(&mut self, row: &[String]) -> Result<(), WriteError> {
        let io = |source| WriteError::Io {
            path: self.csv.clone(),
            source,
        };
        self.csv_file
            .write_record(row)
            .map_err(|e| io(std::io::Error::other(e)))?;
        self.csv_file.flush().map_err(io)
    }

    fn write_summary(&mut self) -> Result<(), WriteError> {
        self.results.aggregate = Aggregate::from_turns(&self.kept);
        self.results.levels = levels(&self.kept, &self.results.threads);
        let json = serde_json::to_vec_pretty(&self.results).map_err(|e| WriteError::Io {
            path: self.json.clone(),
            source: std::io::Error::other(e),
        })?;
        fsio::write_atomic(&self.json, &json)
    }

    /// Writes the summary whole: the turns come back from the JSONL (the report renders each
    /// of them), and stay in `results.turns` for the caller's report.
    pub fn finish(&mut self, interrupted: bool) -> Result<(), WriteError> {
        self.results.turns = read_jsonl(&self.jsonl).map_err(|e| WriteError::Io {
            path: self.jsonl.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
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

/// What [`Aggregate::from_turns`] and [`levels`] read of a turn, and nothing else: the
/// strings (transcript, reply, errors, URLs), the LLM's per-token stamps, busy spans and
/// every event but the first and last are dropped. Both give the same result on the view as
/// on the whole record (tested), for a fraction of its memory.
pub fn summary_view(t: TurnRecord) -> TurnRecord {
    let first = t.events.iter().min_by_key(|(_, n)| **n);
    let last = t.events.iter().max_by_key(|(_, n)| **n);
    let events = first
        .into_iter()
        .chain(last)
        .map(|(k, n)| (*k, *n))
        .collect();
    let slim_call = |mut c: voxlat_core::remote::RemoteCall| {
        c.url = String::new();
        c.request_id = String::new();
        c.server_request_id = None;
        c
    };
    TurnRecord {
        // Kept: the cut-off count groups records by utterance.
        scenario: t.scenario,
        turn: t.turn,
        request_id: String::new(),
        error: None,
        events,
        reference: String::new(),
        transcript: String::new(),
        asr_rejected: None,
        asr_fallback: t.asr_fallback.map(|_| String::new()),
        asr_remote: t.asr_remote.map(slim_call),
        reply_text: String::new(),
        missing_keywords: Vec::new(),
        dropped_tail: t.dropped_tail.map(|_| String::new()),
        chunks: t
            .chunks
            .into_iter()
            .filter_map(|c| {
                Some(crate::record::ChunkRecord {
                    skipped: None,
                    remote: Some(slim_call(c.remote?)),
                    ..c
                })
            })
            .collect(),
        llm: None,
        busy: Vec::new(),
        // The aggregate counts the replies ready at the commit; the map has a few entries.
        speculative_reply: t
            .speculative_reply
            .map(|s| crate::record::SpeculativeReply {
                compute_ms: 0.0,
                ..s
            }),
        pace: t.pace.map(|p| crate::pace::ReplyPace {
            itl_ms: Vec::new(),
            ..p
        }),
        ..t
    }
}

fn append(f: &mut std::fs::File, path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    use std::io::Write;
    f.write_all(bytes).map_err(|source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The CSV's columns: one row per turn, segment columns in ms.
fn csv_header() -> Vec<String> {
    let mut cols: Vec<String> = [
        "scenario",
        "turn",
        "repeat",
        "warmup",
        "request_id",
        "outcome",
        "wer",
    ]
    .map(String::from)
    .into();
    cols.extend(
        VOICE_TO_VOICE
            .steps
            .iter()
            .map(|s| format!("{}_ms", s.name.name())),
    );
    cols.extend(
        [
            "total_ms",
            "overhead_ms",
            "underruns",
            "transcript",
            "reply",
            "error",
        ]
        .map(String::from),
    );
    cols
}

fn csv_row(t: &TurnRecord) -> Vec<String> {
    let ms3 = |ns: i64| format!("{:.3}", voxlat_core::clock::ns_to_ms(ns));
    let mut row = vec![
        t.scenario.clone(),
        t.turn.clone(),
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
                .map(ms3)
                .unwrap_or_default(),
        );
    }
    row.push(
        t.breakdown
            .as_ref()
            .map(|b| ms3(b.total_ns))
            .unwrap_or_default(),
    );
    row.push(t.overhead_ms.map(|v| format!("{v:.3}")).unwrap_or_default());
    row.push(t.underruns.to_string());
    row.push(t.transcript.clone());
    row.push(t.reply_text.clone());
    row.push(t.error.clone().unwrap_or_default());
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn results() -> ReplayResults {
        ReplayResults::new(
            PipelineConfig::default(),
            ThreadBudget::detect(),
            crate::setup::Stages::default(),
        )
    }

    #[test]
    fn a_transcript_with_commas_quotes_and_a_newline_reads_back_whole_from_the_csv() {
        let d = tempfile::tempdir().unwrap();
        let mut w = ResultsWriter::new(d.path(), results()).unwrap();
        let mut t = TurnRecord::blank("s", "t", "r", "hello");
        t.transcript = "Press 1, then say \"yes\".\nThen 2.".into();
        w.push(t).unwrap();
        let mut r = csv::Reader::from_path(&w.csv).unwrap();
        let col = r
            .headers()
            .unwrap()
            .iter()
            .position(|h| h == "transcript")
            .expect("a transcript column");
        let row = r.records().next().expect("one row").unwrap();
        assert_eq!(&row[col], "Press 1, then say \"yes\".\nThen 2.");
        assert_eq!(row.len(), csv_header().len());
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

    /// A turn as a long live run records it: every boundary stamped, a long reply streamed
    /// token by token, remote calls, quality, a barge-in on some.
    fn full_turn(i: u64) -> TurnRecord {
        use voxlat_core::{remote::RemoteCall, EventKind, Nanos};
        let mut t = TurnRecord::blank("live", &format!("t{i}"), &format!("r{i}"), "hello");
        t.sessions = 1 + (i % 2) as u32;
        t.warmup = i == 0;
        t.outcome = match i % 5 {
            3 => crate::TurnOutcome::Interrupted,
            4 => crate::TurnOutcome::NoSpeech,
            _ => crate::TurnOutcome::Ok,
        };
        let mut at = 1_000_000_000 * i;
        let chain = voxlat_core::segments::VOICE_TO_VOICE;
        let boundaries = std::iter::once(chain.start).chain(chain.steps.iter().map(|s| s.to));
        for (k, e) in boundaries.enumerate() {
            at += 1_000_000 * (k as u64 * 7 + i % 13);
            t.events.insert(e, Nanos(at));
        }
        t.events.insert(EventKind::SpeechStart, Nanos(at / 2));
        if i.is_multiple_of(8) {
            // A transcript ready at the commit.
            let end = t.events[&EventKind::Endpoint];
            t.events.insert(EventKind::AsrDone, end);
        }
        t.compute_breakdown();
        t.overhead_ms = Some(i as f64 * 0.5);
        t.wer = Some((i % 3) as f64 / 10.0);
        t.asr_compute_ms = Some(40.0 + i as f64);
        t.asr_fallback = i.is_multiple_of(4).then(|| "ran away".repeat(20));
        t.speech_end_annotated = i.is_multiple_of(2);
        t.vad_speech_end_error_ms = Some(i as f64 - 5.0);
        t.transcript = "what is the weather like in paris today ".repeat(10);
        t.reply_text = "It is sunny and warm in Paris today. ".repeat(200);
        t.underruns = (i % 3) as u32;
        let call = |ms: u64| RemoteCall {
            url: "http://127.0.0.1:9/v1/audio/speech".into(),
            request_id: format!("r{i}-{ms}"),
            sent: Nanos(at),
            first_byte: Some(Nanos(at + ms * 1_000_000)),
            done: Nanos(at + 2 * ms * 1_000_000),
            upload_bytes: 1000 * ms,
            server_compute_ms: Some(ms as f64),
            ..RemoteCall::default()
        };
        t.asr_remote = Some(call(20 + i));
        t.chunks = (0..4u64)
            .map(|c| crate::record::ChunkRecord {
                chars: 40,
                submitted: Nanos(at),
                started: Nanos(at),
                first_audio: Some(Nanos(at + 1)),
                audio_s: 1.5,
                skipped: None,
                remote: c.is_multiple_of(2).then(|| call(30 + c + i)),
                lead_trimmed_ms: None,
                voice_at_ms: None,
            })
            .collect();
        t.quality = Some(crate::quality::ReplyQuality {
            not_echo: true,
            clean_end: !i.is_multiple_of(3),
            foreign_tokens: Vec::new(),
            length_ok: true,
            keywords_ok: Some(i.is_multiple_of(2)),
        });
        t.llm = Some(voxlat_llm::record::StreamOutcome {
            text: t.reply_text.clone(),
            deltas: (0..500)
                .map(|k| voxlat_llm::record::DeltaStamp {
                    t: Nanos(at + k),
                    chars: 4,
                    reasoning: false,
                })
                .collect(),
            ..Default::default()
        });
        // Values JSON carries exactly, so that the turns read back compare equal.
        t.pace = Some(crate::pace::ReplyPace {
            tpot_ms: Some(25.0),
            itl_ms: vec![20.0, 30.0, 25.0],
            itl_p95_ms: Some(30.0),
            tts_rtf: Some(0.125),
            playback_margin_ms: Some(500.0 + i as f64),
        });
        if i % 4 == 1 {
            t.speculative_reply = Some(crate::record::SpeculativeReply {
                committed: true,
                before_commit_ms: [(EventKind::TtsFirstAudio, 40.0)].into_iter().collect(),
                compute_ms: 300.0,
            });
        }
        if t.outcome == crate::TurnOutcome::Interrupted {
            t.interrupted = Some(crate::record::Interruption {
                onset: Nanos(at),
                during: crate::record::Stage::Playout,
                playback_stopped: Some(Nanos(at + 1)),
                reaction_ms: Some(i as f64),
                llm_aborted: false,
                heard: None,
            });
        }
        t
    }

    #[test]
    fn a_long_run_keeps_only_what_the_aggregate_reads() {
        let turns: Vec<TurnRecord> = (0..40).map(full_turn).collect();
        let views: Vec<TurnRecord> = turns.iter().cloned().map(summary_view).collect();
        // The view gives the summary the whole record gives.
        assert_eq!(Aggregate::from_turns(&views), Aggregate::from_turns(&turns));
        let b = ThreadBudget::detect();
        assert_eq!(levels(&views, &b), levels(&turns, &b));
        assert!(Aggregate::from_turns(&turns).tts_remote.is_some());
        let a = Aggregate::from_turns(&views);
        // Turns 4, 8, … 36 ran away; 8, 16, 24 and 32 of them were transcribed by the commit.
        assert_eq!((a.asr_fallbacks, a.asr_fallbacks_after_commit), (9, 5));

        let d = tempfile::tempdir().unwrap();
        let mut w = ResultsWriter::new(d.path(), results()).unwrap();
        let mut whole = 0;
        for t in &turns {
            whole += serde_json::to_vec(t).unwrap().len();
            w.push(t.clone()).unwrap();
        }
        // The old writer held every whole record (replies, transcripts, URLs) in
        // `results.turns` for the whole run.
        assert!(w.results.turns.is_empty());
        let kept: usize = w
            .kept
            .iter()
            .map(|t| serde_json::to_vec(t).unwrap().len())
            .sum();
        assert!(kept * 4 < whole, "kept {kept} of {whole} bytes");
        assert!(w
            .kept
            .iter()
            .all(|t| t.reply_text.is_empty() && t.llm.is_none()));

        // Finished, the summary and the caller's report have every whole turn.
        w.finish(false).unwrap();
        assert_eq!(w.results.turns, turns);
        assert_eq!(w.results.aggregate, Aggregate::from_turns(&turns));
        let done = ReplayResults::load(&w.json).unwrap();
        assert_eq!(done.turns, turns);
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
