//! Text to speech for voxlat: Piper voices on ONNX Runtime, phonemized by espeak-ng, fed by a
//! streaming sentence chunker.
//!
//! - [`chunker`] turns LLM deltas into speakable chunks ([`markup`] strips markdown first).
//! - [`espeak`] phonemizes text clause by clause, keeping punctuation; [`phoneme_ids`] turns
//!   the phonemes into a voice's model input, read from its [`config`].

pub mod chunker;
pub mod config;
pub mod error;
pub mod espeak;
pub mod markup;
pub mod phoneme_ids;

pub use error::{SkipReason, TtsError};
