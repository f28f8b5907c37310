//! `voxlat transcribe` and `voxlat vad` end to end on the bundled clips and on odd formats.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn voxlat(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_voxlat"))
        .args(args)
        .output()
        .expect("run voxlat")
}

fn clip(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/audio")
        .join(name)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The clip re-encoded as stereo, 8-bit, 44.1 kHz: an odd format that must still work.
fn odd_copy(src: &Path, dir: &Path) -> PathBuf {
    let audio = voxlat_audio::wav::read_at(src, 44_100).unwrap().audio;
    let p = dir.join("odd.wav");
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 44_100,
        bits_per_sample: 8,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(&p, spec).unwrap();
    for s in audio.samples {
        let v = (s.clamp(-1.0, 1.0) * 127.0) as i8;
        w.write_sample(v).unwrap();
        w.write_sample(v).unwrap();
    }
    w.finalize().unwrap();
    p
}

#[test]
fn transcribe_prints_words_and_timing_and_names_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let odd = odd_copy(&clip("synthetic-moon.wav"), dir.path());
    let junk = dir.path().join("junk.wav");
    std::fs::write(&junk, b"not a wav").unwrap();
    let o = voxlat(&[
        "transcribe",
        clip("real-conf-getpin.wav").to_str().unwrap(),
        junk.to_str().unwrap(),
        odd.to_str().unwrap(),
    ]);
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "one file failed: {all}");
    assert!(
        all.to_lowercase().contains("conference pin number"),
        "{all}"
    );
    assert!(
        all.to_lowercase().contains("moon"),
        "odd format transcribed: {all}"
    );
    assert!(
        all.contains("junk.wav") && all.contains("not a WAV"),
        "{all}"
    );
    assert!(all.contains("RTF"), "{all}");
    assert!(!all.contains("panicked"));
}

#[test]
fn vad_reports_one_turn_per_clip_with_its_decisions() {
    let o = voxlat(&["vad", clip("synthetic-timer.wav").to_str().unwrap()]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains("speech start") && all.contains("1 turn(s)"),
        "{all}"
    );
    let o = voxlat(&[
        "vad",
        "--mode",
        "7",
        clip("synthetic-timer.wav").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("mode 7"), "{}", text(&o));
}

#[test]
fn empty_wav_is_named_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("empty.wav");
    hound::WavWriter::create(
        &p,
        hound::WavSpec {
            channels: 1,
            sample_rate: 16000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        },
    )
    .unwrap()
    .finalize()
    .unwrap();
    let o = voxlat(&["vad", p.to_str().unwrap()]);
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        all.contains("empty.wav") && all.contains("no audio"),
        "{all}"
    );
}
