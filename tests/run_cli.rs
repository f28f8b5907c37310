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

/// What the virtual speaker played, sample by sample (value, time on this process's clock),
/// readable while recording.
struct Recorder {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<(f32, u64)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    fn start() -> Recorder {
        voxlat_core::clock::init();
        let host = device::host(None).unwrap();
        let input = device::pick(&host, Direction::Input, None).unwrap();
        let mut cap = Capture::open(&input, 16_000, Some(2400)).unwrap();
        let t0 = Instant::now();
        while !cap.health().started() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            cap.health().started(),
            "the monitor source delivered nothing"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (s, out) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Acquire) {
                match cap.next_frame(160) {
                    Some(f) => {
                        let n = f.samples.len() as u64;
                        let mut out = out.lock().unwrap();
                        for (i, v) in f.samples.into_iter().enumerate() {
                            out.push((v, f.t_end.0.saturating_sub((n - 1 - i as u64) * 62_500)));
                        }
                    }
                    None => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Recorder {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    /// Waits until something louder than `level` is recorded after `from` (this process's
    /// clock); returns its time.
    fn wait_for_sound(&self, from: u64, level: f32, timeout: Duration) -> Option<u64> {
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if let Some(s) = self
                .samples
                .lock()
                .unwrap()
                .iter()
                .find(|s| s.1 >= from && s.0.abs() > level)
            {
                return Some(s.1);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    fn finish(mut self) -> Vec<(f32, u64)> {
        self.stop.store(true, Ordering::Release);
        self.thread.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.samples.lock().unwrap())
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
        .args(["run", "--idle-timeout", "120", "--output-dir"])
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
    let (child, log) = start_voxlat(&pulse, &out, &["--max-turns", "1"]);
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
        "playout_start off by {diff_ms:.1} ms (device xruns during the reply: {}, callback threads raised: {})",
        t["device_xruns"],
        r["stages"]["output"]["raised"]
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
        .filter(|w| w.chars().count() >= 4)
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
    // Whisper tiny on twice-resampled speech misses words ("moon" → "minus"): a third of the
    // reply's longer words is plenty to tell the reply from silence, noise or the question.
    let spoken = heard_text
        .split_once(".wav:")
        .map(|(_, t)| t.split('\n').next().unwrap_or(""))
        .unwrap_or("");
    assert!(
        if words.is_empty() {
            spoken.chars().any(char::is_alphabetic)
        } else {
            found >= 1 && found * 3 >= words.len()
        },
        "Whisper heard {heard_text:?} from the speaker, the reply was {}",
        t["reply_text"]
    );
}

/// A long reply streamed slowly, so it is still streaming and playing when the user speaks
/// over it; then a short one for the turn the interruption starts.
fn slow_then_short(_body: &serde_json::Value, i: usize) -> voxlat_testkit::Script {
    let text = if i == 0 {
        "The moon is about three hundred and eighty thousand kilometres away, which is roughly \
         thirty times the width of the earth, and light from its surface takes a little more \
         than one second to reach us, so when you look at it you see it as it was a moment \
         ago, and astronauts needed about three days to travel there in the nineteen sixties."
    } else {
        "You are welcome."
    };
    let mut tokens: Vec<String> = text.split_inclusive(' ').map(String::from).collect();
    if i == 0 {
        // Twice over: long enough that barge-in always comes before the stream ends.
        tokens.extend(tokens.clone());
    }
    voxlat_testkit::Script {
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(if i == 0 { 120 } else { 10 }),
        tokens,
        ..voxlat_testkit::Script::default()
    }
}

/// A scenario clip made louder than the reply, as a user close to the microphone is
/// (tanh keeps it within full scale).
fn loud_copy(src: &Path, dst: &Path, gain: f32) {
    let d = voxlat_audio::wav::read(src).unwrap();
    let x: Vec<f32> = d.audio.samples.iter().map(|v| (v * gain).tanh()).collect();
    voxlat_audio::wav::write(dst, &x, d.audio.rate).unwrap();
}

#[test]
fn speaking_over_the_reply_stops_playback_and_aborts_the_llm_request() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let llm = voxlat_testkit::Builder::per_request(slow_then_short).start_on_own_runtime(1);
    let pulse = Pulse::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    // The speaker must still be playing when the user speaks over it. This reply's first
    // sentence is 300+ characters long at 8 tokens/s, so after the first chunk nothing more
    // is ready for seconds; a 40-character first chunk (about 2.3 s of audio) covers the
    // barge-in, the default 20 characters (about 1 s) may not.
    let (child, log) = start_voxlat(
        &pulse,
        &out,
        &[
            // The interrupted turn is not counted: this stops after the one it starts.
            "--max-turns",
            "1",
            "--llm-url",
            &llm.base_url(),
            "--first-chunk-max",
            "40",
        ],
    );
    let rec = Recorder::start();
    std::thread::sleep(Duration::from_millis(500));
    let asked = voxlat_core::clock::now().0;
    let _ = pulse.play(&scenario("synthetic-moon.wav")).wait();
    let question_end = voxlat_core::clock::now().0;
    // The reply starts: the first sound after the question.
    let reply_heard = rec
        .wait_for_sound(
            question_end + 300_000_000,
            ONSET_LEVEL,
            Duration::from_secs(120),
        )
        .expect("the reply never played");
    std::thread::sleep(Duration::from_millis(700));
    let clip = dir.path().join("thank-you-loud.wav");
    loud_copy(&scenario("real-auth-thankyou.wav"), &clip, 4.0);
    let _ = pulse.play(&clip).wait();
    let clip_end = voxlat_core::clock::now().0;
    let (ok, all) = wait(child, log);
    let recorded = rec.finish();
    assert!(ok, "voxlat run failed:\n{all}");
    let _ = asked;

    let r = results(&out);
    let turns = r["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{all}");
    let t = &turns[0];
    assert_eq!(t["outcome"], "interrupted", "{t}");
    let i = &t["interrupted"];
    assert_eq!(i["during"], "playout", "{i}");
    assert_eq!(i["llm_aborted"], true, "{i}");
    let reaction = i["reaction_ms"].as_f64().expect("reaction time");
    let stopped = i["playback_stopped"].as_u64().expect("stop time");
    let onset = i["onset"].as_u64().unwrap();
    assert!(reaction > 0.0 && stopped > onset, "{i}");
    // Partial timings are kept: the reply had started playing.
    assert!(t["events"]["playout_start"].as_u64().unwrap() < stopped);
    eprintln!("barge-in reaction (speech onset → playback stopped): {reaction:.1} ms");

    // The HTTP request was dropped mid-stream: the server saw the client go away before it
    // sent every token.
    let served = llm.requests();
    assert_eq!(served.len(), 2);
    assert!(
        !served[0].completed,
        "the first LLM request ran to completion"
    );
    assert!(
        served[0].content_sent.len() < slow_then_short(&serde_json::Value::Null, 0).tokens.len()
    );

    // The interruption is the next turn, which is answered; the interrupted turn is counted
    // but left out of the latency figures.
    let t2 = &turns[1];
    assert_eq!(t2["outcome"], "ok", "{t2}");
    assert!(
        t2["transcript"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("thank"),
        "{}",
        t2["transcript"]
    );
    let a = &r["aggregate"];
    assert_eq!(a["interrupted"], 1);
    assert_eq!(a["total"]["n"], 1, "{a}");

    // The speaker really went quiet: nothing but silence between the end of the user's clip
    // and the next reply.
    let voxlat_offset: i128 = r["stages"]["clock"]["monotonic_minus_process_ns"]
        .as_i64()
        .unwrap()
        .into();
    let to_mine = |voxlat_ns: u64| (i128::from(voxlat_ns) + voxlat_offset - my_offset()) as u64;
    let next_reply = to_mine(t2["events"]["playout_start"].as_u64().unwrap());
    let quiet: Vec<f32> = recorded
        .iter()
        .filter(|s| s.1 > clip_end + 100_000_000 && s.1 + 20_000_000 < next_reply)
        .map(|s| s.0)
        .collect();
    assert!(
        quiet.len() > 16_000 / 4,
        "only {} samples between the clip and the next reply",
        quiet.len()
    );
    let peak = quiet.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(
        peak < 0.01,
        "the interrupted reply kept playing (peak {peak})"
    );
    assert!(reply_heard < to_mine(stopped));
}

/// One clip with a 900 ms pause inside it: the endpointer commits the first half at the
/// pause, and the rest interrupts that turn's reply (a 1.5 s wait for the first token keeps
/// it in flight). `--max-turns 1` counts turns that ran to their end, so the run goes on to
/// answer the rest; and every turn it printed is in its results.
#[test]
fn every_turn_run_prints_is_in_its_results() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let llm = voxlat_testkit::Builder::fixed(voxlat_testkit::Script {
        ttft: Duration::from_millis(1500),
        itl: Duration::from_millis(10),
        tokens: ["Okay, ", "noted."].map(String::from).to_vec(),
        ..voxlat_testkit::Script::default()
    })
    .start_on_own_runtime(1);
    let pulse = Pulse::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let first = voxlat_audio::wav::read(&scenario("real-tt-weasels.wav")).unwrap();
    let rest = voxlat_audio::wav::read(&scenario("real-conf-getpin.wav")).unwrap();
    assert_eq!(first.audio.rate, rest.audio.rate);
    let rate = first.audio.rate;
    let mut clip = first.audio.samples.clone();
    clip.extend(std::iter::repeat_n(0.0, rate as usize * 9 / 10));
    clip.extend_from_slice(&rest.audio.samples);
    let wav = dir.path().join("pause-900ms.wav");
    voxlat_audio::wav::write(&wav, &clip, rate).unwrap();
    let (child, log) = start_voxlat(
        &pulse,
        &out,
        &["--max-turns", "1", "--llm-url", &llm.base_url()],
    );
    std::thread::sleep(Duration::from_millis(500));
    let _ = pulse.play(&wav).wait();
    let (ok, all) = wait(child, log);
    assert!(ok, "voxlat run failed:\n{all}");

    let r = results(&out);
    let turns = r["turns"].as_array().unwrap();
    let written: Vec<&str> = turns.iter().map(|t| t["turn"].as_str().unwrap()).collect();
    let printed: Vec<String> = all
        .lines()
        .filter_map(|l| l.strip_prefix('[')?.split_once("] "))
        .filter_map(|(n, _)| n.parse::<u32>().ok())
        .map(|n| format!("turn-{n}"))
        .collect();
    assert!(!printed.is_empty(), "{all}");
    for p in &printed {
        assert!(
            written.contains(&p.as_str()),
            "{p} printed, not in {written:?}:\n{all}"
        );
    }
    let outcomes: Vec<&str> = turns
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    eprintln!("printed {printed:?}; written {written:?}, {outcomes:?}");
    assert_eq!(
        outcomes.last(),
        Some(&"ok"),
        "the run stops at its first answered turn: {outcomes:?}\n{all}"
    );
    assert!(
        outcomes[..outcomes.len() - 1]
            .iter()
            .all(|o| *o == "interrupted"),
        "{outcomes:?}"
    );
}

/// Live watches the embedded server as replay does: killed while the session listens, it
/// ends the session with the reason, and the results file is written, marked interrupted.
#[test]
fn a_crash_of_the_embedded_server_ends_the_live_session_with_the_reason() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let pulse = Pulse::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (child, log) = start_voxlat(&pulse, &out, &[]);
    common::kill_embedded_server(child.id());
    let (ok, all) = wait(child, log);
    assert!(!ok, "the session went on without its LLM:\n{all}");
    assert!(
        all.contains("exited mid-run") && all.contains("killed by signal 9"),
        "{all}"
    );
    assert!(!all.contains("panicked"), "{all}");
    let r = results(&out);
    assert_eq!(r["header"]["interrupted"], true, "{}", r["header"]);
}
