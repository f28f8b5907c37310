//! What the commands share: signals, durations, the LLM connection, the stages and the
//! models they load. Commands import from here, never from each other.

pub mod advice;
pub mod arg_error;
pub mod duration;
pub mod llm;
pub mod pipeline_config;
pub mod remote;
pub mod reply;
pub mod session_args;
pub mod setup;
pub mod signal;
pub mod stack;
pub mod stages;
pub mod turn;

pub use arg_error::ArgError;
pub use duration::parse_duration;
pub use signal::{shutdown_signal, StopSignal};

use voxlat_asr::engine::Fallback;

/// `--fallback` / `--asr-fallback`: how a Whisper decode that ran away is decoded again.
pub fn parse_fallback(s: &str) -> Result<Fallback, ArgError> {
    Fallback::parse(s).ok_or_else(|| ArgError::Fallback(s.to_string()))
}

/// Reads a WAV at the pipeline's rate for a command that goes through several files: a file
/// that cannot be read is reported on stderr (and `None` returned) so the others still run.
pub fn read_wav_reporting(file: &std::path::Path) -> Option<voxlat_audio::wav::Decoded> {
    match voxlat_audio::wav::read_at(file, voxlat_audio::PIPELINE_RATE) {
        Ok(d) => {
            for w in &d.warnings {
                eprintln!("warning: {w}");
            }
            Some(d)
        }
        Err(e) => {
            eprintln!("error: {e}{}", wav_advice(&e));
            None
        }
    }
}

/// What to do about a WAV the reader refused for its numbers, for the end of the message.
pub fn wav_advice(e: &voxlat_audio::wav::WavError) -> &'static str {
    use voxlat_audio::wav::WavError;
    match e {
        WavError::OutOfRange { .. } => {
            "; if the audio itself is sound, convert it, e.g. `sox in.wav -r 16000 -c 1 -b 16 out.wav`"
        }
        WavError::TooLong { .. } => "; cut it into turns, e.g. `sox in.wav out.wav trim 0 60`",
        _ => "",
    }
}

/// Logs go to stderr, off unless `RUST_LOG` asks for them: stdout is for results. Turns are
/// exported as OpenTelemetry spans when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; hold the guard
/// until the end of `main` so the last spans are flushed.
///
/// whisper.cpp logs a decode the pipeline stopped (a transcription nobody waits for any more)
/// as an error, "failed to encode", once per stop; its real failures reach the user as voxlat's
/// own errors, so its log is off unless `RUST_LOG` names it.
pub fn init_tracing() -> voxlat_telemetry::TracingGuard {
    voxlat_telemetry::init_tracing("voxlat", "warn,whisper_rs::whisper_logging_hook=off")
}

/// The metrics and spans name for a turn's outcome.
pub fn telemetry_outcome(o: voxlat_pipeline::TurnOutcome) -> voxlat_telemetry::Outcome {
    use voxlat_pipeline::TurnOutcome as T;
    match o {
        T::Ok => voxlat_telemetry::Outcome::Ok,
        T::NoSpeech => voxlat_telemetry::Outcome::NoSpeech,
        T::Interrupted => voxlat_telemetry::Outcome::Interrupted,
        T::Error => voxlat_telemetry::Outcome::Error,
    }
}

/// The session runtime of `run` and `replay`: two workers, as the machine the figures are
/// taken on has two cores, and the stages run on threads of their own.
pub fn session_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// Per-turn telemetry, serving Prometheus metrics at `--metrics-addr` when given (and saying
/// where).
pub fn turn_telemetry(
    metrics_addr: Option<&str>,
) -> anyhow::Result<voxlat_telemetry::TurnTelemetry> {
    let telemetry =
        voxlat_telemetry::TurnTelemetry::start(metrics_addr.map(|a| ("--metrics-addr", a)))?;
    if let Some(url) = telemetry.metrics_url() {
        eprintln!("metrics on {url}");
    }
    Ok(telemetry)
}
