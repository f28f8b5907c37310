//! One request of a benchmark, as written to the results file, and the figures derived from it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use voxlat_core::clock::ns_to_ms;
use voxlat_core::{EventKind, Nanos, RequestId};
use voxlat_llm::error::ErrorClass;
use voxlat_llm::record::StreamOutcome;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub request_id: RequestId,
    pub cell: String,
    pub model: String,
    pub warmup: bool,
    pub seq: u64,
    /// Open-loop runs: when the request was due (process clock).
    pub scheduled: Option<Nanos>,
    pub error_class: Option<ErrorClass>,
    pub error: Option<String>,
    /// Event times on the process clock, by name.
    pub events: BTreeMap<EventKind, Nanos>,
    pub outcome: StreamOutcome,
    /// What this request varied (sweep point or probe step); absent for plain cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<Variant>,
    /// The stream was closed at the first answer token on purpose (max_tokens sweep), so no
    /// end-of-stream figures exist for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut_at_first_token: bool,
}

impl RequestRecord {
    /// A successful request `id` with nothing measured, for unit tests to fill in.
    #[cfg(test)]
    pub(crate) fn for_test(id: &str, outcome: StreamOutcome) -> RequestRecord {
        RequestRecord {
            request_id: RequestId::from_string(id),
            cell: "c".into(),
            model: "m".into(),
            warmup: false,
            seq: 0,
            scheduled: None,
            error_class: None,
            error: None,
            events: BTreeMap::new(),
            outcome,
            variant: None,
            cut_at_first_token: false,
        }
    }
}

/// What a request varied, so cells can be grouped back into sweeps and probes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Variant {
    PromptTokens { value: u32 },
    MaxTokens { value: u32 },
    Cache { step: CacheStep },
    Connection { http2: bool, cold: bool },
}

/// The steps of the prefix-cache probe, in the order one round sends them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheStep {
    /// A long prompt the server has never seen: full prefill.
    Cold,
    /// The same prompt again: a prefix cache serves all of it.
    Repeat,
    /// The same prompt with its last word changed: a prefix cache serves all but the end.
    ChangeEnd,
    /// The same prompt with its first word changed: no prefix in common.
    ChangeStart,
}

impl CacheStep {
    pub const ROUND: [CacheStep; 4] = [
        CacheStep::Cold,
        CacheStep::Repeat,
        CacheStep::ChangeEnd,
        CacheStep::ChangeStart,
    ];
    pub fn name(self) -> &'static str {
        match self {
            CacheStep::Cold => "cold",
            CacheStep::Repeat => "repeat",
            CacheStep::ChangeEnd => "change-end",
            CacheStep::ChangeStart => "change-start",
        }
    }
}

impl Variant {
    /// The suffix this variant adds to a cell name.
    pub fn label(&self) -> String {
        match self {
            Variant::PromptTokens { value } => format!("prompt-tokens={value}"),
            Variant::MaxTokens { value } => format!("max-tokens={value}"),
            Variant::Cache { step } => format!("cache {}", step.name()),
            Variant::Connection { http2, cold } => format!(
                "{} {}",
                if *http2 { "HTTP/2" } else { "HTTP/1.1" },
                if *cold { "cold" } else { "warm" }
            ),
        }
    }
}

impl RequestRecord {
    pub fn ok(&self) -> bool {
        self.error_class.is_none()
    }

    fn span(&self, from: EventKind, to: EventKind) -> Option<f64> {
        Some(ns_to_ms(
            self.events.get(&to)?.signed_since(*self.events.get(&from)?),
        ))
    }

    /// When the request was written to a ready connection: the moment the HTTP stack took its
    /// body (`connection.written_at`), which is after any connection setup and after the
    /// client's own queueing for a connection and for CPU. Records without that stamp fall
    /// back to the moment a connection the request opened became usable, then to `llm_sent`.
    /// A stamp outside send → headers belongs to another attempt and does not count.
    pub fn ready_at(&self) -> Option<Nanos> {
        let sent = self.sent_at()?;
        let headers = self.events.get(&EventKind::LlmHeaders);
        let in_range = |r: &Nanos| *r >= sent && headers.is_none_or(|h| r <= h);
        let c = &self.outcome.connection;
        let ready = c
            .written_at
            .filter(in_range)
            .or(c.ready_at.filter(in_range));
        Some(ready.unwrap_or(sent))
    }

