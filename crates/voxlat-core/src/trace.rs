//! W3C trace context derived from a request ID, so that every process that sees the ID (the
//! pipeline, the LLM client, the exporter of the turn's spans) agrees on the trace without
//! passing anything else around: the trace ID is a hash of the request ID, and each named
//! span of the turn gets a span ID hashed from the request ID and its name.
//!
//! Hashing (FNV-1a) rather than random IDs keeps the mapping stable and dependency-free; the
//! IDs only need to be unique per request, which the request ID already is.

use crate::request_id::RequestId;

/// The span the LLM request is made under: the parent named in `traceparent`, so a server
/// that traces attaches its spans below it.
pub const LLM_REQUEST_SPAN: &str = "llm_request";
/// The turn's root span.
pub const TURN_SPAN: &str = "turn";

/// A 128-bit trace ID for the request (never zero, as W3C requires).
pub fn trace_id(id: &RequestId) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let h = id
        .as_str()
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u128::from(b)).wrapping_mul(PRIME));
    h.max(1)
}

/// A 64-bit span ID for the span `name` of the request (never zero).
pub fn span_id(id: &RequestId, name: &str) -> u64 {
    const OFFSET: u64 = 0xcbf29ce484222325;
    const PRIME: u64 = 0x100000001b3;
    let h = id
        .as_str()
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(name.bytes())
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    h.max(1)
}

/// The `traceparent` header value for the request's LLM call: version 00, the request's
/// trace, the [`LLM_REQUEST_SPAN`] as parent, sampled.
pub fn traceparent(id: &RequestId) -> String {
    format!(
        "00-{:032x}-{:016x}-01",
        trace_id(id),
        span_id(id, LLM_REQUEST_SPAN)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_well_formed_and_stable() {
        let id = RequestId::from_string("vx-0123abcd-00007");
        let tp = traceparent(&id);
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4, "{tp}");
        assert_eq!((parts[0], parts[3]), ("00", "01"));
        assert_eq!(parts[1].len(), 32);
        assert_eq!(parts[2].len(), 16);
        assert!(parts[1..3].iter().all(|p| p
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())));
        assert_eq!(tp, traceparent(&id));
        assert_eq!(parts[1], format!("{:032x}", trace_id(&id)));
    }

    #[test]
    fn ids_differ_between_requests_and_spans() {
        let a = RequestId::from_string("vx-0123abcd-00007");
        let b = RequestId::from_string("vx-0123abcd-00008");
        assert_ne!(trace_id(&a), trace_id(&b));
        assert_ne!(span_id(&a, TURN_SPAN), span_id(&a, LLM_REQUEST_SPAN));
        assert_ne!(span_id(&a, TURN_SPAN), span_id(&b, TURN_SPAN));
    }
}
