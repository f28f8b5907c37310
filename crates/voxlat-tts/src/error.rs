//! Errors of the TTS stage. Each names the input at fault and what fixes it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TtsError {
    #[error("Piper voice file {path} does not exist")]
    ModelMissing { path: PathBuf },
    #[error("cannot read Piper voice config {path}: {source}")]
    ConfigRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Piper voice config {path} is invalid: {detail}")]
    ConfigInvalid { path: PathBuf, detail: String },
    #[error("ONNX Runtime library {path} does not exist (version 1.24 or newer is needed)")]
    RuntimeMissing { path: PathBuf },
    #[error("cannot load ONNX Runtime from {path} (version 1.24 or newer is needed): {detail}")]
    RuntimeLoad { path: PathBuf, detail: String },
    #[error("ONNX Runtime was already loaded from {loaded} in this process; it cannot also be loaded from {requested}. Use one library per process")]
    RuntimeConflict { loaded: PathBuf, requested: PathBuf },
    #[error("cannot find {what} in the models cache: {detail}")]
    Cache { what: &'static str, detail: String },
    #[error("cannot load Piper voice {path}: {detail}")]
    Session { path: PathBuf, detail: String },
    #[error("Piper voice {path} does not look like a Piper model: {detail}")]
    ModelContract { path: PathBuf, detail: String },
    #[error("espeak-ng: {detail}")]
    Espeak { detail: String },
    #[error("espeak-ng has no voice `{voice}`. Install the Debian package espeak-ng-data, or fix `espeak.voice` in the voice's .onnx.json")]
    EspeakVoice { voice: String },
    /// A remote speech server failed; the error says how, with the fix.
    #[error("remote TTS: {0}")]
    Remote(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("nothing to say in {text:?}: {reason}")]
    NothingToSay { text: String, reason: SkipReason },
    #[error("Piper inference failed on {text:?}: {detail}")]
    Inference { text: String, detail: String },
    #[error("{detail}")]
    Worker { detail: String },
}

/// Why a chunk produced no audio. A chunk is skipped rather than spoken when speaking it would
/// be noise: espeak-ng reads symbols and emoji aloud by name ("grinning face").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Empty or only whitespace.
    Empty,
    /// No letter or digit: only punctuation, symbols or emoji.
    NoWords,
    /// espeak-ng produced no phoneme the voice knows.
    NoPhonemes,
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SkipReason::Empty => "the text is empty",
            SkipReason::NoWords => {
                "it has no letters or digits (only punctuation, symbols or emoji)"
            }
            SkipReason::NoPhonemes => "espeak-ng produced no phonemes this voice knows",
        })
    }
}
