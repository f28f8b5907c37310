//! The aggregate of a run's turns: per-segment statistics, the dominant stage, outcome
//! counts, reply quality and the remote stages' summaries (`docs/latency-model.md` §10).

use crate::quality::QualityCounts;
use crate::record::{TurnOutcome, TurnRecord};
use crate::remote_summary::RemoteSummary;
use serde::{Deserialize, Serialize};
use voxlat_core::segments::{Breakdown, Segment, VOICE_TO_VOICE};
use voxlat_core::stats::Summary;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    pub turns: usize,
    pub ok: usize,
    pub no_speech: usize,
    pub errors: usize,
    /// Barge-ins: counted here, left out of every latency figure.
    #[serde(default)]
    pub interrupted: usize,
    /// Turns committed before their speaker finished (`TurnRecord::cutoff`): counted here,
    /// left out of every latency figure, whose total would time them from the wrong end.
    #[serde(default)]
    pub cut_off: usize,
    /// User speech onset → output silent, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barge_in_reaction: Option<Summary>,
    /// Per segment, in chain order, in ms.
    pub segments: Vec<(Segment, Summary)>,
    pub total: Option<Summary>,
    pub overhead: Option<Summary>,
    pub dominant_p50: Option<Segment>,
    pub dominant_p95: Option<Segment>,
    /// Mean over utterances of the WER of what the LLM was last asked (an utterance's last
    /// record).
    pub wer_mean: Option<f64>,
    /// Turns whose first Whisper decode ran away and was decoded again.
    #[serde(default)]
    pub asr_fallbacks: usize,
    /// Of those, the turns whose transcript came after the endpoint: a runaway on the critical
    /// path. The others were decoded again inside the pause, where the user waited for nothing.
    #[serde(default)]
    pub asr_fallbacks_after_commit: usize,
    /// Whisper compute per turn (every decode), ms: the worst case is its max.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asr_compute: Option<Summary>,
    /// The remote ASR's calls, when `--asr-url` ran it on a server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asr_remote: Option<RemoteSummary>,
    /// The remote TTS's calls (every chunk), when `--tts-url` ran it on a server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tts_remote: Option<RemoteSummary>,
    /// |endpointer's speech-end estimate − annotation|, ms, over annotated turns: how far a
    /// live breakdown's start can be from the truth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speech_end_error: Option<Summary>,
    /// Replay: how many turns judged against their scenario's truth were cut off
    /// (`TurnRecord::cutoff`); absent when no turn was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutoffs: Option<CutoffCount>,
    /// The replies' pace ([`crate::record::pace`]) over the turns that ran to their end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<PaceSummary>,
    /// Turns whose first audio was ready before the endpoint committed them (a speculative
    /// reply's TTS had its first chunk by then): the commit then waits for nothing but the
    /// output.
    #[serde(default)]
    pub ready_at_commit: usize,
    /// Live: turns after whose commit the user spoke again within 2 s.
    #[serde(default)]
    pub resumed: usize,
    /// Turns that carried an earlier commit's words (the user went on with words).
    #[serde(default)]
    pub merged: usize,
    /// Turns whose reply was paused for a sound with no words, and then played on.
    #[serde(default)]
    pub played_on: usize,
    pub underruns: u32,
    /// Every breakdown's segments summed exactly to its total (integer ns).
    pub sums_exact: bool,
    /// Reply-quality pass counts over the spoken replies (absent in older results).
    #[serde(default)]
    pub quality: QualityCounts,
}

/// TPOT, ITL, TTS real-time factor and playback margin over a run's replies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PaceSummary {
    pub tpot_ms: Option<Summary>,
    /// Each reply's ITL P95, ms.
    pub itl_p95_ms: Option<Summary>,
    pub tts_rtf: Option<Summary>,
    /// Per reply; its minimum is the closest any reply came to a stutter.
    pub playback_margin_ms: Option<Summary>,
}

impl PaceSummary {
    fn of<'a>(turns: impl Iterator<Item = &'a TurnRecord>) -> Option<PaceSummary> {
        let paces: Vec<&crate::record::pace::ReplyPace> =
            turns.filter_map(|t| t.pace.as_ref()).collect();
        let pick = |f: fn(&crate::record::pace::ReplyPace) -> Option<f64>| {
            let v: Vec<f64> = paces.iter().filter_map(|p| f(p)).collect();
            Summary::from_samples(&v, 0)
        };
        (!paces.is_empty()).then(|| PaceSummary {
            tpot_ms: pick(|p| p.tpot_ms),
            itl_p95_ms: pick(|p| p.itl_p95_ms),
            tts_rtf: pick(|p| p.tts_rtf),
            playback_margin_ms: pick(|p| p.playback_margin_ms),
        })
    }
}

/// The utterance a record belongs to: one replayed utterance may leave several records.
fn utterance(t: &TurnRecord) -> (u32, &str, &str, u32, bool) {
    (t.session, &t.scenario, &t.turn, t.repeat, t.warmup)
}

/// Cut-off utterances among those judged.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CutoffCount {
    pub judged: usize,
    pub cut_off: usize,
    /// cut_off / judged.
    pub rate: f64,
}

