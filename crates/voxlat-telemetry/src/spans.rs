//! A finished turn as an OpenTelemetry trace, built after the fact from its timeline: the
//! `voxlat.turn` root span, one child span per voice-to-voice segment and one for the LLM
//! request. Start and end times are the timeline's stamps mapped to wall-clock time, and the
//! figures are the segments voxlat-core computes, so the trace shows exactly the breakdown
//! the results files do.

use crate::metrics::Outcome;
use crate::otel::with_ids;
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;
use std::time::SystemTime;
use voxlat_core::clock::{self, ns_to_ms};
use voxlat_core::segments::{Chain, LLM_REQUEST, VOICE_TO_VOICE};
use voxlat_core::trace::{span_id, trace_id, LLM_REQUEST_SPAN, TURN_SPAN};
use voxlat_core::{EventKind, Nanos, TimelineSnapshot};

/// A stamp on the process clock as wall-clock time, through the process's one anchor (the
/// one the results header records).
fn wall(t: Nanos) -> SystemTime {
    clock::anchor().wall(t)
}

/// A chain's segments whose two boundaries were both stamped: (name, from, to).
pub(crate) fn stamped_segments(
    chain: &Chain,
    snap: &TimelineSnapshot,
) -> Vec<(&'static str, Nanos, Nanos)> {
    let mut out = Vec::new();
    let mut prev = snap.get(chain.start);
    for step in chain.steps {
        let t = snap.get(step.to);
        if let (Some(a), Some(b)) = (prev, t) {
            out.push((step.name.name(), a, b));
        }
        prev = t;
    }
    out
}

pub(crate) fn emit(
    tracer: &SdkTracer,
    snap: &TimelineSnapshot,
    outcome: Outcome,
    error: Option<&str>,
) {
    let (Some(&first), Some(&last)) = (snap.events.values().min(), snap.events.values().max())
    else {
        return;
    };
    let id = &snap.request_id;
    let rid = KeyValue::new("voxlat.request_id", id.to_string());
    let segments = stamped_segments(&VOICE_TO_VOICE, snap);
    let mut attrs = vec![
        rid.clone(),
        KeyValue::new("voxlat.outcome", outcome.as_str()),
    ];
    for (name, a, b) in &segments {
        attrs.push(KeyValue::new(
            format!("voxlat.segment.{name}_ms"),
            ns_to_ms(b.signed_since(*a)),
        ));
    }
    if let Ok(b) = VOICE_TO_VOICE.compute(snap) {
        attrs.push(KeyValue::new(
            "voxlat.voice_to_voice_ms",
            ns_to_ms(b.total_ns),
        ));
        if let Some(d) = b.dominant() {
            attrs.push(KeyValue::new("voxlat.dominant_segment", d.name.name()));
        }
    }
    let turn = with_ids(Some(trace_id(id)), Some(span_id(id, TURN_SPAN)), || {
        tracer
            .span_builder("voxlat.turn")
            .with_kind(SpanKind::Internal)
            .with_start_time(wall(first))
            .with_attributes(attrs)
            .start_with_context(tracer, &Context::new())
    });
    let cx = Context::new().with_span(turn);
    for (name, a, b) in segments {
        tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_start_time(wall(a))
            .with_attributes([
                rid.clone(),
                KeyValue::new("voxlat.segment", name),
                KeyValue::new("voxlat.duration_ms", ns_to_ms(b.signed_since(a))),
            ])
            .start_with_context(tracer, &cx)
            .end_with_timestamp(wall(b));
    }
    if let Some(sent) = snap.get(EventKind::LlmSent) {
        let end = snap
            .get(EventKind::LlmDone)
            .or_else(|| LLM_REQUEST.boundaries().filter_map(|e| snap.get(e)).max())
            .unwrap_or(sent);
        let mut attrs = vec![rid.clone()];
        for (name, a, b) in stamped_segments(&LLM_REQUEST, snap) {
            attrs.push(KeyValue::new(
                format!("voxlat.llm.{name}_ms"),
                ns_to_ms(b.signed_since(a)),
            ));
        }
        // The span the LLM server was named as parent in `traceparent`.
        let mut llm = with_ids(None, Some(span_id(id, LLM_REQUEST_SPAN)), || {
            tracer
                .span_builder(LLM_REQUEST_SPAN)
                .with_kind(SpanKind::Client)
                .with_start_time(wall(sent))
                .with_attributes(attrs)
                .start_with_context(tracer, &cx)
        });
        llm.end_with_timestamp(wall(end));
    }
    let span = cx.span();
    if outcome == Outcome::Error {
        span.set_status(Status::error(error.unwrap_or("turn failed").to_string()));
    }
    span.end_with_timestamp(wall(last));
}
