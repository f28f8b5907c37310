//! Synthesis with the real Piper voice: audible, plausible, punctuation-aware, and calm about
//! bad input.

mod common;

use common::{load_voice, rms, serial, voice_path};
use std::sync::Arc;
use std::time::Duration;
use voxlat_core::{EventKind, RequestId, Timeline};
use voxlat_tts::piper::{Voice, VoiceOptions};
use voxlat_tts::stream::{self, TtsEvent, TtsStream};
use voxlat_tts::{SkipReason, TtsError};

#[test]
fn a_sentence_is_audible_and_of_plausible_length() {
    let _g = serial();
    let mut voice = load_voice();
    assert_eq!(voice.sample_rate(), 22_050);
    let speech = voice
        .synthesize("The quick brown fox jumps over the lazy dog.")
        .expect("synthesize");
    let seconds = speech.duration().as_secs_f64();
    // Nine words at a normal speaking rate (2-4 words/s).
    assert!((1.5..5.0).contains(&seconds), "{seconds:.2} s of audio");
    let level = rms(&speech.samples);
    assert!(level > 0.02, "RMS {level:.4}: near silence");
    let peak = speech.samples.iter().fold(0f32, |m, s| m.max(s.abs()));
    assert!(peak <= 1.5, "peak {peak}: clipping garbage");
    assert_eq!(speech.sentences, 1);
    assert!(
        speech.unknown_phonemes.is_empty(),
        "{:?}",
        speech.unknown_phonemes
    );
    assert!(
        speech.real_time_factor() < 1.0,
        "RTF {}",
        speech.real_time_factor()
    );
}

#[test]
fn longer_text_gives_longer_audio_and_one_call_per_sentence() {
    let _g = serial();
    let mut voice = load_voice();
    let short = voice.synthesize("Yes.").expect("short");
    let long = voice
        .synthesize("Yes. I can help you with that today. Tell me more about it.")
        .expect("long");
    assert_eq!(long.sentences, 3);
    assert!(
        long.duration() > short.duration() * 3,
        "{:?} vs {:?}",
        long.duration(),
        short.duration()
    );
}

#[test]
fn phonemes_keep_the_punctuation() {
    let _g = serial();
    let voice = load_voice();
    let sentences = voice
        .phonemize("Hello, world. How are you?")
        .expect("phonemize");
    assert_eq!(sentences.len(), 2, "{sentences:?}");
    assert!(sentences[0].contains(','), "{sentences:?}");
    assert!(sentences[0].ends_with('.'), "{sentences:?}");
    assert!(sentences[1].ends_with('?'), "{sentences:?}");
}

#[test]
fn text_with_nothing_to_say_is_refused_with_a_reason() {
    let _g = serial();
    let mut voice = load_voice();
    for (text, reason) in [
        ("", SkipReason::Empty),
        ("   ", SkipReason::Empty),
        ("...", SkipReason::NoWords),
        ("?!;", SkipReason::NoWords),
        ("🎉🎉", SkipReason::NoWords),
        ("👍🏽 !", SkipReason::NoWords),
    ] {
        match voice.synthesize(text) {
            Err(TtsError::NothingToSay { reason: r, .. }) => assert_eq!(r, reason, "{text:?}"),
            other => panic!("{text:?}: expected NothingToSay, got {other:?}"),
        }
    }
    // Emoji inside real text are dropped, the words are spoken.
    let speech = voice.synthesize("Well done 🎉").expect("words with emoji");
    assert!(rms(&speech.samples) > 0.02);
}

#[test]
fn odd_but_valid_text_does_not_crash() {
    let _g = serial();
    let mut voice = load_voice();
    for text in [
        "a\0b",
        "42",
        "x",
        "C'est la vie, naïve café.",
        "https://example.com/a?b=c",
        &"word ".repeat(60),
    ] {
        match voice.synthesize(text) {
            Ok(speech) => assert!(!speech.samples.is_empty(), "{text:?}"),
            Err(TtsError::NothingToSay { .. }) => {}
            Err(e) => panic!("{text:?}: {e}"),
        }
    }
}

