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
use std::time::Duration;
use voxlat_asr::engine::{AsrError, Transcript, WhisperEngine};
use voxlat_core::Timeline;
use voxlat_llm::client::TextDelta;
use voxlat_llm::{ChatRequest, LlmClient, LlmError, StreamOutcome};
use voxlat_speech_api::{AsrClient, TtsClient};
use voxlat_tts::error::TtsError;
use voxlat_tts::piper::Speech;
use voxlat_tts::stream::Synthesize;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Speech to text for one utterance (16 kHz mono).
pub trait Transcriber {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Transcript, AsrError>;

    /// As `transcribe`, giving up once `abandoned` says nobody awaits the result any more;
    /// a transcriber that cannot stop midway finishes.
    fn transcribe_unless(
        &mut self,
        audio: &[f32],
        abandoned: &dyn Fn() -> bool,
    ) -> Result<Transcript, AsrError> {
        let _ = abandoned;
        self.transcribe(audio)
    }

    /// As `transcribe_unless`, without retrying a runaway decode (it comes back with its
    /// `fallback` report): the caller has a better retry. One that never runs away needs no
    /// other.
    fn transcribe_once_unless(
        &mut self,
        audio: &[f32],
        abandoned: &dyn Fn() -> bool,
    ) -> Result<Transcript, AsrError> {
        self.transcribe_unless(audio, abandoned)
    }
}

impl Transcriber for WhisperEngine {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Transcript, AsrError> {
        WhisperEngine::transcribe(self, audio)
    }

    fn transcribe_unless(
        &mut self,
        audio: &[f32],
        abandoned: &dyn Fn() -> bool,
    ) -> Result<Transcript, AsrError> {
        WhisperEngine::transcribe_unless(self, audio, abandoned)
    }

    fn transcribe_once_unless(
        &mut self,
        audio: &[f32],
        abandoned: &dyn Fn() -> bool,
    ) -> Result<Transcript, AsrError> {
        WhisperEngine::transcribe_once_unless(self, audio, abandoned)
    }
}

/// A transcription server. Its call goes in the transcript; the server's compute, when it
/// reports one, stands for Whisper's (else the whole wait does). The ASR job may be
/// speculative and belong to no turn yet, so each call has its own request ID.
impl Transcriber for AsrClient {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Transcript, AsrError> {
        let id = voxlat_core::RequestId::new();
        let got = AsrClient::transcribe(self, audio, id.as_str())
            .map_err(|e| AsrError::Remote(Box::new(e)))?;
        let secs = audio.len() as f64 / f64::from(voxlat_audio::PIPELINE_RATE);
        let wait_ms = got.call.wait_ms().unwrap_or_default();
        let compute =
            Duration::from_secs_f64(got.call.server_compute_ms.unwrap_or(wait_ms).max(0.0) / 1e3);
        Ok(Transcript {
            raw: got.text.clone(),
            rejected: got
                .text
                .is_empty()
                .then(|| "the server heard no words".to_string()),
            tokens: got.text.split_whitespace().count(),
            text: got.text,
            levels: voxlat_asr::filter::levels(audio),
            compute,
            audio: Duration::from_secs_f64(secs),
            real_time_factor: compute.as_secs_f64() / secs.max(1e-9),
            scores: got.scores,
            fallback: None,
            remote: Some(got.call),
        })
    }
}

/// A speech server as the TTS stage's voice. Its audio is resampled to the rate the stage
/// was opened at, so the output never changes rate between chunks.
pub struct RemoteVoice {
    client: TtsClient,
    rate: u32,
}

impl RemoteVoice {
    /// `rate`: the output rate; the PCM rate the client expects is the natural choice.
    pub fn new(client: TtsClient) -> RemoteVoice {
        let rate = client.options().pcm_rate;
        RemoteVoice { client, rate }
    }
}

impl Synthesize for RemoteVoice {
    fn sample_rate(&self) -> u32 {
        self.rate
    }

    fn synthesize(&mut self, text: &str) -> Result<Speech, TtsError> {
        self.synthesize_for(text, &voxlat_core::RequestId::new())
    }

    fn synthesize_for(
        &mut self,
        text: &str,
        request: &voxlat_core::RequestId,
    ) -> Result<Speech, TtsError> {
        // The same emoji and punctuation rules as Piper's, so a chunk is skipped, not sent.
        let speak = voxlat_tts::text::speakable(text).map_err(|reason| TtsError::NothingToSay {
            text: text.to_string(),
            reason,
        })?;
        let got = self
            .client
            .speak(&speak, request.as_str())
            .map_err(|e| TtsError::Remote(Box::new(e)))?;
        let samples = if got.sample_rate == self.rate {
            got.samples
        } else {
            voxlat_audio::resample::resample(&got.samples, got.sample_rate, self.rate)
                .map_err(|e| TtsError::Remote(Box::new(e)))?
        };
        let compute =
            Duration::from_secs_f64(got.call.done.0.saturating_sub(got.call.sent.0) as f64 / 1e9);
        Ok(Speech {
            samples,
            sample_rate: self.rate,
            compute,
            sentences: 1,
            unknown_phonemes: Vec::new(),
            first_audio: got.call.first_byte,
            remote: Some(got.call),
        })
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
