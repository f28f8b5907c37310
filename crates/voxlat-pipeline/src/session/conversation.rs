//! Conversation: what the agent does about what the user did. It owns the one turn slot
//! (with a reply paused for the user as one of its states), the utterances waiting behind
//! it, the words carried from a turn cut short, the history, and the warm-up of a cut
//! history. Pausing, resuming and giving way are in [`super::continuation`].

use super::continuation::{AskAgain, Paused};
use super::state::TurnSlot;
use super::warm::Warming;
use super::Endpointed;
use crate::record::Warmed;
use std::collections::VecDeque;
use voxlat_core::{EventKind, Nanos};
use voxlat_llm::Message;

/// Words a finished turn leaves to the next.
#[derive(Default)]
pub(super) struct Words {
    /// The words of a committed turn the user went on from before its reply was audible:
    /// the next turn continues them (one user message, never two, never lost).
    pub carried: Option<String>,
    /// The words of a turn whose reply the user heard part of before going on: they stay in
    /// the history, and the next turn's WER is scored on them and its own words together (a
    /// recording's utterance answered in two parts is still one utterance).
    pub heard_before: Option<String>,
    /// When the carried words are asked again on their own, if no speech follows.
    pub ask_again: Option<AskAgain>,
}

/// The utterance a paused reply waits on, decided at its provisional end.
#[derive(Default)]
pub(super) struct Early {
    /// A paused reply waits on this utterance, and the provisional end's transcription,
    /// when it comes, can decide it before the endpoint does: where that provisional end put
    /// the end of speech (source clock).
    pub decides: Option<Nanos>,
    /// Its words decided it: a held reply answers the whole message as soon as the paused
    /// one has given way.
    pub hold_when_idle: bool,
}

/// The shortened history being evaluated ahead of the next turn, and the last one done.
#[derive(Default)]
pub(super) struct Warmup<'p> {
    pub running: Option<Warming<'p>>,
    pub done: Option<Warmed>,
}

pub(super) struct Conversation<'p> {
    pub turn: TurnSlot<'p>,
    /// Utterances endpointed while a turn was in flight, in order. One followed by more
    /// speech starts superseded: cancelled in ASR, its words carry into the next turn.
    pub waiting: VecDeque<Endpointed>,
    /// The committed reply is paused: the user spoke soon after its commit.
    pub paused: Option<Paused>,
    pub words: Words,
    pub early: Early,
    pub history: Vec<Message>,
    /// The system prompt and history the turn in flight was asked with.
    pub asked_with: Option<(String, Vec<Message>)>,
    pub warmup: Warmup<'p>,
    /// Turns started so far.
    pub started: u32,
}

impl<'p> Conversation<'p> {
    pub fn new() -> Conversation<'p> {
        Conversation {
            turn: TurnSlot::Idle,
            waiting: VecDeque::new(),
            paused: None,
            words: Words::default(),
            early: Early::default(),
            history: Vec::new(),
            asked_with: None,
            warmup: Warmup::default(),
            started: 0,
        }
    }

    /// The next utterance needs the cores: a warm-up still running gives way.
    pub fn stop_warming(&mut self) {
        if let Some(w) = self.warmup.running.take() {
            self.warmup.done = Some(w.abandon());
        }
    }

    pub fn cancel_turn(&mut self, onset: Nanos) {
        self.turn.cancel(onset);
    }

    /// The user resumed: a speculative reply not yet committed is cancelled (its LLM request
    /// dropped, its audio never played) and counted as a miss.
    pub fn drop_uncommitted(&mut self, at: Nanos) {
        if self.turn.is_held() {
            self.turn.cancel(at);
        }
    }

    /// Whether the committed reply was audible by `at`: its first sample had left the output.
    pub fn reply_audible_at(&mut self, at: Nanos) -> bool {
        self.turn
            .committed()
            .and_then(|t| t.tl.get(EventKind::PlayoutStart))
            .is_some_and(|start| start <= at)
    }

    /// Whether a new utterance may start a held reply now: nothing in flight or waiting.
    pub fn free(&self) -> bool {
        self.turn.is_idle() && self.waiting.is_empty()
    }

    /// A paused reply waits for an utterance that has not been endpointed yet.
    pub fn pause_undecided(&self) -> bool {
        self.paused.as_ref().is_some_and(|p| p.deciding.is_none())
    }
}
