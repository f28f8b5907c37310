//! Text to speech for voxlat: Piper voices on ONNX Runtime, phonemized by espeak-ng, fed by a
//! streaming sentence chunker.
//!
//! - [`chunker`] turns LLM deltas into speakable chunks ([`markup`] strips markdown first).
//! - [`espeak`] phonemizes text clause by clause, keeping punctuation; [`phoneme_ids`] turns
//!   the phonemes into a voice's model input, read from its [`config`].
//! - [`piper`] loads a voice on ONNX Runtime ([`runtime`]) and synthesizes text; [`text`]
//!   decides what of a chunk is worth speaking.
//! - [`stream`] synthesizes a turn chunk by chunk and stamps its events on the timeline;
//!   [`lead`] trims the silence before the first chunk's voice.
//! - `locate` (feature `cache`, on by default) finds the default voice and ONNX Runtime in the
//!   models cache.
//!
//! ```no_run
//! use voxlat_tts::piper::{Voice, VoiceOptions};
//! let mut voice = Voice::load(&voxlat_tts::locate::default_voice()?, VoiceOptions::default())?;
//! let speech = voice.synthesize("Hello, world.")?;
//! println!("{} samples at {} Hz", speech.samples.len(), speech.sample_rate);
//! # Ok::<(), voxlat_tts::TtsError>(())
//! ```

pub mod chunker;
pub mod config;
pub mod error;
pub mod espeak;
pub mod lead;
#[cfg(feature = "cache")]
pub mod locate;
pub mod markup;
pub mod phoneme_ids;
pub mod piper;
pub mod runtime;
pub mod stream;
pub mod tail;
pub mod text;

pub use error::{SkipReason, TtsError};
