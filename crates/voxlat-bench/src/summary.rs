//! Per-cell aggregates, computed from the request records alone.

use super::record::{RequestRecord, Variant};
use super::server_view::ServerView;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use voxlat_core::stats::Summary;
use voxlat_llm::record::TokenSource;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub cell: String,
    pub model: String,
    pub load: String,
    pub ok: usize,
    pub errors: usize,
    /// Error count by class name, and one example message per class.
    pub errors_by_class: BTreeMap<String, ErrorCount>,
    /// Wall time from the first request sent to the last one finished, in seconds.
    pub span_s: Option<f64>,
    /// Completed requests per second over `span_s`.
    pub throughput_rps: Option<f64>,
    /// From the request written to a ready connection; connection setup excluded.
    pub ttft_ms: Option<Summary>,
    /// From llm_sent, connection setup included for requests that opened one: the
    /// user-facing figure. Equal to `ttft_ms` when every request rode a pooled connection.
    #[serde(default)]
    pub ttft_with_connect_ms: Option<Summary>,
    #[serde(default)]
    pub ttfb_with_connect_ms: Option<Summary>,
    /// Requests sent again on a new connection after their pooled one was found closed.
    #[serde(default)]
    pub retried: usize,
    /// Time to first answer token; differs from TTFT only for reasoning models.
    pub ttfat_ms: Option<Summary>,
    pub ttfb_ms: Option<Summary>,
    pub first_event_ms: Option<Summary>,
    pub tpot_ms: Option<Summary>,
    pub itl_ms: Option<Summary>,
    pub e2e_ms: Option<Summary>,
    pub output_tokens: Option<Summary>,
    pub prompt_tokens: Option<Summary>,
    pub cached_tokens: Option<Summary>,
    /// Open loop only.
    pub send_lag_ms: Option<Summary>,
    pub ttft_from_schedule_ms: Option<Summary>,
    /// How many requests had their output tokens from `usage` vs counted deltas.
    pub tokens_from_usage: usize,
    pub tokens_from_delta_count: usize,
    /// Numeric fields of server-reported timings (llama.cpp `timings`), summarized by name.
    pub server_timings: BTreeMap<String, Summary>,
    /// Measured requests (ok ones) that opened a connection rather than riding a pooled one.
    pub new_connections: usize,
    /// The sweep point or probe step this cell measures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<Variant>,
    /// First token → first answer token (reasoning models).
    #[serde(default)]
    pub thinking_ms: Option<Summary>,
    #[serde(default)]
    pub reasoning_tokens: Option<Summary>,
    /// DNS and connect (TCP, plus TLS for https) of requests that opened a connection.
    #[serde(default)]
    pub dns_ms: Option<Summary>,
    #[serde(default)]
    pub connect_ms: Option<Summary>,
    /// Server-reported queue/prefill/decode beside the client's TTFT.
    #[serde(default)]
    pub server_view: Option<ServerView>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorCount {
    pub count: usize,
    pub example: String,
}

fn summarize(
    records: &[&RequestRecord],
    errors: usize,
    f: impl Fn(&RequestRecord) -> Option<f64>,
) -> Option<Summary> {
    let v: Vec<f64> = records.iter().filter_map(|r| f(r)).collect();
    Summary::from_samples(&v, errors)
}

