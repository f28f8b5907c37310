//! One call to a stage that runs on a server (ASR or TTS over HTTP), stamped on the process
//! clock like every other event of the turn, so its phases line up with the timeline.
//!
//! A remote stage's time splits into what the client saw (request sent, headers, first and
//! last body bytes) and what the server says it spent (its `Server-Timing` header). Where the
//! server reports both queueing and compute, the rest of the wait up to the response headers
//! is the network and upload: see [`RemoteCall::network_ms`].

use crate::Nanos;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteCall {
    pub url: String,
    /// Sent as `X-Request-Id`, for joining with the server's logs.
    pub request_id: String,
    /// The ID the server answered with, when it echoes or assigns one.
    pub server_request_id: Option<String>,
    /// The request was handed to the HTTP client (connection setup, if any, comes after).
    pub sent: Nanos,
    /// Status and headers arrived; `None` when the call failed before.
    pub headers: Option<Nanos>,
    /// The first body bytes arrived (TTS: the first audio).
    pub first_byte: Option<Nanos>,
    /// The body was complete, or the call failed.
    pub done: Nanos,
    pub status: Option<u16>,
    pub upload_bytes: u64,
    pub download_bytes: u64,
    /// The server's own time in its queue, from `Server-Timing: queue;dur=…`.
    pub server_queue_ms: Option<f64>,
    /// The server's own compute, from `Server-Timing` (`asr`, `tts` or `total`).
    pub server_compute_ms: Option<f64>,
}

impl RemoteCall {
    /// sent → headers, ms.
    pub fn wait_ms(&self) -> Option<f64> {
        self.headers
            .map(|h| crate::clock::ns_to_ms(h.0.saturating_sub(self.sent.0) as i64))
    }

    /// The part of sent → headers the server does not account for: connection, upload,
    /// download of the headers. `None` unless the server reported its compute.
    pub fn network_ms(&self) -> Option<f64> {
        let server = self.server_compute_ms? + self.server_queue_ms.unwrap_or(0.0);
        Some((self.wait_ms()? - server).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_time_is_the_wait_the_server_does_not_claim() {
        let call = RemoteCall {
            sent: Nanos(1_000_000),
            headers: Some(Nanos(51_000_000)),
            server_queue_ms: Some(5.0),
            server_compute_ms: Some(30.0),
            ..RemoteCall::default()
        };
        assert_eq!(call.wait_ms(), Some(50.0));
        assert_eq!(call.network_ms(), Some(15.0));
        let silent = RemoteCall {
            server_compute_ms: None,
            ..call
        };
        assert_eq!(silent.network_ms(), None);
    }
}
