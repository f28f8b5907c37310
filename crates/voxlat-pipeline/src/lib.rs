//! The voice pipeline: audio source → VAD/endpointer → ASR → LLM client → sentence chunker →
//! TTS → audio sink, wired with threads and channels.
//!
//! Each stage stamps its own events on the turn's [`voxlat_core::Timeline`] and nothing else;
//! breakdowns are computed afterwards by voxlat-core from those events.

pub mod live;
pub mod quality;
pub mod record;
pub mod results;
pub mod scenario;
pub mod sweep;
pub mod turn;
pub mod workers;

pub use record::{Aggregate, Interruption, TurnOutcome, TurnRecord};
pub use scenario::{LoadedTurn, Scenario, TurnSpec};
pub use turn::{Heard, Output, Pipeline, PipelineConfig, Progress};
