//! What an endpoint gives the turn that answers it, and an utterance waiting for its turn.

use super::annotations::EndKey;
use crate::record::{BusySpan, TurnRecord};
use crate::workers::AsrResult;
use tokio::sync::oneshot;
use voxlat_core::{EventKind, Nanos, Timeline};

/// What the endpoint tells a turn: everything about the user's utterance.
pub(super) struct Commit {
    pub(super) speech_start: Nanos,
    pub(super) speech_end: Nanos,
    pub(super) received: Nanos,
    pub(super) vad_error_ms: Option<f64>,
    pub(super) cutoff: Option<voxlat_core::cutoff::Verdict>,
    pub(super) speculative: bool,
    pub(super) retractions: u32,
    pub(super) busy: Vec<BusySpan>,
    /// The endpoint as its annotations find it; none for words asked again on their own.
    pub(super) key: Option<EndKey>,
}

impl Commit {
    pub(super) fn apply(self, tl: &Timeline, rec: &mut TurnRecord) {
        tl.mark_at(EventKind::SpeechStart, self.speech_start);
        tl.mark_at(EventKind::SpeechEnd, self.speech_end);
        tl.mark_at(EventKind::Endpoint, self.received);
        rec.speculative_asr = self.speculative;
        rec.retractions = self.retractions;
        rec.vad_speech_end_error_ms = self.vad_error_ms;
        rec.cutoff = self.cutoff;
        rec.busy.splice(0..0, self.busy);
    }
}

/// An utterance the endpointer closed, waiting for its turn.
pub(super) struct Endpointed {
    pub(super) commit: Commit,
    pub(super) asr: oneshot::Receiver<AsrResult>,
    /// The user spoke again (from then) before its turn could start: it was not the end.
    pub(super) superseded: Option<Nanos>,
}
