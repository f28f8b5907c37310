pub mod annotate;
pub mod bench_llm;
pub mod bench_stages;
pub mod compare;
pub mod devices;
pub mod models;
pub mod replay;
pub mod report;
pub mod run;
pub mod serve;
pub mod speak;
pub mod table;
pub mod transcribe;
pub mod vad;

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
            eprintln!("error: {e}");
            None
        }
    }
}

/// Logs go to stderr, off unless `RUST_LOG` asks for them: stdout is for results. Turns are
/// exported as OpenTelemetry spans when `OTEL_EXPORTER_OTLP_ENDPOINT` is set; hold the guard
/// until the end of `main` so the last spans are flushed.
pub fn init_tracing() -> voxlat_telemetry::TracingGuard {
    voxlat_telemetry::init_tracing("voxlat", "warn")
}
