//! A long turn is transcribed whole, in one decode: real read speech joined into one passage
//! longer than Whisper's 30 s window. whisper.cpp decodes it a window at a time; the guard's
//! token cap must allow for every window, or a clean decode is taken for a runaway and decoded
//! twice more. (A passage inside one window with more than the old 96-token cap is in
//! voxlat-tts's roundtrip test, where Piper can read one fast enough.)
#![cfg(feature = "engine")]

mod common;

use common::{models_dir, require, scenario_audio, whisper_model};
use voxlat_asr::engine::{WhisperEngine, SAMPLE_RATE};
use voxlat_core::text::{normalize_words, wer};

/// The passage, in the order it is spoken: the bundled real prompts, the synthetic commands and
/// whisper.cpp's jfk.wav, each trimmed to its speech.
const PARTS: &[(&str, &str)] = &[
    ("real-privacy-prompt.wav", "Please enter your phone number, starting with the area code."),
    ("real-tt-weasels.wav", "Weasels have eaten our phone system."),
    ("real-conf-getpin.wav", "Please enter the conference pin number."),
    ("real-agent-alreadyon.wav", "That agent is already logged on. Please enter your agent number followed by the pound key."),
    ("synthetic-weather.wav", "What's the weather like in Paris today?"),
    ("synthetic-timer.wav", "Set a timer for ten minutes."),
    ("synthetic-joke.wav", "Can you tell me a short joke about computers?"),
    ("synthetic-moon.wav", "How far is the moon from the earth?"),
    ("synthetic-remind.wav", "Remind me to call my mother tomorrow at nine."),
    ("jfk.wav", "And so, my fellow Americans, ask not what your country can do for you, ask what you can do for your country."),
];
/// Silence between the parts, as a reader's pause between sentences.
const GAP_S: f64 = 0.25;

/// The span of `samples` whose 10 ms frames reach within 40 dB of the loudest, plus 100 ms.
fn trim(samples: &[f32]) -> &[f32] {
    let frame = SAMPLE_RATE as usize / 100;
    let energy: Vec<f32> = samples
        .chunks(frame)
        .map(|c| c.iter().map(|v| v * v).sum::<f32>() / c.len() as f32)
        .collect();
    let loudest = energy.iter().copied().fold(0.0, f32::max);
    let voiced = |e: &&f32| **e > loudest * 1e-4;
    let first = energy.iter().position(|e| voiced(&e)).unwrap_or(0);
    let last = energy.iter().rposition(|e| voiced(&e)).unwrap_or(0);
    let from = (first.saturating_sub(10)) * frame;
    let to = ((last + 11) * frame).min(samples.len());
    &samples[from..to]
}

#[test]
fn a_passage_longer_than_one_window_is_decoded_whole_and_once() {
    let mut passage = Vec::new();
    let mut reference = Vec::new();
    for (clip, text) in PARTS {
        let audio = if *clip == "jfk.wav" {
            let path = require(models_dir().join("jfk-sample").join("jfk.wav"));
            voxlat_audio::wav::read_at(&path, SAMPLE_RATE)
                .expect("jfk.wav")
                .audio
                .samples
        } else {
            scenario_audio(clip)
        };
        if !passage.is_empty() {
            passage.resize(passage.len() + (GAP_S * SAMPLE_RATE as f64) as usize, 0.0);
        }
        passage.extend_from_slice(trim(&audio));
        reference.push(*text);
    }
    let seconds = passage.len() as f64 / SAMPLE_RATE as f64;
    let reference = reference.join(" ");
    let words = normalize_words(&reference).len();
    eprintln!("passage {seconds:.1} s, {words} words");
    assert!(seconds > 30.0, "the passage is {seconds:.1} s");
    // Words alone are over the old cap of 96 tokens.
    assert!(words > 96, "{words} words");

    let mut engine = WhisperEngine::load(&whisper_model(), 2).expect("load");
    let t = engine.transcribe(&passage).expect("transcribe");
    let w = wer(&reference, &t.text);
    eprintln!(
        "{} tokens, WER {w:.3}, fallback {:?}: {:?}",
        t.tokens, t.fallback, t.text
    );
    // The end of the passage is what a cap cuts off.
    let heard = normalize_words(&t.text);
    let tail: Vec<String> = normalize_words("can do for your country");
    assert!(
        heard.ends_with(&tail),
        "the passage's last words are missing: {:?}",
        t.text
    );
    assert!(w <= 0.2, "WER {w:.3}: {:?}", t.text);
    assert!(
        t.fallback.is_none(),
        "a clean decode was decoded again: {:?}",
        t.fallback
    );
}
