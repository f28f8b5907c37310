//! The process's `tracing` subscriber and, opt-in, the OpenTelemetry exporter.
//!
//! Export is on only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; otherwise no exporter, provider or thread
//! exists and recording a turn costs one `OnceLock` read.

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use std::cell::Cell;
use std::sync::OnceLock;

static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Whether turns are exported as OpenTelemetry spans in this process.
pub fn export_enabled() -> bool {
    TRACER.get().is_some()
}

pub(crate) fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// Flushes and stops the exporter when dropped: hold it in `main` until the end.
#[must_use = "dropping the guard stops the span exporter"]
pub struct TracingGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TracingGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            if let Err(e) = p.shutdown() {
                tracing::warn!("OpenTelemetry export did not finish: {e}");
            }
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Whether the environment asks for span export (the OpenTelemetry SDK's variables).
fn export_requested() -> bool {
    let off = |v: Option<String>, word: &str| v.is_some_and(|v| v.eq_ignore_ascii_case(word));
    if off(env("OTEL_SDK_DISABLED"), "true") || off(env("OTEL_TRACES_EXPORTER"), "none") {
        return false;
    }
    env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
}

/// Installs the `tracing` subscriber (logs to stderr, filtered by `RUST_LOG`, else
/// `default_filter`) and, when the environment asks for it, the OTLP/HTTP span exporter with
/// `OTEL_SERVICE_NAME` (else `service`) as the service name. An exporter that cannot be set
/// up is reported on stderr and left off: telemetry never stops the program.
pub fn init_tracing(service: &str, default_filter: &str) -> TracingGuard {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: logs written to files are quoted in error messages.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    if !export_requested() {
        return TracingGuard { provider: None };
    }
    match build(service) {
        Ok(provider) => {
            let _ = TRACER.set(provider.tracer("voxlat"));
            TracingGuard {
                provider: Some(provider),
            }
        }
        Err(e) => {
            tracing::warn!("OpenTelemetry export is off: {e}");
            TracingGuard { provider: None }
        }
    }
}

/// Why the span exporter is off; each names the variable to fix.
#[derive(Debug, thiserror::Error)]
enum ExportError {
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0} is not supported: voxlat exports OTLP over HTTP \
         (http/protobuf, usually port 4318); unset it or set it to http/protobuf"
    )]
    Protocol(String),
    #[error("cannot set up the OTLP exporter from OTEL_EXPORTER_OTLP_ENDPOINT: {0}")]
    Build(opentelemetry_otlp::ExporterBuildError),
}

fn build(service: &str) -> Result<SdkTracerProvider, ExportError> {
    let protocol =
        env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if let Some(p) = protocol.filter(|p| p != "http/protobuf") {
        return Err(ExportError::Protocol(p));
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .map_err(ExportError::Build)?;
    let name = env("OTEL_SERVICE_NAME").unwrap_or_else(|| service.to_string());
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_id_generator(TurnIds::default())
        .with_resource(Resource::builder().with_service_name(name).build())
        .build())
}

thread_local! {
    /// IDs the next span built on this thread must have (see [`with_ids`]).
    static NEXT_IDS: Cell<(Option<u128>, Option<u64>)> = const { Cell::new((None, None)) };
}

/// Builds a span with the given trace and span IDs. The SDK takes IDs only from its ID
/// generator, and a turn's trace ID and LLM span ID are fixed by its request ID (the LLM
/// server was told them in `traceparent` long before the turn's spans are built).
pub(crate) fn with_ids<R>(trace: Option<u128>, span: Option<u64>, f: impl FnOnce() -> R) -> R {
    NEXT_IDS.set((trace, span));
    let r = f();
    NEXT_IDS.set((None, None));
    r
}

/// Random IDs, unless [`with_ids`] set the next ones.
#[derive(Debug, Default)]
struct TurnIds(RandomIdGenerator);

impl IdGenerator for TurnIds {
    fn new_trace_id(&self) -> TraceId {
        let (trace, span) = NEXT_IDS.get();
        NEXT_IDS.set((None, span));
        trace.map_or_else(|| self.0.new_trace_id(), TraceId::from)
    }

    fn new_span_id(&self) -> SpanId {
        let (trace, span) = NEXT_IDS.get();
        NEXT_IDS.set((trace, None));
        span.map_or_else(|| self.0.new_span_id(), SpanId::from)
    }
}
