//! Real speech through the converted model: whisper.cpp's jfk.wav (public-domain 1961
//! inaugural address) must come back as the words that were spoken.
//!
//! Needs the models cache (`voxlat models fetch whisper-tiny.en jfk-sample`); it fails, rather
//! than skips, when they are absent, so CI cannot pass without exercising the converter.
#![cfg(feature = "engine")]

use std::path::PathBuf;
use voxlat_asr::engine::{read_wav_16k_mono, WhisperEngine};

const REFERENCE: &str = "And so, my fellow Americans, ask not what your country can do for \
                         you, ask what you can do for your country.";

/// Mirrors voxlat-models' cache location (a dev-dependency on it would be a cycle).
fn models_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("VOXLAT_MODELS_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    dirs::cache_dir()
        .expect("no platform cache directory; set VOXLAT_MODELS_DIR")
        .join("voxlat")
        .join("models")
}

fn require(path: PathBuf) -> PathBuf {
    assert!(
        path.is_file(),
        "{} is missing. Run `cargo run -- models fetch whisper-tiny.en jfk-sample` first \
         (or set VOXLAT_MODELS_DIR to a cache that has them)",
        path.display()
    );
    path
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric() || *c == '\'')
                .flat_map(char::to_lowercase)
                .collect::<String>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word error rate by edit distance over words.
fn wer(reference: &[String], hypothesis: &[String]) -> f64 {
    let mut prev: Vec<usize> = (0..=hypothesis.len()).collect();
    for (i, r) in reference.iter().enumerate() {
        let mut cur = vec![i + 1; hypothesis.len() + 1];
        for (j, h) in hypothesis.iter().enumerate() {
            let sub = prev[j] + usize::from(r != h);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[hypothesis.len()] as f64 / reference.len().max(1) as f64
}

#[test]
fn wer_helper_counts_edits() {
    let r = words("ask not what your country");
    assert_eq!(wer(&r, &r), 0.0);
    assert_eq!(wer(&r, &words("ask what your country")), 0.2);
    assert_eq!(wer(&r, &words("Ask NOT, what your county!")), 0.2);
}

#[test]
fn converted_tiny_en_transcribes_jfk() {
    let dir = models_dir();
    let model = require(dir.join("whisper-tiny.en").join("ggml-tiny.en.bin"));
    let wav = require(dir.join("jfk-sample").join("jfk.wav"));

    let samples = read_wav_16k_mono(&wav).expect("jfk.wav");
    let t0 = std::time::Instant::now();
    let mut engine = WhisperEngine::load(&model, 2).expect("load converted model");
    let load = t0.elapsed();
    let first = engine.transcribe(&samples).expect("transcribe");
    // A second pass on the reused state must give the same words (no_context keeps the first
    // transcript out of the prompt).
    let second = engine.transcribe(&samples).expect("transcribe again");
    eprintln!(
        "load {load:?}; transcript {:?}; compute {:?} (then {:?}) for {:?} of audio, RTF {:.3}",
        first.text, first.compute, second.compute, first.audio, first.real_time_factor
    );

    let reference = words(REFERENCE);
    let hyp = words(&first.text);
    let w = wer(&reference, &hyp);
    assert!(w <= 0.1, "WER {w:.3}: got {:?}", first.text);
    assert!(
        hyp.join(" ")
            .contains("ask not what your country can do for you"),
        "{:?}",
        first.text
    );
    assert_eq!(words(&second.text), hyp);
    assert!(
        (first.audio.as_secs_f64() - 11.0).abs() < 0.1,
        "{:?}",
        first.audio
    );
}
