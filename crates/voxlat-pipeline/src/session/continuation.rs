//! The user went on: speech after a commit means the commit may have come too early, or the
//! user has something to add.
//!
//! Soon after the commit (within [`RESUMED_WITHIN_MS`]), or at any time over a reply the
//! user can hear, the reply is paused, not dropped: its audio stops (or, not yet audible,
//! stays held) and the session waits for what the user says, for [`RESUMED_WITHIN_MS`] from
//! the interruption (LiveKit's `false_interruption_timeout`). No words (a cough, "mm-hm", a
//! door, a noise the barge-in gate took for speech: [`super::adds`]) and the reply plays on
//! from where it stopped. Words, before any of the reply was audible, mean the commit was
//! early: the reply gives way, and its words carry into the turn that continues them (one
//! user message, never two, never lost). Words over an audible reply are the next turn: the
//! exchange stays in the conversation as it was heard (the user's words, and the reply up to
//! the last sample played), and the new words are the next user message.

use super::adds::{adds, Adds};
use super::conversation::Conversation;
use super::{Commit, Endpointed};
use crate::record::{TurnOutcome, TurnRecord};
use crate::workers::AsrResult;
use std::time::Duration;
use tokio::sync::oneshot;
use voxlat_asr::engine::Transcript;
use voxlat_core::{clock, EventKind, Nanos};

/// Speech this soon after a commit counts as the user resuming the same turn (the commit
/// came too early): LiveKit's `false_interruption_timeout`, 2 s. It is also how long a paused
/// reply waits for an utterance before it plays on.
pub const RESUMED_WITHIN_MS: f64 = 2000.0;

/// The words a finished turn leaves for the next: all it was asked with, when the user cut
/// it short before any of its reply was audible, or went on from it with words while it was
/// paused, or when its own audio could not be transcribed (the words it carried were never
/// asked); none otherwise.
pub(super) fn carried_words(rec: &TurnRecord, merge: bool) -> Option<String> {
    let unheard = match rec.outcome {
        // Not remembered as heard (no whole word of the reply was): the words go on.
        TurnOutcome::Interrupted => merge || !remembered_as_heard(rec),
        // Failed before the LLM: asking the carried words again cannot fail the same way.
        TurnOutcome::Error => !rec.events.contains_key(&EventKind::LlmSent),
        _ => false,
    };
    let words = crate::history::continued(rec.merged_words.as_deref(), &rec.transcript);
    (unheard && !words.trim().is_empty()).then_some(words)
}

/// The turn's words went into the history with the part of its reply the user heard. The one
/// test both ways: words neither remembered nor carried would be lost.
fn remembered_as_heard(rec: &TurnRecord) -> bool {
    rec.interrupted.as_ref().is_some_and(|i| i.heard.is_some())
}

/// The words of a turn that was interrupted after the user heard some of its reply, and did
/// not carry into the next (the exchange stays in the history as heard).
pub(super) fn heard_words(rec: &TurnRecord, merge: bool) -> Option<String> {
    let heard = rec.outcome == TurnOutcome::Interrupted && !merge && remembered_as_heard(rec);
    let words = crate::history::continued(rec.merged_words.as_deref(), &rec.transcript);
    (heard && !words.trim().is_empty()).then_some(words)
}

/// A committed reply paused because the user spoke soon after its commit.
pub(super) struct Paused {
    onset: Nanos,
    /// Only the gate's first sign paused it: no speech start or barge-in since.
    overheard_only: bool,
    /// When it plays on if no utterance has come by then.
    pub(super) due: tokio::time::Instant,
    /// The utterance that decides, endpointed and being transcribed.
    pub(super) deciding: Option<Endpointed>,
}

fn resume_due() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(RESUMED_WITHIN_MS as u64)
}

/// A transcription already received, to be awaited again by whoever takes it next.
pub(super) fn received(
    r: Result<AsrResult, oneshot::error::RecvError>,
) -> oneshot::Receiver<AsrResult> {
    let (tx, rx) = oneshot::channel();
    if let Ok(a) = r {
        let _ = tx.send(a);
    }
    rx
}

