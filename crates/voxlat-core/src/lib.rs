//! The one thing every voxlat stage shares: a process-wide monotonic clock, request IDs,
//! the per-request timeline of events, and what is computed from it (segments, statistics,
//! the versioned results model). See `docs/latency-model.md` for the definitions.

pub mod clock;
pub mod cpu;
pub mod cutoff;
pub mod event;
pub mod fsio;
pub mod mel;
pub mod memory;
pub mod remote;
pub mod report;
pub mod request_id;
pub mod script;
pub mod segments;
pub mod stats;
pub mod table;
pub mod text;
pub mod threads;
pub mod timeline;
pub mod trace;
pub mod whisper_scores;

pub use clock::Nanos;
pub use event::EventKind;
pub use request_id::RequestId;
pub use timeline::{Timeline, TimelineSnapshot};
