//! The server's own account of a request, read from whichever convention it reports in,
//! set beside the client's TTFT. What the server does not account for is the network plus
//! both sides' HTTP and SSE handling.
//!
//! Conventions read (all optional, all in the record's `server_timings` or `usage`):
//! - llama.cpp `timings`: `prompt_ms` (prefill), `predicted_ms` (decode), `prompt_n`,
//!   `cache_n`. llama.cpp reports no queue time, so its server-side TTFT is `prompt_ms` alone.
//! - the embedded `voxlat-server`: llama.cpp's names plus `queue_ms` and `first_token_ms`
//!   (request received → first token sampled), which is then the server-side TTFT.
//! - Ollama: `prompt_eval_duration` (prefill), `eval_duration` (decode) and `load_duration`
//!   in nanoseconds; server-side TTFT = load + prefill.
//! - `usage.prompt_tokens_details.cached_tokens`.

use super::record::RequestRecord;
use serde::{Deserialize, Serialize};
use voxlat_core::stats::Summary;

/// One request's server-reported times, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerTimes {
    pub queue_ms: Option<f64>,
    pub prefill_ms: Option<f64>,
    pub decode_ms: Option<f64>,
    /// Request received (or picked up) → first token, as the server sees it.
    pub ttft_ms: Option<f64>,
    pub cached_tokens: Option<f64>,
    /// `llama.cpp`, `voxlat-server` or `ollama`.
    pub convention: &'static str,
}

/// Reads the server's times from a record; `None` when it reported none.
pub fn server_times(r: &RequestRecord) -> Option<ServerTimes> {
    let cached_from_usage = r
        .outcome
        .usage
        .as_ref()
        .and_then(|u| u.prompt_tokens_details.as_ref())
        .and_then(|d| d.cached_tokens)
        .map(|n| n as f64);
    let m = match &r.outcome.server_timings {
        Some(serde_json::Value::Object(m)) => m,
        _ => return None,
    };
    let f = |k: &str| m.get(k).and_then(serde_json::Value::as_f64);
    let ns_to_ms = |k: &str| f(k).map(|ns| ns / 1e6);
    if f("prompt_eval_duration").is_some() || f("eval_duration").is_some() {
        let prefill = ns_to_ms("prompt_eval_duration");
        let load = ns_to_ms("load_duration").unwrap_or(0.0);
        return Some(ServerTimes {
            queue_ms: None,
            prefill_ms: prefill,
            decode_ms: ns_to_ms("eval_duration"),
            ttft_ms: prefill.map(|p| p + load),
            cached_tokens: cached_from_usage,
            convention: "ollama",
        });
    }
    if f("prompt_ms").is_none() && f("predicted_ms").is_none() {
        return None;
    }
    let embedded = f("first_token_ms").is_some();
    Some(ServerTimes {
        queue_ms: f("queue_ms"),
        prefill_ms: f("prompt_ms"),
        decode_ms: f("predicted_ms"),
        ttft_ms: f("first_token_ms")
            .or_else(|| Some(f("prompt_ms")? + f("queue_ms").unwrap_or(0.0))),
        cached_tokens: f("cache_n").or(cached_from_usage),
        convention: if embedded {
            "voxlat-server"
        } else {
            "llama.cpp"
        },
    })
}

/// A cell's server view: the server's times summarized beside the client's TTFT.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerView {
    pub convention: String,
    /// Requests with server times.
    pub requests: usize,
    /// Of those, how many echoed our `X-Request-Id`, so client and server records are
    /// provably the same request.
    pub joined_by_request_id: usize,
    /// The rest: the server did not echo the ID (llama-server does not), so they are joined
    /// by the response that carried them. The times arrive inside the request's own stream,
    /// on its own connection, so the join is still one to one; it is just not proven by ID.
    #[serde(default)]
    pub joined_by_response: usize,
    pub queue_ms: Option<Summary>,
    pub prefill_ms: Option<Summary>,
    pub decode_ms: Option<Summary>,
    pub server_ttft_ms: Option<Summary>,
    /// Per request: client TTFT − server TTFT. The network, HTTP and SSE on both sides.
    pub outside_server_ms: Option<Summary>,
}

impl ServerView {
    pub fn from_records(ok: &[&RequestRecord]) -> Option<ServerView> {
        let with: Vec<(&RequestRecord, ServerTimes)> = ok
            .iter()
            .filter_map(|r| Some((*r, server_times(r)?)))
            .collect();
        let (_, first) = with.first()?;
        let s = |f: &dyn Fn(&(&RequestRecord, ServerTimes)) -> Option<f64>| {
            let v: Vec<f64> = with.iter().filter_map(f).collect();
            Summary::from_samples(&v, 0)
        };
        Some(ServerView {
            convention: first.convention.to_string(),
            requests: with.len(),
            joined_by_request_id: with
                .iter()
                .filter(|(r, _)| {
                    r.outcome.server_request_id.as_deref() == Some(r.request_id.as_str())
                })
                .count(),
            joined_by_response: with
                .iter()
                .filter(|(r, _)| {
                    r.outcome.server_request_id.as_deref() != Some(r.request_id.as_str())
                })
                .count(),
            queue_ms: s(&|(_, t)| t.queue_ms),
            prefill_ms: s(&|(_, t)| t.prefill_ms),
            decode_ms: s(&|(_, t)| t.decode_ms),
            server_ttft_ms: s(&|(_, t)| t.ttft_ms),
            outside_server_ms: s(&|(r, t)| Some(r.ttft_ms()? - t.ttft_ms?)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlat_llm::record::StreamOutcome;

    fn rec(timings: serde_json::Value) -> RequestRecord {
        RequestRecord::for_test(
            "r1",
            StreamOutcome {
                server_timings: Some(timings),
                server_request_id: Some("r1".into()),
                ..StreamOutcome::default()
            },
        )
    }

    #[test]
    fn each_convention_maps_to_queue_prefill_decode() {
        let l = server_times(&rec(
            serde_json::json!({"prompt_ms": 40.0, "predicted_ms": 100.0, "cache_n": 3}),
        ))
        .unwrap();
        assert_eq!(
            (l.convention, l.ttft_ms, l.cached_tokens),
            ("llama.cpp", Some(40.0), Some(3.0))
        );
        let e = server_times(&rec(serde_json::json!({"queue_ms": 5.0, "prompt_ms": 40.0, "first_token_ms": 47.0, "predicted_ms": 9.0})))
            .unwrap();
        assert_eq!(
            (e.convention, e.queue_ms, e.ttft_ms),
            ("voxlat-server", Some(5.0), Some(47.0))
        );
        let o = server_times(&rec(serde_json::json!({"load_duration": 2_000_000u64, "prompt_eval_duration": 30_000_000u64, "eval_duration": 90_000_000u64})))
            .unwrap();
        assert_eq!(
            (o.convention, o.prefill_ms, o.decode_ms, o.ttft_ms),
            ("ollama", Some(30.0), Some(90.0), Some(32.0))
        );
        assert!(server_times(&rec(serde_json::json!({"other": 1}))).is_none());
        let r = rec(serde_json::json!({"prompt_ms": 1.0}));
        let v = ServerView::from_records(&[&r]).unwrap();
        assert_eq!(
            (v.requests, v.joined_by_request_id, v.joined_by_response),
            (1, 1, 0)
        );
        let mut r = r;
        r.outcome.server_request_id = None;
        let v = ServerView::from_records(&[&r]).unwrap();
        assert_eq!((v.joined_by_request_id, v.joined_by_response), (0, 1));
    }
}
