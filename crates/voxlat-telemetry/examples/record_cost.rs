//! What recording one finished turn costs the caller, off and on: `TurnTelemetry::record_turn`
//! on a complete voice-to-voice timeline, timed over many calls. Prints ns per turn.
//!
//!     cargo run --release -p voxlat-telemetry --example record_cost            # export off
//!     cargo run --release -p voxlat-telemetry --example record_cost -- metrics # + Prometheus
//!     OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 \
//!       cargo run --release -p voxlat-telemetry --example record_cost -- metrics  # + spans
//!
//! With export on, spans go to the batch exporter's queue (2048 spans by default); beyond
//! that they are dropped, which this does not count, so it sends few enough turns.

use std::time::Instant;
use voxlat_core::segments::VOICE_TO_VOICE;
use voxlat_core::{EventKind, Nanos, RequestId, Timeline};
use voxlat_telemetry::{Outcome, TurnTelemetry};

fn main() {
    voxlat_core::clock::init();
    let _guard = voxlat_telemetry::init_tracing("voxlat-record-cost", "warn");
    let metrics = std::env::args().any(|a| a == "metrics");
    let t = TurnTelemetry::start(metrics.then_some(("example", "127.0.0.1:0")))
        .expect("metrics server");
    let snaps: Vec<_> = (0..200)
        .map(|i| {
            let tl = Timeline::new(RequestId::new());
            for (k, e) in VOICE_TO_VOICE.boundaries().enumerate() {
                tl.mark_at(
                    e,
                    Nanos(1_000_000_000 + i * 10_000_000 + k as u64 * 50_000_000),
                );
            }
            tl.mark_at(EventKind::LlmSent, Nanos(1_100_000_000));
            tl.mark_at(EventKind::LlmDone, Nanos(1_400_000_000));
            tl.snapshot()
        })
        .collect();
    let t0 = Instant::now();
    for s in &snaps {
        t.record_turn(s, Outcome::Ok, None);
    }
    let per = t0.elapsed().as_nanos() as f64 / snaps.len() as f64;
    println!(
        "record_turn: {per:.0} ns per turn (metrics {}, span export {})",
        if metrics { "on" } else { "off" },
        if voxlat_telemetry::export_enabled() {
            "on"
        } else {
            "off"
        }
    );
}
