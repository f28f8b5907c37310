//! What one turn produced ([`TurnRecord`]); the aggregate over many is in
//! [`crate::aggregate`]. Every figure here is derived from stamped events by voxlat-core;
//! nothing is timed directly.

use crate::quality::ReplyQuality;
pub mod pace;
mod pause_span;

pub use pause_span::PauseSpan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use voxlat_core::remote::RemoteCall;
use voxlat_core::segments::{Breakdown, VOICE_TO_VOICE};
use voxlat_core::{EventKind, Nanos, TimelineSnapshot};
use voxlat_llm::StreamOutcome;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The reply was spoken.
    Ok,
    /// ASR heard nothing to answer (silence, or a filtered hallucination).
    NoSpeech,
    Error,
    /// The user spoke over the reply (live mode's barge-in): excluded from the latency
    /// statistics, counted apart.
    Interrupted,
}

impl TurnOutcome {
    /// Whether the turn ran to its end (answered, failed or heard nothing). An interrupted
    /// turn did not: the speech that cut it short is the next turn.
    pub fn ran_to_end(self) -> bool {
        self != TurnOutcome::Interrupted
    }
}

/// A reply started before its turn was committed (at the provisional end) and held until the
/// endpoint. See docs/latency-model.md §7.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpeculativeReply {
    /// The endpoint confirmed it, so it was played.
    pub committed: bool,
    /// How long before the endpoint each boundary event really happened, ms, for the ones
    /// that did (the breakdown counts them at the endpoint, as it does a speculative
    /// transcript).
    pub before_commit_ms: BTreeMap<EventKind, f64>,
    /// Compute this record saw spent on it (Whisper, the LLM request while open, Piper for
    /// the chunks that played), ms. The waste of one not committed is counted apart, in the
    /// next record's `speculation_wasted_ms`, with the work still running when it was dropped.
    pub compute_ms: f64,
}

