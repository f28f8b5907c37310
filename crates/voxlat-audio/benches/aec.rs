//! The echo canceller's cost on this machine: CPU time per second of audio, far end and
//! microphone both fed, over the bundled synthetic replies through the simulated room.
//!
//! `cargo bench -p voxlat-audio --bench aec`. It prints figures rather than asserting them:
//! timings depend on the machine and on what else runs.

use std::path::Path;
use std::time::Instant;
use voxlat_audio::aec::room::EchoPath;
use voxlat_audio::aec::{EchoCanceller, Sonora, FRAME, RATE};

const RUNS: usize = 7;

fn main() {
    let mut far = Vec::new();
    for name in [
        "synthetic-weather.wav",
        "synthetic-moon.wav",
        "synthetic-joke.wav",
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios/audio")
            .join(name);
        match voxlat_audio::wav::read_at(&path, RATE) {
            Ok(d) => far.extend(d.audio.samples),
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                return;
            }
        }
    }
    let mic = EchoPath::default().echo(&far, RATE);
    let audio_s = far.len() as f64 / f64::from(RATE);
    let mut per_s = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let mut aec = Sonora::new();
        let mut out = mic.clone();
        let t = Instant::now();
        for (f, m) in far.chunks_exact(FRAME).zip(out.chunks_exact_mut(FRAME)) {
            if aec.render(f).and_then(|()| aec.capture(m)).is_err() {
                eprintln!("the canceller refused a frame");
                return;
            }
        }
        per_s.push(t.elapsed().as_secs_f64() * 1e3 / audio_s);
    }
    per_s.sort_by(f64::total_cmp);
    println!(
        "AEC3 (sonora), {audio_s:.1} s of audio, {RUNS} runs: {:.1} ms of one core per second of audio \
         (min {:.1}, max {:.1}), {:.1} % of a core",
        per_s[RUNS / 2],
        per_s[0],
        per_s[RUNS - 1],
        per_s[RUNS / 2] / 10.0
    );
}
