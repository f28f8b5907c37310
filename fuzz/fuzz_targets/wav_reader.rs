//! The WAV reader on arbitrary bytes, then the resampler on what it decoded: an error or a
//! decoded clip, never a panic, and never an allocation sized by an untrusted header (libFuzzer's
//! RSS limit catches those). Resampling is part of the target because that is where header
//! rates did their damage (0 Hz divided by zero, 4 GHz sized a 17 GB buffer).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use voxlat_audio::resample::{resample, RATE_RANGE};
use voxlat_audio::wav::{decode, CHANNELS_RANGE, MAX_DURATION_S};

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = decode(data, Path::new("fuzz.wav")) {
        assert!(!d.audio.samples.is_empty());
        assert!(d.audio.samples.iter().all(|s| s.is_finite()));
        assert!(RATE_RANGE.contains(&d.audio.rate));
        assert!(CHANNELS_RANGE.contains(&d.channels));
        assert!(d.audio.duration_s() <= f64::from(MAX_DURATION_S));
        // The pipeline's rate, and a second one so both directions and an odd ratio run.
        for to in [voxlat_audio::PIPELINE_RATE, 44_100] {
            let out = resample(&d.audio.samples, d.audio.rate, to).expect("rates in range");
            let want = (d.audio.samples.len() as u64 * u64::from(to)
                + u64::from(d.audio.rate) / 2)
                / u64::from(d.audio.rate);
            assert_eq!(out.len() as u64, want);
            assert!(out.iter().all(|s| s.is_finite()));
        }
    }
});
