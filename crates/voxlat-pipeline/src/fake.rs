//! Scripted stand-ins for every stage, for tests: a session runs on them in milliseconds, with
//! no model files and no server. Each fake records what it was asked, so a test can check
//! what the session did, and sleeps where its stage would compute, so speculation and
//! cancellation have time to happen.

use crate::stages::{BoxFuture, Replier, Transcriber};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use voxlat_asr::engine::{AsrError, Scores, Transcript};
use voxlat_core::{clock, EventKind, Timeline};
use voxlat_llm::client::TextDelta;
use voxlat_llm::{ChatRequest, DeltaStamp, LlmError, StreamOutcome};
use voxlat_tts::piper::Speech;
use voxlat_tts::stream::Synthesize;
use voxlat_tts::TtsError;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A scripted transcript that begins with this is words Whisper wrote for what it took to be
/// no speech (a noise): its scores fail Whisper's no-speech rule. Others pass it.
pub const NO_SPEECH: &str = "(no speech) ";

/// Says the scripted transcripts in order (the last one again when they run out), after
/// `compute`, scored as [`NO_SPEECH`] says. `calls` counts transcriptions, speculative ones
/// included; `abandoned` those it gave up midway because nobody awaited them any more.
#[derive(Clone)]
pub struct FakeAsr {
    pub texts: Arc<Mutex<VecDeque<String>>>,
    pub compute: Duration,
    pub calls: Arc<AtomicU32>,
    pub abandoned: Arc<AtomicU32>,
}

impl FakeAsr {
    pub fn new(texts: &[&str], compute: Duration) -> FakeAsr {
        FakeAsr {
            texts: Arc::new(Mutex::new(texts.iter().map(|s| s.to_string()).collect())),
            compute,
            calls: Arc::new(AtomicU32::new(0)),
            abandoned: Arc::new(AtomicU32::new(0)),
        }
    }
}

impl Transcriber for FakeAsr {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Transcript, AsrError> {
        self.transcribe_unless(audio, &|| false)
    }

    /// Computes in 5 ms steps, asking between them, as whisper.cpp asks between decoder steps.
    fn transcribe_unless(
        &mut self,
        audio: &[f32],
        abandoned: &dyn Fn() -> bool,
    ) -> Result<Transcript, AsrError> {
        if audio.is_empty() {
            return Err(AsrError::EmptyAudio);
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        let step = Duration::from_millis(5);
        let mut left = self.compute;
        while !left.is_zero() {
            if abandoned() {
                self.abandoned.fetch_add(1, Ordering::SeqCst);
                return Err(AsrError::Abandoned);
            }
            let now = left.min(step);
            std::thread::sleep(now);
            left -= now;
        }
        let text = {
            let mut t = lock(&self.texts);
            if t.len() > 1 {
                t.pop_front().unwrap_or_default()
            } else {
                t.front().cloned().unwrap_or_default()
            }
        };
        let (text, scores) = match text.strip_prefix(NO_SPEECH) {
            Some(noise) => (noise.to_string(), (0.9, -1.5)),
            None => (text, (0.01, -0.3)),
        };
        let secs = audio.len() as f64 / f64::from(voxlat_audio::PIPELINE_RATE);
        Ok(Transcript {
            scores: Some(Scores {
                no_speech_prob: scores.0,
                avg_logprob: scores.1,
            }),
            raw: text.clone(),
            tokens: text.split_whitespace().count(),
            text,
            rejected: None,
            levels: voxlat_asr::filter::levels(audio),
            compute: self.compute,
            audio: Duration::from_secs_f64(secs),
            real_time_factor: self.compute.as_secs_f64() / secs.max(1e-9),
            fallback: None,
            remote: None,
        })
    }
}

/// A voice that says every chunk as `per_char` of a 220 Hz tone per character, after
/// `compute` and `lead` of digital silence (as Piper starts a clip). `spoken` keeps the
/// chunks it was given.
#[derive(Clone)]
pub struct FakeTts {
    pub rate: u32,
    pub per_char: Duration,
    pub compute: Duration,
    pub lead: Duration,
    pub spoken: Arc<Mutex<Vec<String>>>,
}

impl FakeTts {
    pub fn new(compute: Duration) -> FakeTts {
        FakeTts {
            rate: 16_000,
            per_char: Duration::from_millis(5),
            compute,
            lead: Duration::ZERO,
            spoken: Arc::default(),
        }
    }
}

impl Synthesize for FakeTts {
    fn sample_rate(&self) -> u32 {
        self.rate
    }

