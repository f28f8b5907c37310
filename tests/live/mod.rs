//! The live tests' sound card: a private PulseAudio daemon whose null sink's monitor is the
//! default input (scripts/pulse-null-sink.sh), reached through ALSA's pulse plugin, so
//! whatever is played comes back as microphone input; a recorder of that monitor on this
//! process's clock; and `voxlat run` started on it. Needs pulseaudio, pulseaudio-utils
//! (paplay), libasound2-plugins (scripts/lib.sh installs them) and the fetched models.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use voxlat_audio::capture::Capture;
use voxlat_audio::device::{self, Direction};

/// One daemon and one voxlat at a time: they share the process environment and 2 cores.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub struct Pulse {
    dir: tempfile::TempDir,
    server: String,
}

impl Pulse {
    pub fn start() -> Pulse {
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

    pub fn play(&self, wav: &Path) -> Child {
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
pub struct Recorder {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<(f32, u64)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    pub fn start() -> Recorder {
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
    pub fn wait_for_sound(&self, from: u64, level: f32, timeout: Duration) -> Option<u64> {
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

    pub fn finish(mut self) -> Vec<(f32, u64)> {
        self.stop.store(true, Ordering::Release);
        self.thread.take().unwrap().join().unwrap();
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}

/// This process's CLOCK_MONOTONIC − process clock.
pub fn my_offset() -> i128 {
    voxlat_core::clock::init();
    voxlat_audio::clockmap::monotonic_offset().0
}

/// Starts `voxlat run` and returns once it is listening.
pub fn start_voxlat(
    pulse: &Pulse,
    out: &Path,
    extra: &[&str],
) -> (Child, std::thread::JoinHandle<String>) {
    let mut child = crate::common::voxlat()
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

pub fn wait(mut child: Child, log: std::thread::JoinHandle<String>) -> (bool, String) {
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

pub fn results(dir: &Path) -> serde_json::Value {
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

pub fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/audio")
        .join(name)
}

/// One clip played into `voxlat run --max-turns 1` (with `extra` flags; its results in
/// `out`), recorded from the speaker: the results, the run's output, the recording and when
/// the clip ended (this process's clock). The run must succeed with one answered turn.
pub fn one_turn(
    out: &Path,
    extra: &[&str],
    clip: &Path,
) -> (serde_json::Value, String, Vec<(f32, u64)>, u64) {
    let pulse = Pulse::start();
    let args: Vec<&str> = ["--max-turns", "1"].iter().chain(extra).copied().collect();
    let (child, log) = start_voxlat(&pulse, out, &args);
    let rec = Recorder::start();
    std::thread::sleep(Duration::from_millis(500));
    let _ = pulse.play(clip).wait();
    let clip_end = voxlat_core::clock::now().0;
    let (ok, all) = wait(child, log);
    std::thread::sleep(Duration::from_millis(300));
    let recorded = rec.finish();
    assert!(ok, "voxlat run failed:\n{all}");
    let r = results(out);
    let turns = r["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{all}");
    assert_eq!(turns[0]["outcome"], "ok", "{}", turns[0]);
    (r, all, recorded, clip_end)
}

/// voxlat's process clock onto this process's, by the offsets both publish (`r` is the run's
/// results).
pub fn to_mine(r: &serde_json::Value) -> impl Fn(u64) -> i64 {
    let voxlat_offset: i128 = r["stages"]["clock"]["monotonic_minus_process_ns"]
        .as_i64()
        .unwrap()
        .into();
    let mine = my_offset();
    move |voxlat_ns| (i128::from(voxlat_ns) + voxlat_offset - mine) as i64
}

/// Index of the first sample louder than `level`.
pub fn onset(x: &[f32], level: f32) -> Option<usize> {
    x.iter().position(|v| v.abs() > level)
}

pub const ONSET_LEVEL: f32 = 0.05;

/// `voxlat run` on its own loopback, answered by the scripted LLM at `llm_url`, asked the
/// bundled moon question: what a test needs once the reply is first heard.
pub struct Asked {
    pub pulse: Pulse,
    pub dir: tempfile::TempDir,
    /// The run's `--output-dir`.
    pub out: PathBuf,
    pub child: Child,
    pub log: std::thread::JoinHandle<String>,
    pub rec: Recorder,
    /// When the reply was first heard (this process's clock).
    pub reply_heard: u64,
}

/// Starts `voxlat run --max-turns 1` with a 40-character first chunk (a long first sentence
/// keeps the speaker busy for about 2.3 s, long enough for the user to speak over it), asks it
/// the moon question and waits until the reply is heard.
pub fn ask_about_the_moon(llm_url: &str) -> Asked {
    let pulse = Pulse::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let args = [
        "--max-turns",
        "1",
        "--llm-url",
        llm_url,
        "--first-chunk-max",
        "40",
    ];
    let (child, log) = start_voxlat(&pulse, &out, &args);
    let rec = Recorder::start();
    std::thread::sleep(Duration::from_millis(500));
    let _ = pulse.play(&scenario("synthetic-moon.wav")).wait();
    let question_end = voxlat_core::clock::now().0;
    let reply_heard = rec
        .wait_for_sound(
            question_end + 300_000_000,
            ONSET_LEVEL,
            Duration::from_secs(120),
        )
        .expect("the reply never played");
    Asked {
        pulse,
        dir,
        out,
        child,
        log,
        rec,
        reply_heard,
    }
}

/// A long reply streamed slowly, so it is still streaming and playing when the user speaks
/// over it; then a short one for every later request.
pub fn slow_then_short(_body: &serde_json::Value, i: usize) -> voxlat_testkit::Script {
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
        // Twice over: long enough that the user always speaks before the stream ends.
        tokens.extend(tokens.clone());
    }
    voxlat_testkit::Script {
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(if i == 0 { 120 } else { 10 }),
        tokens,
        ..voxlat_testkit::Script::default()
    }
}

/// `x` made louder, as a user close to the microphone is (tanh keeps it within full scale),
/// written to `dst`.
pub fn loud(x: &[f32], rate: u32, gain: f32, dst: &Path) {
    let y: Vec<f32> = x.iter().map(|v| (v * gain).tanh()).collect();
    voxlat_audio::wav::write(dst, &y, rate).unwrap();
}

impl Asked {
    /// Plays `x` (at `rate`, `gain` times louder) into the microphone, as the user; returns
    /// when it has played (this process's clock).
    pub fn say(&self, x: &[f32], rate: u32, gain: f32) -> u64 {
        let clip = self.dir.path().join("user.wav");
        loud(x, rate, gain, &clip);
        let _ = self.pulse.play(&clip).wait();
        voxlat_core::clock::now().0
    }

    /// Waits for the run to end (it must succeed): its results, its output, and the recording.
    pub fn finish(self) -> (serde_json::Value, String, Vec<(f32, u64)>) {
        let (ok, all) = wait(self.child, self.log);
        let recorded = self.rec.finish();
        assert!(ok, "voxlat run failed:\n{all}");
        (results(&self.out), all, recorded)
    }
}
