//! Shared by the integration tests: where the fetched models are.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::PathBuf;

/// Mirrors voxlat-models' cache location (a dev-dependency on it would be a cycle: it uses
/// this crate's converter).
pub fn models_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("VOXLAT_MODELS_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    dirs::cache_dir()
        .expect("no platform cache directory; set VOXLAT_MODELS_DIR")
        .join("voxlat")
        .join("models")
}

/// Fails (never skips) when a fetched file is missing, saying how to fetch it.
pub fn require(path: PathBuf) -> PathBuf {
    assert!(
        path.is_file(),
        "{} is missing. Run `cargo run -- models fetch --all` first \
         (or set VOXLAT_MODELS_DIR to a cache that has the models)",
        path.display()
    );
    path
}

pub fn whisper_model() -> PathBuf {
    require(
        models_dir()
            .join("whisper-tiny.en")
            .join("ggml-tiny.en.bin"),
    )
}

pub fn scenario_audio(name: &str) -> Vec<f32> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/audio")
        .join(name);
    voxlat_audio::wav::read_at(&p, 16_000)
        .unwrap_or_else(|e| panic!("{e}"))
        .audio
        .samples
}
