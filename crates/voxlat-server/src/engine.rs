//! The seam between the scheduler and a model runner: the [`Engine`] trait, the [`Sink`] an
//! engine reports through, and the [`Event`]s that reach the HTTP side. The llama.cpp engine
//! ([`crate::llama`]) and the scripted one ([`crate::fake`]) both implement it.

use crate::text::{Scan, StopMatcher, Utf8Joiner};
use crate::timings::{Stamps, Timings};
use serde::Serialize;
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;

/// The cause an engine or its builder reports, kept whole.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A step of generation that failed. Its message already holds the cause's words, so the
/// cause is not chained again (`{:#}` would repeat them).
#[derive(Debug, thiserror::Error)]
#[error("{step} failed: {cause}")]
pub struct EngineError {
    /// What the engine was doing, in its own terms (`llama_decode`, `batch add`).
    pub step: &'static str,
    pub cause: BoxError,
}

impl EngineError {
    pub fn new(step: &'static str, cause: impl Into<BoxError>) -> EngineError {
        EngineError {
            step,
            cause: cause.into(),
        }
    }
}

/// Why a request got no reply from its slot.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("internal error (panic in the engine); the slot was reset")]
    Panicked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 0 means greedy.
    pub temperature: f32,
    pub top_p: f32,
    pub seed: Option<u32>,
}

/// What a slot needs to run one request: the prompt already templated and tokenized.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub tokens: Vec<i32>,
    pub stops: Vec<String>,
    pub max_tokens: u32,
    pub sampling: Sampling,
    pub timings_per_token: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
}

/// What a slot reports back to the HTTP side, in order.
#[derive(Debug)]
pub enum Event {
    Delta {
        text: String,
        timings: Option<Timings>,
    },
    Done {
        finish: FinishReason,
        usage: Usage,
        timings: Timings,
    },
    Failed(Failure),
}

/// How an engine's run ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Finished(FinishReason),
    Cancelled,
}

/// One slot's model runner. It calls the [`Sink`] as it goes; the sink owns stop strings,
/// `max_tokens`, timings and cancellation, so every engine (the real one and test fakes)
/// behaves the same at the edges.
pub trait Engine {
    fn generate(&mut self, job: &JobSpec, sink: &mut Sink) -> Result<Outcome, EngineError>;
    /// Forget any cached state, after a failure left it unknown.
    fn reset(&mut self);
}

/// The engine's view of the request it is serving.
pub struct Sink {
    tx: UnboundedSender<Event>,
    stamps: Stamps,
    joiner: Utf8Joiner,
    matcher: StopMatcher,
    max_tokens: u32,
    per_token: bool,
    cache_n: u64,
    prompt_n: u64,
    predicted_n: u64,
}

/// What the engine does after handing over a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Continue,
    Finish(FinishReason),
    Cancelled,
}

impl Sink {
    pub(crate) fn new(job: &JobSpec, tx: UnboundedSender<Event>, mut stamps: Stamps) -> Sink {
        stamps.started = Some(Instant::now());
        Sink {
            tx,
            stamps,
            joiner: Utf8Joiner::default(),
            matcher: StopMatcher::new(job.stops.clone()),
            max_tokens: job.max_tokens,
            per_token: job.timings_per_token,
            cache_n: 0,
            prompt_n: 0,
            predicted_n: 0,
        }
    }

    /// The client went away: stop spending CPU on it.
    pub fn cancelled(&self) -> bool {
        self.tx.is_closed()
    }

    /// The prompt is evaluated: `cache_n` tokens came from the KV cache, `prompt_n` were run.
    pub fn prefilled(&mut self, cache_n: usize, prompt_n: usize) {
        self.stamps.prefilled = Some(Instant::now());
        self.cache_n = cache_n as u64;
        self.prompt_n = prompt_n as u64;
    }

    /// One sampled token's bytes (not an end-of-generation token).
    pub fn token(&mut self, bytes: &[u8]) -> Step {
        let now = Instant::now();
        self.stamps.first_token.get_or_insert(now);
        self.stamps.last_token = Some(now);
        self.predicted_n += 1;
        let text = self.joiner.push(bytes);
        let (text, stopped) = match self.matcher.push(&text) {
            Scan::Text(t) => (t, false),
            Scan::Stopped(t) => (t, true),
        };
        if !text.is_empty() && !self.send_delta(text) {
            return Step::Cancelled;
        }
        if stopped {
            Step::Finish(FinishReason::Stop)
        } else if self.predicted_n >= u64::from(self.max_tokens) {
            Step::Finish(FinishReason::Length)
        } else if self.cancelled() {
            Step::Cancelled
        } else {
            Step::Continue
        }
    }

    fn send_delta(&mut self, text: String) -> bool {
        let timings = self.per_token.then(|| self.timings());
        self.tx.send(Event::Delta { text, timings }).is_ok()
    }

    pub(crate) fn timings(&self) -> Timings {
        self.stamps.timings(
            self.cache_n,
            self.prompt_n,
            self.predicted_n,
            Instant::now(),
        )
    }

    pub(crate) fn done(mut self, finish: FinishReason) {
        // Text held back as a possible stop string was not one after all (the reply ended
        // another way), and an unfinished character is flushed as a replacement character.
        let tail = self.joiner.finish();
        let rest = match self.matcher.push(&tail) {
            Scan::Text(t) => t + &self.matcher.finish(),
            Scan::Stopped(t) => t,
        };
        if !rest.is_empty() {
            self.send_delta(rest);
        }
        let usage = Usage {
            prompt_tokens: self.cache_n + self.prompt_n,
            completion_tokens: self.predicted_n,
            cached_tokens: self.cache_n,
        };
        let timings = self.timings();
        let _ = self.tx.send(Event::Done {
            finish,
            usage,
            timings,
        });
    }

    pub(crate) fn fail(self, why: Failure) {
        let _ = self.tx.send(Event::Failed(why));
    }
}