    /// When the attempt that counts was handed to the HTTP stack: `llm_sent`, or the retry's
    /// send when a stale pooled connection made the first attempt fail.
    pub fn sent_at(&self) -> Option<Nanos> {
        match &self.outcome.retry {
            Some(r) => Some(r.sent),
            None => self.events.get(&EventKind::LlmSent).copied(),
        }
    }

    fn since_sent(&self, to: EventKind) -> Option<f64> {
        Some(ns_to_ms(
            self.events.get(&to)?.signed_since(self.sent_at()?),
        ))
    }

    /// The request written to a ready connection → `to`.
    fn since_ready(&self, to: EventKind) -> Option<f64> {
        Some(ns_to_ms(
            self.events.get(&to)?.signed_since(self.ready_at()?),
        ))
    }

    /// Ready connection → first non-empty content delta. Connection setup (DNS, TCP, TLS) is
    /// not in it: see [`Self::ttft_with_connect_ms`].
    pub fn ttft_ms(&self) -> Option<f64> {
        self.since_ready(EventKind::LlmFirstToken)
    }

    /// llm_sent → first non-empty content delta: what a user waits for, connection setup
    /// included when the request opened a connection. Equal to TTFT on a pooled connection.
    pub fn ttft_with_connect_ms(&self) -> Option<f64> {
        self.since_sent(EventKind::LlmFirstToken)
    }

    /// llm_sent → response headers, connection setup included.
    pub fn ttfb_with_connect_ms(&self) -> Option<f64> {
        self.since_sent(EventKind::LlmHeaders)
    }

    /// Ready connection → first answer (non-reasoning) delta.
    pub fn ttfat_ms(&self) -> Option<f64> {
        self.since_ready(EventKind::LlmFirstAnswerToken)
    }

    /// Ready connection → response headers.
    pub fn ttfb_ms(&self) -> Option<f64> {
        self.since_ready(EventKind::LlmHeaders)
    }

    pub fn first_event_ms(&self) -> Option<f64> {
        self.since_ready(EventKind::LlmFirstEvent)
    }

    pub fn e2e_ms(&self) -> Option<f64> {
        self.since_ready(EventKind::LlmDone)
    }

    /// (llm_done − llm_first_token) / (output tokens − 1).
    pub fn tpot_ms(&self) -> Option<f64> {
        let tokens = self.outcome.output_tokens?;
        if tokens < 2 {
            return None;
        }
        Some(self.span(EventKind::LlmFirstToken, EventKind::LlmDone)? / (tokens - 1) as f64)
    }

    /// Gaps between consecutive content deltas.
    pub fn itls_ms(&self) -> Vec<f64> {
        self.outcome
            .deltas
            .windows(2)
            .map(|w| ns_to_ms(w[1].t.signed_since(w[0].t)))
            .collect()
    }

    /// llm_first_token → llm_first_answer_token: time spent on reasoning before the answer.
    pub fn thinking_ms(&self) -> Option<f64> {
        self.span(EventKind::LlmFirstToken, EventKind::LlmFirstAnswerToken)
    }

    /// Reasoning tokens: `usage.completion_tokens_details.reasoning_tokens` when sent, else
    /// the number of reasoning deltas.
    pub fn reasoning_tokens(&self) -> Option<u64> {
        let from_usage = self
            .outcome
            .usage
            .as_ref()
            .and_then(|u| u.completion_tokens_details.as_ref())
            .and_then(|d| d.reasoning_tokens);
        let deltas = self.outcome.deltas.iter().filter(|d| d.reasoning).count() as u64;
        from_usage.or((deltas > 0).then_some(deltas))
    }

    /// The prompt's size in tokens: the server's count when it reports one, else the size a
    /// sweep asked for.
    pub fn prompt_tokens(&self) -> Option<f64> {
        let usage = self.outcome.usage.as_ref().and_then(|u| u.prompt_tokens);
        match (usage, self.variant) {
            (Some(n), _) => Some(n as f64),
            (None, Some(Variant::PromptTokens { value })) => Some(f64::from(value)),
            _ => None,
        }
    }

