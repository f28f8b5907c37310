//! The events of a turn, in the order they happen. Names and meanings follow
//! `docs/latency-model.md` exactly; the serialized names are the ones in that table.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! event_kinds {
    ($($variant:ident => $name:literal: $doc:literal),* $(,)?) => {
        /// One kind of event on a request's timeline. Each kind is stamped at most once per request.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum EventKind {
            $(#[doc = $doc] $variant,)*
        }

        impl EventKind {
            /// Every kind, in pipeline order.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)*];
            pub const COUNT: usize = EventKind::ALL.len();

            /// The name used in results files and tables.
            pub fn name(self) -> &'static str {
                match self { $(EventKind::$variant => $name,)* }
            }

            pub fn from_name(name: &str) -> Option<EventKind> {
                match name { $($name => Some(EventKind::$variant),)* _ => None }
            }

            /// Position in [`EventKind::ALL`], used as a slot index.
            pub fn index(self) -> usize {
                self as usize
            }
        }
    };
}

event_kinds! {
    SpeechStart => "speech_start": "First voiced sample of the utterance entered the pipeline.",
    SpeechEnd => "speech_end": "The user stopped speaking: the last voiced sample entered the pipeline (ground truth in replay, the VAD's retro-dated estimate live).",
    Endpoint => "endpoint": "The endpointer declared the turn over (after its hangover).",
    AsrDone => "asr_done": "Final transcript available.",
    LlmSent => "llm_sent": "HTTP request handed to the connection.",
    LlmHeaders => "llm_headers": "Response status and headers received.",
    LlmFirstEvent => "llm_first_event": "First SSE event received (often a role-only chunk with no text).",
    LlmFirstToken => "llm_first_token": "First delta with non-empty content, reasoning or answer: TTFT ends here.",
    LlmFirstAnswerToken => "llm_first_answer_token": "First answer (non-reasoning) content.",
    FirstChunk => "first_chunk": "The sentence chunker handed the first speakable text to TTS.",
    TtsFirstAudio => "tts_first_audio": "TTS produced the first samples of the first chunk.",
    PlayoutQueued => "playout_queued": "First reply sample written to the output buffer (the device's ring, or the virtual sink).",
    PlayoutStart => "playout_start": "First reply sample leaves the output: the device's own playback timestamp live, the moment it is queued in replay's virtual sink.",
    FirstVoice => "first_voice": "First voiced reply sample leaves the output: playout_start plus the offset of the voice in the first chunk, whose leading silence TTS trimmed to a few ms.",
    LlmDone => "llm_done": "The LLM stream ended.",
    TtsDone => "tts_done": "TTS finished the last chunk.",
    PlayoutDone => "playout_done": "The last reply sample was played.",
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for (i, k) in EventKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
            assert_eq!(EventKind::from_name(k.name()), Some(*k));
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
        }
        assert_eq!(EventKind::from_name("nope"), None);
    }
}
