//! TTS figures on this machine: ONNX session load time per optimization level, and time to
//! first audio for a 3-word clause, an 8-word and a 25-word sentence with 1 and 2 intra-op
//! threads.
//!
//! `cargo bench -p voxlat-tts --bench tts` (needs `voxlat models fetch`). It prints figures
//! rather than asserting them: timings depend on the machine and on what else runs.
//!
//! Time to first audio is a whole `Voice::synthesize` call (phonemize + one model run), since
//! VITS produces a sentence's samples all at once.

use std::time::{Duration, Instant};
use voxlat_tts::piper::{Optimization, Voice, VoiceOptions};

const TEXTS: &[(&str, &str)] = &[
    ("3-word clause", "Sure, no problem,"),
    (
        "8-word sentence",
        "The meeting has been moved to Thursday afternoon.",
    ),
    (
        "25-word sentence",
        "If you leave the office before five, take the northern road, because the bridge on \
         the southern route is closed for repairs until next week.",
    ),
];
const LOADS: usize = 5;
const WARMUP: usize = 2;
const RUNS: usize = 15;

/// (median, min, max) in milliseconds.
fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort_unstable();
    let median = v.get(v.len() / 2).copied().unwrap_or_default();
    let min = v.first().copied().unwrap_or_default();
    let max = v.last().copied().unwrap_or_default();
    (
        voxlat_core::clock::ms(median),
        voxlat_core::clock::ms(min),
        voxlat_core::clock::ms(max),
    )
}

fn main() {
    let model = match voxlat_tts::locate::default_voice() {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "{e}\nRun `cargo run -- models fetch piper-en_US-joe-medium onnxruntime` first"
            );
            std::process::exit(1);
        }
    };
    let load = |threads: usize, optimization: Optimization| {
        Voice::load(
            &model,
            VoiceOptions {
                intra_threads: threads,
                optimization,
                ..VoiceOptions::default()
            },
        )
        .unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(1);
        })
    };

    // The first load also loads the ONNX Runtime library; report it on its own.
    let first = load(1, Optimization::Disable);
    println!(
        "ONNX Runtime library load: {:.0} ms (once per process)",
        voxlat_core::clock::ms(first.load_times().runtime)
    );
    drop(first);

    println!("\nONNX session load ({LOADS} loads each, 1 intra-op thread)");
    println!("  optimization   median     min     max");
    for opt in [
        Optimization::Disable,
        Optimization::Basic,
        Optimization::Extended,
        Optimization::All,
    ] {
        let times: Vec<Duration> = (0..LOADS)
            .map(|_| load(1, opt).load_times().session)
            .collect();
        let (median, min, max) = stats(times);
        println!(
            "  {:<12} {median:>7.0} {min:>7.0} {max:>7.0} ms",
            format!("{opt:?}")
        );
    }

    // Does the level that loads faster synthesize slower? Runs interleaved across levels, so
    // that load from other processes drifts over all of them alike.
    let (_, sentence) = TEXTS[1];
    let mut voices: Vec<(Optimization, Voice, Vec<Duration>)> = [
        Optimization::Disable,
        Optimization::Basic,
        Optimization::All,
    ]
    .into_iter()
    .map(|opt| (opt, load(1, opt), Vec::new()))
    .collect();
    for round in 0..WARMUP + RUNS {
        for (_, voice, times) in voices.iter_mut() {
            let start = Instant::now();
            if let Err(e) = voice.synthesize(sentence) {
                eprintln!("{e}");
                std::process::exit(1);
            }
            if round >= WARMUP {
                times.push(start.elapsed());
            }
        }
    }
    println!("\nSynthesis of the 8-word sentence by optimization level (1 thread, interleaved)");
    for (opt, _, times) in voices {
        let (median, min, max) = stats(times);
        println!(
            "  {:<12} {median:>7.0} {min:>7.0} {max:>7.0} ms",
            format!("{opt:?}")
        );
    }

    println!("\nTime to first audio ({RUNS} runs after {WARMUP} warm-up; spinning off)");
    println!("  threads  text               median     min     max   audio    RTF");
    for threads in [1, 2] {
        let mut voice = load(threads, Optimization::Disable);
        for (label, text) in TEXTS {
            for _ in 0..WARMUP {
                let _ = voice.synthesize(text);
            }
            let mut times = Vec::with_capacity(RUNS);
            let mut audio = Duration::ZERO;
            for _ in 0..RUNS {
                let start = Instant::now();
                match voice.synthesize(text) {
                    Ok(speech) => {
                        times.push(start.elapsed());
                        audio = speech.duration();
                    }
                    Err(e) => {
                        eprintln!("{label}: {e}");
                        std::process::exit(1);
                    }
                }
            }
            let (median, min, max) = stats(times);
            println!(
                "  {threads:>7}  {label:<17} {median:>7.0} {min:>7.0} {max:>7.0} ms {:>5.2} s {:>6.3}",
                audio.as_secs_f64(),
                median / 1e3 / audio.as_secs_f64().max(1e-9),
            );
        }
    }
}