#[test]
fn a_missing_model_names_the_path_and_the_fetch_command() {
    let err = Voice::load(
        std::path::Path::new("/nonexistent/voice.onnx"),
        VoiceOptions::default(),
    )
    .expect_err("missing model");
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/voice.onnx"), "{msg}");
    assert!(matches!(err, TtsError::ModelMissing { .. }), "{err:?}");
}

#[test]
fn a_model_without_its_config_names_the_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("voice.onnx");
    std::os::unix::fs::symlink(voice_path(), &model).expect("symlink");
    let err = Voice::load(&model, VoiceOptions::default()).expect_err("no config");
    let msg = err.to_string();
    assert!(msg.contains("voice.onnx.json"), "{msg}");
    assert!(
        !msg.contains("voxlat "),
        "a library gives no CLI advice: {msg}"
    );
}

#[test]
fn a_different_runtime_library_in_the_same_process_is_refused() {
    let _g = serial();
    let _voice = load_voice();
    let dir = tempfile::tempdir().expect("tempdir");
    let other = dir.path().join("libonnxruntime.so");
    std::fs::write(&other, b"not a library").expect("write");
    let err = Voice::load(
        &voice_path(),
        VoiceOptions {
            runtime: Some(other.clone()),
            ..VoiceOptions::default()
        },
    )
    .expect_err("second runtime");
    assert!(err.to_string().contains(&*other.to_string_lossy()), "{err}");
}

#[test]
fn the_stream_stamps_the_timeline_and_reports_each_chunk() {
    let _g = serial();
    let mut voice = load_voice();
    let timeline = Arc::new(Timeline::new(RequestId::new()));
    let mut tts = TtsStream::new(&mut voice, timeline.clone());
    let skipped = tts.speak("🎉").expect("emoji chunk");
    assert_eq!(skipped.skipped, Some(SkipReason::NoWords));
    assert!(skipped.samples.is_empty() && skipped.timing.first_audio.is_none());
    assert_eq!(timeline.get(EventKind::TtsFirstAudio), None);

    let first = tts.speak("Hello there,").expect("first");
    let second = tts.speak("how are you today?").expect("second");
    let summary = tts.finish();

    assert_eq!((first.index, second.index), (1, 2));
    assert!(!first.samples.is_empty() && first.sample_rate == 22_050);
    assert_eq!(summary.chunks, 3);
    assert_eq!(summary.skipped, 1);
    assert_eq!(summary.audio, first.duration() + second.duration());
    let chunk = timeline.get(EventKind::FirstChunk).expect("first_chunk");
    let audio = timeline
        .get(EventKind::TtsFirstAudio)
        .expect("tts_first_audio");
    let done = timeline.get(EventKind::TtsDone).expect("tts_done");
    assert_eq!(chunk, skipped.timing.submitted);
    assert_eq!(Some(audio), first.timing.first_audio);
    assert!(chunk <= audio && audio <= done);
    for c in [&first, &second] {
        let t = c.timing;
        assert!(t.submitted <= t.started && Some(t.started) <= t.first_audio);
        assert!(t.time_to_first_audio().expect("ttfa") < Duration::from_secs(5));
    }
}

#[test]
fn the_threaded_stream_returns_chunks_in_order_and_the_voice() {
    let _g = serial();
    let voice = load_voice();
    let timeline = Arc::new(Timeline::new(RequestId::new()));
    let (input, events, handle) = stream::spawn(voice, timeline.clone()).expect("spawn");
    for text in ["One.", "...", "Two three."] {
        input.say(text).expect("say");
    }
    drop(input);
    let events: Vec<TtsEvent> = events.iter().collect();
    assert_eq!(events.len(), 4, "{events:?}");
    let indexes: Vec<usize> = events
        .iter()
        .filter_map(|e| match e {
            TtsEvent::Chunk(c) => Some(c.index),
            _ => None,
        })
        .collect();
    assert_eq!(indexes, [0, 1, 2]);
    match events.last() {
        Some(TtsEvent::Done(summary)) => {
            assert_eq!((summary.chunks, summary.skipped, summary.failed), (3, 1, 0))
        }
        other => panic!("expected Done last, got {other:?}"),
    }
    assert!(timeline.get(EventKind::TtsDone).is_some());
    let mut voice = handle.join().expect("worker");
    assert!(
        voice.synthesize("Again.").is_ok(),
        "the voice comes back usable"
    );
}
