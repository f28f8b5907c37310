//! What one streamed request produced, beside its timeline: deltas, usage, server timings.

use crate::chunk::Usage;
use crate::connection::ConnPhases;
use serde::{Deserialize, Serialize};
use voxlat_core::Nanos;

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
