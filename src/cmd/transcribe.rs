//! `voxlat transcribe FILE…`: Whisper on WAV files, with timing, like whisper.cpp's own CLI.

use crate::common::setup::Setup;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use voxlat_asr::engine::{Fallback, WhisperEngine};

/// Transcribes WAV files (any common encoding, rate and channel count: they are resampled to
/// 16 kHz mono) and prints each transcript with its compute time and real-time factor.
#[derive(Args, Debug)]
pub struct TranscribeArgs {
    /// WAV files.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// A ggml Whisper model. [default: whisper-tiny.en from the model cache]
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// Threads for whisper.cpp. [default: every core: ASR runs alone in a turn]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// How a decode that ran away into a loop is decoded again: full-window (encode Whisper's
    /// whole 30 s window), wider-window (twice the fitted window, then the whole one),
    /// temperature (sample at 0.2, then 0.4) or off.
    #[arg(long, value_name = "HOW", default_value = "wider-window", value_parser = crate::common::parse_fallback)]
    pub fallback: Fallback,
}

pub fn run(args: TranscribeArgs) -> Result<ExitCode> {
    let setup = Setup::open()?;
    let model = setup.model_or(args.model, voxlat_models::known::WHISPER)?;
    let threads = args.threads.unwrap_or(setup.budget.asr);
    let t0 = Instant::now();
    let mut engine = WhisperEngine::load(&model, threads)
        .with_context(|| format!("loading {}", model.display()))?;
    eprintln!(
        "model {} loaded in {:.0} ms ({threads} threads)",
        model.display(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    engine.set_fallback(args.fallback);
    let mut failed = 0;
    let mut computes = Vec::new();
    let mut fallbacks = 0;
    for file in &args.files {
        let Some(decoded) = crate::common::read_wav_reporting(file) else {
            failed += 1;
            continue;
        };
        match engine.transcribe(&decoded.audio.samples) {
            Ok(t) => {
                let note = t
                    .rejected
                    .as_ref()
                    .map(|r| format!(" [dropped: {r}]"))
                    .unwrap_or_default();
                let retried = t
                    .fallback
                    .as_ref()
                    .map(|f| {
                        format!(
                            "\n  first decode ran away ({}); {} more decode(s), {}, {:.0} ms",
                            f.reason,
                            f.retries,
                            if f.recovered {
                                "recovered"
                            } else {
                                "cut at the loop"
                            },
                            t.fallback_compute().as_secs_f64() * 1e3
                        )
                    })
                    .unwrap_or_default();
                let scores = t
                    .scores
                    .map(|s| {
                        format!(
                            ", P(no speech) {:.2}, mean log p {:.2}{}",
                            s.no_speech_prob,
                            s.avg_logprob,
                            if s.no_speech() {
                                " (Whisper's no-speech rule)"
                            } else {
                                ""
                            }
                        )
                    })
                    .unwrap_or_default();
                println!(
                    "{}: {}{note}\n  audio {:.2} s, compute {:.0} ms, RTF {:.3}{scores}{retried}",
                    file.display(),
                    t.text,
                    t.audio.as_secs_f64(),
                    t.compute.as_secs_f64() * 1e3,
                    t.real_time_factor
                );
                computes.push(t.compute.as_secs_f64() * 1e3);
                fallbacks += usize::from(t.fallback.is_some());
            }
            Err(e) => {
                eprintln!("error: {}: {e}", file.display());
                failed += 1;
            }
        }
    }
    if let Some(s) = voxlat_core::stats::Summary::from_samples(&computes, failed) {
        println!(
            "{} files: {fallbacks} decode(s) ran away ({}); compute P50 {:.0} ms, P95 {:.0} ms, worst {:.0} ms",
            s.n,
            args.fallback.name(),
            s.p50,
            s.p95,
            s.max
        );
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
