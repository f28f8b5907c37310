//! A replay's annotations of each end of turn: the truth (where the annotated speech ended)
//! and the verdict (where the commit fell against the truth and the labelled pauses).
//!
//! They come as messages of their own, in whatever order the source's thread and the
//! session's select meet them, and each is matched to its endpoint by time, never by
//! arrival: a verdict names its endpoint's decision, and a truth belongs to the first
//! endpoint decided at or after it (one decided before it committed inside a pause, and the
//! truth is the next one's). What is known at the endpoint goes into the commit; what comes
//! later is folded into the turn's record when the turn ends ([`EndKey::annotate`]), so the
//! record is the same in every order.

use super::SourceClock;
use crate::record::{Stage, TurnRecord};
use voxlat_core::cutoff::Verdict;
use voxlat_core::{clock, EventKind, Nanos};

/// How many recent endpoints a late truth or verdict is matched against.
const RECENT: usize = 8;

/// What is known of one end of turn.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Annotation {
    /// When the annotated last speech sample entered the pipeline (source clock).
    pub truth: Option<Nanos>,
    pub verdict: Option<Verdict>,
}

/// The endpoint a turn answers, as annotations find it: its decision (source clock), the
/// endpointer's end of speech, and how source times map onto the process clock.
#[derive(Clone, Copy, Debug)]
pub(super) struct EndKey {
    pub at: Nanos,
    pub speech_end: Nanos,
    pub received: Nanos,
    pub clock: SourceClock,
}

impl EndKey {
    /// Source time → process clock: identity when paced; anchored at the decision when in
    /// audio time.
    pub fn map(&self, t: Nanos) -> Nanos {
        match self.clock {
            SourceClock::Process => t,
            SourceClock::Audio => Nanos(
                self.received
                    .0
                    .saturating_sub(self.at.0.saturating_sub(t.0)),
            ),
        }
    }

    /// The endpointer's end of speech against the truth `t`, ms (positive: late).
    pub fn error_ms(&self, t: Nanos) -> f64 {
        clock::ns_to_ms(self.speech_end.signed_since(t))
    }

    /// Folds `a` into `rec`, the record of the turn this endpoint committed: the true end of
    /// speech, the endpointer's error against it, and the verdict (the breakdown is computed
    /// after). Idempotent, so what was already in the commit is simply written again.
    pub fn annotate(&self, rec: &mut TurnRecord, a: Annotation) {
        if let Some(t) = a.truth {
            let end = self.map(t);
            if rec.events.contains_key(&EventKind::SpeechEnd) {
                rec.events.insert(EventKind::SpeechEnd, end);
            }
            rec.vad_speech_end_error_ms = Some(self.error_ms(t));
            for b in rec.busy.iter_mut().filter(|b| b.stage == Stage::Endpointer) {
                b.from = end;
            }
        }
        if a.verdict.is_some() {
            rec.cutoff = a.verdict;
        }
    }
}

/// Truths and verdicts, matched to endpoints by time.
#[derive(Default)]
pub(super) struct Annotations {
    /// A truth no endpoint has been decided at or after yet.
    unmatched_truth: Option<Nanos>,
    /// Recent endpoints' decisions, with what is known of each (oldest first).
    ends: Vec<(Nanos, Annotation)>,
}

impl Annotations {
    pub fn truth(&mut self, t: Nanos) {
        match self.ends.iter_mut().find(|(at, _)| *at >= t) {
            Some((_, a)) => a.truth = Some(t),
            None => self.unmatched_truth = Some(t),
        }
    }

    /// The verdict on the endpoint decided at `at`.
    pub fn verdict(&mut self, at: Nanos, v: Verdict) {
        self.entry(at).verdict = Some(v);
    }

    /// An endpoint decided at `at`: what is known of it so far.
    pub fn at_endpoint(&mut self, at: Nanos) -> Annotation {
        let truth = self.unmatched_truth.filter(|&t| t <= at);
        if truth.is_some() {
            self.unmatched_truth = None;
        }
        let a = self.entry(at);
        a.truth = a.truth.or(truth);
        *a
    }

    /// All that is known of the endpoint decided at `at`, for its turn's record.
    pub fn of(&self, at: Nanos) -> Annotation {
        self.ends
            .iter()
            .find(|(t, _)| *t == at)
            .map(|(_, a)| *a)
            .unwrap_or_default()
    }

    fn entry(&mut self, at: Nanos) -> &mut Annotation {
        let i = match self.ends.iter().position(|(t, _)| *t == at) {
            Some(i) => i,
            None => {
                if self.ends.len() == RECENT {
                    self.ends.remove(0);
                }
                self.ends.push((at, Annotation::default()));
                self.ends.len() - 1
            }
        };
        &mut self.ends[i].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truth_belongs_to_the_first_endpoint_at_or_after_it_whenever_it_comes() {
        // Before: kept for the endpoint.
        let mut a = Annotations::default();
        a.truth(Nanos::from_ms(900));
        assert_eq!(
            a.at_endpoint(Nanos::from_ms(500)).truth,
            None,
            "a commit inside a pause"
        );
        assert_eq!(
            a.at_endpoint(Nanos::from_ms(1_200)).truth,
            Some(Nanos::from_ms(900))
        );
        // After: matched to the endpoint it belongs to, not to the earlier one.
        let mut a = Annotations::default();
        a.at_endpoint(Nanos::from_ms(500));
        a.at_endpoint(Nanos::from_ms(1_200));
        a.truth(Nanos::from_ms(900));
        assert_eq!(a.of(Nanos::from_ms(500)).truth, None);
        assert_eq!(a.of(Nanos::from_ms(1_200)).truth, Some(Nanos::from_ms(900)));
    }

    #[test]
    fn a_verdict_belongs_to_the_endpoint_it_names() {
        let v = Verdict::BeforeEnd;
        let mut a = Annotations::default();
        a.verdict(Nanos::from_ms(1_200), v);
        assert_eq!(a.at_endpoint(Nanos::from_ms(500)).verdict, None);
        assert_eq!(a.at_endpoint(Nanos::from_ms(1_200)).verdict, Some(v));
        a.verdict(Nanos::from_ms(500), v);
        assert_eq!(a.of(Nanos::from_ms(500)).verdict, Some(v));
    }
}
