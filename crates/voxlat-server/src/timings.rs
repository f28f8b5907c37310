//! Server-side timings of one request, named after llama.cpp server's `timings` object where
//! it has the same quantity (prompt_n, prompt_ms, cache_n, predicted_n, predicted_ms, …), so
//! tools that read llama.cpp read these too. All stamps are `Instant`s of this process.

use serde::Serialize;
use std::time::Instant;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Timings {
    /// Waiting for a free slot: request queued → a slot picked it up.
    pub queue_ms: f64,
    /// Prompt tokens reused from the slot's KV cache (not evaluated again).
    pub cache_n: u64,
    /// Prompt tokens evaluated (the prompt minus `cache_n`).
    pub prompt_n: u64,
    /// Prefill: slot picked the request up → prompt evaluated (includes KV-cache bookkeeping).
    pub prompt_ms: f64,
    pub prompt_per_second: f64,
    /// Request received (before templating and tokenizing) → first token sampled.
    pub first_token_ms: f64,
    /// Tokens sampled so far (the reply's tokens, an end-of-generation token excluded).
    pub predicted_n: u64,
    /// Decode: prompt evaluated → latest token sampled.
    pub predicted_ms: f64,
    pub predicted_per_second: f64,
    /// Request received → now (the last chunk: → reply complete).
    pub total_ms: f64,
}

/// The instants a request passes through on the server.
#[derive(Debug, Clone)]
pub struct Stamps {
    pub received: Instant,
    pub queued: Instant,
    pub started: Option<Instant>,
    pub prefilled: Option<Instant>,
    pub first_token: Option<Instant>,
    pub last_token: Option<Instant>,
}

/// Milliseconds from `a` to `b` (0 if `b` is earlier).
fn span_ms(a: Instant, b: Instant) -> f64 {
    voxlat_core::clock::ms(b.saturating_duration_since(a))
}

fn per_second(n: u64, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1e3 / ms
    } else {
        0.0
    }
}

impl Stamps {
    pub fn new(received: Instant) -> Stamps {
        Stamps {
            received,
            queued: received,
            started: None,
            prefilled: None,
            first_token: None,
            last_token: None,
        }
    }

    /// The timings as of `now`; stages not reached yet read 0.
    pub fn timings(&self, cache_n: u64, prompt_n: u64, predicted_n: u64, now: Instant) -> Timings {
        let started = self.started.unwrap_or(now);
        let prompt_ms = self.prefilled.map_or(0.0, |p| span_ms(started, p));
        let predicted_ms = match (self.prefilled, self.last_token) {
            (Some(p), Some(l)) => span_ms(p, l),
            _ => 0.0,
        };
        Timings {
            queue_ms: span_ms(self.queued, started),
            cache_n,
            prompt_n,
            prompt_ms,
            prompt_per_second: per_second(prompt_n, prompt_ms),
            first_token_ms: self.first_token.map_or(0.0, |f| span_ms(self.received, f)),
            predicted_n,
            predicted_ms,
            predicted_per_second: per_second(predicted_n, predicted_ms),
            total_ms: span_ms(self.received, now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stages_telescope_from_receipt() {
        let t0 = Instant::now();
        let at = |m: u64| t0 + Duration::from_millis(m);
        let s = Stamps {
            received: t0,
            queued: at(1),
            started: Some(at(11)),
            prefilled: Some(at(31)),
            first_token: Some(at(32)),
            last_token: Some(at(72)),
        };
        let t = s.timings(5, 20, 4, at(80));
        assert_eq!(t.queue_ms, 10.0);
        assert_eq!(t.prompt_ms, 20.0);
        assert_eq!(t.first_token_ms, 32.0);
        assert_eq!(t.predicted_ms, 41.0);
        assert_eq!(t.total_ms, 80.0);
        assert_eq!(t.prompt_per_second, 1000.0);
        assert!(t.queue_ms + t.prompt_ms <= t.first_token_ms);
    }

    #[test]
    fn unreached_stages_read_zero() {
        let t0 = Instant::now();
        let t = Stamps::new(t0).timings(0, 0, 0, t0 + Duration::from_millis(5));
        assert_eq!(
            (t.prompt_ms, t.first_token_ms, t.predicted_ms),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(t.queue_ms, 5.0);
        assert_eq!(t.predicted_per_second, 0.0);
    }
}
