//! Scenario TOML on arbitrary text: an error naming the file, or a scenario with turns.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use voxlat_pipeline::scenario::Scenario;

fuzz_target!(|text: &str| {
    match Scenario::parse(text, Path::new("fuzz.toml")) {
        Ok(s) => {
            assert!(!s.turns.is_empty());
            for t in &s.turns {
                let _ = s.wav_path(t);
            }
        }
        Err(e) => assert!(e.to_string().contains("fuzz.toml"), "{e}"),
    }
});
