//! The default voice and ONNX Runtime in voxlat's models cache (`voxlat models fetch`).

use crate::error::TtsError;
use std::path::PathBuf;
use voxlat_models::known::{self, ModelFile};
use voxlat_models::Store;

fn ready(file: ModelFile, what: &'static str) -> Result<PathBuf, TtsError> {
    let cache_err = |e: voxlat_models::ModelsError| TtsError::Cache {
        what,
        detail: e.to_string(),
    };
    let store = Store::open_default(None).map_err(cache_err)?;
    store.ready(file).map_err(cache_err)
}

/// The default voice's `.onnx`, verified present together with its `.onnx.json`.
pub fn default_voice() -> Result<PathBuf, TtsError> {
    ready(known::PIPER_VOICE_CONFIG, "the Piper voice config")?;
    ready(known::PIPER_VOICE, "the Piper voice")
}

/// The ONNX Runtime library fetched into the cache.
pub fn runtime() -> Result<PathBuf, TtsError> {
    ready(known::ONNX_RUNTIME, "ONNX Runtime")
}
