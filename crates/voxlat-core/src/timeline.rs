//! A request's timeline: one slot per [`EventKind`], each written at most once.
//!
//! Stamping is a single atomic compare-and-swap on the request's own slot: no lock of any
//! kind, global or per request, so stages on different threads and tasks (and the audio
//! thread, eventually) can stamp without contending or allocating.

use crate::clock::{self, Nanos};
use crate::event::EventKind;
use crate::request_id::RequestId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Slot value meaning "not stamped". Stamps are stored as `ns + 1`, so a stamp at exactly the
/// origin (possible in tests) is still distinguishable from an empty slot.
const EMPTY: u64 = 0;

#[derive(Debug)]
pub struct Timeline {
    id: RequestId,
    slots: [AtomicU64; EventKind::COUNT],
}

impl Timeline {
    pub fn new(id: RequestId) -> Timeline {
        Timeline {
            id,
            slots: std::array::from_fn(|_| AtomicU64::new(EMPTY)),
        }
    }

    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// Stamps `kind` now, unless it was stamped before. Returns the stamp that holds.
    pub fn mark(&self, kind: EventKind) -> Nanos {
        self.mark_at(kind, clock::now())
    }

    /// Stamps `kind` at `t` (for events whose time is known better than "now", such as a
    /// retro-dated speech end). The first stamp wins; returns the stamp that holds.
    pub fn mark_at(&self, kind: EventKind, t: Nanos) -> Nanos {
        let slot = &self.slots[kind.index()];
        match slot.compare_exchange(EMPTY, t.0 + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => t,
            Err(existing) => Nanos(existing - 1),
        }
    }

    pub fn get(&self, kind: EventKind) -> Option<Nanos> {
        match self.slots[kind.index()].load(Ordering::Acquire) {
            EMPTY => None,
            v => Some(Nanos(v - 1)),
        }
    }

    pub fn snapshot(&self) -> TimelineSnapshot {
        let events = EventKind::ALL
            .iter()
            .filter_map(|&k| self.get(k).map(|t| (k, t)))
            .collect();
        TimelineSnapshot {
            request_id: self.id.clone(),
            events,
        }
    }
}

/// A frozen copy of a timeline, as written to results files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineSnapshot {
    pub request_id: RequestId,
    /// Nanoseconds on the process clock, by event name.
    pub events: BTreeMap<EventKind, Nanos>,
}

impl TimelineSnapshot {
    pub fn get(&self, kind: EventKind) -> Option<Nanos> {
        self.events.get(&kind).copied()
    }

    /// `to - from` in nanoseconds when both were stamped.
    pub fn span_ns(&self, from: EventKind, to: EventKind) -> Option<i64> {
        Some(self.get(to)?.signed_since(self.get(from)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn first_stamp_wins() {
        let tl = Timeline::new(RequestId::new());
        assert_eq!(tl.get(EventKind::LlmSent), None);
        assert_eq!(tl.mark_at(EventKind::LlmSent, Nanos(5)), Nanos(5));
        assert_eq!(tl.mark_at(EventKind::LlmSent, Nanos(9)), Nanos(5));
        assert_eq!(tl.get(EventKind::LlmSent), Some(Nanos(5)));
    }

    #[test]
    fn a_stamp_at_the_origin_is_not_lost() {
        let tl = Timeline::new(RequestId::new());
        tl.mark_at(EventKind::SpeechEnd, Nanos(0));
        assert_eq!(tl.get(EventKind::SpeechEnd), Some(Nanos(0)));
    }

    #[test]
    fn concurrent_stampers_agree_on_one_value() {
        let tl = Arc::new(Timeline::new(RequestId::new()));
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let tl = tl.clone();
                std::thread::spawn(move || tl.mark_at(EventKind::AsrDone, Nanos(100 + i)))
            })
            .collect();
        let seen: Vec<Nanos> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let held = tl.get(EventKind::AsrDone).unwrap();
        assert!(seen.iter().all(|&s| s == held));
    }

    #[test]
    fn snapshot_serializes_event_names() {
        let tl = Timeline::new(RequestId::from_string("r1"));
        tl.mark_at(EventKind::LlmSent, Nanos(10));
        tl.mark_at(EventKind::LlmFirstToken, Nanos(25));
        let snap = tl.snapshot();
        assert_eq!(
            snap.span_ns(EventKind::LlmSent, EventKind::LlmFirstToken),
            Some(15)
        );
        let json = serde_json::to_value(&snap).unwrap();
        assert_eq!(json["events"]["llm_first_token"], 25);
        assert_eq!(json["request_id"], "r1");
        let back: TimelineSnapshot = serde_json::from_value(json).unwrap();
        assert_eq!(back, snap);
    }
}
