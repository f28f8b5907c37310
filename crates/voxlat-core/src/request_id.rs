//! Request IDs: short, unique, printable; sent to LLM servers as `X-Request-Id`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// `vx-` + 8 random hex digits (per process) + `-` + a 5-hex-digit counter.
///
/// The random part keeps IDs from different runs apart in a server's logs; the counter makes
/// IDs within one run unique by construction and sortable by creation order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(String);

fn process_tag() -> u32 {
    use std::sync::OnceLock;
    static TAG: OnceLock<u32> = OnceLock::new();
    *TAG.get_or_init(|| fastrand::u32(..))
}

impl RequestId {
    pub fn new() -> RequestId {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        RequestId(format!("vx-{:08x}-{:05x}", process_tag(), n))
    }

    /// Wraps an ID that came from elsewhere (a results file, a server header).
    pub fn from_string(s: impl Into<String>) -> RequestId {
        RequestId(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for RequestId {
    fn default() -> Self {
        RequestId::new()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_printable_and_valid_header_values() {
        let ids: Vec<RequestId> = (0..10_000).map(|_| RequestId::new()).collect();
        let set: HashSet<&str> = ids.iter().map(|i| i.as_str()).collect();
        assert_eq!(set.len(), ids.len());
        for id in &ids[..10] {
            assert!(id.as_str().len() <= 20, "{id}");
            assert!(id
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-'));
        }
    }
}
