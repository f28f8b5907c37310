//! Text to speech for voxlat: Piper voices on ONNX Runtime, phonemized by espeak-ng, fed by a
//! streaming sentence chunker.
//!
//! - [`chunker`] turns LLM deltas into speakable chunks ([`markup`] strips markdown first).

pub mod chunker;
pub mod markup;
