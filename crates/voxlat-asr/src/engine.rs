//! whisper.cpp (through whisper-rs) tuned for short utterances.
//!
//! The model is loaded once and one decoding state is reused, so per-utterance cost is only
//! the encoder and decoder passes. whisper.cpp's defaults encode a full 30 s window even for a
//! 3 s utterance, which dominated latency (docs/models.md), so the first decode encodes just the audio (see
//! [`audio_ctx_for`]) with greedy decoding and no temperature fallback.
//!
//! The decode predicts timestamps even though voxlat keeps only the text. Without them
//! (`<|notimestamps|>`) tiny.en ran away on short turns cut where an endpointer cuts them,
//! 150 ms after the speech ("Firefox Firefox Firefox …", on 5 of the turn corpus's 31 test
//! turns): nothing told the decoder where the speech ended. With timestamps it closes each
//! segment with the segment's end time and then ends the text, and it did so on all but one of
//! those turns; up to 3 s more silence after the words changed nothing (docs/models.md,
//! "Whisper on trimmed turns", has the counts).
//!
//! Every decode is still checked by [`crate::guard`]; a failed one is decoded again
//! ([`Fallback`]), and the transcript says so and what it cost.

use crate::repeat::filter::{hold_back_repeats, RepeatBan};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use whisper_rs::{
    FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters, WhisperError,
    WhisperState,
};

/// whisper.cpp's input rate; callers resample before calling [`WhisperEngine::transcribe`].
pub const SAMPLE_RATE: u32 = 16_000;
/// Encoder frames per second of audio (20 ms per frame).
const FRAMES_PER_SECOND: f64 = 50.0;
/// Padding below this many frames made the decoder loop on repeated words.
const AUDIO_CTX_PADDING: i32 = 256;
/// The model's full window (30 s).
const MAX_AUDIO_CTX: i32 = 1500;
/// The most text tokens one 30 s window may decode: whisper.cpp's own default (half the
/// decoder's 448-token context). A 30 s read passage needs 120–170, so a tighter cap would cut
/// long turns short; shorter clips get a smaller cap ([`crate::guard::token_cap`]).
const MAX_TOKENS_PER_WINDOW: i32 = 224;
/// Seconds of audio in one encoder window.
const WINDOW_SECONDS: f64 = 30.0;
/// Silence put before every utterance. With timestamps, speech that starts at the first
/// sample lost its first word ("What's the weather …" became "the weather …"): the model opens
/// with the time 0.00 and its first word must come after it.
const LEAD_IN_SAMPLES: usize = SAMPLE_RATE as usize / 5;
/// The temperature of a sampled re-decode (OpenAI Whisper's first fallback step is 0.2).
const FALLBACK_TEMPERATURE: f32 = 0.2;

/// How a decode that the guard rejected is tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fallback {
    /// Never: keep the first decode, cut at its loop.
    Off,
    /// Encode the model's whole 30 s window, as it was trained, and decode greedily again.
    FullWindow,
    /// Twice the fitted window first (a fraction of the full window's encoder cost), then the
    /// whole window if that still runs away. On the looping bundled clips the first retry
    /// already recovers, at about a third of the full window's cost.
    #[default]
    WiderWindow,
    /// Same window, sampled at a temperature of 0.2 (then 0.4) instead of greedily.
    Temperature,
    /// Not a choice but a report: the part of a turn after a pause ran away, and its caller
    /// decoded the whole turn instead (`voxlat-pipeline`'s `asr_prefix`).
    WholeTurn,
}

