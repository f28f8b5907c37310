//! `voxlat run` end to end on a real (virtual) sound card: a private PulseAudio daemon whose
//! null sink's monitor is the default input (scripts/pulse-null-sink.sh), reached through
//! ALSA's pulse plugin, so whatever is played comes back as microphone input. The test plays
//! a scenario WAV into that path, voxlat hears it, answers, and the test records the virtual
//! speaker itself.
//!
//! Putting the recording on voxlat's clock: the test records with voxlat-audio's capture
//! (cpal's own capture timestamps of the monitor source, mapped onto this process's clock),
//! and both processes publish how their clocks relate to CLOCK_MONOTONIC (voxlat in its
//! results, `monotonic_minus_process_ns`). So the comparison is between voxlat's *playback*
//! timestamp (what the output device predicted when it scheduled the first sample) and the
//! *capture* timestamp a separate client's stream gives the same sample on the monitor: two
//! directions of PulseAudio's latency accounting, not a physical clock. It catches a wrong
//! mapping, a missing device segment or a mis-timed playout; it cannot catch an error common
//! to both of PulseAudio's latency reports. Needs pulseaudio, pulseaudio-utils (paplay),
//! libasound2-plugins (scripts/lib.sh installs them) and the fetched models.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use voxlat_audio::capture::Capture;
use voxlat_audio::device::{self, Direction};

/// One daemon and one voxlat at a time: they share the process environment and 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());

struct Pulse {
    dir: tempfile::TempDir,
    server: String,
}

impl Pulse {
    fn start() -> Pulse {
        let dir = tempfile::tempdir().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pulse-null-sink.sh");
        let o = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(dir.path())
            .output()
            .expect("bash");
        assert!(
            o.status.success(),
            "cannot start the PulseAudio test daemon: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let out = String::from_utf8_lossy(&o.stdout);
        let server = out
            .lines()
            .find_map(|l| l.strip_prefix("PULSE_SERVER="))
            .expect("PULSE_SERVER line")
            .to_string();
        // The ALSA pulse plugin in this process (the recorder) reads it from the environment.
        std::env::set_var("PULSE_SERVER", &server);
        Pulse { dir, server }
    }

    fn play(&self, wav: &Path) -> Child {
        Command::new("paplay")
            .arg(wav)
            .env("PULSE_SERVER", &self.server)
            .spawn()
            .expect("paplay (pulseaudio-utils) must be installed")
    }
}

impl Drop for Pulse {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pulse-null-sink.sh");
        let _ = Command::new("bash")
            .arg(script)
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

/// What the virtual speaker played, sample by sample, on this process's clock.
struct Recorder {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<(f32, u64)>>>,
}

impl Recorder {
    fn start() -> Recorder {
        voxlat_core::clock::init();
        let host = device::host(None).unwrap();
        let input = device::pick(&host, Direction::Input, None).unwrap();
        let mut cap = Capture::open(&input, 16_000).unwrap();
        let t0 = Instant::now();
        while !cap.started() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(cap.started(), "the monitor source delivered nothing");
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut out = Vec::new();
            while !s.load(Ordering::Acquire) {
                match cap.next_frame(160) {
                    Some(f) => {
                        let n = f.samples.len() as u64;
                        for (i, v) in f.samples.into_iter().enumerate() {
                            out.push((v, f.t_end.0.saturating_sub((n - 1 - i as u64) * 62_500)));
                        }
                    }
                    None => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            out
        });
        Recorder {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<(f32, u64)> {
        self.stop.store(true, Ordering::Release);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// This process's CLOCK_MONOTONIC − process clock.
fn my_offset() -> i128 {
    voxlat_core::clock::init();
    voxlat_audio::clockmap::monotonic_offset().0
}

/// Starts `voxlat run` and returns once it is listening.
fn start_voxlat(
    pulse: &Pulse,
    out: &Path,
    extra: &[&str],
) -> (Child, std::thread::JoinHandle<String>) {
    let mut child = common::voxlat()
        .args([
            "run",
            "--max-turns",
            "1",
            "--idle-timeout",
            "120",
            "--output-dir",
        ])
        .arg(out)
        .arg("--save-replies")
        .arg(out.join("replies"))
        .args(extra)
        .env("PULSE_SERVER", &pulse.server)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let log = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("listening on") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if rx.recv_timeout(Duration::from_secs(600)).is_err() {
        let _ = child.kill();
        panic!(
            "voxlat run never started listening: {}",
            log.join().unwrap()
        );
    }
    (child, log)
}

fn wait(mut child: Child, log: std::thread::JoinHandle<String>) -> (bool, String) {
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > Duration::from_secs(600) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut stdout);
    }
    let all = format!("{stdout}{}", log.join().unwrap());
    (status.is_some_and(|s| s.success()), all)
}

fn results(dir: &Path) -> serde_json::Value {
    let json = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("live-")
        })
        .expect("live results file");
    serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap()
}

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/audio")
        .join(name)
}

/// Index of the first sample louder than `level`.
fn onset(x: &[f32], level: f32) -> Option<usize> {
    x.iter().position(|v| v.abs() > level)
}

const ONSET_LEVEL: f32 = 0.05;

#[test]
fn a_spoken_question_is_answered_through_the_speaker_on_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let pulse = Pulse::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (child, log) = start_voxlat(&pulse, &out, &[]);
    let rec = Recorder::start();
    std::thread::sleep(Duration::from_millis(500));
    let mut player = pulse.play(&scenario("synthetic-moon.wav"));
    let _ = player.wait();
    let (ok, all) = wait(child, log);
    std::thread::sleep(Duration::from_millis(300));
    let recorded = rec.finish();
    assert!(ok, "voxlat run failed:\n{all}");