impl CutoffCount {
    /// Counts utterances, not records: an utterance committed inside a pause and then
    /// merged with its rest leaves two records (the reply that gave way, cut off, and the
    /// merged turn), and it was cut off once.
    pub fn of<'a>(turns: impl Iterator<Item = &'a TurnRecord>) -> Option<CutoffCount> {
        let mut utterances: std::collections::BTreeMap<_, bool> = Default::default();
        for t in turns {
            if let Some(v) = t.cutoff {
                *utterances.entry(utterance(t)).or_default() |= v.cut_off();
            }
        }
        let judged = utterances.len();
        let cut_off = utterances.values().filter(|&&c| c).count();
        (judged > 0).then(|| CutoffCount {
            judged,
            cut_off,
            rate: cut_off as f64 / judged as f64,
        })
    }
}

impl Aggregate {
    pub fn from_turns(turns: &[TurnRecord]) -> Aggregate {
        let measured: Vec<&TurnRecord> = turns.iter().filter(|t| !t.warmup).collect();
        // An interrupted turn's partial breakdown would skew the percentiles, and a turn that
        // cut its speaker off is timed from an end that was not the end of the turn
        // (docs/latency-model.md §12): latency is over the turns that ran as the user meant.
        let timed = |t: &&&TurnRecord| {
            t.outcome != TurnOutcome::Interrupted && !t.cutoff.is_some_and(|v| v.cut_off())
        };
        let broken: Vec<&Breakdown> = measured
            .iter()
            .filter(timed)
            .filter_map(|t| t.breakdown.as_ref())
            .collect();
        let cut_off = measured
            .iter()
            .filter(|t| t.cutoff.is_some_and(|v| v.cut_off()))
            .count();
        let errors = measured
            .iter()
            .filter(|t| t.outcome == TurnOutcome::Error)
            .count();
        let segments: Vec<(Segment, Summary)> = VOICE_TO_VOICE
            .steps
            .iter()
            .filter_map(|step| {
                let v: Vec<f64> = broken
                    .iter()
                    .filter_map(|b| b.segment_ns(step.name))
                    .map(|ns| ns as f64 / 1e6)
                    .collect();
                Summary::from_samples(&v, errors).map(|s| (step.name, s))
            })
            .collect();
        let totals: Vec<f64> = broken.iter().map(|b| b.total_ns as f64 / 1e6).collect();
        let overheads: Vec<f64> = measured
            .iter()
            .filter(timed)
            .filter_map(|t| t.overhead_ms)
            .collect();
        let reactions: Vec<f64> = measured
            .iter()
            .filter_map(|t| t.interrupted.as_ref()?.reaction_ms)
            .collect();
        let dominant = |f: fn(&Summary) -> f64| {
            segments
                .iter()
                .max_by(|a, b| f(&a.1).total_cmp(&f(&b.1)))
                .map(|(n, _)| *n)
        };
        // Per utterance, its last record's: an utterance committed early and merged with its
        // rest leaves the reply that gave way (its first words only) before the merged turn.
        let mut last_wer: std::collections::BTreeMap<_, f64> = Default::default();
        for t in &measured {
            if let Some(w) = t.wer {
                last_wer.insert(utterance(t), w);
            }
        }
        let wers: Vec<f64> = last_wer.into_values().collect();
        let asr_compute: Vec<f64> = measured.iter().filter_map(|t| t.asr_compute_ms).collect();
        let end_errors: Vec<f64> = measured
            .iter()
            .filter(|t| t.speech_end_annotated)
            .filter_map(|t| t.vad_speech_end_error_ms.map(f64::abs))
            .collect();
        Aggregate {
            turns: measured.len(),
            ok: measured
                .iter()
                .filter(|t| t.outcome == TurnOutcome::Ok)
                .count(),
            no_speech: measured
                .iter()
                .filter(|t| t.outcome == TurnOutcome::NoSpeech)
                .count(),
            errors,
            interrupted: measured
                .iter()
                .filter(|t| t.outcome == TurnOutcome::Interrupted)
                .count(),
            cut_off,
            barge_in_reaction: Summary::from_samples(&reactions, 0),
            total: Summary::from_samples(&totals, errors),
            overhead: Summary::from_samples(&overheads, 0),
            dominant_p50: dominant(|s| s.p50),
            dominant_p95: dominant(|s| s.p95),
            segments,
            wer_mean: (!wers.is_empty()).then(|| wers.iter().sum::<f64>() / wers.len() as f64),
            asr_fallbacks: measured.iter().filter(|t| t.asr_fallback.is_some()).count(),
            asr_fallbacks_after_commit: measured
                .iter()
                .filter(|t| t.asr_fallback.is_some() && transcribed_after_commit(t))
                .count(),
            asr_compute: Summary::from_samples(&asr_compute, 0),
            asr_remote: RemoteSummary::from_calls(
                measured.iter().filter_map(|t| t.asr_remote.as_ref()),
            ),
            tts_remote: RemoteSummary::from_calls(
                measured
                    .iter()
                    .flat_map(|t| t.chunks.iter().filter_map(|c| c.remote.as_ref())),
            ),
            speech_end_error: Summary::from_samples(&end_errors, 0),
            cutoffs: CutoffCount::of(measured.iter().copied()),
            pace: PaceSummary::of(
                measured
                    .iter()
                    .copied()
                    .filter(|t| t.outcome != TurnOutcome::Interrupted),
            ),
            ready_at_commit: measured
                .iter()
                .filter(|t| {
                    t.speculative_reply.as_ref().is_some_and(|s| {
                        s.committed
                            && s.before_commit_ms
                                .contains_key(&voxlat_core::EventKind::TtsFirstAudio)
                    })
                })
                .count(),
            resumed: measured
                .iter()
                .filter(|t| t.resumed_after_ms.is_some())
                .count(),
            merged: measured.iter().filter(|t| t.merged_words.is_some()).count(),
            played_on: measured
                .iter()
                .filter(|t| t.reply_pauses.iter().any(|p| p.resumed.is_some()))
                .count(),
            underruns: measured.iter().map(|t| t.underruns).sum(),
            quality: QualityCounts::from_turns(
                measured
                    .iter()
                    .copied()
                    .filter(|t| t.outcome == TurnOutcome::Ok),
            ),
            sums_exact: broken
                .iter()
                .all(|b| b.segments.iter().map(|s| s.ns).sum::<i64>() == b.total_ns),
        }
    }
}

