//! What can go wrong in a session, as facts. The CLI turns them into advice.

use crate::record::Stage;
use voxlat_asr::engine::AsrError;
use voxlat_llm::LlmError;
use voxlat_vad::VadError;

/// Why an audio source (the microphone, or replay's recorded utterance) failed. Each message
/// already holds its cause's words, so no cause is chained again (`{:#}` would repeat them).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("the endpointer: {0}")]
    Endpointer(VadError),
    #[error("the input device {device} stopped")]
    DeviceStopped { device: String },
    #[error("no thread for it: {0}")]
    Thread(std::io::Error),
}

impl From<VadError> for SourceError {
    fn from(e: VadError) -> Self {
        SourceError::Endpointer(e)
    }
}

/// A stage that could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The loader's own error, kept whole so the CLI can tell what to do about it; its words
    /// are in this message, so it is not chained as a source as well.
    #[error("cannot load the {stage} stage: {cause}")]
    Load {
        stage: Stage,
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot run the {stage} worker: {detail}")]
    Thread { stage: Stage, detail: String },
}

impl StageError {
    /// Why the stage did not load, as its loader said it.
    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self {
            StageError::Load { cause, .. } => Some(cause.as_ref()),
            StageError::Thread { .. } => None,
        }
    }
}

/// Why one turn failed. It is kept in the turn's record as its message.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("the audio ended without an endpoint")]
    NoEndpoint,
    #[error("the session ended before the utterance's endpoint")]
    SessionEnded,
    #[error("the endpointer found no speech in the utterance")]
    NoSpeech,
    #[error("cannot start the audio source: {0}")]
    Source(SourceError),
    #[error("the ASR worker stopped")]
    AsrWorkerGone,
    #[error("ASR failed: {0}")]
    Asr(#[source] AsrError),
    #[error("LLM: {0}")]
    Llm(#[source] LlmError),
    #[error("the audio sink failed: {0}")]
    Output(String),
    #[error("the reply produced no audio (reply text {0:?})")]
    NoAudio(String),
}

/// Why a session stopped before its plan did.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The microphone, its endpointer or its thread failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("the audio source stopped")]
    SourceGone,
    #[error("no speech heard for {secs} s")]
    Idle { secs: u64 },
}
