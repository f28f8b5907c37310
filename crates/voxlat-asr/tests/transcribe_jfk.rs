//! Real speech through the converted model: whisper.cpp's jfk.wav (public-domain 1961
//! inaugural address) must come back as the words that were spoken.
//!
//! Needs the models cache (`voxlat models fetch whisper-tiny.en jfk-sample`); it fails, rather
//! than skips, when they are absent, so CI cannot pass without exercising the converter.
#![cfg(feature = "engine")]

mod common;

use common::{models_dir, require, whisper_model};
use voxlat_asr::engine::WhisperEngine;
use voxlat_core::text::{normalize_words, wer};

const REFERENCE: &str = "And so, my fellow Americans, ask not what your country can do for \
                         you, ask what you can do for your country.";

#[test]
fn converted_tiny_en_transcribes_jfk() {
    let model = whisper_model();
    let wav = require(models_dir().join("jfk-sample").join("jfk.wav"));

    let samples = voxlat_audio::wav::read_at(&wav, 16_000)
        .expect("jfk.wav")
        .audio
        .samples;
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

    let hyp = normalize_words(&first.text);
    let w = wer(REFERENCE, &first.text);
    assert!(w <= 0.1, "WER {w:.3}: got {:?}", first.text);
    assert!(
        hyp.join(" ")
            .contains("ask not what your country can do for you"),
        "{:?}",
        first.text
    );
    assert_eq!(normalize_words(&second.text), hyp);
    assert!(first.rejected.is_none());
    assert!(
        (first.audio.as_secs_f64() - 11.0).abs() < 0.1,
        "{:?}",
        first.audio
    );
}
