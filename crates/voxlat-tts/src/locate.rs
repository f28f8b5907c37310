//! The default voice and ONNX Runtime in voxlat's models cache (`voxlat models fetch`).

use crate::error::TtsError;
use std::path::PathBuf;
use voxlat_models::Store;

/// The manifest's default Piper voice.
pub const VOICE_MODEL: &str = "piper-en_US-joe-medium";
pub const VOICE_FILE: &str = "en_US-joe-medium.onnx";
pub const VOICE_CONFIG_FILE: &str = "en_US-joe-medium.onnx.json";
pub const RUNTIME_MODEL: &str = "onnxruntime";
pub const RUNTIME_FILE: &str = "libonnxruntime.so.1.32.0";

fn ready(model: &'static str, file: &str, what: &'static str) -> Result<PathBuf, TtsError> {
    let cache_err = |e: voxlat_models::ModelsError| TtsError::Cache {
        what,
        detail: e.to_string(),
    };
    let store = Store::open_default(None).map_err(cache_err)?;
    store.ready_path(model, file).map_err(cache_err)
}

/// The default voice's `.onnx`, verified present together with its `.onnx.json`.
pub fn default_voice() -> Result<PathBuf, TtsError> {
    ready(VOICE_MODEL, VOICE_CONFIG_FILE, "the Piper voice config")?;
    ready(VOICE_MODEL, VOICE_FILE, "the Piper voice")
}

/// The ONNX Runtime library fetched into the cache.
pub fn runtime() -> Result<PathBuf, TtsError> {
    ready(RUNTIME_MODEL, RUNTIME_FILE, "ONNX Runtime")
}
