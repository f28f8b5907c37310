//! Observability for voxlat: what a team running a voice agent watches in the tools it
//! already has.
//!
//! - **Prometheus metrics** ([`TurnMetrics`], [`ServerMetrics`]), served on an opt-in
//!   address by [`MetricsServer`]: per-segment histograms of finished turns, turn counters by
//!   outcome, and the LLM server's queue depth, prefill, decode and prefix-cache hits.
//! - **OpenTelemetry spans** of each turn over OTLP/HTTP, opt-in through the standard
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_SERVICE_NAME` variables ([`init_tracing`]): one
//!   trace per turn, each segment a child span, the segment figures as attributes.
//!
//! Every figure comes from the voxlat-core timeline of a finished turn, never from timing
//! spans: a turn is recorded once, after the fact ([`TurnTelemetry::record_turn`]), so the
//! stages themselves carry no instrumentation and nothing costs anything when it is off.
//!
//! This crate depends on voxlat-core alone: voxlat-server uses it, and nothing the server
//! depends on may pull in voxlat-asr.

mod http;
mod metrics;
mod otel;
mod server;
mod spans;
mod turn;

pub use http::MetricsServer;
pub use metrics::{Outcome, TurnMetrics, SEGMENT_BUCKETS};
pub use otel::{export_enabled, init_tracing, TracingGuard};
pub use prometheus_client::registry::Registry;
pub use server::{FinishedRequest, RequestOutcome, ServerMetrics, SERVER_BUCKETS};
pub use turn::TurnTelemetry;

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("{flag} {addr}: {why} (give HOST:PORT, e.g. 127.0.0.1:9464; port 0 picks a free one)")]
    BadAddress {
        flag: &'static str,
        addr: String,
        why: String,
    },
    #[error("cannot serve metrics on {addr}: {source} (in use? pick another port, or 0)")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot start the metrics server thread: {0}")]
    Thread(std::io::Error),
}
