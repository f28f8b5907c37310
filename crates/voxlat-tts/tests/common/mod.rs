//! Shared by the tests that need the real voice. They fail, never skip, when the models are
//! missing: CI must not pass without exercising synthesis.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use voxlat_tts::piper::{Voice, VoiceOptions};

const FETCH: &str = "Run `cargo run -- models fetch piper-en_US-joe-medium onnxruntime` (or \
                     `voxlat models fetch`) first, or set VOXLAT_MODELS_DIR to a cache that has them";

pub fn voice_path() -> PathBuf {
    voxlat_tts::locate::default_voice().unwrap_or_else(|e| panic!("{e}\n{FETCH}"))
}

/// Tests in one binary run in parallel on 2 cores; one voice at a time keeps them from
/// oversubscribing the machine (and timing each other's contention).
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn load_voice() -> Voice {
    Voice::load(&voice_path(), VoiceOptions::default()).unwrap_or_else(|e| panic!("{e}\n{FETCH}"))
}

pub fn rms(samples: &[f32]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    (samples
        .iter()
        .map(|&s| f64::from(s) * f64::from(s))
        .sum::<f64>()
        / samples.len() as f64)
        .sqrt()
}