    /// Open loop: how late the request left against its schedule.
    pub fn send_lag_ms(&self) -> Option<f64> {
        Some(ns_to_ms(
            self.events
                .get(&EventKind::LlmSent)?
                .signed_since(self.scheduled?),
        ))
    }

    /// Open loop: TTFT counted from when the request was due, so a client that fell behind
    /// cannot hide the wait (coordinated omission).
    pub fn ttft_from_schedule_ms(&self) -> Option<f64> {
        Some(ns_to_ms(
            self.events
                .get(&EventKind::LlmFirstToken)?
                .signed_since(self.scheduled?),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlat_llm::record::DeltaStamp;

    #[test]
    fn derived_figures_follow_the_definitions() {
        let ms = 1_000_000u64;
        let mut r = RequestRecord {
            request_id: RequestId::from_string("r"),
            cell: "c".into(),
            model: "m".into(),
            warmup: false,
            seq: 0,
            scheduled: Some(Nanos(0)),
            error_class: None,
            error: None,
            events: BTreeMap::new(),
            outcome: StreamOutcome::default(),
            variant: None,
            cut_at_first_token: false,
        };
        for (k, t) in [
            (EventKind::LlmSent, 2),
            (EventKind::LlmHeaders, 10),
            (EventKind::LlmFirstEvent, 12),
            (EventKind::LlmFirstToken, 52),
            (EventKind::LlmFirstAnswerToken, 52),
            (EventKind::LlmDone, 142),
        ] {
            r.events.insert(k, Nanos(t * ms));
        }
        r.outcome.output_tokens = Some(10);
        r.outcome.deltas = [52, 62, 82]
            .iter()
            .map(|&t| DeltaStamp {
                t: Nanos(t * ms),
                chars: 1,
                reasoning: false,
            })
            .collect();
        assert_eq!(r.ttft_ms(), Some(50.0));
        assert_eq!(r.ttfb_ms(), Some(8.0));
        assert_eq!(r.first_event_ms(), Some(10.0));
        assert_eq!(r.e2e_ms(), Some(140.0));
        assert_eq!(r.tpot_ms(), Some(10.0));
        assert_eq!(r.itls_ms(), vec![10.0, 20.0]);
        assert_eq!(r.send_lag_ms(), Some(2.0));
        assert_eq!(r.ttft_from_schedule_ms(), Some(52.0));
        r.outcome.output_tokens = Some(1);
        assert_eq!(r.tpot_ms(), None, "TPOT needs two tokens");
        assert_eq!(r.ttft_with_connect_ms(), Some(50.0), "pooled: the same");
        // A request that opened a connection ready at 6 ms: TTFT from there, and the
        // connect-inclusive figure from llm_sent.
        r.outcome.connection.new_connection = true;
        r.outcome.connection.ready_at = Some(Nanos(6 * ms));
        assert_eq!(r.ttft_ms(), Some(46.0));
        assert_eq!(r.ttft_with_connect_ms(), Some(50.0));
        assert_eq!(r.ttfb_ms(), Some(4.0));
        assert_eq!(r.ttfb_with_connect_ms(), Some(8.0));
        // Ready after the headers: a background connect, not this request's.
        r.outcome.connection.ready_at = Some(Nanos(11 * ms));
        assert_eq!(r.ttft_ms(), Some(50.0));
        // A retry after a stale connection: both figures count from the retry.
        r.outcome.retry = Some(voxlat_llm::record::Retry {
            sent: Nanos(5 * ms),
            first_error: "connection closed before message completed".into(),
        });
        r.outcome.connection.ready_at = Some(Nanos(7 * ms));
        assert_eq!(r.ttft_with_connect_ms(), Some(47.0));
        assert_eq!(r.ttft_ms(), Some(45.0));
        // The body taken for writing at 7.5 ms, after the connection was ready: TTFT from the
        // write, which is what the server's own TTFT starts from.
        r.outcome.connection.written_at = Some(Nanos(7 * ms + ms / 2));
        assert_eq!(r.ttft_ms(), Some(44.5));
        assert_eq!(r.ttft_with_connect_ms(), Some(47.0));
        // A write stamp from the dead first attempt (before the retry) is not this attempt's.
        r.outcome.connection.written_at = Some(Nanos(ms));
        assert_eq!(r.ttft_ms(), Some(45.0));
    }
}