impl CellSummary {
    /// Aggregates the measured (non-warm-up) records of one cell.
    pub fn from_records(cell: &str, model: &str, load: &str, all: &[RequestRecord]) -> CellSummary {
        let measured: Vec<&RequestRecord> =
            all.iter().filter(|r| r.cell == cell && !r.warmup).collect();
        let ok: Vec<&RequestRecord> = measured.iter().copied().filter(|r| r.ok()).collect();
        let errors = measured.len() - ok.len();
        let mut errors_by_class: BTreeMap<String, ErrorCount> = BTreeMap::new();
        for r in measured.iter().filter(|r| !r.ok()) {
            let class = r
                .error_class
                .map(|c| c.name())
                .unwrap_or("other")
                .to_string();
            let e = errors_by_class.entry(class).or_insert_with(|| ErrorCount {
                count: 0,
                example: r.error.clone().unwrap_or_default(),
            });
            e.count += 1;
        }
        let first_sent = measured
            .iter()
            .filter_map(|r| r.events.get(&voxlat_core::EventKind::LlmSent))
            .min();
        let last_done = ok
            .iter()
            .filter_map(|r| r.events.get(&voxlat_core::EventKind::LlmDone))
            .max();
        let span_s = match (first_sent, last_done) {
            (Some(a), Some(b)) if b > a => Some(b.signed_since(*a) as f64 / 1e9),
            _ => None,
        };
        let itls: Vec<f64> = ok.iter().flat_map(|r| r.itls_ms()).collect();
        let mut server_fields: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for r in &ok {
            if let Some(serde_json::Value::Object(m)) = &r.outcome.server_timings {
                for (k, v) in m {
                    if let Some(x) = v.as_f64() {
                        server_fields.entry(k.clone()).or_default().push(x);
                    }
                }
            }
        }
        let usage = |r: &RequestRecord| r.outcome.usage.clone();
        CellSummary {
            cell: cell.into(),
            model: model.into(),
            load: load.into(),
            ok: ok.len(),
            errors,
            errors_by_class,
            span_s,
            throughput_rps: span_s.map(|s| ok.len() as f64 / s),
            ttft_ms: summarize(&ok, errors, RequestRecord::ttft_ms),
            ttft_with_connect_ms: summarize(&ok, errors, RequestRecord::ttft_with_connect_ms),
            ttfb_with_connect_ms: summarize(&ok, errors, RequestRecord::ttfb_with_connect_ms),
            retried: measured
                .iter()
                .filter(|r| r.outcome.retry.is_some())
                .count(),
            ttfat_ms: summarize(&ok, errors, RequestRecord::ttfat_ms),
            ttfb_ms: summarize(&ok, errors, RequestRecord::ttfb_ms),
            first_event_ms: summarize(&ok, errors, RequestRecord::first_event_ms),
            tpot_ms: summarize(&ok, errors, RequestRecord::tpot_ms),
            itl_ms: Summary::from_samples(&itls, errors),
            e2e_ms: summarize(&ok, errors, RequestRecord::e2e_ms),
            output_tokens: summarize(&ok, errors, |r| r.outcome.output_tokens.map(|t| t as f64)),
            prompt_tokens: summarize(&ok, errors, |r| usage(r)?.prompt_tokens.map(|t| t as f64)),
            cached_tokens: summarize(&ok, errors, |r| {
                usage(r)?
                    .prompt_tokens_details?
                    .cached_tokens
                    .map(|t| t as f64)
            }),
            send_lag_ms: summarize(&ok, errors, RequestRecord::send_lag_ms),
            ttft_from_schedule_ms: summarize(&ok, errors, RequestRecord::ttft_from_schedule_ms),
            tokens_from_usage: ok
                .iter()
                .filter(|r| r.outcome.output_tokens_source == Some(TokenSource::Usage))
                .count(),
            tokens_from_delta_count: ok
                .iter()
                .filter(|r| r.outcome.output_tokens_source == Some(TokenSource::DeltaCount))
                .count(),
            server_timings: server_fields
                .into_iter()
                .filter_map(|(k, v)| Summary::from_samples(&v, 0).map(|s| (k, s)))
                .collect(),
            new_connections: ok
                .iter()
                .filter(|r| r.outcome.connection.new_connection)
                .count(),
            variant: measured.first().and_then(|r| r.variant),
            thinking_ms: summarize(&ok, errors, |r| {
                r.thinking_ms()
                    .filter(|&t| t > 0.0 || r.reasoning_tokens().is_some())
            }),
            reasoning_tokens: summarize(&ok, errors, |r| r.reasoning_tokens().map(|n| n as f64)),
            dns_ms: summarize(&ok, errors, |r| {
                r.outcome.connection.dns_ns.map(|n| n as f64 / 1e6)
            }),
            connect_ms: summarize(&ok, errors, |r| {
                r.outcome.connection.connect_ns.map(|n| n as f64 / 1e6)
            }),
            server_view: ServerView::from_records(&ok),
        }
    }
}
