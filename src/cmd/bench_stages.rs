//! `voxlat bench-stages`: each voice stage in isolation on this machine, and what thread
//! contention does to them. Figures are printed (medians over repeats), never asserted.

use crate::common::setup::Setup;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use voxlat_asr::engine::WhisperEngine;
use voxlat_core::stats::Summary;
use voxlat_core::table::{fmt_num, Table};
use voxlat_models::known;
use voxlat_tts::piper::{Voice, VoiceOptions};
use voxlat_vad::{VoiceDetector, WebRtcDetector};

/// Times VAD (frames/s), Whisper (latency and real-time factor for ~1, 3 and 8 s of speech),
/// Piper (ONNX session load; time to first audio for a 3-word clause, an 8-word and a 25-word
/// sentence, with 1 and 2 threads) and the cost of two spinning stages sharing the cores.
#[derive(Args, Debug)]
pub struct BenchStagesArgs {
    /// Repeats per measurement (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Skip the contention measurement.
    #[arg(long)]
    pub no_contention: bool,
}

fn clip(name: &str) -> Result<Vec<f32>> {
    let p = PathBuf::from("scenarios/audio").join(name);
    Ok(voxlat_audio::wav::read_at(&p, 16_000)?.audio.samples)
}

fn median_ms(mut f: impl FnMut() -> Result<Duration>, n: usize) -> Result<Summary> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(f()?.as_secs_f64() * 1e3);
    }
    Summary::from_samples(&v, 0).ok_or_else(|| anyhow::anyhow!("no samples"))
}

/// A thread that spins until dropped: a stand-in for another stage's busy thread pool.
struct Spinner(Arc<AtomicBool>, Option<std::thread::JoinHandle<()>>);

impl Spinner {
    fn start() -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let h = std::thread::spawn(move || {
            let mut x = 0u64;
            while !s.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
        Spinner(stop, Some(h))
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(h) = self.1.take() {
            let _ = h.join();
        }
    }
}

pub fn run(args: BenchStagesArgs) -> Result<ExitCode> {
    let n = args.repeat.max(1);
    let setup = Setup::open()?;
    let whisper = setup.model(known::WHISPER)?;
    let voice_path = setup.model(known::PIPER_VOICE)?;
    let runtime = setup.model(known::ONNX_RUNTIME)?;
    let mut t = Table::new(&["stage", "measure", "n", "p50", "min", "max", "unit"]);
    fn row(t: &mut Table, stage: &str, what: &str, s: &Summary, unit: &str) {
        t.row(vec![
            stage.into(),
            what.into(),
            s.n.to_string(),
            fmt_num(s.p50),
            fmt_num(s.min),
            fmt_num(s.max),
            unit.into(),
        ]);
    }

    // VAD throughput on real speech.
    let speech: Vec<f32> = [
        "real-agent-alreadyon.wav",
        "real-privacy-prompt.wav",
        "synthetic-joke.wav",
    ]
    .iter()
    .map(|c| clip(c))
    .collect::<Result<Vec<_>>>()?
    .concat();
    let mut vad = WebRtcDetector::new(2, 20)?;
    let frames = speech.len() / 320;
    let mut fps = Vec::new();
    for _ in 0..n {
        let t0 = Instant::now();
        for f in speech.chunks_exact(320) {
            std::hint::black_box(vad.is_voice(f)?);
        }
        fps.push(frames as f64 / t0.elapsed().as_secs_f64());
    }
    row(
        &mut t,
        "vad",
        "webrtc 20 ms frames per second",
        &Summary::from_samples(&fps, 0).unwrap_or_else(|| unreachable!()),
        "frames/s",
    );
    let silero = setup.model(known::SILERO_VAD)?;
    let mut sv = voxlat_vad::silero::SileroDetector::new(&silero, &runtime, 0.5)?;
    let sframes = speech.len() / 512;
    let mut sfps = Vec::new();
    for _ in 0..n {
        sv.reset();
        let t0 = Instant::now();
        for f in speech.chunks_exact(512) {
            std::hint::black_box(sv.is_voice(f)?);
        }
        sfps.push(sframes as f64 / t0.elapsed().as_secs_f64());
    }
    if let Some(s) = Summary::from_samples(&sfps, 0) {
        row(
            &mut t,
            "vad",
            "silero 32 ms frames per second (1 thread)",
            &s,
            "frames/s",
        );
    }

    // ASR by utterance length.
    let budget = &setup.budget;
    let mut asr = WhisperEngine::load(&whisper, budget.asr)?;
    let one = clip("real-auth-thankyou.wav")?;
    let three = clip("synthetic-joke.wav")?;
    let eight = [
        clip("real-agent-alreadyon.wav")?,
        clip("real-tt-weasels.wav")?,
    ]
    .concat();
    asr.transcribe(&three)?; // warm-up
    for (label, audio) in [("~1 s", &one), ("~3 s", &three), ("~8 s", &eight)] {
        let secs = audio.len() as f64 / 16_000.0;
        let s = median_ms(|| Ok(asr.transcribe(audio)?.compute), n)?;
        row(
            &mut t,
            "asr",
            &format!(
                "whisper tiny.en, {label} ({secs:.1} s), {} threads",
                budget.asr
            ),
            &s,
            "ms",
        );
        t.row(vec![
            "".into(),
            "  real-time factor at p50".into(),
            "".into(),
            format!("{:.3}", s.p50 / 1e3 / secs),
            "".into(),
            "".into(),
            "".into(),
        ]);
    }

    // The runaway guard: what checking a clean decode costs (it runs on every one), and what a
    // short real command costs whose first decode may run away and be decoded again.
    let sentence = "That agent is already logged on. Please enter your agent number followed by the pound key.";
    let reps = 10_000;
    let t0 = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(voxlat_asr::guard::check(
            std::hint::black_box(sentence),
            22,
            96,
            5.5,
        ));
    }
    let per_check_us = t0.elapsed().as_secs_f64() * 1e6 / reps as f64;
    t.row(vec![
        "asr".into(),
        "runaway guard, one check of a clean 17-word decode".into(),
        reps.to_string(),
        format!("{per_check_us:.2}"),
        "".into(),
        "".into(),
        "µs".into(),
    ]);
    for name in ["real-digit-40.wav", "real-word-goodbye.wav"] {
        let audio = clip(name)?;
        let mut retried = 0;
        let s = median_ms(
            || {
                let tr = asr.transcribe(&audio)?;
                retried += usize::from(tr.fallback.is_some());
                Ok(tr.compute)
            },
            n,
        )?;
        row(
            &mut t,
            "asr",
            &format!("{name}, every decode ({retried} of {n} decoded again)"),
            &s,
            "ms",
        );
    }

