//! `voxlat speak` end to end with the real Piper voice. Needs the models cache; it fails, never
//! skips, when the voice or ONNX Runtime is missing.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn require_models() {
    let store = voxlat_models::Store::open_default(None).expect("models cache");
    use voxlat_models::known::{ONNX_RUNTIME, PIPER_VOICE, PIPER_VOICE_CONFIG};
    for file in [PIPER_VOICE, PIPER_VOICE_CONFIG, ONNX_RUNTIME] {
        if let Err(e) = store.ready(file) {
            panic!("{e}\nRun `cargo run -- models fetch` (or `voxlat models fetch`) first");
        }
    }
}

fn speak(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_voxlat"))
        .arg("speak")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run voxlat");
    let input = stdin.unwrap_or("").to_string();
    let mut pipe = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("writer").expect("write stdin");
    out
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// (seconds, RMS) of a WAV written by `voxlat speak`, checking its format.
fn read_wav(path: &Path) -> (f64, f64) {
    let mut r = hound::WavReader::open(path).expect("a readable WAV");
    let spec = r.spec();
    assert_eq!(
        (spec.channels, spec.sample_rate, spec.bits_per_sample),
        (1, 22_050, 16)
    );
    let samples: Vec<f64> = r
        .samples::<i16>()
        .map(|s| f64::from(s.expect("sample")) / 32768.0)
        .collect();
    let rms = (samples.iter().map(|s| s * s).sum::<f64>() / samples.len().max(1) as f64).sqrt();
    (samples.len() as f64 / 22_050.0, rms)
}

#[test]
fn speaks_text_into_a_wav_and_prints_the_figures() {
    require_models();
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("out.wav");
    let out = speak(
        &[
            "Hello, world. This is a **test** of the speak command.",
            "-o",
            wav.to_str().expect("utf-8 path"),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for figure in ["time to first audio", "session load", "RTF", "s of audio"] {
        assert!(stdout.contains(figure), "no {figure:?} in:\n{stdout}");
    }
    let (seconds, rms) = read_wav(&wav);
    assert!((2.0..8.0).contains(&seconds), "{seconds:.2} s");
    assert!(rms > 0.02, "RMS {rms:.4}");
    // Written atomically: no temporary file left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, [std::ffi::OsString::from("out.wav")]);
}

#[test]
fn reads_the_text_from_stdin_when_none_is_given() {
    require_models();
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("stdin.wav");
    let out = speak(
        &["-o", wav.to_str().expect("utf-8 path")],
        Some("Good morning, everyone.\n"),
    );
    assert!(out.status.success(), "{}", text(&out));
    let (seconds, rms) = read_wav(&wav);
    assert!((0.8..4.0).contains(&seconds), "{seconds:.2} s");
    assert!(rms > 0.02, "RMS {rms:.4}");
}

#[test]
fn text_with_nothing_to_say_is_an_error_and_writes_nothing() {
    require_models();
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("none.wav");
    let path = wav.to_str().expect("utf-8 path");
    for input in ["🎉🎉 ...", "   "] {
        let out = speak(&[input, "-o", path], None);
        assert!(!out.status.success(), "{input:?}: {}", text(&out));
        assert!(text(&out).contains("nothing to say"), "{}", text(&out));
        assert!(!wav.exists(), "{input:?} wrote a file");
    }
    let out = speak(&["-o", path], Some(""));
    assert!(!out.status.success());
    assert!(text(&out).contains("standard input"), "{}", text(&out));
}

#[test]
fn a_missing_voice_names_the_path_and_the_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("x.wav");
    let out = speak(
        &[
            "hello",
            "--model",
            "/nonexistent/voice.onnx",
            "-o",
            wav.to_str().expect("utf-8 path"),
        ],
        None,
    );
    assert!(!out.status.success());
    let all = text(&out);
    assert!(all.contains("/nonexistent/voice.onnx"), "{all}");
    assert!(all.contains("voxlat models fetch"), "{all}");
    assert!(!wav.exists());
}

#[test]
fn an_unwritable_destination_fails_before_synthesis() {
    let out = speak(&["hello", "-o", "/proc/voxlat-nope/out.wav"], None);
    assert!(!out.status.success());
    let all = text(&out);
    assert!(all.contains("/proc/voxlat-nope"), "{all}");
    assert!(!all.contains("time to first audio"), "{all}");
}
