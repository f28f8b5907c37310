//! `voxlat check-loopback` on a recording built here, where the listener's wait is known by
//! construction: a real clip at a known place, and a reply (with its own leading silence) a
//! known time after the clip's end.

mod common;

use std::path::Path;

const RATE: usize = 16_000;

fn write_turns(path: &Path, total_ms: f64) {
    use voxlat_core::{EventKind, Nanos};
    let mut turn = voxlat_pipeline::TurnRecord::blank("live", "turn-1", "req-1", "");
    turn.outcome = voxlat_pipeline::TurnOutcome::Ok;
    turn.events
        .insert(EventKind::SpeechEnd, Nanos(1_000_000_000));
    turn.events
        .insert(EventKind::PlayoutStart, Nanos(2_000_000_000));
    turn.events
        .insert(EventKind::FirstVoice, Nanos(2_000_000_000));
    turn.breakdown = Some(voxlat_core::segments::Breakdown {
        chain: String::new(),
        segments: Vec::new(),
        total_ns: (total_ms * 1e6) as i64,
    });
    std::fs::write(path, format!("{}\n", serde_json::to_string(&turn).unwrap())).unwrap();
}

/// Runs the check with a reported total of `reported_ms`; returns the JSON it wrote.
fn check(dir: &Path, reported_ms: f64) -> serde_json::Value {
    write_turns(&dir.join("live.jsonl"), reported_ms);
    let out = common::voxlat()
        .arg("check-loopback")
        .arg("--recording")
        .arg(dir.join("device.wav"))
        .arg("--plan")
        .arg(dir.join("plan.tsv"))
        .arg("--turns")
        .arg(dir.join("live.jsonl"))
        .arg("--replies")
        .arg(dir.join("replies"))
        .arg("--json")
        .arg(dir.join("out.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::output_text(&out));
    serde_json::from_slice(&std::fs::read(dir.join("out.json")).unwrap()).unwrap()
}

/// Writes a recording of `clip` (from scenarios/audio) at a known place, with `overlay`
/// seconds of a loud tone over it from the clip's start (a reply to a part of it), and a reply
/// whose first sound comes 700 ms after the clip's end, over a noise floor of peak `noise`;
/// returns where the clip starts.
fn scene(dir: &Path, clip: &str, overlay: Option<(f32, f32)>, noise: f32) -> usize {
    let clip_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/audio")
        .join(clip);
    let clip = voxlat_audio::wav::read_at(&clip_path, RATE as u32)
        .unwrap()
        .audio
        .samples;
    // The whole clip counts as speech: its end is its last sample.
    let end_ms = clip.len() * 1000 / RATE;
    let clip_at = RATE + 1234;
    // The reply WAV starts with 50 ms of silence; its first sound is heard 700 ms after the
    // end of speech, so the listener waited 700 ms (the breakdown ends at the first voice).
    let lead = RATE / 20;
    let mut reply = vec![0.0f32; lead];
    // A chirp with a syllable-rate envelope: like speech, it matches itself at one lag only.
    reply.extend((0..RATE).map(|i| {
        let t = i as f32;
        let syllables = 0.6 + 0.4 * (t * std::f32::consts::TAU * 4.0 / RATE as f32).sin();
        0.3 * syllables * (t * (0.03 + t * 4e-6)).sin()
    }));
    let reply_at = clip_at + end_ms * RATE / 1000 + 7 * RATE / 10 - lead;
    let mut rec = vec![0.0f32; reply_at + reply.len() + RATE];
    // A sound before the clip that must not be taken for it, and low noise everywhere.
    for (i, r) in rec[..RATE / 2].iter_mut().enumerate() {
        *r = 0.2 * (i as f32 * 0.013).sin();
    }
    for (r, c) in rec[clip_at..].iter_mut().zip(&clip) {
        *r += 0.9 * c;
    }
    if let Some((from_s, len_s)) = overlay {
        let from = clip_at + (from_s * RATE as f32) as usize;
        let n = (len_s * RATE as f32) as usize;
        for (i, r) in rec[from..from + n].iter_mut().enumerate() {
            *r += 0.5 * (i as f32 * 0.11).sin();
        }
    }
    for (r, c) in rec[reply_at..].iter_mut().zip(&reply) {
        *r += c;
    }
    for (i, r) in rec.iter_mut().enumerate() {
        *r += 2.0 * noise * ((i * 7919 % 97) as f32 / 97.0 - 0.5);
    }
    voxlat_audio::wav::write(&dir.join("device.wav"), &rec, RATE as u32).unwrap();
    std::fs::create_dir_all(dir.join("replies")).unwrap();
    voxlat_audio::wav::write(&dir.join("replies/live-turn-1-0.wav"), &reply, RATE as u32).unwrap();
    std::fs::write(
        dir.join("plan.tsv"),
        format!("{}\tsc:clip\t{end_ms}\t0\n", clip_path.display()),
    )
    .unwrap();
    clip_at
}

/// The check's figures for the one clip, given a reported total of `reported_ms`.
fn assert_timed(dir: &Path, clip_at: usize, reported_ms: f64, expected_error_ms: f64) {
    let out = check(dir, reported_ms);
    let c = &out["clips"][0];
    assert_eq!(c["onset_found_by"], "correlation", "{c}");
    let at_s = c["at_s"].as_f64().unwrap_or(f64::NAN);
    assert!(
        (at_s - clip_at as f64 / RATE as f64).abs() < 0.001,
        "clip found at {at_s} s: {c}"
    );
    let heard = c["heard_total_ms"].as_f64().unwrap();
    assert!((heard - 700.0).abs() <= 2.0, "heard {heard} ms: {c}");
    let error = c["error_ms"].as_f64().unwrap();
    assert!(
        (error - expected_error_ms).abs() <= 2.0,
        "error {error} ms: {c}"
    );
    assert_eq!(out["summary"]["measured"], 1);
}

#[test]
fn the_wait_heard_in_the_recording_is_set_against_the_reported_total() {
    let dir = tempfile::tempdir().unwrap();
    let clip_at = scene(dir.path(), "real-conf-getpin.wav", None, 0.0005);
    // Reported right: no error. Reported 120 ms short (a late speech-end estimate): −120 ms.
    for (reported, expected) in [(700.0, 0.0), (580.0, -120.0)] {
        assert_timed(dir.path(), clip_at, reported, expected);
    }
}

/// A room's noise floor above the sound level, everywhere (here about 25 dB under the
/// speech's peaks): a level threshold finds "sound" at the end of speech and cannot time the
/// clip; the reply, placed by correlation, is found where it starts.
#[test]
fn a_clip_over_a_noise_floor_is_timed_by_placing_the_reply() {
    let dir = tempfile::tempdir().unwrap();
    let clip_at = scene(dir.path(), "real-conf-getpin.wav", None, 0.06);
    assert_timed(dir.path(), clip_at, 700.0, 0.0);
}

/// Live took a pause inside the clip for the end of a turn and began a reply over the rest of
/// it until the user's speech stopped it: the clip is found by its first second, and named as
/// one that cannot be timed, not "not found".
#[test]
fn a_clip_with_a_reply_over_its_middle_is_found_and_not_timed() {
    let dir = tempfile::tempdir().unwrap();
    let clip_at = scene(
        dir.path(),
        "real-agent-alreadyon.wav",
        Some((1.5, 2.0)),
        0.0005,
    );
    let out = check(dir.path(), 650.0);
    let c = &out["clips"][0];
    let at_s = c["at_s"].as_f64().unwrap_or(f64::NAN);
    assert!(
        (at_s - clip_at as f64 / RATE as f64).abs() < 0.001,
        "clip found at {at_s} s: {c}"
    );
    assert!(
        c["note"].as_str().unwrap_or("").contains("over the clip"),
        "{c}"
    );
    assert_eq!(out["summary"]["measured"], 0);
}

#[test]
fn a_plan_line_that_is_not_four_fields_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plan.tsv"), "a.wav\tlabel\n").unwrap();
    let out = common::voxlat()
        .args([
            "check-loopback",
            "--recording",
            "r.wav",
            "--turns",
            "t.jsonl",
            "--replies",
            ".",
        ])
        .arg("--plan")
        .arg(dir.path().join("plan.tsv"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = common::output_text(&out);
    assert!(
        text.contains("plan.tsv:1:") && text.contains("TURNS_BEFORE"),
        "{text}"
    );
}
