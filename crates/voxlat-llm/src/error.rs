//! How a chat stream fails: the HTTP call's own failures ([`NetError`]) and what only an SSE
//! chat stream can do wrong. Messages that could contain the API key are scrubbed before they
//! get here.

pub use voxlat_net::error::{truncate_body, ErrorClass, NetError, TimeoutKind};

#[derive(Clone, Debug, thiserror::Error)]
pub enum LlmError {
    #[error(transparent)]
    Net(#[from] NetError),

    #[error("the response from {url} is not a server-sent event stream (Content-Type: {content_type:?}). The server may not support \"stream\": true at this path{}", body_suffix(.body))]
    NotSse {
        url: String,
        content_type: String,
        body: String,
    },

    #[error("the server sent an error in the stream: {message}")]
    StreamError { message: String },

    #[error("a stream event is not valid JSON ({detail}): {data:?}")]
    InvalidChunk { detail: String, data: String },

    /// Cut at [`crate::client::stream_text_cap`]: memory for one request stays bounded.
    #[error("the server streamed more than {cap_bytes} bytes of text for one request{}, so the stream was cut there: the server ignores max_tokens (or the model never stops); check the server's max_tokens support and stop settings", runaway_suffix(*.max_tokens))]
    Runaway {
        cap_bytes: usize,
        max_tokens: Option<u32>,
    },
}

fn runaway_suffix(max_tokens: Option<u32>) -> String {
    match max_tokens {
        Some(n) => format!(" with max_tokens = {n}"),
        None => " (the request set no max_tokens)".into(),
    }
}

fn body_suffix(body: &str) -> String {
    if body.trim().is_empty() {
        String::new()
    } else {
        format!(". Response body: {}", body.trim())
    }
}

impl LlmError {
    pub fn class(&self) -> ErrorClass {
        match self {
            LlmError::Net(e) => e.class(),
            LlmError::NotSse { .. } => ErrorClass::NotSse,
            LlmError::StreamError { .. } => ErrorClass::StreamError,
            LlmError::InvalidChunk { .. } => ErrorClass::InvalidChunk,
            LlmError::Runaway { .. } => ErrorClass::Runaway,
        }
    }

    /// The HTTP status, where there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Net(e) => e.status(),
            _ => None,
        }
    }

    /// A failure of the client's own making, not the server's.
    pub fn other(detail: impl Into<String>) -> LlmError {
        LlmError::Net(NetError::Other(detail.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_net_failure_keeps_its_class_and_message() {
        let e = LlmError::from(NetError::Status {
            status: 429,
            url: "u".into(),
            body: String::new(),
            retry_after: Some("2".into()),
        });
        assert_eq!(e.class().name(), "rate_limited");
        assert_eq!(e.status(), Some(429));
        assert!(e.to_string().contains("Retry-After: 2"));
    }

    #[test]
    fn runaway_says_whether_max_tokens_was_set() {
        let e = LlmError::Runaway {
            cap_bytes: 10,
            max_tokens: None,
        };
        assert_eq!(e.class(), ErrorClass::Runaway);
        assert!(e.to_string().contains("set no max_tokens"));
    }
}
