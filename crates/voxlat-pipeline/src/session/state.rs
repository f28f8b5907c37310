//! The session's states: its one turn slot and its source. Utterances endpointed while the
//! slot is taken wait in order behind it (`Session::waiting`), never in place of it.

use super::held_progress::HeldProgress;
use super::{Commit, TurnFuture};
use crate::control::TurnControl;
use crate::meter::Spent;
use voxlat_core::Nanos;

/// A turn running: its future, its control, and what the session folds into its record
/// when it ends.
pub(super) struct InFlight<'p> {
    pub fut: TurnFuture<'p>,
    /// Commit, pause, resume and cancel: the turn's one control.
    pub control: TurnControl,
    /// A held reply's speculative transcription: its decode's compute.
    pub asr_spent: Option<Spent>,
    /// The reply's LLM and TTS compute, reported by those stages until they are done with
    /// it: waste if the reply is dropped (a miss, or words that go on in the next turn).
    pub reply_spent: Spent,
    /// The user spoke again this soon after this turn's commit, ms.
    pub resumed_after_ms: Option<f64>,
    /// Cancelled because the user's words went on from it: they carry into the next turn
    /// even if some of its reply was heard.
    pub merge: bool,
    /// What the user said while its reply was paused, too short to go on from it.
    pub passed_over: Vec<String>,
    /// The turn's timeline, which the output stamps as the reply becomes audible.
    pub tl: std::sync::Arc<voxlat_core::Timeline>,
    /// The endpoint it answers: known at launch, or at its commit for a held reply.
    pub commit: Option<Commit>,
    /// Launched held, at a provisional end: a speculative reply.
    pub speculative: bool,
}

impl InFlight<'_> {
    pub fn is_cancelled(&self) -> bool {
        self.control.is_cancelled()
    }

    pub fn pause(&self, onset: Nanos) {
        self.control.pause(onset);
    }

    pub fn resume(&self) {
        self.control.resume();
    }
}

/// The session's one turn slot.
pub(super) enum TurnSlot<'p> {
    /// No turn in flight: the next endpointed utterance starts at once.
    Idle,
    /// A speculative reply started at a provisional end, quiet until the endpoint commits it.
    Held(InFlight<'p>, HeldProgress),
    /// A committed turn, or a held reply dropped and winding down as a miss.
    Running(InFlight<'p>),
}

impl<'p> TurnSlot<'p> {
    pub fn is_idle(&self) -> bool {
        matches!(self, TurnSlot::Idle)
    }

    pub fn is_held(&self) -> bool {
        matches!(self, TurnSlot::Held(..))
    }

    pub fn in_flight(&mut self) -> Option<&mut InFlight<'p>> {
        match self {
            TurnSlot::Idle => None,
            TurnSlot::Held(t, _) | TurnSlot::Running(t) => Some(t),
        }
    }

    /// A committed turn only: a held reply belongs to the utterance still being spoken.
    pub fn committed(&mut self) -> Option<&mut InFlight<'p>> {
        match self {
            TurnSlot::Running(t) => Some(t),
            _ => None,
        }
    }

    /// Held → running: the reply stands, and this shows its progress so far. The caller
    /// commits its control.
    pub fn commit(&mut self) -> Option<HeldProgress> {
        match std::mem::replace(self, TurnSlot::Idle) {
            TurnSlot::Held(t, u) => {
                *self = TurnSlot::Running(t);
                Some(u)
            }
            other => {
                *self = other;
                None
            }
        }
    }

    /// Cancels the turn in flight (the user spoke at `onset`); a held reply can no longer be
    /// committed, so it ends as a miss.
    pub fn cancel(&mut self, onset: Nanos) {
        drop(self.commit());
        if let Some(t) = self.in_flight() {
            t.control.cancel(onset);
        }
    }

    /// Empties the slot: the turn that was in it, and whether it was still held.
    pub fn take(&mut self) -> Option<(InFlight<'p>, bool)> {
        match std::mem::replace(self, TurnSlot::Idle) {
            TurnSlot::Idle => None,
            TurnSlot::Held(t, _) => Some((t, true)),
            TurnSlot::Running(t) => Some((t, false)),
        }
    }
}

/// Whether the source can still send events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SourceState {
    Open,
    /// It said it ended (the scenario's audio played out).
    Ended,
    /// It went away without saying so.
    Gone,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{Control, Steer};

    fn turn<'p>(held: bool) -> (InFlight<'p>, Steer) {
        let (control, steer) = TurnControl::new(held);
        let t = InFlight {
            fut: Box::pin(std::future::pending()),
            control,
            asr_spent: None,
            reply_spent: crate::meter::meter().1,
            resumed_after_ms: None,
            merge: false,
            passed_over: Vec::new(),
            tl: std::sync::Arc::new(voxlat_core::Timeline::new(voxlat_core::RequestId::new())),
            commit: None,
            speculative: held,
        };
        (t, steer)
    }

    fn held<'p>() -> (TurnSlot<'p>, Steer) {
        let (t, steer) = turn(true);
        let (_, progress) = HeldProgress::new(std::sync::Arc::new(|_| {}));
        (TurnSlot::Held(t, progress), steer)
    }

    #[test]
    fn a_commit_turns_a_held_reply_into_a_running_turn_once() {
        let (mut slot, steer) = held();
        assert!(slot.committed().is_none(), "a held reply is not committed");
        assert!(slot.commit().is_some());
        assert!(matches!(slot, TurnSlot::Running(_)));
        assert!(slot.commit().is_none(), "nothing left to commit");
        assert!(slot.committed().is_some());
        assert_eq!(steer.now(), Control::Held, "the caller commits the control");
    }

    #[test]
    fn cancelling_a_held_reply_drops_it_and_keeps_the_first_onset() {
        let (mut slot, steer) = held();
        slot.cancel(Nanos(5));
        slot.cancel(Nanos(9));
        assert!(!slot.is_held());
        assert!(steer.dropped(), "it can no longer be committed: a miss");
        assert_eq!(steer.cancelled_at(), Some(Nanos(5)));
        let (_, was_held) = slot.take().expect("still winding down");
        assert!(!was_held);
        assert!(slot.is_idle());
    }

    #[test]
    fn an_idle_slot_has_nothing_to_cancel_or_take() {
        let mut slot = TurnSlot::Idle;
        slot.cancel(Nanos(1));
        assert!(slot.commit().is_none());
        assert!(slot.take().is_none());
        let (t, steer) = turn(false);
        let mut slot = TurnSlot::Running(t);
        assert!(slot.commit().is_none(), "a committed turn is not held");
        slot.cancel(Nanos(3));
        assert_eq!(steer.now(), Control::Cancelled { onset: Nanos(3) });
    }
}