/// Where a turn's time goes, by who spends it. Serialised as the lower-case names results
/// files have always carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// webrtc-vad classifying frames.
    Vad,
    /// From the speech end to the endpoint decision reaching the pipeline.
    Endpointer,
    Asr,
    Llm,
    Tts,
    /// The output taking the reply's first audio in.
    Sink,
    /// The output buffer and the device until the first sample leaves the speaker.
    Device,
    /// The reply playing (where a barge-in can land).
    Playout,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Vad => "vad",
            Stage::Endpointer => "endpointer",
            Stage::Asr => "asr",
            Stage::Llm => "llm",
            Stage::Tts => "tts",
            Stage::Sink => "sink",
            Stage::Device => "device",
            Stage::Playout => "playout",
        }
    }

    /// A stage that computes (the pipeline's overhead is time when none of these works).
    pub fn computes(self) -> bool {
        matches!(self, Stage::Asr | Stage::Llm | Stage::Tts)
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A turn cut short by the user speaking.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interruption {
    /// When the user's new speech began (capture time).
    pub onset: Nanos,
    /// The stage the turn was in: asr, llm (the request was in flight), tts or playout.
    pub during: Stage,
    /// When the output device went silent (its own playback timestamp).
    pub playback_stopped: Option<Nanos>,
    /// onset → playback stopped.
    pub reaction_ms: Option<f64>,
    /// The streaming LLM request was dropped before it finished.
    pub llm_aborted: bool,
    /// What of the reply the user heard, as it went into the history with their words; `None`
    /// when no whole word was heard, and then their words carry into the next message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heard: Option<String>,
}

/// A span during which a stage worked on the turn (for the overhead figure).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BusySpan {
    pub stage: Stage,
    pub from: Nanos,
    pub to: Nanos,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChunkRecord {
    pub chars: usize,
    pub submitted: Nanos,
    pub started: Nanos,
    pub first_audio: Option<Nanos>,
    pub audio_s: f64,
    pub skipped: Option<String>,
    /// The call, when a remote speech server spoke the chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteCall>,
    /// The turn's first chunk with audio: the voice's leading silence trimmed from it, and
    /// where its first voiced sample falls in what was played, ms (`voxlat_tts::lead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_trimmed_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_at_ms: Option<f64>,
}

impl ChunkRecord {
    pub fn of(c: &voxlat_tts::stream::ChunkAudio) -> ChunkRecord {
        ChunkRecord {
            chars: c.text.chars().count(),
            submitted: c.timing.submitted,
            started: c.timing.started,
            first_audio: c.timing.first_audio,
            audio_s: c.duration().as_secs_f64(),
            skipped: c.skipped.as_ref().map(|s| format!("{s:?}")),
            remote: c.remote.as_deref().cloned(),
            lead_trimmed_ms: c
                .lead
                .map(|l| voxlat_core::clock::samples_to_ms(l.trimmed, c.sample_rate)),
            voice_at_ms: c
                .lead
                .map(|l| voxlat_core::clock::samples_to_ms(l.voice_at, c.sample_rate)),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The concurrency level of a `--sessions` replay (callers at once); 0 otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sessions: u32,
    /// Which caller of that level replayed the turn, from 1; 0 otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub session: u32,
    pub scenario: String,
    pub turn: String,
    pub repeat: u32,
    pub warmup: bool,
    pub request_id: String,
    pub outcome: TurnOutcome,
    pub error: Option<String>,
    /// Event times on the process clock.
    pub events: BTreeMap<EventKind, Nanos>,
    pub breakdown: Option<Breakdown>,
    /// Time within [speech_end, playout_start] when no stage was working on the turn.
    pub overhead_ms: Option<f64>,
    pub reference: String,
    pub transcript: String,
    /// WER of what the LLM was asked: `merged_words` and `transcript` as one message.
    pub wer: Option<f64>,
    pub asr_rejected: Option<String>,
    pub asr_compute_ms: Option<f64>,
    pub asr_rtf: Option<f64>,
    /// Why Whisper's first decode was rejected as a runaway (then decoded again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asr_fallback: Option<String>,
    /// Compute spent on those extra decodes, ms (included in `asr_compute_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asr_fallback_ms: Option<f64>,
    /// The call, when a remote transcription server transcribed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asr_remote: Option<RemoteCall>,
    /// The transcript came from speculative ASR on a provisional endpoint.
    pub speculative_asr: bool,
    pub retractions: u32,
    /// Whether `speech_end` is the scenario's annotation (else the energy estimate).
    pub speech_end_annotated: bool,
    /// The VAD's own speech-end estimate minus the ground truth.
    pub vad_speech_end_error_ms: Option<f64>,
    /// The commit judged against the scenario's truth (its end and labelled pauses) in audio
    /// time, as `eval-turns` judges it: inside a pause or before the end cut the speaker off.
    /// Replay only, on turns with an annotated end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutoff: Option<voxlat_core::cutoff::Verdict>,
    /// Live: the user spoke again this soon after the commit (within
    /// [`crate::session::RESUMED_WITHIN_MS`]), a sign the commit came too early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_after_ms: Option<f64>,
    /// The words of an earlier commit that this turn continues (the user went on before its
    /// reply was heard; in replay, the rest of an utterance committed inside a pause); the LLM
    /// was asked with them and `transcript` as one message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_words: Option<String>,
    /// The reply's audio paused because the user spoke soon after the commit: each pause,
    /// when the output went silent, whether it played on, and the audible overlap.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reply_pauses: Vec<PauseSpan>,
    /// What the user said while the reply was paused that did not go on from it (under
    /// [`crate::session::MIN_GOING_ON_MS`] of speech, and over a reply the source may have
    /// heard, or only a backchannel, or words Whisper wrote for what it took to be no speech); the reply
    /// played on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed_over: Vec<String>,
    pub reply_text: String,
    pub reply_audio_s: f64,
    pub missing_keywords: Vec<String>,
    /// The reply-quality checks on what was spoken ([`crate::quality`]); none before they
    /// existed, or when nothing was spoken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<ReplyQuality>,
    /// The same checks on the reply before the tail filter withheld anything
    /// ([`crate::quality::before_filter`]); none before they existed, or when nothing was spoken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality_before_filter: Option<ReplyQuality>,
    /// A trailing fragment or stray token the LLM wrote but TTS was not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_tail: Option<String>,
    pub chunks: Vec<ChunkRecord>,
    /// Gaps in playout between chunks (the stutter a listener hears).
    pub underruns: u32,
    pub underrun_ms: f64,
    /// Underruns the output driver reported during the reply (its callback ran late, so the
    /// device played silence whatever was queued): live mode only.
    #[serde(default)]
    pub device_xruns: u64,
    pub llm: Option<StreamOutcome>,
    /// TPOT, inter-token gaps, Piper's real-time factor and the playback margin
    /// ([`pace`]); none without an LLM stream, or in results from before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<pace::ReplyPace>,
    pub busy: Vec<BusySpan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interruption>,
    /// This turn's reply was speculative (started before the endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_reply: Option<SpeculativeReply>,
    /// Speculative replies discarded since the previous record (the user resumed).
    #[serde(default)]
    pub speculation_misses: u32,
    /// Whisper, LLM and Piper busy time spent on speculation discarded since the previous
    /// record, ms: those replies (work they left running included, such as a decode or a
    /// chunk finishing after the drop), speculative transcriptions a retraction dropped, and
    /// the transcription of a sound with no words that a paused reply waited for. On an
    /// `interrupted` record whose words carry into the next turn, it includes the LLM and TTS
    /// compute of its own dropped reply.
    /// Misses after a session's last turn are on a record of its own (`close`).
    #[serde(default)]
    pub speculation_wasted_ms: f64,
    /// The previous turn cut the history, and the LLM evaluated this turn's shortened prompt
    /// before the turn (`PipelineConfig::warm_cut_history`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_warmup: Option<Warmed>,
}

/// A prompt evaluated ahead of its turn, so that the server's prefix cache holds it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Warmed {
    /// From the request to its end, or to when the next turn dropped it, ms. The server's
    /// compute for it is at most this.
    pub ms: f64,
    /// The request ended before the next turn needed the LLM (dropped, the server keeps
    /// what it evaluated by then).
    pub finished: bool,
}

impl TurnRecord {
    /// Records a stage's busy span when both ends are known.
    pub fn push_span(&mut self, stage: Stage, from: Option<Nanos>, to: Option<Nanos>) {
        if let (Some(from), Some(to)) = (from, to) {
            self.busy.push(BusySpan { stage, from, to });
        }
    }

    /// The file `--save-replies` writes this turn's played reply to, in its directory; under
    /// `--sessions` each session's replies are kept apart.
    pub fn reply_wav_name(&self) -> String {
        if self.sessions > 1 {
            format!(
                "{}-{}-{}-session{}.wav",
                self.scenario, self.turn, self.repeat, self.session
            )
        } else {
            format!("{}-{}-{}.wav", self.scenario, self.turn, self.repeat)
        }
    }

    /// A record with nothing measured yet (outcome `Error` until the turn says otherwise).
    pub fn blank(scenario: &str, turn: &str, request_id: &str, reference: &str) -> TurnRecord {
        TurnRecord {
            sessions: 0,
            session: 0,
            scenario: scenario.into(),
            turn: turn.into(),
            repeat: 0,
            warmup: false,
            request_id: request_id.into(),
            outcome: TurnOutcome::Error,
            error: None,
            events: Default::default(),
            breakdown: None,
            overhead_ms: None,
            reference: reference.into(),
            transcript: String::new(),
            wer: None,
            asr_rejected: None,
            asr_compute_ms: None,
            asr_rtf: None,
            asr_fallback: None,
            asr_fallback_ms: None,
            asr_remote: None,
            speculative_asr: false,
            retractions: 0,
            speech_end_annotated: false,
            vad_speech_end_error_ms: None,
            cutoff: None,
            resumed_after_ms: None,
            merged_words: None,
            reply_pauses: Vec::new(),
            passed_over: Vec::new(),
            reply_text: String::new(),
            reply_audio_s: 0.0,
            missing_keywords: Vec::new(),
            quality: None,
            quality_before_filter: None,
            dropped_tail: None,
            chunks: Vec::new(),
            underruns: 0,
            underrun_ms: 0.0,
            device_xruns: 0,
            llm: None,
            pace: None,
            busy: Vec::new(),
            interrupted: None,
            speculative_reply: None,
            speculation_misses: 0,
            speculation_wasted_ms: 0.0,
            history_warmup: None,
        }
    }

    /// A speculative reply committed at `endpoint`: the reply's events stamped before it
    /// count at it, as a speculative transcript does (docs/latency-model.md §7), so the
    /// events stay in pipeline order; how early each really came is kept in
    /// `speculative_reply`. The reply's pace is taken from the true times first.
    pub fn commit_speculation(&mut self, endpoint: Nanos) {
        let mut spec = SpeculativeReply {
            committed: true,
            compute_ms: self.compute_ms(),
            ..SpeculativeReply::default()
        };
        self.pace = pace::ReplyPace::of(self);
        let after_endpoint = EventKind::ALL
            .iter()
            .copied()
            .skip_while(|&e| e != EventKind::Endpoint)
            .skip(1);
        for e in after_endpoint {
            if let Some(t) = self.events.get_mut(&e) {
                if *t < endpoint {
                    spec.before_commit_ms
                        .insert(e, voxlat_core::clock::ns_to_ms(endpoint.signed_since(*t)));
                    *t = endpoint;
                }
            }
        }
        self.speculative_reply = Some(spec);
    }

    /// Whisper, LLM and Piper busy time in this turn, ms.
    pub fn compute_ms(&self) -> f64 {
        self.busy
            .iter()
            .filter(|b| b.stage.computes())
            .map(|b| voxlat_core::clock::ns_to_ms(b.to.signed_since(b.from)).max(0.0))
            .sum()
    }

    pub fn snapshot(&self) -> TimelineSnapshot {
        TimelineSnapshot {
            request_id: voxlat_core::RequestId::from_string(self.request_id.clone()),
            events: self.events.clone(),
        }
    }

    /// The telescoping breakdown, when every boundary event is present.
    pub fn compute_breakdown(&mut self) {
        let committed = self.speculative_reply.as_ref().is_some_and(|s| s.committed);
        if !committed {
            self.pace = pace::ReplyPace::of(self);
        }
        self.breakdown = VOICE_TO_VOICE.compute(&self.snapshot()).ok();
        self.overhead_ms = self.breakdown.as_ref().and_then(|_| {
            let from = *self.events.get(&EventKind::SpeechEnd)?;
            let to = *self.events.get(&EventKind::PlayoutStart)?;
            Some(uncovered_ns(from, to, &self.busy) as f64 / 1e6)
        });
    }
}

/// Nanoseconds of [from, to] covered by none of `spans`.
pub fn uncovered_ns(from: Nanos, to: Nanos, spans: &[BusySpan]) -> u64 {
    if to <= from {
        return 0;
    }
    let mut v: Vec<(u64, u64)> = spans
        .iter()
        .map(|s| (s.from.0.max(from.0), s.to.0.min(to.0)))
        .filter(|(a, b)| b > a)
        .collect();
    v.sort_unstable();
    let mut covered = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (a, b) in v {
        match cur {
            Some((ca, cb)) if a <= cb => cur = Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                covered += cb - ca;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    if let Some((a, b)) = cur {
        covered += b - a;
    }
    (to.0 - from.0) - covered
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_serialise_as_the_names_files_already_hold() {
        let all = [
            Stage::Vad,
            Stage::Endpointer,
            Stage::Asr,
            Stage::Llm,
            Stage::Tts,
            Stage::Sink,
            Stage::Device,
            Stage::Playout,
        ];
        for s in all {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.name()));
            assert_eq!(serde_json::from_str::<Stage>(&json).unwrap(), s);
        }
        let old = r#"{"onset":5,"during":"llm","playback_stopped":null,"reaction_ms":null,"llm_aborted":true}"#;
        let i: Interruption = serde_json::from_str(old).unwrap();
        assert_eq!(i.during, Stage::Llm);
        assert!(serde_json::from_str::<Stage>("\"lunch\"").is_err());
    }

    #[test]
    fn an_interrupted_turn_did_not_run_to_its_end() {
        assert!(!TurnOutcome::Interrupted.ran_to_end());
        for o in [TurnOutcome::Ok, TurnOutcome::Error, TurnOutcome::NoSpeech] {
            assert!(o.ran_to_end(), "{o:?}");
        }
    }

    fn span(a: u64, b: u64) -> BusySpan {
        BusySpan {
            stage: Stage::Asr,
            from: Nanos(a),
            to: Nanos(b),
        }
    }

    #[test]
    fn uncovered_time_merges_overlaps_and_clips_to_the_window() {
        assert_eq!(uncovered_ns(Nanos(0), Nanos(100), &[]), 100);
        assert_eq!(
            uncovered_ns(
                Nanos(0),
                Nanos(100),
                &[span(10, 30), span(20, 40), span(90, 200)]
            ),
            100 - 30 - 10
        );
        assert_eq!(uncovered_ns(Nanos(50), Nanos(60), &[span(0, 100)]), 0);
        assert_eq!(uncovered_ns(Nanos(60), Nanos(50), &[]), 0);
    }
}
