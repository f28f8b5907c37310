//! Echo cancellation: the microphone with what the speaker played taken out, so the user is
//! heard while the assistant talks.
//!
//! A canceller is a trait, so a second engine can be measured in the same harness. The one
//! voxlat runs is WebRTC's AEC3 as ported to Rust by `sonora` ([`Sonora`]): the field's
//! reference canceller (browsers run it), it builds offline, and it reports the statistics
//! the field judges a canceller by (ERL, ERLE, its delay estimate). The C++ library's Rust
//! bindings need a newer libwebrtc than Debian ships, and speexdsp has no delay estimator.
//!
//! Engines allocate per block, so a canceller runs on a worker thread of its own, never in a
//! device callback. AEC and the high-pass filter are on; noise suppression and gain control
//! are off, so the VAD and Whisper get the levels the microphone heard.

mod measure;
pub mod room;
mod sonora_engine;

pub use measure::{erle_db, ErleWindows};
pub use sonora_engine::Sonora;

/// The canceller's rate: the pipeline's.
pub const RATE: u32 = crate::PIPELINE_RATE;
/// One frame: 10 ms at [`RATE`], what WebRTC's audio processing takes at a time.
pub const FRAME: usize = RATE as usize / 100;

/// Why a canceller refused a frame.
#[derive(Debug, thiserror::Error)]
pub enum AecError {
    #[error("an echo canceller takes frames of {FRAME} samples (10 ms at 16 kHz), not {0}")]
    Frame(usize),
    #[error("the echo canceller failed: {0}")]
    Engine(String),
}

/// What an engine says of itself, when it knows.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EchoStats {
    /// Echo return loss: far end over echo, dB.
    pub erl_db: Option<f64>,
    /// Echo return loss enhancement: echo over what is left of it, dB.
    pub erle_db: Option<f64>,
    /// The engine's estimate of the delay from the far end to its echo, ms.
    pub delay_ms: Option<f64>,
}

/// An echo canceller working in [`FRAME`]s at [`RATE`]: every frame the speaker played goes
/// to [`EchoCanceller::render`], in order and in time with the microphone's frames, which
/// [`EchoCanceller::capture`] cleans.
pub trait EchoCanceller: Send {
    /// The engine's name, for the results.
    fn name(&self) -> &'static str;
    /// A frame of what the speaker played.
    fn render(&mut self, far: &[f32]) -> Result<(), AecError>;
    /// A frame of the microphone, the echo taken out in place.
    fn capture(&mut self, near: &mut [f32]) -> Result<(), AecError>;
    /// The far end's frames reach the speaker this long after [`EchoCanceller::render`]
    /// sees them, and the microphone's reach `capture` this long after they were heard:
    /// a hint from the device timestamps, which the engine refines itself.
    fn set_delay_hint_ms(&mut self, ms: u32);
    fn stats(&self) -> EchoStats;
}
