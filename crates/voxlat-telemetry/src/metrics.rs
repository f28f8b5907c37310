//! Turn metrics: the voice-to-voice segments of every finished turn as Prometheus
//! histograms, and turns counted by outcome.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use voxlat_core::segments::VOICE_TO_VOICE;
use voxlat_core::TimelineSnapshot;

/// Bucket bounds in seconds: 10 ms to 10 s, about 2.5× apart. A voice turn's segments run
/// from a few ms (chunking) to seconds (a slow ASR or a cold prefill); below 10 ms the
/// difference does not matter to a listener, above 10 s the turn has failed anyway.
pub const SEGMENT_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// How a turn ended, as the `outcome` label of `voxlat_turns_total`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Outcome {
    /// The reply was spoken.
    Ok,
    /// Nothing to answer: silence, or ASR output filtered as a hallucination.
    NoSpeech,
    /// The user spoke over the reply (barge-in) or the run was stopped mid-turn.
    Interrupted,
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::NoSpeech => "no_speech",
            Outcome::Interrupted => "interrupted",
            Outcome::Error => "error",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SegmentLabels {
    segment: &'static str,
}

impl EncodeLabelValue for Outcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: Outcome,
}

fn segment_histogram() -> Histogram {
    Histogram::new(SEGMENT_BUCKETS.iter().copied())
}

/// `voxlat_turn_segment_seconds{segment}`, `voxlat_turn_voice_to_voice_seconds` and
/// `voxlat_turns_total{outcome}`.
#[derive(Clone, Debug)]
pub struct TurnMetrics {
    segments: Family<SegmentLabels, Histogram, fn() -> Histogram>,
    total: Histogram,
    turns: Family<OutcomeLabels, Counter>,
}

impl TurnMetrics {
    /// Registers the turn metrics in `registry`, which must have no prefix (names are full).
    pub fn register(registry: &mut Registry) -> TurnMetrics {
        let m = TurnMetrics {
            segments: Family::new_with_constructor(segment_histogram as fn() -> Histogram),
            total: segment_histogram(),
            turns: Family::default(),
        };
        registry.register_with_unit(
            "voxlat_turn_segment",
            "Segments of user stopped speaking -> first reply audio, per finished turn \
             (endpointing, asr, llm_ttft, llm_thinking, llm_first_chunk, tts_first_audio, playout, device)",
            Unit::Seconds,
            m.segments.clone(),
        );
        registry.register_with_unit(
            "voxlat_turn_voice_to_voice",
            "User stopped speaking -> first reply audio (the sum of the segments)",
            Unit::Seconds,
            m.total.clone(),
        );
        registry.register(
            "voxlat_turns",
            "Finished turns by outcome (ok, no_speech, interrupted, error)",
            m.turns.clone(),
        );
        // Every series exists from the start, so a rate() over a quiet period reads 0, not
        // nothing, and a dashboard shows the segments before the first turn.
        for o in [
            Outcome::Ok,
            Outcome::NoSpeech,
            Outcome::Interrupted,
            Outcome::Error,
        ] {
            let _ = m.turns.get_or_create(&OutcomeLabels { outcome: o });
        }
        for step in VOICE_TO_VOICE.steps {
            let _ = m.segments.get_or_create(&SegmentLabels {
                segment: step.name.name(),
            });
        }
        m
    }

    /// Counts the turn and, when its breakdown is complete and in order, observes every
    /// segment. A misordered breakdown (a negative segment: a stamping bug) is counted but
    /// not observed, since a negative duration would corrupt the histograms' sums.
    pub fn record_turn(&self, snap: &TimelineSnapshot, outcome: Outcome) {
        self.turns.get_or_create(&OutcomeLabels { outcome }).inc();
        let Ok(b) = VOICE_TO_VOICE.compute(snap) else {
            return;
        };
        if !b.is_ordered() {
            return;
        }
        for (step, seg) in VOICE_TO_VOICE.steps.iter().zip(&b.segments) {
            self.segments
                .get_or_create(&SegmentLabels {
                    segment: step.name.name(),
                })
                .observe(seg.ns as f64 / 1e9);
        }
        self.total.observe(b.total_ns as f64 / 1e9);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlat_core::{EventKind, Nanos, RequestId, Timeline};

    fn encode(r: &Registry) -> String {
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, r).unwrap();
        s
    }

    fn turn(ms: &[u64]) -> TimelineSnapshot {
        let tl = Timeline::new(RequestId::new());
        for (e, &t) in VOICE_TO_VOICE.boundaries().zip(ms) {
            tl.mark_at(e, Nanos(t * 1_000_000));
        }
        tl.snapshot()
    }

    #[test]
    fn a_turn_lands_in_the_right_buckets_and_counters() {
        let mut r = Registry::default();
        let m = TurnMetrics::register(&mut r);
        // speech_end, endpoint (+300), asr_done (+40), first token (+150), answer (+0),
        // first chunk (+120), tts (+80), playout queued (+20), leaves the device (+20), the
        // voice (+5)
        m.record_turn(
            &turn(&[0, 300, 340, 490, 490, 610, 690, 710, 730, 735]),
            Outcome::Ok,
        );
        m.record_turn(&turn(&[0, 300]), Outcome::Error);
        let text = encode(&r);
        assert!(
            text.contains("# TYPE voxlat_turn_segment_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains("voxlat_turns_total{outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("voxlat_turns_total{outcome=\"error\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("voxlat_turns_total{outcome=\"interrupted\"} 0"),
            "{text}"
        );
        // asr took 40 ms: above the 25 ms bound, within the 50 ms one.
        assert!(
            text.contains("voxlat_turn_segment_seconds_bucket{le=\"0.025\",segment=\"asr\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("voxlat_turn_segment_seconds_bucket{le=\"0.05\",segment=\"asr\"} 1"),
            "{text}"
        );
        // Only the complete turn is observed.
        assert!(
            text.contains("voxlat_turn_segment_seconds_count{segment=\"endpointing\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("voxlat_turn_voice_to_voice_seconds_sum 0.735"),
            "{text}"
        );
    }

    #[test]
    fn a_misordered_turn_is_counted_but_not_observed() {
        let mut r = Registry::default();
        let m = TurnMetrics::register(&mut r);
        let tl = Timeline::new(RequestId::new());
        for (e, t) in VOICE_TO_VOICE
            .boundaries()
            .zip([0, 300, 200, 400, 400, 500, 600, 700, 710, 715])
        {
            tl.mark_at(e, Nanos(t * 1_000_000));
        }
        assert!(tl.get(EventKind::AsrDone).is_some());
        m.record_turn(&tl.snapshot(), Outcome::Ok);
        let text = encode(&r);
        assert!(
            text.contains("voxlat_turns_total{outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("voxlat_turn_voice_to_voice_seconds_count 0"),
            "{text}"
        );
    }
}