    // TTS: session load and time to first audio.
    let texts = [
        ("3-word clause", "Sure, no problem."),
        ("8-word sentence", "The moon is about four hundred thousand kilometres away."),
        ("25-word sentence", "The moon orbits the earth at an average distance of about three hundred eighty four thousand kilometres, which light crosses in a little more than one second."),
    ];
    for threads in [1usize, 2] {
        let t0 = Instant::now();
        let mut voice = Voice::load(
            &voice_path,
            VoiceOptions {
                intra_threads: threads,
                runtime: Some(runtime.clone()),
                ..Default::default()
            },
        )?;
        let load = t0.elapsed();
        let lt = voice.load_times();
        t.row(vec![
            "tts".into(),
            format!(
                "load ({threads} thread): ONNX session {:.0} ms, runtime {:.0} ms",
                lt.session.as_secs_f64() * 1e3,
                lt.runtime.as_secs_f64() * 1e3
            ),
            "1".into(),
            fmt_num(load.as_secs_f64() * 1e3),
            "".into(),
            "".into(),
            "ms".into(),
        ]);
        voice.synthesize("Warm up.")?;
        for (label, text) in texts {
            let s = median_ms(|| Ok(voice.synthesize(text)?.compute), n)?;
            row(
                &mut t,
                "tts",
                &format!("piper first audio, {label}, {threads} thread(s)"),
                &s,
                "ms",
            );
        }
    }

    // Contention: ASR with 2 threads and with 1 while another stage keeps one core busy.
    if !args.no_contention {
        let quiet = median_ms(|| Ok(asr.transcribe(&three)?.compute), n)?;
        let spinner = Spinner::start();
        let busy2 = median_ms(|| Ok(asr.transcribe(&three)?.compute), n)?;
        drop(asr);
        let mut asr1 = WhisperEngine::load(&whisper, 1)?;
        asr1.transcribe(&three)?;
        let busy1 = median_ms(|| Ok(asr1.transcribe(&three)?.compute), n)?;
        drop(spinner);
        row(
            &mut t,
            "contention",
            &format!("asr ~3 s, {} threads, cores quiet", budget.asr),
            &quiet,
            "ms",
        );
        row(
            &mut t,
            "contention",
            &format!("asr ~3 s, {} threads, one core busy", budget.asr),
            &busy2,
            "ms",
        );
        row(
            &mut t,
            "contention",
            "asr ~3 s, 1 thread, one core busy",
            &busy1,
            "ms",
        );
        t.row(vec![
            "".into(),
            "  slowdown of the spinning pool vs 1 thread".into(),
            "".into(),
            format!("{:.1}x", busy2.p50 / busy1.p50),
            "".into(),
            "".into(),
            "".into(),
        ]);
    }
    print!("{}", t.render());
    println!("Medians of {n} runs each, on this machine as it is now; these are figures, not pass/fail thresholds.");
    Ok(ExitCode::SUCCESS)
}
