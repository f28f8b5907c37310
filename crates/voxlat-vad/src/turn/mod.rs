//! End-of-turn models: is the user done, or only pausing?
//!
//! A VAD hears silence, not meaning, so a rule on silence alone must wait long enough for
//! every mid-sentence pause, and every turn pays for that wait. A turn model scores the
//! turn's audio (intonation, a finished phrase) after a short silence, so the endpointer can
//! commit early when it is confident and hold longer when it is not ([`policy`]).

pub mod features;
pub mod policy;
#[cfg(feature = "silero")]
pub mod smart_turn;

use crate::VadError;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use policy::{Decision, TurnPolicy, TurnPolicyError};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TurnScore {
    /// The probability that the turn is complete.
    pub probability: f32,
    /// How long scoring took (the endpoint decision is that much later than the frame).
    pub took: Duration,
}

/// Scores a turn's audio so far (16 kHz, from speech start through the current silence).
pub trait TurnScorer: Send {
    fn name(&self) -> &'static str;
    fn score(&mut self, audio: &[f32]) -> Result<TurnScore, VadError>;
}

/// One loaded model, shared by the endpointers a process makes (one per replayed turn):
/// loading it costs far more than a score.
pub type SharedScorer = Arc<Mutex<dyn TurnScorer>>;

/// A scripted scorer for tests: the probability is a function of the audio.
pub struct ScriptedScorer<F: FnMut(&[f32]) -> f32 + Send>(pub F);

impl<F: FnMut(&[f32]) -> f32 + Send> TurnScorer for ScriptedScorer<F> {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn score(&mut self, audio: &[f32]) -> Result<TurnScore, VadError> {
        Ok(TurnScore {
            probability: (self.0)(audio),
            took: Duration::ZERO,
        })
    }
}
