//! How two runs' TTFTs were stamped. The direct transport stamps each read with the kernel's
//! receive time (or, where the kernel gave none, the time the read returned); reqwest's pieces
//! are stamped when the request's task got them, about a millisecond later under load. Two
//! runs stamped differently differ by that much with nothing else changed, so `compare` says
//! so before anyone reads the difference as the server's.

use super::record::RequestRecord;
use super::results::BenchResults;
use std::collections::BTreeMap;

/// What one request's record says, or that it is silent (a file from before it was noted).
fn kinds(r: &RequestRecord) -> (&'static str, &'static str) {
    let c = &r.outcome.connection;
    (
        c.transport.map_or("unrecorded", |t| t.name()),
        c.stamps.map_or("unrecorded", |s| s.name()),
    )
}

/// Measured requests by transport and by stamp kind.
#[derive(Debug, Default, PartialEq)]
pub struct Mix {
    pub transports: BTreeMap<&'static str, usize>,
    pub stamps: BTreeMap<&'static str, usize>,
}

/// The mix over a run's measured requests (warm-ups excluded, as in every figure compared).
pub fn mix(r: &BenchResults) -> Mix {
    let mut m = Mix::default();
    for q in r.requests.iter().filter(|q| !q.warmup) {
        let (t, s) = kinds(q);
        *m.transports.entry(t).or_default() += 1;
        *m.stamps.entry(s).or_default() += 1;
    }
    m
}

fn words(counts: &BTreeMap<&'static str, usize>) -> String {
    counts
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Warnings for each of transport and stamp kind in which the runs differ: not the same
/// kinds present in both (the counts may differ, the runs' lengths do).
pub fn stamping_warnings(a: &BenchResults, b: &BenchResults) -> Vec<String> {
    let (ma, mb) = (mix(a), mix(b));
    let same = |x: &BTreeMap<&str, usize>, y: &BTreeMap<&str, usize>| x.keys().eq(y.keys());
    let mut out = Vec::new();
    if !same(&ma.transports, &mb.transports) {
        out.push(format!(
            "warning: the runs went over different transports (A: {}; B: {}). The direct transport (plain HTTP/1.1) stamps arrivals by the kernel, reqwest (https, HTTP/2, proxies) when its task gets them, which is later under load: part of any TTFT difference is the stamping",
            words(&ma.transports),
            words(&mb.transports)
        ));
    }
    if !same(&ma.stamps, &mb.stamps) {
        out.push(format!(
            "warning: the runs' arrivals were stamped differently (A: {}; B: {}). kernel = the kernel's receive time; fallback-read-time = when the read returned (no kernel stamp came); task = when reqwest's task handed the bytes over: part of any TTFT difference is the stamping",
            words(&ma.stamps),
            words(&mb.stamps)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlat_llm::record::StreamOutcome;
    use voxlat_net::connection::{StampKind, TransportKind};

    fn run(kinds: &[(Option<TransportKind>, Option<StampKind>)]) -> BenchResults {
        let requests = kinds
            .iter()
            .map(|&(t, s)| {
                let mut o = StreamOutcome::default();
                o.connection.transport = t;
                o.connection.stamps = s;
                RequestRecord::for_test("r", o)
            })
            .collect();
        BenchResults::for_test(requests)
    }

    const KERNEL: (Option<TransportKind>, Option<StampKind>) =
        (Some(TransportKind::Direct), Some(StampKind::Kernel));
    const FALLBACK: (Option<TransportKind>, Option<StampKind>) = (
        Some(TransportKind::Direct),
        Some(StampKind::FallbackReadTime),
    );
    const TASK: (Option<TransportKind>, Option<StampKind>) =
        (Some(TransportKind::Reqwest), Some(StampKind::Task));

    #[test]
    fn runs_stamped_alike_get_no_warning_whatever_their_lengths() {
        assert!(stamping_warnings(&run(&[KERNEL; 3]), &run(&[KERNEL; 7])).is_empty());
        assert!(stamping_warnings(&run(&[TASK; 2]), &run(&[TASK])).is_empty());
    }

    #[test]
    fn a_different_transport_or_stamp_kind_is_warned_about() {
        let w = stamping_warnings(&run(&[KERNEL; 4]), &run(&[TASK; 4]));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("A: 4 direct; B: 4 reqwest"), "{}", w[0]);
        assert!(w[1].contains("A: 4 kernel; B: 4 task"), "{}", w[1]);
        // Same transport, but B's kernel stamps fell back on one request.
        let w = stamping_warnings(&run(&[KERNEL; 4]), &run(&[KERNEL, KERNEL, FALLBACK]));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("B: 1 fallback-read-time, 2 kernel"),
            "{}",
            w[0]
        );
        // A file from before the fields existed says nothing, and that is a difference too.
        let w = stamping_warnings(&run(&[(None, None)]), &run(&[KERNEL]));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("A: 1 unrecorded"), "{}", w[0]);
    }

    #[test]
    fn warm_ups_do_not_count() {
        let mut b = run(&[FALLBACK, KERNEL]);
        b.requests[0].warmup = true;
        assert!(stamping_warnings(&run(&[KERNEL]), &b).is_empty());
    }
}
