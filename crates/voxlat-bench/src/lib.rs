//! The `bench-llm` engine, on voxlat-llm's client: load shapes, cells, per-request records and their aggregates.
//!
//! A *cell* is one model under one load (a concurrency level or an arrival rate). Every
//! request produces a [`RequestRecord`] holding all its event times; every figure in a
//! [`CellSummary`] is derived from those records and nothing else.

pub mod analysis;
pub mod cache_check;
pub mod compare;
pub mod config;
pub mod fit;
pub mod guard;
pub mod html;
pub mod prompt;
pub mod record;
pub mod results;
pub mod runner;
pub mod server_view;
pub mod stamping;
pub mod summary;
pub mod text;

pub use config::{BenchConfig, Load};
pub use prompt::PromptSource;
pub use record::RequestRecord;
pub use results::{BenchResults, ResultsWriter};
pub use runner::{run, RunEvent};
pub use summary::CellSummary;
