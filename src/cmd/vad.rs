//! `voxlat vad FILE…`: the endpointer's decisions on WAV files, in audio time.

use crate::common::setup::Setup;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use voxlat_core::Nanos;
use voxlat_vad::{Endpointer, EndpointerConfig, VadEvent, VoiceDetector, WebRtcDetector};

/// Prints speech segments and endpoint decisions (provisional ends, retractions, endpoints)
/// for WAV files, with times in seconds of audio. Files are resampled to 16 kHz mono.
/// The frame classifiers `--engine` chooses from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    Webrtc,
    Silero,
}

#[derive(Args, Debug)]
pub struct VadArgs {
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// webrtc-vad aggressiveness 0-3.
    #[arg(long, default_value_t = 2)]
    pub mode: u8,
    /// Silence (ms) that ends a turn.
    #[arg(long, default_value_t = 600)]
    pub hangover: u32,
    /// Silence (ms) after which a provisional end is emitted; 0 disables speculation.
    #[arg(long, default_value_t = voxlat_vad::EndpointerConfig::default().provisional_ms)]
    pub provisional: u32,
    /// Count the provisional silence from the VAD's last voiced frame, as before 2026-12-05,
    /// not from the refined end of speech (50-300 ms sooner; see docs/latency-model.md).
    #[arg(long)]
    pub provisional_from_vad: bool,
    /// The frame classifier: webrtc (webrtc-vad, 20 ms frames) or silero (Silero VAD on ONNX
    /// Runtime, 32 ms frames; needs `voxlat models fetch silero-vad onnxruntime`).
    #[arg(long, value_enum, default_value_t = Engine::Webrtc)]
    pub engine: Engine,
    /// Silero's speech-probability threshold.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f32,
    /// Shortest voiced run (ms) that starts a turn.
    #[arg(long, default_value_t = 60)]
    pub min_speech: u32,
}

fn secs(t: Nanos) -> f64 {
    t.0 as f64 / 1e9
}

pub fn run(args: VadArgs) -> Result<ExitCode> {
    let cfg = EndpointerConfig {
        mode: args.mode,
        hangover_ms: args.hangover,
        provisional_ms: args.provisional,
        early_provisional: !args.provisional_from_vad,
        min_speech_ms: args.min_speech,
        tail_ms: EndpointerConfig::default()
            .tail_ms
            .min(args.provisional.max(1)),
        ..EndpointerConfig::default()
    };
    let mut failed = 0;
    for file in &args.files {
        let Some(decoded) = crate::common::read_wav_reporting(file) else {
            failed += 1;
            continue;
        };
        let detector: Box<dyn VoiceDetector> = match args.engine {
            Engine::Silero => {
                let setup = Setup::open()?;
                let model = setup.model(voxlat_models::known::SILERO_VAD)?;
                let runtime = setup.model(voxlat_models::known::ONNX_RUNTIME)?;
                Box::new(voxlat_vad::silero::SileroDetector::new(
                    &model,
                    &runtime,
                    args.threshold,
                )?)
            }
            Engine::Webrtc => Box::new(WebRtcDetector::new(cfg.mode, cfg.frame_ms)?),
        };
        let mut ep = Endpointer::new(cfg.clone(), detector)?;
        println!("{} ({:.2} s):", file.display(), decoded.audio.duration_s());
        let samples = &decoded.audio.samples;
        let mut events = Vec::new();
        for (i, chunk) in samples.chunks(320).enumerate() {
            let last = (i * 320 + chunk.len() - 1) as u64;
            events.extend(ep.push(chunk, Nanos(last * 62_500))?);
        }
        events.extend(ep.finish(Nanos(samples.len() as u64 * 62_500)));
        let mut turns = 0;
        for e in events {
            match e {
                VadEvent::SpeechStart { at } => println!("  {:7.3}  speech start", secs(at)),
                VadEvent::Provisional { speech_end, at, .. } => {
                    println!(
                        "  {:7.3}  provisional end (speech ended {:.3})",
                        secs(at),
                        secs(speech_end)
                    )
                }
                VadEvent::Retracted { at, .. } => {
                    println!("  {:7.3}  retracted: speech resumed", secs(at))
                }
                VadEvent::Endpoint {
                    speech_start,
                    speech_end,
                    at,
                    forced,
                    ..
                } => {
                    turns += 1;
                    println!(
                        "  {:7.3}  endpoint: speech {:.3}–{:.3}, decided {:.0} ms after it ended{}",
                        secs(at),
                        secs(speech_start),
                        secs(speech_end),
                        at.signed_since(speech_end) as f64 / 1e6,
                        if forced {
                            " (forced: end of input or max length)"
                        } else {
                            ""
                        }
                    );
                }
            }
        }
        println!("  {turns} turn(s)");
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
