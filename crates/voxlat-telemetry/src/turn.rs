//! The one object a turn-running command holds: metrics on an opt-in address, spans when
//! the environment asks for them, and `record_turn` for each finished turn.

use crate::http::MetricsServer;
use crate::metrics::{Outcome, TurnMetrics};
use crate::{otel, spans, TelemetryError};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use voxlat_core::segments::VOICE_TO_VOICE;
use voxlat_core::TimelineSnapshot;

/// Turn telemetry for a command that runs turns (`voxlat replay`, `voxlat run`).
pub struct TurnTelemetry {
    metrics: Option<TurnMetrics>,
    server: Option<MetricsServer>,
}

impl TurnTelemetry {
    /// Serves the turn metrics at `metrics_addr`, given as (where it came from, `HOST:PORT`),
    /// when given; without it, records no metrics at all. Errors quote the source.
    pub fn start(
        metrics_addr: Option<(&'static str, &str)>,
    ) -> Result<TurnTelemetry, TelemetryError> {
        let Some((source, addr)) = metrics_addr else {
            return Ok(TurnTelemetry {
                metrics: None,
                server: None,
            });
        };
        let mut registry = Registry::default();
        let metrics = TurnMetrics::register(&mut registry);
        let server = MetricsServer::start(source, addr, Arc::new(registry))?;
        Ok(TurnTelemetry {
            metrics: Some(metrics),
            server: Some(server),
        })
    }

    /// `http://ADDR/metrics` when metrics are served.
    pub fn metrics_url(&self) -> Option<String> {
        self.server.as_ref().map(MetricsServer::url)
    }

    /// Records a finished turn from its timeline: the metrics (when served), the OTel trace
    /// (when exported), and `tracing` spans `voxlat.turn` / `voxlat.stage` carrying the
    /// request ID and each segment (visible with `RUST_LOG=voxlat_telemetry=debug`).
    /// `error` is the turn's error message, if it failed.
    pub fn record_turn(&self, snap: &TimelineSnapshot, outcome: Outcome, error: Option<&str>) {
        if let Some(m) = &self.metrics {
            m.record_turn(snap, outcome);
        }
        if let Some(t) = otel::tracer() {
            spans::emit(t, snap, outcome, error);
        }
        let turn = tracing::debug_span!(
            "voxlat.turn",
            request_id = %snap.request_id,
            outcome = outcome.as_str()
        );
        if turn.is_disabled() {
            return;
        }
        let _in_turn = turn.enter();
        for (name, a, b) in spans::stamped_segments(&VOICE_TO_VOICE, snap) {
            let ms = b.signed_since(a) as f64 / 1e6;
            tracing::debug_span!("voxlat.stage", request_id = %snap.request_id, segment = name, ms)
                .in_scope(|| tracing::debug!(segment = name, ms, "segment"));
        }
    }
}