/// `e` with its transcription already done: `r` is what the turn that takes it will await.
fn transcribed(mut e: Endpointed, r: Result<AsrResult, oneshot::error::RecvError>) -> Endpointed {
    e.asr = received(r);
    e
}

impl Conversation<'_> {
    /// New speech from `at`; `since_commit` is how soon after the last commit, if within
    /// [`RESUMED_WITHIN_MS`].
    pub(super) fn user_went_on(&mut self, at: Nanos, since_commit: Option<f64>) {
        // A held reply not committed yet belongs to this utterance, not the last commit.
        if let (Some(ms), Some(t)) = (since_commit, self.turn.committed()) {
            t.resumed_after_ms.get_or_insert(ms);
        }
        if self.pause_reply(at, since_commit.is_some()) {
            return;
        }
        // Speaking again before the reply is heard: the user was not done, so the turn in
        // flight gives way, and so do those waiting behind it.
        self.cancel_turn(at);
        for w in self.waiting.iter_mut() {
            w.superseded.get_or_insert(at);
        }
    }

    /// The barge-in gate heard the user over the reply at `onset` (`soon` after the commit).
    pub(super) fn barged_in(&mut self, onset: Nanos, soon: bool) {
        if !self.pause_reply(onset, soon) {
            self.cancel_turn(onset);
        }
    }

    /// The gate's first sign of the user over the reply (`Some`, `soon` after the commit),
    /// or its end without a barge-in (`None`): it pauses a reply soon after its commit, and a
    /// pause nothing else has backed plays on as soon as the sign is gone (unless the user is
    /// `speaking`).
    pub(super) fn overheard(&mut self, onset: Option<Nanos>, soon: bool, speaking: bool) {
        match onset {
            Some(at) if self.paused.is_none() => {
                if self.pause_reply(at, soon) {
                    if let Some(p) = self.paused.as_mut() {
                        p.overheard_only = true;
                    }
                }
            }
            Some(_) => {}
            None => {
                let unbacked = self
                    .paused
                    .as_ref()
                    .is_some_and(|p| p.overheard_only && p.deciding.is_none());
                if unbacked && !speaking {
                    self.resume_paused();
                }
            }
        }
    }

    /// Whether the source may have heard the committed reply before `at`: its audio had
    /// reached the speaker, and the source hears the speaker.
    fn source_heard_reply_before(&mut self, at: Nanos, hears_output: bool) -> bool {
        hears_output && self.reply_audible_at(at)
    }

    /// Pauses the committed reply in flight for speech at `onset` soon after its commit, or
    /// over it while it is audible (or keeps it paused a while longer); false when there is
    /// none to pause.
    fn pause_reply(&mut self, onset: Nanos, soon: bool) -> bool {
        if let Some(p) = self.paused.as_mut() {
            // More speech: what was said since the pause is not the end either.
            p.overheard_only = false;
            p.due = resume_due();
            let said = p.deciding.iter_mut().chain(self.waiting.iter_mut());
            for e in said {
                e.superseded.get_or_insert(onset);
            }
            return true;
        }
        let soon = soon || self.reply_audible_at(onset);
        if !soon || !self.waiting.is_empty() {
            return false;
        }
        let Some(t) = self.turn.committed().filter(|t| !t.is_cancelled()) else {
            return false;
        };
        t.pause(onset);
        self.paused = Some(Paused {
            onset,
            overheard_only: false,
            due: resume_due(),
            deciding: None,
        });
        true
    }

    /// An utterance endpointed: it decides a paused reply, or waits its turn.
    pub(super) fn endpointed(&mut self, e: Endpointed) {
        match self.paused.as_mut() {
            Some(p) if p.deciding.is_none() => p.deciding = Some(e),
            _ => self.waiting.push_back(e),
        }
    }

    /// The deciding utterance's transcription came: words replace the paused reply, none let
    /// it play on (or, when the user spoke on after the sound, leave the next utterance to
    /// decide). A short utterance with words that more speech followed is the user going on.
    /// Returns the compute of a transcription nobody uses, ms.
    pub(super) fn decide(
        &mut self,
        r: Result<AsrResult, oneshot::error::RecvError>,
        hears_output: bool,
    ) -> Option<f64> {
        let mut p = self.paused.take()?;
        let e = p.deciding.take()?;
        // From the sound that paused the reply: live, the endpointer's own start reaches back
        // into its pre-roll, which holds the reply's echo.
        let from = e.commit.speech_start.max(p.onset);
        let speech_ms = clock::ns_to_ms(e.commit.speech_end.signed_since(from));
        let reply_heard = self.source_heard_reply_before(p.onset, hears_output);
        let adds = adds(&r, speech_ms, reply_heard);
        let spoke_on = e.superseded.is_some();
        if matches!(adds, Adds::Unknown) && !spoke_on {
            // The reply answers the words that are known, at once; the utterance takes a
            // turn of its own after it, which reports the failure.
            self.waiting.push_back(transcribed(e, r));
            self.resume_paused();
            return None;
        }
        if !matches!(adds, Adds::Nothing(_)) || matches!(adds, Adds::Nothing(Some(_)) if spoke_on) {
            self.give_way(p.onset);
            self.waiting.push_front(transcribed(e, r));
            return None;
        }
        let wasted = r
            .as_ref()
            .ok()
            .map(|a| clock::ns_to_ms(a.finished.signed_since(a.started)));
        if spoke_on {
            p.deciding = self.waiting.pop_front();
            p.due = resume_due();
            self.paused = Some(p);
            return wasted;
        }
        if let (Adds::Nothing(Some(text)), Some(t)) = (adds, self.turn.committed()) {
            t.passed_over.push(text);
        }
        self.resume_paused();
        wasted
    }

    /// The provisional end's transcription (`r`) of the utterance a paused reply waits on
    /// came. Words (and speech long enough to be more than a backchannel) decide it now, as
    /// the endpoint would: the paused reply gives way, and a held reply to the whole message
    /// is made during the pause instead of after the endpoint. Anything else is left for the
    /// endpoint to decide, as the user may yet say more.
    pub(super) fn decide_early(
        &mut self,
        r: &Result<AsrResult, oneshot::error::RecvError>,
        hears_output: bool,
    ) {
        let end = self.early.decides.take();
        let onset = self
            .paused
            .as_ref()
            .filter(|p| p.deciding.is_none())
            .map(|p| p.onset);
        let speech_ms = match (onset, end) {
            (Some(onset), Some(end)) => clock::ns_to_ms(end.signed_since(onset)),
            _ => 0.0,
        };
        let audible = onset.is_none_or(|at| self.source_heard_reply_before(at, hears_output));
        let words = matches!(adds(r, speech_ms, audible), Adds::Words);
        let Some(onset) = onset.filter(|_| words) else {
            return;
        };
        self.paused = None;
        self.give_way(onset);
        self.early.hold_when_idle = true;
    }

    /// The committed reply gives way to words the user went on with from `onset`: its turn
    /// ends. Not yet audible, its words carry into the one that continues them; audible, the
    /// turn keeps the exchange as heard (`respond`), and the new words are a turn of their own.
    fn give_way(&mut self, onset: Nanos) {
        let heard = self.reply_audible_at(onset);
        if let Some(t) = self.turn.committed() {
            t.merge = !heard;
        }
        self.cancel_turn(onset);
    }

    /// Whether the held reply to a continuation decided early may start: the turn it
    /// continues has ended and left its words to carry. Asking clears the wish.
    pub(super) fn take_hold_when_idle(&mut self) -> bool {
        if !(self.early.hold_when_idle && self.free()) {
            return false;
        }
        self.early.hold_when_idle = false;
        true
    }

    /// Plays the paused reply on (no words came).
    pub(super) fn resume_paused(&mut self) {
        self.paused = None;
        if let Some(t) = self.turn.committed() {
            t.resume();
        }
    }

    /// The turn in flight ended: an utterance that was to decide about it takes its own turn.
    pub(super) fn turn_ended(&mut self) {
        if let Some(e) = self.paused.take().and_then(|p| p.deciding) {
            self.waiting.push_front(e);
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
            due: resume_due(),
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
                key: None,
            },
            asr,
            superseded: None,
        }
    }
}

#[cfg(test)]
#[path = "continuation_tests.rs"]
mod tests;
