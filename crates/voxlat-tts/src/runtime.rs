//! ONNX Runtime, loaded once per process from a shared library (`ort`'s `load-dynamic`).
//!
//! Debian has no ONNX Runtime and ort's build script would download one, so the library is a
//! file: the path given explicitly, else `ORT_DYLIB_PATH`, else the models cache. Version 1.32
//! is the one to use: 1.24–1.31 spend 1.2–1.8 s of CPU creating a Piper session.

use crate::error::TtsError;
use ort::environment::Environment;
use std::path::{Path, PathBuf};
use std::time::Duration;
use voxlat_onnx::OnnxError;

/// Environment variable naming the ONNX Runtime library (the same one `ort` itself reads).
pub const DYLIB_ENV: &str = "ORT_DYLIB_PATH";

/// The process's ONNX Runtime environment (shared with every other ONNX stage through
/// `voxlat-onnx`), loading the library on first use.
///
/// Returns the environment, the library's path, and how long this call spent loading it
/// (zero when it was already loaded). A second, different explicit path is an error: a
/// process can hold only one ONNX Runtime.
pub fn environment(explicit: Option<&Path>) -> Result<(Environment, PathBuf, Duration), TtsError> {
    let path = match (explicit, voxlat_onnx::loaded_path()) {
        (None, Some(loaded)) => loaded,
        _ => resolve(explicit)?,
    };
    let (env, took) = voxlat_onnx::environment(&path).map_err(|e| match e {
        OnnxError::Missing { path } => TtsError::RuntimeMissing { path },
        OnnxError::Load { path, detail } => TtsError::RuntimeLoad { path, detail },
        OnnxError::Conflict { loaded, requested } => {
            TtsError::RuntimeConflict { loaded, requested }
        }
    })?;
    Ok((env, path, took))
}

/// Where the library would be loaded from: `explicit`, else `ORT_DYLIB_PATH`, else the models
/// cache (feature `cache`).
pub fn resolve(explicit: Option<&Path>) -> Result<PathBuf, TtsError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os(DYLIB_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    from_cache()
}

#[cfg(feature = "cache")]
fn from_cache() -> Result<PathBuf, TtsError> {
    crate::locate::runtime()
}

#[cfg(not(feature = "cache"))]
fn from_cache() -> Result<PathBuf, TtsError> {
    Err(TtsError::Cache {
        what: "ONNX Runtime",
        detail: format!("no path given; set {DYLIB_ENV} to a libonnxruntime.so (1.24 or newer)"),
    })
}
