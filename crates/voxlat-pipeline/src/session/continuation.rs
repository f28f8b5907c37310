//! The user went on: speech after a commit means the commit came too early. The turn in
//! flight and those waiting behind it give way, and their words carry into the turn that
//! continues them (one user message, never two, never lost).

use super::{Commit, Endpointed, Session};
use crate::record::{TurnOutcome, TurnRecord};
use crate::workers::AsrResult;
use std::time::Duration;
use tokio::sync::oneshot;
use voxlat_asr::engine::Transcript;
use voxlat_core::{clock, EventKind, Nanos};

/// Speech this soon after a commit counts as the user resuming the same turn (the commit
/// came too early): LiveKit's `false_interruption_timeout`, 2 s.
pub const RESUMED_WITHIN_MS: f64 = 2000.0;

/// The words a finished turn leaves for the next: all it was asked with when the user cut it
/// short before any of its reply was audible; none otherwise.
pub(super) fn carried_words(rec: &TurnRecord) -> Option<String> {
    let unheard = rec.outcome == TurnOutcome::Interrupted
        && !rec.events.contains_key(&EventKind::PlayoutStart);
    let words = crate::history::continued(rec.merged_words.as_deref(), &rec.transcript);
    (unheard && !words.trim().is_empty()).then_some(words)
}

impl Session<'_> {
    /// New speech from `at`.
    pub(super) fn user_went_on(&mut self, at: Nanos) {
        let since_commit = self
            .last_commit
            .map(|c| clock::ns_to_ms(at.signed_since(c)))
            .filter(|ms| (0.0..=RESUMED_WITHIN_MS).contains(ms));
        // A held reply not committed yet belongs to this utterance, not the last commit.
        let committed = self.turn.committed();
        if let (Some(ms), Some(t)) = (since_commit, committed) {
            t.resumed_after_ms.get_or_insert(ms);
        }
        // Speaking again before the reply is heard: the user was not done, so the turn in
        // flight gives way, and so do those waiting behind it.
        self.cancel_turn(at);
        for w in self.waiting.iter_mut() {
            w.superseded.get_or_insert(at);
        }
    }
}

/// Words cut short by speech that never became an utterance (a noise, a click, a breath the
/// barge-in gate took for the user): if nothing is said within [`RESUMED_WITHIN_MS`] of the
/// cut, they are answered on their own, as LiveKit resumes after a false interruption.
pub(super) struct AskAgain {
    pub(super) due: tokio::time::Instant,
    speech_start: Nanos,
    speech_end: Nanos,
    cutoff: Option<voxlat_core::cutoff::Verdict>,
}

impl AskAgain {
    /// For the turn `rec` that left words to carry.
    pub(super) fn after(rec: &TurnRecord) -> Option<AskAgain> {
        Some(AskAgain {
            due: tokio::time::Instant::now() + Duration::from_millis(RESUMED_WITHIN_MS as u64),
            speech_start: *rec.events.get(&EventKind::SpeechStart)?,
            speech_end: *rec.events.get(&EventKind::SpeechEnd)?,
            cutoff: rec.cutoff,
        })
    }

    /// A turn with no new audio: the session's carried words are its whole message. Its
    /// `speech_end` is the end of the words it answers, so the wait shows in `endpointing`.
    pub(super) fn endpointed(self) -> Endpointed {
        let now = clock::now();
        let (tx, asr) = oneshot::channel();
        let _ = tx.send(AsrResult {
            transcript: Ok(Transcript::no_new_words()),
            started: now,
            finished: now,
        });
        Endpointed {
            commit: Commit {
                speech_start: self.speech_start,
                speech_end: self.speech_end,
                received: now,
                vad_error_ms: None,
                cutoff: self.cutoff,
                speculative: false,
                retractions: 0,
                busy: Vec::new(),
            },
            asr,
            superseded: None,
        }
    }
}
