//! The user went on: speech after a commit means the commit came too early. The turn in
//! flight and those waiting behind it give way, and their words carry into the turn that
//! continues them (one user message, never two, never lost).

use super::Session;
use crate::record::{TurnOutcome, TurnRecord};
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
