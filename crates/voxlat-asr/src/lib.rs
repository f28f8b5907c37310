//! Speech recognition for voxlat.
//!
//! - [`convert`] turns faster-whisper's CTranslate2 checkpoint into the ggml file whisper.cpp
//!   loads. It is pure Rust and always available.
//! - `engine` (feature `engine`, on by default) runs whisper.cpp through whisper-rs with the
//!   settings that matter for short utterances.
//! - [`filter`] keeps Whisper's hallucinations on quiet audio from becoming turns.
//! - [`guard`] catches a decode that ran away into a loop, so the engine can decode again.

pub mod convert;
#[cfg(feature = "engine")]
pub mod engine;
pub mod filter;
pub mod guard;
pub mod repeat;
