//! Round trip: Piper speaks a sentence, Whisper (tiny.en) transcribes it back, and the words
//! must match. This catches what a level check cannot: garbled phonemes, lost punctuation
//! turning prosody into mush, a wrong sample rate.

mod common;

use common::{load_voice, serial};
use voxlat_asr::engine::{WhisperEngine, SAMPLE_RATE};
use voxlat_core::text::{normalize_words, wer};
use voxlat_models::Store;

/// Windowed-sinc resampler: band-limits to the lower rate's Nyquist before sampling, so
/// 22.05 kHz speech does not alias into Whisper's 16 kHz band.
fn resample(input: &[f32], from: u32, to: u32) -> Vec<f32> {
    const HALF_TAPS: f64 = 16.0;
    let ratio = f64::from(to) / f64::from(from);
    let cutoff = ratio.min(1.0);
    let half_width = HALF_TAPS / cutoff;
    let out_len = (input.len() as f64 * ratio).floor() as usize;
    (0..out_len)
        .map(|n| {
            let x = n as f64 / ratio;
            let lo = (x - half_width).ceil().max(0.0) as usize;
            let hi = ((x + half_width).floor() as usize).min(input.len().saturating_sub(1));
            let mut acc = 0.0;
            let mut norm = 0.0;
            for (k, &sample) in input.iter().enumerate().take(hi + 1).skip(lo) {
                let d = x - k as f64;
                let arg = std::f64::consts::PI * cutoff * d;
                let sinc = if arg.abs() < 1e-9 {
                    1.0
                } else {
                    arg.sin() / arg
                };
                // Hann window over the kernel's support.
                let w = 0.5 + 0.5 * (std::f64::consts::PI * d / half_width).cos();
                acc += f64::from(sample) * sinc * w;
                norm += sinc * w;
            }
            if norm.abs() > 1e-12 {
                (acc / norm) as f32
            } else {
                0.0
            }
        })
        .collect()
}

#[test]
fn the_resampler_keeps_a_tone_and_its_length() {
    let from = 22_050;
    let tone: Vec<f32> = (0..from)
        .map(|i| (2.0 * std::f32::consts::PI * 440.0 * i as f32 / from as f32).sin() * 0.5)
        .collect();
    let out = resample(&tone, from, 16_000);
    assert_eq!(out.len(), 16_000);
    // Compare with the ideal 440 Hz tone at 16 kHz, away from the edges.
    let worst = (100..15_900)
        .map(|i| {
            let ideal = (2.0 * std::f32::consts::PI * 440.0 * i as f32 / 16_000.0).sin() * 0.5;
            (out[i] - ideal).abs()
        })
        .fold(0f32, f32::max);
    assert!(worst < 0.01, "max error {worst}");
}

#[test]
fn whisper_hears_what_piper_said() {
    let _g = serial();
    let whisper_model = Store::open_default(None)
        .and_then(|s| s.ready_path("whisper-tiny.en", "ggml-tiny.en.bin"))
        .unwrap_or_else(|e| {
            panic!("{e}\nRun `cargo run -- models fetch whisper-tiny.en` (or `voxlat models fetch`) first")
        });
    let mut voice = load_voice();
    let mut asr = WhisperEngine::load(&whisper_model, 2).expect("load whisper");

    let sentences = [
        "Hello, this is a test of the speech synthesis system.",
        "The weather today is sunny, with a light breeze from the west.",
        "Please call me back when you have a moment.",
    ];
    let mut total = 0.0;
    for reference in sentences {
        let speech = voice.synthesize(reference).expect("synthesize");
        let audio = resample(&speech.samples, speech.sample_rate, SAMPLE_RATE);
        let heard = asr.transcribe(&audio).expect("transcribe");
        let error = wer(reference, &heard.text);
        eprintln!(
            "said {reference:?}\nheard {:?} (WER {error:.3})",
            heard.text
        );
        // The first words matter most: a lost comma once made Whisper hear "Although this
        // is" for "Hello, this is".
        let (r, h) = (normalize_words(reference), normalize_words(&heard.text));
        assert_eq!(
            r.first(),
            h.first(),
            "said {reference:?}, heard {:?}",
            heard.text
        );
        assert!(
            error <= 0.2,
            "WER {error:.3}: said {reference:?}, heard {:?}",
            heard.text
        );
        total += error;
    }
    let mean = total / sentences.len() as f64;
    assert!(mean <= 0.1, "mean WER {mean:.3}");
}
