//! The seams between a session and its stages. The session drives these traits and nothing
//! more concrete, so one state machine runs the product's stages (Whisper, llama.cpp over
//! HTTP, Piper) and the scripted fakes of [`crate::fake`] alike.
//!
//! - [`Transcriber`]: audio → text, blocking, on the ASR worker's thread.
//! - [`voxlat_tts::stream::Synthesize`]: text → audio, blocking, on the TTS worker's thread.
//! - [`Replier`]: a streaming chat completion, async, cancelled by dropping its future.
//! - [`crate::output::Output`]: where a reply's audio goes.

use std::future::Future;
use std::pin::Pin;
use voxlat_asr::engine::{AsrError, Transcript, WhisperEngine};
use voxlat_core::Timeline;
use voxlat_llm::client::TextDelta;
use voxlat_llm::{ChatRequest, LlmClient, LlmError, StreamOutcome};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Speech to text for one utterance (16 kHz mono).
pub trait Transcriber {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Transcript, AsrError>;
}

impl Transcriber for WhisperEngine {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Transcript, AsrError> {
        WhisperEngine::transcribe(self, audio)
    }
}

/// A streaming chat completion. It stamps the LLM events of the turn's timeline
/// (`llm_sent` … `llm_done`) and hands each text delta to `on_delta` as it arrives.
/// Dropping the future abandons the request: a remote server sees the client leave.
pub trait Replier: Send + Sync {
    fn stream_chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        tl: &'a Timeline,
        on_delta: &'a mut (dyn FnMut(TextDelta<'_>) + Send),
    ) -> BoxFuture<'a, (StreamOutcome, Option<LlmError>)>;
}

impl Replier for LlmClient {
    fn stream_chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        tl: &'a Timeline,
        on_delta: &'a mut (dyn FnMut(TextDelta<'_>) + Send),
    ) -> BoxFuture<'a, (StreamOutcome, Option<LlmError>)> {
        Box::pin(LlmClient::stream_chat(self, req, tl, on_delta))
    }
}
