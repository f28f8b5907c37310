//! A turn's record, built from values when the turn ends: what its future returned, the
//! commit's facts, the timeline's events, a speculative reply's commit, and the endpoint's
//! annotations, whenever they came ([`super::annotations`]).

use super::annotations::Annotations;
use super::state::InFlight;
use crate::record::TurnRecord;

/// Folds what the session knows of turn `t` into `rec`, the record its future returned;
/// gives back the turn's parts the session still needs (its compute, whether it merged).
pub(super) fn record<'p>(
    mut rec: TurnRecord,
    mut t: InFlight<'p>,
    annotations: &Annotations,
) -> (TurnRecord, InFlight<'p>) {
    rec.resumed_after_ms = t.resumed_after_ms;
    rec.passed_over = std::mem::take(&mut t.passed_over);
    let Some(commit) = t.commit.take() else {
        rec.events = t.tl.snapshot().events;
        rec.compute_breakdown();
        return (rec, t);
    };
    let (received, key) = (commit.received, commit.key);
    commit.apply(&t.tl, &mut rec);
    rec.events = t.tl.snapshot().events;
    if t.speculative {
        rec.commit_speculation(received);
    }
    if let Some(key) = key {
        key.annotate(&mut rec, annotations.of(key.at));
    }
    rec.compute_breakdown();
    (rec, t)
}