/// The transcript came after the endpoint committed the turn: the breakdown's `asr` segment
/// is not empty (a speculative transcript that was ready is stamped at the endpoint itself).
fn transcribed_after_commit(t: &TurnRecord) -> bool {
    t.breakdown
        .as_ref()
        .and_then(|b| b.segment_ns(Segment::Asr))
        .is_some_and(|ns| ns > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlat_core::{EventKind, Nanos};

    /// A turn committed at 1 s whose transcript came at `asr_done_ms`, after a runaway or not;
    /// every later stage 10 ms after the one before.
    fn turn(asr_done_ms: u64, ran_away: bool) -> TurnRecord {
        let mut t = TurnRecord::blank("s", "t", "r", "x");
        t.events.insert(VOICE_TO_VOICE.start, Nanos(400_000_000));
        let mut at = asr_done_ms * 1_000_000;
        for step in VOICE_TO_VOICE.steps {
            let stamp = match step.to {
                EventKind::Endpoint => 1_000_000_000,
                EventKind::AsrDone => at,
                _ => {
                    at += 10_000_000;
                    at
                }
            };
            t.events.insert(step.to, Nanos(stamp));
        }
        t.compute_breakdown();
        t.asr_fallback = ran_away.then(|| "reached the token cap".to_string());
        t
    }

    #[test]
    fn a_runaway_counts_on_the_critical_path_only_when_its_transcript_came_after_the_commit() {
        let a = Aggregate::from_turns(&[
            turn(1000, true),
            turn(1400, true),
            turn(1400, false),
            turn(1000, false),
        ]);
        assert_eq!(a.asr_fallbacks, 2);
        assert_eq!(a.asr_fallbacks_after_commit, 1);
    }

    #[test]
    fn the_wer_is_an_utterances_last_record_not_the_reply_that_gave_way() {
        let scored = |repeat: u32, wer: f64| {
            let mut t = turn(1000, false);
            t.repeat = repeat;
            t.wer = Some(wer);
            t
        };
        // Repeat 0 was committed inside a pause: its first words alone (0.8), then the
        // merged turn (0.1). Repeat 1 was one turn.
        let a = Aggregate::from_turns(&[scored(0, 0.8), scored(0, 0.1), scored(1, 0.2)]);
        let mean = a.wer_mean.expect("scored");
        assert!((mean - 0.15).abs() < 1e-9, "{mean}");
    }

    /// A `--fast` replay committed one turn inside a pause: it is an `ok` record with a
    /// breakdown timed from the first part's end, and it must not sit in the percentiles.
    #[test]
    fn a_turn_that_cut_its_speaker_off_is_counted_and_left_out_of_the_latency() {
        let mut cut = turn(1000, false);
        cut.outcome = TurnOutcome::Ok;
        cut.cutoff = Some(voxlat_core::cutoff::Verdict::InPause { pause: 0 });
        cut.overhead_ms = Some(1.0);
        let mut on_time = turn(1400, false);
        on_time.outcome = TurnOutcome::Ok;
        on_time.cutoff = Some(voxlat_core::cutoff::Verdict::AfterEnd { latency_ms: 600.0 });
        on_time.overhead_ms = Some(2.0);
        let a = Aggregate::from_turns(&[cut, on_time.clone()]);
        assert_eq!(a.cut_off, 1);
        assert_eq!(a.cutoffs.as_ref().map(|c| c.cut_off), Some(1));
        let total = a.total.expect("one turn timed");
        assert_eq!(total.n, 1);
        let only = on_time.breakdown.as_ref().unwrap().total_ns as f64 / 1e6;
        assert!(
            (total.p50 - only).abs() < 1e-9,
            "{} against {only}",
            total.p50
        );
        assert_eq!(a.overhead.map(|o| o.n), Some(1));
    }
}
