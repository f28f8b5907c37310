//! One error type for every HTTP call voxlat makes (LLM, ASR, TTS): each names what failed
//! and the usual fix on the server's side. Bodies and messages that could contain the API key
//! are scrubbed before they get here. Which command-line flag raises a timeout is the binary's
//! business: the error carries the [`TimeoutKind`].

use crate::config::Service;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A stable class for tables and results files.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    Unauthorized,
    NotFound,
    RateLimited,
    HttpStatus,
    ConnectionRefused,
    Connect,
    Proxy,
    Dns,
    Tls,
    Timeout,
    NotSse,
    StreamError,
    Disconnected,
    /// The connection closed before any response byte, after the one retry (or on a new
    /// connection, where no retry is made).
    ConnectionClosed,
    InvalidChunk,
    /// The stream passed its text cap: the server ignored `max_tokens`.
    Runaway,
    Other,
}

impl ErrorClass {
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Unauthorized => "unauthorized",
            ErrorClass::NotFound => "not_found",
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::HttpStatus => "http_status",
            ErrorClass::ConnectionRefused => "connection_refused",
            ErrorClass::Connect => "connect",
            ErrorClass::Proxy => "proxy",
            ErrorClass::Dns => "dns",
            ErrorClass::Tls => "tls",
            ErrorClass::Timeout => "timeout",
            ErrorClass::NotSse => "not_sse",
            ErrorClass::StreamError => "stream_error",
            ErrorClass::Disconnected => "disconnected",
            ErrorClass::ConnectionClosed => "connection_closed",
            ErrorClass::InvalidChunk => "invalid_chunk",
            ErrorClass::Runaway => "runaway",
            ErrorClass::Other => "other",
        }
    }
}

/// Which wait ran out. The binary maps each to the flag that raises it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutKind {
    /// Opening the connection (DNS, TCP, TLS).
    Connect,
    /// From sending the request to the response headers.
    Headers,
    /// The longest silence between two reads of the body.
    Idle,
}

impl TimeoutKind {
    pub fn name(self) -> &'static str {
        match self {
            TimeoutKind::Connect => "connect",
            TimeoutKind::Headers => "headers",
            TimeoutKind::Idle => "idle",
        }
    }
}

#[derive(Clone, Debug, thiserror::Error)]
pub enum NetError {
    #[error("HTTP {status} from {url}: the server rejected the credentials. {hint}{}", body_suffix(.body))]
    Unauthorized {
        status: u16,
        url: String,
        hint: String,
        body: String,
    },

    #[error("HTTP 404 from {url}: {hint}{}", body_suffix(.body))]
    NotFound {
        url: String,
        hint: String,
        body: String,
    },

    #[error("HTTP {status} from {url}{}{}", retry_suffix(.retry_after), body_suffix(.body))]
    Status {
        status: u16,
        url: String,
        body: String,
        retry_after: Option<String>,
    },

    #[error("connection refused by {addr}: nothing is listening there. Is the server running, and is the port right?{}", proxy_suffix(.proxy))]
    ConnectionRefused { addr: String, proxy: Option<String> },

    #[error("cannot connect to {url} through the proxy {proxy}: {detail}. The proxy comes from the environment (HTTP_PROXY/HTTPS_PROXY/ALL_PROXY); set NO_PROXY={host} to bypass it for this host")]
    Proxy {
        url: String,
        proxy: String,
        host: String,
        detail: String,
    },

    #[error("cannot connect to {url}: {detail}{}", proxy_suffix(.proxy))]
    Connect {
        url: String,
        detail: String,
        proxy: Option<String>,
    },

    #[error("DNS lookup of {host:?} failed: {detail}. Check the host name in the base URL")]
    Dns { host: String, detail: String },

    #[error("TLS handshake with {url} failed: {detail}. If the server speaks plain HTTP, use an http:// base URL; if it uses a private CA, add it to the system trust store")]
    Tls { url: String, detail: String },

    #[error("timed out after {:.1} s {phase}: the {} server's {} timeout ran out; raise it if the server is just slow", .after.as_secs_f64(), .service.name(), .kind.name())]
    Timeout {
        service: Service,
        kind: TimeoutKind,
        /// What was being waited for, in words ("listing models").
        phase: &'static str,
        after: Duration,
    },

    #[error("the stream broke off before it ended: {detail}")]
    Disconnected { detail: String },

    #[error("{url}: the server closed the connection before sending any response ({detail}). {}", closed_hint(*.retried))]
    ConnectionClosed {
        url: String,
        detail: String,
        retried: bool,
    },

