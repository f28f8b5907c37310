//! Segments: consecutive spans between boundary events of a timeline.
//!
//! A [`Chain`] is a start event and an ordered list of boundaries. Segment *i* runs from
//! boundary *i−1* to boundary *i*, so the segments telescope: their sum is the total
//! (start → last boundary) exactly, in integer nanoseconds, whatever the values. Nothing
//! here is measured; everything is derived from stamped events.

use crate::event::EventKind;
use crate::timeline::TimelineSnapshot;
use serde::{Deserialize, Serialize};

/// A segment's name, written in tables and results as the snake-case string `name` gives.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Segment {
    // Voice to voice.
    Endpointing,
    Asr,
    LlmTtft,
    LlmThinking,
    LlmFirstChunk,
    TtsFirstAudio,
    Playout,
    Device,
    LeadIn,
    // One LLM request.
    Headers,
    FirstEvent,
    FirstToken,
    Generation,
}

impl Segment {
    pub fn name(self) -> &'static str {
        match self {
            Segment::Endpointing => "endpointing",
            Segment::Asr => "asr",
            Segment::LlmTtft => "llm_ttft",
            Segment::LlmThinking => "llm_thinking",
            Segment::LlmFirstChunk => "llm_first_chunk",
            Segment::TtsFirstAudio => "tts_first_audio",
            Segment::Playout => "playout",
            Segment::Device => "device",
            Segment::LeadIn => "lead_in",
            Segment::Headers => "headers",
            Segment::FirstEvent => "first_event",
            Segment::FirstToken => "first_token",
            Segment::Generation => "generation",
        }
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq<str> for Segment {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<&str> for Segment {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub name: Segment,
    /// The event that ends this segment (and starts the next).
    pub to: EventKind,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    pub name: &'static str,
    pub start: EventKind,
    pub steps: &'static [Step],
}

/// The headline voice-to-voice breakdown: user stopped speaking → first reply audio.
///
/// `llm_thinking` (first token of any kind → first answer token) is zero for models that do
/// not reason, so TTFT and the thinking time are both visible for those that do. `device`
/// (reply queued → its first sample leaves the device: output buffer and device latency) is
/// zero in replay, whose virtual sink has no buffer. `lead_in` (first sample → first voiced
/// sample) is what is left of the voice's leading silence after TTS trimmed it: the breakdown
/// ends where the listener hears a voice, not where the output starts.
pub const VOICE_TO_VOICE: Chain = Chain {
    name: "voice_to_voice",
    start: EventKind::SpeechEnd,
    steps: &[
        Step {
            name: Segment::Endpointing,
            to: EventKind::Endpoint,
        },
        Step {
            name: Segment::Asr,
            to: EventKind::AsrDone,
        },
        Step {
            name: Segment::LlmTtft,
            to: EventKind::LlmFirstToken,
        },
        Step {
            name: Segment::LlmThinking,
            to: EventKind::LlmFirstAnswerToken,
        },
        Step {
            name: Segment::LlmFirstChunk,
            to: EventKind::FirstChunk,
        },
        Step {
            name: Segment::TtsFirstAudio,
            to: EventKind::TtsFirstAudio,
        },
        Step {
            name: Segment::Playout,
            to: EventKind::PlayoutQueued,
        },
        Step {
            name: Segment::Device,
            to: EventKind::PlayoutStart,
        },
        Step {
            name: Segment::LeadIn,
            to: EventKind::FirstVoice,
        },
    ],
};

/// One streamed LLM request, from the request leaving the client to the end of the stream.
pub const LLM_REQUEST: Chain = Chain {
    name: "llm_request",
    start: EventKind::LlmSent,
    steps: &[
        Step {
            name: Segment::Headers,
            to: EventKind::LlmHeaders,
        },
        Step {
            name: Segment::FirstEvent,
            to: EventKind::LlmFirstEvent,
        },
        Step {
            name: Segment::FirstToken,
            to: EventKind::LlmFirstToken,
        },
        Step {
            name: Segment::Generation,
            to: EventKind::LlmDone,
        },
    ],
};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentValue {
    pub name: Segment,
    pub ns: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breakdown {
    pub chain: String,
    pub segments: Vec<SegmentValue>,
    pub total_ns: i64,
}

impl Breakdown {
    /// True when no segment is negative, i.e. the boundary events were stamped in order.
    pub fn is_ordered(&self) -> bool {
        self.segments.iter().all(|s| s.ns >= 0)
    }

    pub fn segment_ns(&self, name: Segment) -> Option<i64> {
        self.segments.iter().find(|s| s.name == name).map(|s| s.ns)
    }

    /// The segment with the largest share of the total (first one wins ties).
    pub fn dominant(&self) -> Option<&SegmentValue> {
        self.segments
            .iter()
            .reduce(|best, s| if s.ns > best.ns { s } else { best })
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BreakdownError {
    #[error("event `{event}` is missing from request {request_id}, so the {chain} breakdown cannot be computed")]
    Missing {
        chain: &'static str,
        event: EventKind,
        request_id: String,
    },
}

impl Chain {
    /// The boundary events, start first.
    pub fn boundaries(&self) -> impl Iterator<Item = EventKind> + '_ {
        std::iter::once(self.start).chain(self.steps.iter().map(|s| s.to))
    }

    pub fn compute(&self, snap: &TimelineSnapshot) -> Result<Breakdown, BreakdownError> {
        let at = |event: EventKind| {
            snap.get(event).ok_or_else(|| BreakdownError::Missing {
                chain: self.name,
                event,
                request_id: snap.request_id.to_string(),
            })
        };
        let start = at(self.start)?;
        let mut prev = start;
        let mut segments = Vec::with_capacity(self.steps.len());
        for step in self.steps {
            let t = at(step.to)?;
            segments.push(SegmentValue {
                name: step.name,
                ns: t.signed_since(prev),
            });
            prev = t;
        }
        Ok(Breakdown {
            chain: self.name.to_string(),
            segments,
            total_ns: prev.signed_since(start),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Nanos;
    use crate::request_id::RequestId;
    use crate::timeline::Timeline;
    use proptest::prelude::*;

    fn snapshot_with(chain: &Chain, stamps: &[u64]) -> TimelineSnapshot {
        let tl = Timeline::new(RequestId::new());
        for (event, &t) in chain.boundaries().zip(stamps) {
            tl.mark_at(event, Nanos(t));
        }
        tl.snapshot()
    }

    #[test]
    fn voice_breakdown_matches_hand_computed_segments() {
        // speech_end, endpoint, asr_done, first_token, first_answer, first_chunk, tts, queued,
        // playout, first voice
        let ms = 1_000_000;
        let snap = snapshot_with(
            &VOICE_TO_VOICE,
            &[
                0,
                300 * ms,
                550 * ms,
                700 * ms,
                700 * ms,
                820 * ms,
                900 * ms,
                920 * ms,
                950 * ms,
                955 * ms,
            ],
        );
        let b = VOICE_TO_VOICE.compute(&snap).unwrap();
        let got: Vec<(&str, i64)> = b
            .segments
            .iter()
            .map(|s| (s.name.name(), s.ns / ms as i64))
            .collect();
        assert_eq!(
            got,
            vec![
                ("endpointing", 300),
                ("asr", 250),
                ("llm_ttft", 150),
                ("llm_thinking", 0),
                ("llm_first_chunk", 120),
                ("tts_first_audio", 80),
                ("playout", 20),
                ("device", 30),
                ("lead_in", 5)
            ]
        );
        assert_eq!(b.total_ns, 955 * ms as i64);
        assert_eq!(b.dominant().unwrap().name, Segment::Endpointing);
        assert!(b.is_ordered());
    }

    #[test]
    fn a_missing_event_is_named() {
        let snap = snapshot_with(&LLM_REQUEST, &[1, 2, 3]);
        let err = LLM_REQUEST.compute(&snap).unwrap_err();
        assert!(matches!(
            err,
            BreakdownError::Missing {
                event: EventKind::LlmFirstToken,
                ..
            }
        ));
        assert!(err.to_string().contains("llm_first_token"));
    }

    #[test]
    fn misordered_events_show_as_negative_segments() {
        let snap = snapshot_with(&LLM_REQUEST, &[10, 30, 20, 40, 50]);
        let b = LLM_REQUEST.compute(&snap).unwrap();
        assert!(!b.is_ordered());
        assert_eq!(b.segment_ns(Segment::FirstEvent), Some(-10));
    }

    /// Results files hold these strings: renaming a variant must not change them.
    #[test]
    fn segment_names_are_the_strings_results_files_hold() {
        for chain in [&VOICE_TO_VOICE, &LLM_REQUEST] {
            for step in chain.steps {
                let json = serde_json::to_string(&step.name).unwrap();
                assert_eq!(json, format!("\"{}\"", step.name.name()));
                let back: Segment = serde_json::from_str(&json).unwrap();
                assert_eq!(back, step.name);
            }
        }
        let names: Vec<&str> = VOICE_TO_VOICE.steps.iter().map(|s| s.name.name()).collect();
        assert_eq!(
            names,
            [
                "endpointing",
                "asr",
                "llm_ttft",
                "llm_thinking",
                "llm_first_chunk",
                "tts_first_audio",
                "playout",
                "device",
                "lead_in"
            ]
        );
    }

    proptest! {
        /// Telescoping: the segments sum to the total exactly, ordered or not.
        #[test]
        fn segments_sum_exactly_to_total(stamps in proptest::collection::vec(0u64..1u64 << 50, 10)) {
            for chain in [&VOICE_TO_VOICE, &LLM_REQUEST] {
                let snap = snapshot_with(chain, &stamps);
                let b = chain.compute(&snap).unwrap();
                let sum: i64 = b.segments.iter().map(|s| s.ns).sum();
                prop_assert_eq!(sum, b.total_ns);
                prop_assert_eq!(b.segments.len(), chain.steps.len());
            }
        }
    }
}
