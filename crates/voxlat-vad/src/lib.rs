//! Voice activity detection and endpointing.
//!
//! A [`VoiceDetector`] classifies fixed-size frames; the [`Endpointer`] turns those decisions
//! into turn events: speech start, a retro-dated speech end, a *provisional* end after a
//! short silence (so downstream stages can start speculatively), its retraction if the user
//! resumes, and the confirmed endpoint after the full hangover.

pub mod annotate;
pub mod detector;
pub mod endpointer;
pub mod energy;
#[cfg(feature = "silero")]
pub mod silero;
pub mod stop_hold;
pub mod turn;

pub use detector::{VoiceDetector, WebRtcDetector};
pub use endpointer::{Endpointer, EndpointerConfig, VadEvent};
pub use stop_hold::StopHold;
pub use turn::{SharedScorer, TurnPolicy, TurnPolicyError, TurnScore, TurnScorer};

/// The rate every detector here works at.
pub const RATE: u32 = 16_000;

#[derive(Debug, thiserror::Error)]
pub enum VadError {
    #[error("VAD mode {0} is not 0-3 (0 = least aggressive, 3 = most)")]
    Mode(u8),
    #[error("frame length {0} ms is not 10, 20 or 30 (what webrtc-vad accepts)")]
    FrameMs(u32),
    #[error("the VAD rejected a frame of {0} samples")]
    Frame(usize),
    #[error("invalid endpointer setting: {0}")]
    Config(String),
    /// Its words are in the message, so it is not chained as a source as well.
    #[error("invalid endpointer setting: {0}")]
    TurnPolicy(TurnPolicyError),
    #[error("turn model {path}: {detail}")]
    TurnModel {
        path: std::path::PathBuf,
        detail: String,
    },
    #[error("Silero VAD model {path}: {detail}")]
    Silero {
        path: std::path::PathBuf,
        detail: String,
    },
    /// The runtime under Silero or Smart Turn, not the model.
    #[cfg(feature = "silero")]
    #[error(transparent)]
    OnnxRuntime(voxlat_onnx::OnnxError),
}

/// Why one run of a model failed; the caller names the model.
#[cfg(feature = "silero")]
#[derive(Debug, thiserror::Error)]
enum InferError {
    #[error(transparent)]
    Ort(#[from] ort::Error),
    #[error("no output")]
    NoOutput,
}

/// A model's session error as a [`VadError`]: a runtime failure as itself, anything else
/// about the model through `model` (which names the model).
#[cfg(feature = "silero")]
fn session_error(e: voxlat_onnx::SessionError, model: impl FnOnce(String) -> VadError) -> VadError {
    match e {
        voxlat_onnx::SessionError::Runtime(r) => VadError::OnnxRuntime(r),
        // The wrapper names the path already.
        voxlat_onnx::SessionError::ModelMissing(_) => model("the file does not exist".into()),
        other => model(other.to_string()),
    }
}
