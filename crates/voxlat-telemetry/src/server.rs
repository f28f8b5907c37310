//! The LLM server's metrics: queue depth, slot use, queue wait, prefill and decode times,
//! tokens and prefix-cache hits. Plain numbers in, so this crate knows nothing of the
//! server's types.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Bucket bounds in seconds for server stages: 5 ms (a cached prefill, a short decode) to
/// 30 s (a long reply on a CPU).
pub const SERVER_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How a request left the server, as the `outcome` label of `voxlat_server_requests_total`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum RequestOutcome {
    Completed,
    /// The client went away (before or during generation).
    Cancelled,
    /// Refused at once: every slot busy and the queue full (HTTP 503).
    Rejected,
    Failed,
}

impl EncodeLabelValue for RequestOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: RequestOutcome,
}

impl RequestOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::Completed => "completed",
            RequestOutcome::Cancelled => "cancelled",
            RequestOutcome::Rejected => "rejected",
            RequestOutcome::Failed => "failed",
        }
    }
}

/// One completed request's server-side figures (llama.cpp's `timings` quantities).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FinishedRequest {
    pub queue_s: f64,
    pub prefill_s: f64,
    pub decode_s: f64,
    pub first_token_s: f64,
    /// Prompt tokens reused from the slot's KV cache.
    pub cached_tokens: u64,
    /// Prompt tokens evaluated.
    pub prompt_tokens: u64,
    pub generated_tokens: u64,
}

fn histogram() -> Histogram {
    Histogram::new(SERVER_BUCKETS.iter().copied())
}

/// Everything under `voxlat_server_*`.
#[derive(Clone, Debug)]
pub struct ServerMetrics {
    queue_depth: Gauge,
    busy_slots: Gauge,
    slots: Gauge,
    requests: Family<OutcomeLabels, Counter>,
    queue_wait: Histogram,
    prefill: Histogram,
    decode: Histogram,
    first_token: Histogram,
    prompt_tokens: Counter,
    cached_tokens: Counter,
    generated_tokens: Counter,
    cache_hits: Counter,
    cache_misses: Counter,
}

impl ServerMetrics {
    pub fn register(registry: &mut Registry, slots: usize) -> ServerMetrics {
        let m = ServerMetrics {
            queue_depth: Gauge::default(),
            busy_slots: Gauge::default(),
            slots: Gauge::default(),
            requests: Family::default(),
            queue_wait: histogram(),
            prefill: histogram(),
            decode: histogram(),
            first_token: histogram(),
            prompt_tokens: Counter::default(),
            cached_tokens: Counter::default(),
            generated_tokens: Counter::default(),
            cache_hits: Counter::default(),
            cache_misses: Counter::default(),
        };
        m.slots.set(slots as i64);
        let r = registry;
        let gauges = [
            (
                "voxlat_server_queue_depth",
                "Requests admitted and waiting for a free slot",
                &m.queue_depth,
            ),
            (
                "voxlat_server_busy_slots",
                "Slots generating right now",
                &m.busy_slots,
            ),
            (
                "voxlat_server_slots",
                "Slots (requests generated at once)",
                &m.slots,
            ),
        ];
        for (name, help, g) in gauges {
            r.register(name, help, g.clone());
        }
        r.register(
            "voxlat_server_requests",
            "Chat requests by outcome (completed, cancelled, rejected, failed)",
            m.requests.clone(),
        );
        let hists = [
            (
                "voxlat_server_queue_wait",
                "Request queued -> a slot picked it up",
                &m.queue_wait,
            ),
            (
                "voxlat_server_prefill",
                "Prefill: the prompt evaluated (llama.cpp prompt_ms)",
                &m.prefill,
            ),
            (
                "voxlat_server_decode",
                "Decode: prompt evaluated -> last token (llama.cpp predicted_ms)",
                &m.decode,
            ),
            (
                "voxlat_server_time_to_first_token",
                "Request received -> first token sampled",
                &m.first_token,
            ),
        ];
        for (name, help, h) in hists {
            r.register_with_unit(name, help, Unit::Seconds, h.clone());
        }
        let counters = [
            (
                "voxlat_server_prompt_tokens",
                "Prompt tokens evaluated (not reused from the KV cache)",
                &m.prompt_tokens,
            ),
            (
                "voxlat_server_cached_prompt_tokens",
                "Prompt tokens reused from a slot's KV cache (prefix cache)",
                &m.cached_tokens,
            ),
            (
                "voxlat_server_generated_tokens",
                "Tokens generated",
                &m.generated_tokens,
            ),
            (
                "voxlat_server_prefix_cache_hits",
                "Completed requests that reused at least one cached prompt token",
                &m.cache_hits,
            ),
            (
                "voxlat_server_prefix_cache_misses",
                "Completed requests that reused no cached prompt token",
                &m.cache_misses,
            ),
        ];
        for (name, help, c) in counters {
            r.register(name, help, c.clone());
        }
        for o in [
            RequestOutcome::Completed,
            RequestOutcome::Cancelled,
            RequestOutcome::Rejected,
            RequestOutcome::Failed,
        ] {
            let _ = m.requests.get_or_create(&OutcomeLabels { outcome: o });
        }
        m
    }

    /// The scheduler's occupancy after a change: `queued` waiting, `busy` generating.
    pub fn set_occupancy(&self, queued: usize, busy: usize) {
        self.queue_depth.set(queued as i64);
        self.busy_slots.set(busy as i64);
    }

    /// A request that did not complete (see [`ServerMetrics::finished`] for those that did).
    pub fn ended(&self, outcome: RequestOutcome) {
        self.requests
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    pub fn finished(&self, r: &FinishedRequest) {
        self.ended(RequestOutcome::Completed);
        self.queue_wait.observe(r.queue_s);
        self.prefill.observe(r.prefill_s);
        self.decode.observe(r.decode_s);
        self.first_token.observe(r.first_token_s);
        self.prompt_tokens.inc_by(r.prompt_tokens);
        self.cached_tokens.inc_by(r.cached_tokens);
        self.generated_tokens.inc_by(r.generated_tokens);
        if r.cached_tokens > 0 {
            self.cache_hits.inc();
        } else {
            self.cache_misses.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_request_updates_every_series() {
        let mut r = Registry::default();
        let m = ServerMetrics::register(&mut r, 2);
        m.set_occupancy(3, 2);
        m.finished(&FinishedRequest {
            queue_s: 0.002,
            prefill_s: 0.3,
            decode_s: 1.2,
            first_token_s: 0.31,
            cached_tokens: 40,
            prompt_tokens: 12,
            generated_tokens: 20,
        });
        m.ended(RequestOutcome::Rejected);
        let mut t = String::new();
        prometheus_client::encoding::text::encode(&mut t, &r).unwrap();
        for want in [
            "voxlat_server_queue_depth 3",
            "voxlat_server_busy_slots 2",
            "voxlat_server_slots 2",
            "voxlat_server_requests_total{outcome=\"completed\"} 1",
            "voxlat_server_requests_total{outcome=\"rejected\"} 1",
            "voxlat_server_requests_total{outcome=\"failed\"} 0",
            "voxlat_server_prefill_seconds_bucket{le=\"0.25\"} 0",
            "voxlat_server_prefill_seconds_bucket{le=\"0.5\"} 1",
            "voxlat_server_cached_prompt_tokens_total 40",
            "voxlat_server_prefix_cache_hits_total 1",
            "voxlat_server_prefix_cache_misses_total 0",
        ] {
            assert!(t.contains(want), "{want} missing from:\n{t}");
        }
    }
}
