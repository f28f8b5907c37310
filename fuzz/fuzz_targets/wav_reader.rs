//! The WAV reader on arbitrary bytes: an error or a decoded clip, never a panic, and never an
//! allocation sized by an untrusted header (libFuzzer's RSS limit catches those).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = voxlat_audio::wav::decode(data, Path::new("fuzz.wav")) {
        assert!(!d.audio.samples.is_empty());
        assert!(d.audio.samples.iter().all(|s| s.is_finite()));
    }
});