impl Fallback {
    pub fn name(self) -> &'static str {
        match self {
            Fallback::Off => "off",
            Fallback::FullWindow => "full-window",
            Fallback::WiderWindow => "wider-window",
            Fallback::Temperature => "temperature",
            Fallback::WholeTurn => "whole-turn",
        }
    }

    pub fn parse(s: &str) -> Option<Fallback> {
        [
            Fallback::Off,
            Fallback::FullWindow,
            Fallback::WiderWindow,
            Fallback::Temperature,
        ]
        .into_iter()
        .find(|f| f.name() == s)
    }

    /// `(audio_ctx, temperature)` of each retry after a first decode at `fit` frames. A retry
    /// that would repeat the first decode or an earlier retry is left out: greedy decoding of
    /// the same window gives the same text. On turns of 9.9 s and more, twice the fitted
    /// window is already the whole window, and on turns near 30 s the fitted window is.
    pub fn retry_plan(self, fit: i32) -> Vec<(i32, f32)> {
        let mut plan: Vec<(i32, f32)> = Vec::new();
        for &(ctx, temperature) in self.retries() {
            let audio_ctx = match ctx {
                Ctx::Fit => fit,
                Ctx::Double => (2 * fit).min(MAX_AUDIO_CTX),
                Ctx::Full => MAX_AUDIO_CTX,
            };
            let step = (audio_ctx, temperature);
            // A sampled retry (temperature above 0) differs each time, so it always runs.
            let repeats = temperature == 0.0 && (step == (fit, 0.0) || plan.contains(&step));
            if !repeats {
                plan.push(step);
            }
        }
        plan
    }

    fn retries(self) -> &'static [(Ctx, f32)] {
        match self {
            Fallback::Off | Fallback::WholeTurn => &[],
            Fallback::FullWindow => &[(Ctx::Full, 0.0)],
            Fallback::WiderWindow => &[(Ctx::Double, 0.0), (Ctx::Full, 0.0)],
            Fallback::Temperature => &[
                (Ctx::Fit, FALLBACK_TEMPERATURE),
                (Ctx::Fit, 2.0 * FALLBACK_TEMPERATURE),
            ],
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Ctx {
    /// Just the audio plus padding.
    Fit,
    /// Twice that, at most the whole window.
    Double,
    /// The model's whole window.
    Full,
}

/// A first decode that the guard rejected, and what the retries did about it.
#[derive(Clone, Debug, PartialEq)]
pub struct FallbackReport {
    /// What was wrong with the first decode.
    pub reason: String,
    /// The strategy used.
    pub strategy: Fallback,
    /// Decodes after the first.
    pub retries: u32,
    /// Whether a retry passed the guard (else the least bad output was cut at its loop).
    pub recovered: bool,
    /// The first decode's compute; `Transcript::compute` minus this is what the fallback cost.
    pub first_compute: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum AsrError {
    #[error("Whisper model {path} does not exist")]
    ModelMissing { path: PathBuf },
    #[error("cannot load Whisper model {path} (is it a ggml Whisper file, whole?): {source}")]
    Load {
        path: PathBuf,
        #[source]
        source: WhisperError,
    },
    #[error("no audio samples to transcribe")]
    EmptyAudio,
    #[error("sample {index} is not a finite number (NaN or infinity): the audio is corrupt")]
    NotFinite { index: usize },
    #[error("whisper.cpp failed: {0}")]
    Inference(#[source] WhisperError),
    /// The caller gave up on the transcription while Whisper ran (a speculative one whose
    /// turn went on), and the decode stopped early.
    #[error("the transcription was abandoned while Whisper ran")]
    Abandoned,
    /// A remote transcription server failed; the error says how, with the fix.
    #[error("remote ASR: {0}")]
    Remote(#[source] Box<dyn std::error::Error + Send + Sync>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// What was said; empty when the output was rejected.
    pub text: String,
    /// Whisper's output verbatim, before filtering.
    pub raw: String,
    /// Why the output was dropped (a hallucination on quiet audio, no words at all).
    pub rejected: Option<String>,
    pub levels: crate::filter::Levels,
    /// Wall time of the whisper.cpp call (encoder + decoder).
    pub compute: Duration,
    pub audio: Duration,
    /// compute / audio: below 1 is faster than real time.
    pub real_time_factor: f64,
    /// Text tokens of the kept decode.
    pub tokens: usize,
    /// Whisper's own belief that the kept decode heard speech; `None` when no segment came
    /// back, or another engine transcribed.
    pub scores: Option<Scores>,
    /// Set when the first decode ran away and was decoded again.
    pub fallback: Option<FallbackReport>,
    /// The call, when a remote server transcribed.
    pub remote: Option<voxlat_core::remote::RemoteCall>,
}

/// In voxlat-core, so that a remote transcriber's scores are the same type.
pub use voxlat_core::whisper_scores::Scores;

impl Transcript {
    /// No audio was decoded because none brought new words: a turn that answers words heard
    /// before (the user went quiet after interrupting an early commit).
    pub fn no_new_words() -> Transcript {
        Transcript {
            text: String::new(),
            raw: String::new(),
            rejected: Some("no new words".into()),
            levels: crate::filter::levels(&[]),
            compute: Duration::ZERO,
            audio: Duration::ZERO,
            real_time_factor: 0.0,
            tokens: 0,
            scores: None,
            fallback: None,
            remote: None,
        }
    }

    /// Compute spent on decodes after the first (zero when the first was kept).
    pub fn fallback_compute(&self) -> Duration {
        self.fallback
            .as_ref()
            .map(|f| self.compute.saturating_sub(f.first_compute))
            .unwrap_or_default()
    }
}

/// One decode's output.
struct Decode {
    text: String,
    /// Text tokens.
    tokens: usize,
    /// Every token the decoder produced, timestamps included: what whisper.cpp's
    /// `max_tokens` counts, so what the guard's cap is checked against.
    steps: usize,
    scores: Option<Scores>,
    compute: Duration,
}

pub struct WhisperEngine {
    // Kept alive for the state, which points into it.
    ctx: WhisperContext,
    state: WhisperState,
    threads: i32,
    fallback: Fallback,
    repeats: RepeatBan,
}

/// whisper.cpp's abort callback: `user_data` points at a `&dyn Fn() -> bool` (see
/// [`WhisperEngine::decode`]).
unsafe extern "C" fn ask_abandoned(user_data: *mut std::ffi::c_void) -> bool {
    // SAFETY: set by `decode` to a reference that lives through the call that invokes this.
    let abandoned = unsafe { &*(user_data as *const &dyn Fn() -> bool) };
    abandoned()
}

/// `audio_ctx` for an utterance of `seconds`: just enough encoder frames, plus the padding that
/// keeps the decoder stable, never more than the model's window.
pub fn audio_ctx_for(seconds: f64) -> i32 {
    let frames = (seconds.max(0.0) * FRAMES_PER_SECOND).ceil();
    // Clamp before the cast: a huge duration must not wrap.
    let frames = frames.min(MAX_AUDIO_CTX as f64) as i32;
    (frames + AUDIO_CTX_PADDING).min(MAX_AUDIO_CTX)
}

/// The guard's token cap for a whole decode of `seconds`: whisper.cpp decodes audio longer than
/// one window a window at a time, each up to [`MAX_TOKENS_PER_WINDOW`].
pub fn token_cap_for(seconds: f64) -> i32 {
    let windows = (seconds.max(0.0) / WINDOW_SECONDS).ceil().clamp(1.0, 1e6) as i32;
    crate::guard::token_cap(seconds, MAX_TOKENS_PER_WINDOW.saturating_mul(windows))
}

impl WhisperEngine {
    /// Loads a ggml Whisper model. `threads` is explicit because ggml's spinning thread pool
    /// collapses when stages oversubscribe the cores (see docs/models.md, threads).
    pub fn load(model: &Path, threads: usize) -> Result<Self, AsrError> {
        if !model.is_file() {
            return Err(AsrError::ModelMissing {
                path: model.to_path_buf(),
            });
        }
        // Route whisper.cpp's and ggml's own logging to `tracing` instead of stderr.
        whisper_rs::install_logging_hooks();
        let load_err = |source| AsrError::Load {
            path: model.to_path_buf(),
            source,
        };
        let ctx = WhisperContext::new_with_params(model, WhisperContextParameters::default())
            .map_err(load_err)?;
        let state = ctx.create_state().map_err(load_err)?;
        let repeats = RepeatBan::new(&ctx);
        Ok(Self {
            ctx,
            state,
            repeats,
            threads: i32::try_from(threads.max(1)).unwrap_or(i32::MAX),
            fallback: Fallback::default(),
        })
    }

    /// How a runaway decode is retried ([`Fallback::WiderWindow`] unless set).
    pub fn set_fallback(&mut self, fallback: Fallback) {
        self.fallback = fallback;
    }

    /// Transcribes 16 kHz mono samples in [-1, 1].
    pub fn transcribe(&mut self, samples: &[f32]) -> Result<Transcript, AsrError> {
        self.transcribe_unless(samples, &|| false)
    }

    /// As [`WhisperEngine::transcribe`], stopping with [`AsrError::Abandoned`] soon after
    /// `abandoned` turns true: whisper.cpp asks after the encoder and after each decoder step,
    /// so a decode nobody awaits gives the cores back at its next step instead of running on.
    pub fn transcribe_unless(
        &mut self,
        samples: &[f32],
        abandoned: &dyn Fn() -> bool,
    ) -> Result<Transcript, AsrError> {
        self.transcribe_with(samples, self.fallback, abandoned)
    }

    /// One decode and the guard's verdict, never a retry: a runaway comes back cut at its
    /// loop, with `fallback` saying why and `recovered` false. For a caller that has a better
    /// retry than the same audio decoded again (the part of a turn after a pause has the whole
    /// turn).
    pub fn transcribe_once_unless(
        &mut self,
        samples: &[f32],
        abandoned: &dyn Fn() -> bool,
    ) -> Result<Transcript, AsrError> {
        self.transcribe_with(samples, Fallback::Off, abandoned)
    }

    fn transcribe_with(
        &mut self,
        samples: &[f32],
        strategy: Fallback,
        abandoned: &dyn Fn() -> bool,
    ) -> Result<Transcript, AsrError> {
        if samples.is_empty() {
            return Err(AsrError::EmptyAudio);
        }
        if let Some(index) = samples.iter().position(|v| !v.is_finite()) {
            return Err(AsrError::NotFinite { index });
        }
        let seconds = samples.len() as f64 / SAMPLE_RATE as f64;
        let mut padded = vec![0.0; LEAD_IN_SAMPLES];
        padded.extend_from_slice(samples);
        let fit = audio_ctx_for(padded.len() as f64 / SAMPLE_RATE as f64);
        let cap = token_cap_for(seconds);
        let first = self.decode(&padded, fit, 0.0, cap, abandoned)?;
        let mut compute = first.compute;
        let mut fallback = None;
        let mut kept = first;
        if let Some(failure) = crate::guard::check(&kept.text, kept.steps, cap as usize, seconds) {
            let first_compute = kept.compute;
            let mut retries = 0;
            let mut recovered = false;
            for (audio_ctx, temperature) in strategy.retry_plan(fit) {
                let retry = self.decode(&padded, audio_ctx, temperature, cap, abandoned)?;
                retries += 1;
                compute += retry.compute;
                let passed =
                    crate::guard::check(&retry.text, retry.steps, cap as usize, seconds).is_none();
                // A failed retry still replaces a longer failed decode: shorter is less wrong.
                if passed || retry.text.len() < kept.text.len() {
                    kept = retry;
                }
                if passed {
                    recovered = true;
                    break;
                }
            }
            if !recovered {
                kept.text = crate::guard::cut_loop(&kept.text);
            }
            tracing::debug!(%failure, retries, recovered, "Whisper decode ran away");
            fallback = Some(FallbackReport {
                reason: failure.to_string(),
                strategy,
                retries,
                recovered,
                first_compute,
            });
        }
        let text = kept.text;
        let audio = Duration::from_secs_f64(seconds);
        let levels = crate::filter::levels(samples);
        let raw = text.trim().to_string();
        let (text, rejected) = match crate::filter::filter(&raw, levels) {
            Ok(t) => (t, None),
            Err(why) => (String::new(), Some(why.to_string())),
        };
        Ok(Transcript {
            text,
            raw,
            rejected,
            levels,
            compute,
            audio,
            real_time_factor: compute.as_secs_f64() / seconds,
            tokens: kept.tokens,
            scores: kept.scores,
            fallback,
            remote: None,
        })
    }

    /// One whisper.cpp decode, with whisper.cpp's own temperature fallback off: the guard
    /// decides about retries, so a clean decode is never decoded twice.
    fn decode(
        &mut self,
        samples: &[f32],
        audio_ctx: i32,
        temperature: f32,
        max_tokens: i32,
        abandoned: &dyn Fn() -> bool,
    ) -> Result<Decode, AsrError> {
        let mut params = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
        params.set_n_threads(self.threads);
        params.set_language(Some("en"));
        // With a reused state, the previous transcript would otherwise become the prompt and
        // cause hallucinated continuations.
        params.set_no_context(true);
        // With timestamps, the model leaves words near the end of a full 30 s window for the
        // window after (the last segment opens with its time and ends the window): a single
        // segment would lose them. whisper.cpp then decodes on from that time.
        params.set_single_segment(false);
        // Timestamps keep short turns from running away (see the module's comment).
        params.set_no_timestamps(false);
        params.set_temperature(temperature);
        params.set_temperature_inc(0.0);
        // whisper.cpp applies the cap to each window's segment.
        params.set_max_tokens(max_tokens.min(MAX_TOKENS_PER_WINDOW));
        params.set_audio_ctx(audio_ctx);
        params.set_print_progress(false);
        params.set_print_realtime(false);
        params.set_print_special(false);
        params.set_print_timestamps(false);

        // The callback gets a pointer to `abandoned`, which outlives the call: `full` returns
        // before this frame does, and whisper.cpp keeps no copy of the pointer.
        let abandoned_ref: &&dyn Fn() -> bool = &abandoned;
        // SAFETY: `ask_abandoned` only reads through the pointer given here, which stays valid
        // for the whole `full` call (see above); the closure is `Fn`, so a shared call is sound.
        unsafe {
            params.set_abort_callback(Some(ask_abandoned));
            params.set_abort_callback_user_data(
                abandoned_ref as *const &dyn Fn() -> bool as *mut std::ffi::c_void,
            );
            // SAFETY: `hold_back_repeats` only reads the `RepeatBan`, which `self` owns and
            // nothing changes while `full` runs.
            params.set_filter_logits_callback(Some(hold_back_repeats));
            params.set_filter_logits_callback_user_data(
                &self.repeats as *const RepeatBan as *mut std::ffi::c_void,
            );
        }
        let start = Instant::now();
        let ran = self.state.full(params, samples);
        if abandoned() {
            return Err(AsrError::Abandoned);
        }
        ran.map_err(AsrError::Inference)?;
        let compute = start.elapsed();

        let eot = self.ctx.token_eot();
        let mut text = String::new();
        let timestamp_0 = self.ctx.token_beg();
        let mut tokens = 0;
        let mut steps = 0;
        let mut no_speech_prob = None;
        let mut logprob_sum = 0.0;
        for segment in self.state.as_iter() {
            let piece = segment.to_str_lossy().map_err(AsrError::Inference)?;
            text.push_str(&piece);
            no_speech_prob.get_or_insert(segment.no_speech_probability());
            // Text tokens have ids below end-of-text, timestamps from `token_beg` up; the
            // special tokens between them are the prompt's, not the decoder's output.
            for t in (0..segment.n_tokens()).filter_map(|i| segment.get_token(i)) {
                let id = t.token_id();
                if id < eot {
                    tokens += 1;
                    logprob_sum += f64::from(t.token_data().plog);
                }
                steps += usize::from(id < eot || id >= timestamp_0);
            }
        }
        let scores = no_speech_prob.map(|no_speech_prob| Scores {
            no_speech_prob,
            avg_logprob: (logprob_sum / tokens.max(1) as f64) as f32,
        });
        Ok(Decode {
            text,
            tokens,
            steps,
            scores,
            compute,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_ctx_pads_and_caps() {
        assert_eq!(audio_ctx_for(0.0), 256);
        assert_eq!(audio_ctx_for(3.1), 155 + 256);
        assert_eq!(audio_ctx_for(11.0), 550 + 256);
        assert_eq!(audio_ctx_for(29.0), 1500);
        assert_eq!(audio_ctx_for(1e12), 1500);
        assert_eq!(audio_ctx_for(-1.0), 256);
    }

    #[test]
    fn a_long_turn_may_decode_as_many_tokens_as_it_needs() {
        // 30 s of read speech is 120–170 text tokens; the old cap of 96 cut it short.
        assert!(token_cap_for(30.0) >= 200);
        assert_eq!(token_cap_for(30.0), MAX_TOKENS_PER_WINDOW);
        // A minute is two windows, each with its own cap.
        assert!(token_cap_for(60.0) > MAX_TOKENS_PER_WINDOW);
        assert_eq!(token_cap_for(2.0), crate::guard::token_cap(2.0, 224));
    }

    #[test]
    fn no_retry_repeats_an_identical_decode() {
        let plan = |seconds: f64, f: Fallback| f.retry_plan(audio_ctx_for(seconds));
        // A short turn: twice the window, then the whole window.
        assert_eq!(
            plan(3.0, Fallback::WiderWindow),
            vec![(2 * audio_ctx_for(3.0), 0.0), (MAX_AUDIO_CTX, 0.0)]
        );
        // From 9.9 s, twice the window is the whole window: one retry, not the same one twice.
        assert_eq!(plan(9.9, Fallback::WiderWindow), vec![(MAX_AUDIO_CTX, 0.0)]);
        assert_eq!(
            plan(15.0, Fallback::WiderWindow),
            vec![(MAX_AUDIO_CTX, 0.0)]
        );
        // Near 30 s the first decode already had the whole window: a greedy retry would only
        // say the same again.
        assert!(plan(29.5, Fallback::WiderWindow).is_empty());
        assert!(plan(29.5, Fallback::FullWindow).is_empty());
        // Sampled retries differ each time, so they stay.
        assert_eq!(plan(29.5, Fallback::Temperature).len(), 2);
        assert!(plan(3.0, Fallback::Off).is_empty());
    }

    #[test]
    fn a_missing_model_is_named_as_a_fact() {
        let err = WhisperEngine::load(Path::new("/nonexistent/ggml.bin"), 1)
            .err()
            .unwrap();
        assert!(matches!(err, AsrError::ModelMissing { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/ggml.bin"), "{msg}");
        assert!(
            !msg.contains("voxlat "),
            "a library gives no CLI advice: {msg}"
        );
    }
}
