//! The voice pipeline: audio source → VAD/endpointer → ASR → LLM client → sentence chunker →
//! TTS → audio output, run by one [`Session`] for replay and live alike.
//!
//! - [`session`]: the state machine: source events in, turn records out.
//! - [`source`] (a scenario's audio) and [`live`] (microphone and speaker) are its ends.
//! - [`respond`]: one turn after its endpoint, over the [`stages`] traits.
//! - [`workers`]: the blocking stages on threads of their own; [`fake`]: scripted stages.
//!
//! Each stage stamps its own events on the turn's [`voxlat_core::Timeline`] and nothing else;
//! breakdowns are computed afterwards by voxlat-core from those events.

pub mod aggregate;
pub mod asr_prefix;
pub mod config;
pub mod control;
pub mod cues;
pub mod discover;
pub mod error;
pub mod fake;
pub mod history;
pub mod levels;
pub mod live;
pub mod meter;
pub mod output;
pub mod quality;
pub mod record;
pub mod remote_summary;
mod replay;
pub mod respond;
pub mod results;
pub mod scenario;
pub mod session;
pub mod setup;
pub mod source;
pub mod stages;
pub mod sweep;
pub mod turn_eval;
pub mod workers;

pub use aggregate::Aggregate;
pub use config::PipelineConfig;
pub use error::{SessionError, SourceError, StageError, TurnError};
pub use output::{Output, RealTimeSink, VirtualSink};
pub use record::pace;
pub use record::{Interruption, TurnOutcome, TurnRecord};
pub use respond::{Pipeline, Progress};
pub use scenario::{LoadedTurn, Scenario, TurnSpec};
pub use session::{Session, SessionOptions, SourceClock, SourceEvent, TurnMeta};