    #[error("{0}")]
    Other(String),
}

fn body_suffix(body: &str) -> String {
    if body.trim().is_empty() {
        String::new()
    } else {
        format!(". Response body: {}", body.trim())
    }
}

fn closed_hint(retried: bool) -> &'static str {
    if retried {
        "It happened on a reused keep-alive connection and again on the retry over a new one, so it is not only a stale connection: check the server's log for a crash or a connection limit, and any proxy in between"
    } else {
        "It happened on a new connection: the server (or a proxy in front of it) is refusing work, overloaded or crashing; check its log and connection limits"
    }
}

fn retry_suffix(r: &Option<String>) -> String {
    r.as_ref()
        .map(|r| format!(" (Retry-After: {r})"))
        .unwrap_or_default()
}

fn proxy_suffix(p: &Option<String>) -> String {
    p.as_ref()
        .map(|p| format!(" Note: requests go through the proxy {p} from the environment; set NO_PROXY for local servers"))
        .unwrap_or_default()
}

impl NetError {
    pub fn class(&self) -> ErrorClass {
        match self {
            NetError::Unauthorized { .. } => ErrorClass::Unauthorized,
            NetError::NotFound { .. } => ErrorClass::NotFound,
            NetError::Status { status: 429, .. } => ErrorClass::RateLimited,
            NetError::Status { .. } => ErrorClass::HttpStatus,
            NetError::ConnectionRefused { .. } => ErrorClass::ConnectionRefused,
            NetError::Proxy { .. } => ErrorClass::Proxy,
            NetError::Connect { .. } => ErrorClass::Connect,
            NetError::Dns { .. } => ErrorClass::Dns,
            NetError::Tls { .. } => ErrorClass::Tls,
            NetError::Timeout { .. } => ErrorClass::Timeout,
            NetError::Disconnected { .. } => ErrorClass::Disconnected,
            NetError::ConnectionClosed { .. } => ErrorClass::ConnectionClosed,
            NetError::Other(_) => ErrorClass::Other,
        }
    }

    /// The HTTP status, where there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            NetError::Unauthorized { status, .. } | NetError::Status { status, .. } => {
                Some(*status)
            }
            NetError::NotFound { .. } => Some(404),
            _ => None,
        }
    }
}

/// Why the next piece of a response body could not be read, on either stack. Its top-level
/// message can be bare ("error decoding response body"): word it with
/// [`crate::classify::chain`].
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error(transparent)]
    Direct(#[from] crate::direct::ExchangeError),
    #[error(transparent)]
    Reqwest(#[from] reqwest::Error),
}

/// Bodies are shown, but never whole: a gateway's HTML error page would drown the message.
pub const BODY_LIMIT: usize = 500;

pub fn truncate_body(body: &str) -> String {
    let body = body.trim();
    if body.len() <= BODY_LIMIT {
        return body.to_string();
    }
    let mut end = BODY_LIMIT;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &body[..end], body.len())
}

/// The hint for a 404, which is almost always a base URL with or without `/v1`.
pub fn not_found_hint(base_url: &str) -> String {
    if base_url.ends_with("/v1") {
        let without = base_url.trim_end_matches("/v1");
        format!("the path does not exist. The base URL is {base_url}: if this server does not use the /v1 prefix try {without}; otherwise the model name may be unknown to it")
    } else {
        format!("the path does not exist. OpenAI-compatible servers usually serve under /v1: try the base URL {base_url}/v1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_hint_suggests_the_other_form() {
        assert!(not_found_hint("http://h:8080").contains("http://h:8080/v1"));
        assert!(not_found_hint("http://h:8080/v1").contains("try http://h:8080;"));
    }

    #[test]
    fn long_bodies_are_truncated_on_a_char_boundary() {
        let body = "é".repeat(400);
        let t = truncate_body(&body);
        assert!(t.len() <= BODY_LIMIT + 30, "{}", t.len());
        assert!(t.contains("800 bytes in all"));
    }

    #[test]
    fn classes_have_stable_names() {
        let e = NetError::Status {
            status: 429,
            url: "u".into(),
            body: String::new(),
            retry_after: Some("2".into()),
        };
        assert_eq!(e.class().name(), "rate_limited");
        assert!(e.to_string().contains("Retry-After: 2"));
        assert_eq!(
            serde_json::to_string(&ErrorClass::NotSse).unwrap(),
            "\"not_sse\""
        );
    }
}
