//! A scripted stand-in for llama.cpp, for tests of everything around the engine (HTTP,
//! queueing, cancellation, stop strings, timings) that must be fast and deterministic.

use crate::engine::{Engine, EngineError, FinishReason, JobSpec, Outcome, Sink, Step};
use crate::error::ApiError;
use crate::http::Model;
use crate::request::ChatRequest;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// "Tokenizes" one token per byte of every message, so prompt lengths are easy to control.
pub struct FakeModel {
    pub n_ctx: usize,
    aliases: Vec<String>,
}

impl FakeModel {
    pub fn new(n_ctx: usize) -> FakeModel {
        FakeModel {
            n_ctx,
            aliases: vec!["fake.gguf".into()],
        }
    }
}

impl Model for FakeModel {
    fn id(&self) -> &str {
        "fake-model"
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn prepare(&self, req: &ChatRequest) -> Result<(Vec<i32>, Vec<String>), ApiError> {
        let tokens: Vec<i32> = req
            .messages
            .iter()
            .flat_map(|m| m.content.bytes().map(i32::from))
            .collect();
        if tokens.len() >= self.n_ctx {
            return Err(ApiError::PromptTooLong {
                prompt_tokens: tokens.len(),
                n_ctx: self.n_ctx,
            });
        }
        let mut stops = vec!["<eot>".to_string()];
        stops.extend(req.stop.iter().cloned());
        Ok((tokens, stops))
    }
}

/// Emits `pieces` in order, one per `token_delay`, then ends (as at an end-of-generation
/// token). A prompt containing the bytes of "PANIC" makes it panic, and one containing
/// "FAIL" makes it fail, to test containment.
pub struct FakeEngine {
    pub pieces: Vec<String>,
    pub token_delay: Duration,
    pub prefill_per_token: Duration,
    /// Tokens produced, across requests: a cancelled request must stop adding to it.
    pub produced: Arc<AtomicU64>,
}

impl Engine for FakeEngine {
    fn generate(&mut self, job: &JobSpec, sink: &mut Sink) -> Result<Outcome, EngineError> {
        let panic_marker: Vec<i32> = b"PANIC".iter().map(|b| i32::from(*b)).collect();
        if job.tokens.windows(5).any(|w| w == panic_marker.as_slice()) {
            panic!("fake engine asked to panic");
        }
        let fail_marker: Vec<i32> = b"FAIL".iter().map(|b| i32::from(*b)).collect();
        if job.tokens.windows(4).any(|w| w == fail_marker.as_slice()) {
            return Err(EngineError::new(
                "the scripted step",
                std::io::Error::other("asked to fail"),
            ));
        }
        std::thread::sleep(self.prefill_per_token * job.tokens.len() as u32);
        if sink.cancelled() {
            return Ok(Outcome::Cancelled);
        }
        sink.prefilled(0, job.tokens.len());
        for p in &self.pieces {
            std::thread::sleep(self.token_delay);
            self.produced.fetch_add(1, Ordering::Relaxed);
            match sink.token(p.as_bytes()) {
                Step::Continue => {}
                Step::Finish(r) => return Ok(Outcome::Finished(r)),
                Step::Cancelled => return Ok(Outcome::Cancelled),
            }
        }
        Ok(Outcome::Finished(FinishReason::Stop))
    }

    fn reset(&mut self) {}
}
