//! What the commands share: signals, durations, the LLM connection, the stages and the
//! models they load. Commands import from here, never from each other.

pub mod duration;
pub mod llm;
pub mod remote;
pub mod reply;
pub mod signal;
pub mod stages;
pub mod turn;

pub use duration::parse_duration;
pub use signal::{shutdown_signal, StopSignal};

use voxlat_asr::engine::Fallback;

/// `--fallback` / `--asr-fallback`: how a Whisper decode that ran away is decoded again.
pub fn parse_fallback(s: &str) -> Result<Fallback, String> {
    Fallback::parse(s)
        .ok_or_else(|| format!("{s:?} is not one of full-window, wider-window, temperature, off"))
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

/// The flag that raises the wait a network timeout names, for the line after the error:
/// the library says which wait ran out, only the binary knows its flags.
pub fn timeout_advice(e: &anyhow::Error) -> Option<String> {
    use voxlat_net::{NetError, Service, TimeoutKind};
    let (service, kind) = e.chain().find_map(|c| {
        let net = c.downcast_ref::<NetError>().or_else(|| {
            match c.downcast_ref::<voxlat_llm::LlmError>() {
                Some(voxlat_llm::LlmError::Net(n)) => Some(n),
                _ => None,
            }
        });
        match net {
            Some(NetError::Timeout { service, kind, .. }) => Some((*service, *kind)),
            _ => None,
        }
    })?;
    let flag = match (service, kind) {
        (Service::Asr, _) => "--asr-timeout",
        (Service::Tts, _) => "--tts-timeout",
        (Service::Llm, TimeoutKind::Connect) => "--connect-timeout",
        (Service::Llm, TimeoutKind::Headers) => "--headers-timeout",
        (Service::Llm, TimeoutKind::Idle) => "--idle-timeout",
    };
    Some(format!(
        "hint: {flag} raises that wait, where the command has it"
    ))
}

/// Logs go to stderr, off unless `RUST_LOG` asks for them: stdout is for results. Turns are
/// exported as OpenTelemetry spans when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; hold the guard
/// until the end of `main` so the last spans are flushed.
pub fn init_tracing() -> voxlat_telemetry::TracingGuard {
    voxlat_telemetry::init_tracing("voxlat", "warn")
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

#[cfg(test)]
mod tests {
    use super::timeout_advice;
    use std::time::Duration;
    use voxlat_net::{NetError, Service, TimeoutKind};

    fn timeout(service: Service, kind: TimeoutKind) -> NetError {
        NetError::Timeout {
            service,
            kind,
            phase: "waiting",
            after: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_timeout_names_the_flag_for_its_service_and_wait() {
        let llm = voxlat_llm::LlmError::from(timeout(Service::Llm, TimeoutKind::Headers));
        let e = anyhow::Error::new(llm).context("turn 3");
        assert!(timeout_advice(&e).unwrap().contains("--headers-timeout"));
        let e = anyhow::Error::new(timeout(Service::Asr, TimeoutKind::Idle));
        assert!(timeout_advice(&e).unwrap().contains("--asr-timeout"));
        let e = anyhow::anyhow!("not a network failure");
        assert_eq!(timeout_advice(&e), None);
    }
}
