//! What a session is given: its source's events, the clock they are on, how each turn is
//! labelled, and its options.

use crate::error::SourceError;
use std::time::Duration;
use voxlat_core::Nanos;
use voxlat_vad::VadEvent;

/// What a source tells the session.
#[derive(Debug)]
pub enum SourceEvent {
    /// The endpointer's event, and when it reached the session (process clock).
    Vad { ev: VadEvent, received: Nanos },
    /// When the annotated last speech sample entered the pipeline (replay's ground truth, on
    /// the source clock). It belongs to the first endpoint decided at or after it, whether
    /// it comes before or after that endpoint's event.
    Truth(Nanos),
    /// The scenario's truth judged the endpoint decided at `at` (replay; source clock): where
    /// in the audio it committed, against the true end and the labelled pauses. Before or
    /// after that endpoint's event.
    Judged {
        at: Nanos,
        verdict: voxlat_core::cutoff::Verdict,
    },
    /// The user spoke over a reply, from `onset`.
    BargeIn { onset: Nanos },
    /// The first sign of the user over a reply (less evidence than a barge-in), from
    /// `onset`; `None` once that sign has died away without becoming one. Enough to pause a
    /// reply soon after its commit, which is undone if no words follow, never to cancel one.
    Overheard { onset: Option<Nanos> },
    /// The source has no more audio.
    Ended,
    /// The source failed.
    Failed(SourceError),
}

/// The clock a source's times are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceClock {
    /// The process clock: paced replay, the microphone.
    Process,
    /// Audio time: unpaced replay. Mapped onto the process clock at the endpoint decision.
    Audio,
}

/// Who a turn is, for its record.
#[derive(Clone, Debug, Default)]
pub struct TurnMeta {
    pub scenario: String,
    pub turn: String,
    pub repeat: u32,
    pub warmup: bool,
    /// What was said, when known: the turn is then scored (WER).
    pub reference: Option<String>,
    pub expect_keywords: Vec<String>,
    pub speech_end_annotated: bool,
    /// Overrides the pipeline's system prompt.
    pub system_prompt: Option<String>,
}

impl TurnMeta {
    /// The n-th turn of a live session.
    pub fn live(n: u32) -> TurnMeta {
        TurnMeta {
            scenario: "live".into(),
            turn: format!("turn-{n}"),
            ..TurnMeta::default()
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct SessionOptions {
    pub clock: SourceClock,
    /// Give up when no speech started and no turn ran for this long.
    pub idle_timeout: Option<Duration>,
    /// A source that ends without one turn still yields a record (replay: the utterance
    /// failed), rather than nothing.
    pub record_empty_source: bool,
    /// The source hears what the output plays: a microphone in the room of the speaker, with
    /// no echo cancellation. Then Whisper may write the reply's own words for a short noise
    /// over it, so a short utterance over an audible reply adds no words
    /// (`session::adds`). A replayed recording never hears the output.
    pub source_hears_output: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            clock: SourceClock::Process,
            idle_timeout: None,
            record_empty_source: false,
            source_hears_output: true,
        }
    }
}
