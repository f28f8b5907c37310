//! What one streamed request produced, beside its timeline: deltas, usage, server timings.

use crate::chunk::Usage;
use serde::{Deserialize, Serialize};
use voxlat_core::Nanos;
use voxlat_net::connection::ConnPhases;

/// One content delta: when it arrived, how many characters, and whether it was reasoning.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeltaStamp {
    pub t: Nanos,
    pub chars: u32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reasoning: bool,
}

/// Where the output token count came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage.completion_tokens`.
    Usage,
    /// No usage was sent: the count of content deltas stands in, which is right only when the
    /// server sends one token per delta.
    DeltaCount,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOutcome {
    pub status: Option<u16>,
    pub http_version: Option<String>,
    /// The request ID the server echoed back, if it did.
    pub server_request_id: Option<String>,
    pub deltas: Vec<DeltaStamp>,
    /// The answer text (reasoning excluded).
    pub text: String,
    pub reasoning_chars: u64,
    pub events: u64,
    pub comments: u64,
    /// `data: [DONE]` was received. A stream that ends cleanly without it is accepted, and
    /// this says so.
    pub done_marker: bool,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub output_tokens: Option<u64>,
    pub output_tokens_source: Option<TokenSource>,
    /// Server-reported timings (llama.cpp `timings` object, verbatim), last one seen.
    pub server_timings: Option<serde_json::Value>,
    pub connection: ConnPhases,
    /// The request was sent a second time, on a new connection, because the pooled
    /// connection it first went out on was closed before any response byte. `llm_sent` is the
    /// first attempt's; every later stamp, and `connection`, belong to the retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

/// The retry of a request whose first attempt died on a stale connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Retry {
    /// When the retry was handed to the HTTP stack (process clock): TTFT counts from here,
    /// not from the dead attempt.
    pub sent: Nanos,
    /// Why the first attempt failed.
    pub first_error: String,
}

impl StreamOutcome {
    pub fn content_deltas(&self) -> impl Iterator<Item = &DeltaStamp> {
        self.deltas.iter()
    }

    /// Sets the output token count from usage when present, else from the delta count.
    pub fn settle_token_count(&mut self) {
        match self.usage.as_ref().and_then(|u| u.completion_tokens) {
            Some(n) => {
                self.output_tokens = Some(n);
                self.output_tokens_source = Some(TokenSource::Usage);
            }
            None => {
                self.output_tokens = Some(self.deltas.len() as u64);
                self.output_tokens_source = Some(TokenSource::DeltaCount);
            }
        }
    }
}
