//! A last consonant that webrtc-vad calls silence. In `monologue-4` of the turn corpus
//! (Michael's quiet room, MFA test data) the last word, "words", ends in an unvoiced "s" of
//! about 90 ms that the VAD does not hear, so the speech end came 120 ms early. Truth is the
//! corpus annotation (scripts/annotate-reference.py, an independent rule).

use std::path::PathBuf;
use voxlat_core::Nanos;
use voxlat_vad::{Endpointer, EndpointerConfig, VadEvent, WebRtcDetector};

const RATE: u64 = 16_000;

#[test]
fn an_unvoiced_last_consonant_is_part_of_the_turn() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/turns/audio/michael-monologue-4.wav");
    let x = voxlat_audio::wav::read_at(&p, RATE as u32)
        .unwrap_or_else(|e| panic!("{e}"))
        .audio
        .samples;
    // speech_end_ms of the turn in scenarios/turns/test/michael.toml.
    let truth_ms = 4180;

    let det = WebRtcDetector::new(2, 20).unwrap();
    let mut ep = Endpointer::new(EndpointerConfig::default(), det).unwrap();
    let mut events = Vec::new();
    for (k, frame) in x.chunks(320).enumerate() {
        let last = (k * 320 + frame.len() - 1) as u64;
        events.extend(ep.push(frame, Nanos(last * 1_000_000_000 / RATE)).unwrap());
    }
    let ends: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            VadEvent::Endpoint {
                speech_end,
                forced: false,
                ..
            } => Some(speech_end.0 / 1_000_000),
            _ => None,
        })
        .collect();
    let [end] = ends[..] else {
        panic!("one turn, ended by silence: {ends:?}");
    };
    assert!(
        end.abs_diff(truth_ms) <= 40,
        "speech end {end} ms, annotated {truth_ms} ms"
    );
}