    let r = results(&out);
    let turns = r["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{all}");
    let t = &turns[0];
    assert_eq!(t["outcome"], "ok", "{t}");
    assert!(
        t["transcript"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("moon"),
        "transcript {}",
        t["transcript"]
    );
    // One line per turn: transcript, reply, breakdown with the dominant stage starred.
    let line = all
        .lines()
        .find(|l| l.starts_with("[1] "))
        .expect("turn line");
    assert!(
        line.contains(" → ") && line.contains("*") && line.contains(" ms"),
        "{line}"
    );

    // The breakdown telescopes exactly, and includes the device's own latency.
    let b = &t["breakdown"];
    let segs = b["segments"].as_array().unwrap();
    let sum: i64 = segs.iter().map(|s| s["ns"].as_i64().unwrap()).sum();
    assert_eq!(sum, b["total_ns"].as_i64().unwrap());
    let ev = &t["events"];
    let at = |k: &str| {
        ev[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} missing: {ev}"))
    };
    assert_eq!(
        b["total_ns"].as_u64().unwrap(),
        at("playout_start") - at("speech_end")
    );
    let device_ns = segs.iter().find(|s| s["name"] == "device").unwrap()["ns"]
        .as_i64()
        .unwrap();
    assert!(
        device_ns > 0,
        "a real device plays after the sample is queued: {device_ns} ns"
    );
    assert!(at("playout_done") > at("playout_start"));

    // The speaker played what TTS produced, and its first sound came when voxlat said.
    let reply = voxlat_audio::wav::read_at(&out.join("replies/live-turn-1-0.wav"), 16_000)
        .unwrap()
        .audio
        .samples;
    let reply_onset = onset(&reply, ONSET_LEVEL).expect("the reply has sound");
    let voxlat_offset: i128 = r["stages"]["clock"]["monotonic_minus_process_ns"]
        .as_i64()
        .unwrap()
        .into();
    let to_mine = |voxlat_ns: u64| (i128::from(voxlat_ns) + voxlat_offset - my_offset()) as i64;
    let expected = to_mine(at("playout_start")) + (reply_onset as i64 * 1_000_000_000 / 16_000);
    // The reply is the first sound after the question ended (1.5 s of silence at least).
    let after_question = to_mine(at("endpoint"));
    let samples: Vec<f32> = recorded.iter().map(|s| s.0).collect();
    let start = recorded
        .iter()
        .position(|s| s.1 as i64 >= after_question)
        .expect("recording covers the reply");
    let heard = start + onset(&samples[start..], ONSET_LEVEL).expect("the speaker was silent");
    let diff_ms = (recorded[heard].1 as i64 - expected) as f64 / 1e6;
    eprintln!(
        "recording {} samples over {:.3} s; endpoint at {:.3} s, expected onset {:.3} s, heard {:.3} s (recording time)",
        recorded.len(),
        (recorded.last().unwrap().1 - recorded[0].1) as f64 / 1e9,
        (after_question - recorded[0].1 as i64) as f64 / 1e9,
        (expected - recorded[0].1 as i64) as f64 / 1e9,
        (recorded[heard].1 - recorded[0].1) as f64 / 1e9,
    );
    eprintln!("captured onset − voxlat's playout_start (+ reply onset): {diff_ms:+.2} ms; device segment {:.1} ms", device_ns as f64 / 1e6);
    assert!(
        diff_ms.abs() <= 20.0,
        "playout_start off by {diff_ms:.1} ms"
    );

    // Non-silent speech: loud enough, and Whisper hears the reply's words in the recording
    // (a sample-exact comparison would fail on the gaps a loaded machine's scheduler causes,
    // which the results count as device xruns).
    let first_reply_sample = heard - reply_onset.min(heard);
    let end = (first_reply_sample + reply.len() + 3_200).min(samples.len());
    let played = &samples[first_reply_sample..end];
    let rms = (played.iter().map(|v| v * v).sum::<f32>() / played.len() as f32).sqrt();
    assert!(rms > 0.01, "reply RMS {rms}");
    let wav = dir.path().join("heard.wav");
    voxlat_audio::wav::write(&wav, played, 16_000).unwrap();
    let o = common::voxlat()
        .arg("transcribe")
        .arg(&wav)
        .output()
        .unwrap();
    let heard_text = String::from_utf8_lossy(&o.stdout).to_lowercase();
    let words: Vec<String> = t["reply_text"]
        .as_str()
        .unwrap()
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| w.len() >= 3)
        .map(str::to_lowercase)
        .collect();
    let found = words
        .iter()
        .filter(|w| heard_text.contains(w.as_str()))
        .count();
    eprintln!(
        "underruns {}, device xruns {}; the speaker said {heard_text:?} for {:?}",
        t["underruns"], t["device_xruns"], t["reply_text"]
    );
    assert!(
        !words.is_empty() && found * 2 >= words.len(),
        "Whisper heard {heard_text:?} from the speaker, the reply was {}",
        t["reply_text"]
    );
}