    fn synthesize(&mut self, text: &str) -> Result<Speech, TtsError> {
        lock(&self.spoken).push(text.to_string());
        std::thread::sleep(self.compute);
        let n =
            (self.per_char.as_secs_f64() * f64::from(self.rate)) as usize * text.chars().count();
        let step = 2.0 * std::f32::consts::PI * 220.0 / self.rate as f32;
        let silent = (self.lead.as_secs_f64() * f64::from(self.rate)) as usize;
        Ok(Speech {
            samples: std::iter::repeat_n(0.0, silent)
                .chain((0..n).map(|i| 0.3 * (i as f32 * step).sin()))
                .collect(),
            sample_rate: self.rate,
            compute: self.compute,
            sentences: 1,
            unknown_phonemes: Vec::new(),
            first_audio: None,
            remote: None,
        })
    }
}

/// A streaming LLM that answers every request with the scripted tokens: the first after
/// `ttft`, the rest `itl` apart. It stamps the turn's LLM events as the real client does.
/// `requests` keeps what it was sent; `abandoned` counts requests whose caller went away
/// before the stream ended (what a server sees as the client leaving).
#[derive(Clone)]
pub struct FakeLlm {
    pub tokens: Vec<String>,
    pub ttft: Duration,
    pub itl: Duration,
    pub requests: Arc<Mutex<Vec<ChatRequest>>>,
    pub abandoned: Arc<AtomicU32>,
}

impl FakeLlm {
    pub fn new(tokens: &[&str], ttft: Duration, itl: Duration) -> FakeLlm {
        FakeLlm {
            tokens: tokens.iter().map(|s| s.to_string()).collect(),
            ttft,
            itl,
            requests: Arc::default(),
            abandoned: Arc::default(),
        }
    }
}

/// Counts the request as abandoned unless the stream finished.
struct Leaving {
    abandoned: Arc<AtomicU32>,
    finished: bool,
}

impl Drop for Leaving {
    fn drop(&mut self) {
        if !self.finished {
            self.abandoned.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Replier for FakeLlm {
    fn stream_chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        tl: &'a Timeline,
        on_delta: &'a mut (dyn FnMut(TextDelta<'_>) + Send),
    ) -> BoxFuture<'a, (StreamOutcome, Option<LlmError>)> {
        Box::pin(async move {
            lock(&self.requests).push(req.clone());
            let mut leaving = Leaving {
                abandoned: self.abandoned.clone(),
                finished: false,
            };
            let mut out = StreamOutcome {
                status: Some(200),
                ..StreamOutcome::default()
            };
            tl.mark(EventKind::LlmSent);
            tl.mark(EventKind::LlmHeaders);
            for (i, token) in self.tokens.iter().enumerate() {
                tokio::time::sleep(if i == 0 { self.ttft } else { self.itl }).await;
                let t = clock::now();
                if i == 0 {
                    tl.mark_at(EventKind::LlmFirstEvent, t);
                    tl.mark_at(EventKind::LlmFirstToken, t);
                    tl.mark_at(EventKind::LlmFirstAnswerToken, t);
                }
                out.deltas.push(DeltaStamp {
                    t,
                    chars: token.chars().count() as u32,
                    reasoning: false,
                });
                out.text.push_str(token);
                on_delta(TextDelta {
                    t,
                    text: token,
                    reasoning: false,
                });
            }
            out.events = self.tokens.len() as u64;
            out.done_marker = true;
            out.finish_reason = Some("stop".into());
            out.settle_token_count();
            tl.mark(EventKind::LlmDone);
            leaving.finished = true;
            (out, None)
        })
    }
}
