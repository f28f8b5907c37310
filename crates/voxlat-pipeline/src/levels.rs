//! A concurrency gradient (`voxlat replay --sessions 1,4,8`): the same conversations replayed
//! by 1, 4, 8 … simulated callers at once, one summary per level, and the segment whose P50
//! grows most as callers are added: the stage that saturates first.

use crate::aggregate::Aggregate;
use crate::record::TurnRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use voxlat_core::threads::ThreadBudget;

/// One level: every turn replayed while `sessions` callers ran at once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Level {
    pub sessions: u32,
    /// First to last stamp over the level's measured turns, s.
    pub wall_s: f64,
    /// Measured turns (ok, no speech or failed) per minute of `wall_s`.
    pub turns_per_min: f64,
    pub aggregate: Aggregate,
    /// The threads each caller's stages had at this level: the run's budget shared by
    /// `sessions` callers. Absent in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<ThreadBudget>,
}

/// Where the P50 grew most between two levels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Growth {
    pub from: u32,
    pub to: u32,
    pub segment: voxlat_core::segments::Segment,
    pub p50_from_ms: f64,
    pub p50_to_ms: f64,
}

impl Growth {
    pub fn grew_ms(&self) -> f64 {
        self.p50_to_ms - self.p50_from_ms
    }
}

/// The levels of the turns that carry one (`sessions > 0`), in ascending order; `threads` is
/// the run's budget for one caller.
pub fn levels(turns: &[TurnRecord], threads: &ThreadBudget) -> Vec<Level> {
    let mut by: BTreeMap<u32, Vec<TurnRecord>> = BTreeMap::new();
    for t in turns.iter().filter(|t| t.sessions > 0) {
        by.entry(t.sessions).or_default().push(t.clone());
    }
    by.into_iter()
        .map(|(sessions, turns)| {
            let measured: Vec<&TurnRecord> = turns.iter().filter(|t| !t.warmup).collect();
            let stamps = measured.iter().flat_map(|t| t.events.values().map(|n| n.0));
            let (first, last) = stamps.fold((u64::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
            let wall_s = if last > first {
                (last - first) as f64 / 1e9
            } else {
                0.0
            };
            Level {
                sessions,
                wall_s,
                turns_per_min: if wall_s > 0.0 {
                    measured.len() as f64 * 60.0 / wall_s
                } else {
                    0.0
                },
                aggregate: Aggregate::from_turns(&turns),
                threads: Some(threads.shared_by(sessions as usize)),
            }
        })
        .collect()
}

/// A step's largest growth counts as saturation when it adds at least this share of the lower
/// level's total P50: less is within the noise of a few turns, and too little for a caller to
/// notice.
pub const SATURATION_SHARE: f64 = 0.10;

/// For each pair of neighbouring levels, the segment whose P50 grew most (none where no
/// segment grew); and the stage that saturates first: that segment at the first step whose
/// growth reaches [`SATURATION_SHARE`] of the lower level's total P50.
pub fn growth(levels: &[Level]) -> (Vec<Growth>, Option<Growth>) {
    let between = |a: &Level, b: &Level| -> Option<Growth> {
        a.aggregate
            .segments
            .iter()
            .filter_map(|(name, sa)| {
                let sb = &b.aggregate.segments.iter().find(|(n, _)| n == name)?.1;
                Some(Growth {
                    from: a.sessions,
                    to: b.sessions,
                    segment: *name,
                    p50_from_ms: sa.p50,
                    p50_to_ms: sb.p50,
                })
            })
            .filter(|g| g.grew_ms() > 0.0)
            .max_by(|x, y| x.grew_ms().total_cmp(&y.grew_ms()))
    };
    let mut first = None;
    let mut steps = Vec::new();
    for w in levels.windows(2) {
        let Some(g) = between(&w[0], &w[1]) else {
            continue;
        };
        let base = w[0].aggregate.total.as_ref().map_or(0.0, |s| s.p50);
        if first.is_none() && g.grew_ms() >= SATURATION_SHARE * base {
            first = Some(g.clone());
        }
        steps.push(g);
    }
    (steps, first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TurnOutcome;
    use voxlat_core::{EventKind, Nanos};

    /// A turn whose boundaries are `ms` apart, one value per segment of the chain.
    fn turn(sessions: u32, start_ms: u64, gaps_ms: &[u64]) -> TurnRecord {
        let mut t = TurnRecord::blank("s", "t", &format!("r{sessions}-{start_ms}"), "x");
        t.sessions = sessions;
        t.outcome = TurnOutcome::Ok;
        let kinds = [
            EventKind::SpeechEnd,
            EventKind::Endpoint,
            EventKind::AsrDone,
            EventKind::LlmSent,
            EventKind::LlmFirstToken,
            EventKind::LlmFirstAnswerToken,
            EventKind::FirstChunk,
            EventKind::TtsFirstAudio,
            EventKind::PlayoutQueued,
            EventKind::PlayoutStart,
            EventKind::FirstVoice,
        ];
        let mut at = start_ms;
        t.events
            .insert(EventKind::SpeechStart, Nanos(at * 1_000_000));
        for (i, k) in kinds.iter().enumerate() {
            at += gaps_ms.get(i).copied().unwrap_or(0);
            t.events.insert(*k, Nanos(at * 1_000_000));
        }
        t.compute_breakdown();
        t
    }

    #[test]
    fn the_segment_that_grows_most_is_named_per_step_and_the_first_to_saturate() {
        // Level 1: ASR 100 ms; level 2: ASR 400 ms; level 4: ASR 450, TTS +300 ms.
        let mut turns = Vec::new();
        for i in 0..3 {
            turns.push(turn(
                1,
                i * 10_000,
                &[500, 100, 100, 0, 20, 0, 10, 150, 0, 0],
            ));
            turns.push(turn(
                2,
                100_000 + i * 10_000,
                &[500, 100, 400, 0, 20, 0, 10, 150, 0, 0],
            ));
            turns.push(turn(
                4,
                200_000 + i * 10_000,
                &[500, 100, 450, 0, 20, 0, 10, 450, 0, 0],
            ));
        }
        turns.push(TurnRecord::blank("s", "t", "plain", "x"));
        let lv = levels(&turns, &ThreadBudget::for_cores(2));
        assert_eq!(lv.iter().map(|l| l.sessions).collect::<Vec<_>>(), [1, 2, 4]);
        assert_eq!(lv[0].aggregate.turns, 3);
        // 2 cores: one caller has both for ASR and for prefill; two or four share them, one
        // thread each, and prefill keeps the decode's single thread.
        let t = |l: &Level| {
            let b = l.threads.expect("recorded");
            (b.asr, b.tts, b.llm, b.llm_prefill)
        };
        assert_eq!(t(&lv[0]), (2, 1, 1, 2));
        assert_eq!(t(&lv[1]), (1, 1, 1, 1));
        assert_eq!(t(&lv[2]), (1, 1, 1, 1));
        let (steps, first) = growth(&lv);
        assert_eq!(steps.len(), 2);
        let asr_name = "asr";
        assert_eq!(steps[0].segment, asr_name);
        assert_eq!(steps[0].grew_ms(), 300.0);
        assert_eq!(steps[1].segment, "tts_first_audio");
        assert_eq!(steps[1].grew_ms(), 300.0);
        // Level 1's total P50 is 380 ms, so +300 ms at the first step is saturation.
        let first = first.unwrap();
        assert_eq!(
            (first.from, first.to, first.segment.name()),
            (1, 2, asr_name)
        );
        // Growth below the share of the total is noise, not saturation.
        let mut flat = levels(&turns, &ThreadBudget::for_cores(2));
        let base = flat[0].aggregate.clone();
        for l in &mut flat[1..] {
            l.aggregate = base.clone();
        }
        if let Some((_, s)) = flat[2]
            .aggregate
            .segments
            .iter_mut()
            .find(|(n, _)| n == "asr")
        {
            s.p50 += 30.0;
        }
        let (steps, first) = growth(&flat);
        assert_eq!(steps.len(), 1, "only 2 → 4 grew");
        assert!(
            first.is_none(),
            "30 ms on a 380 ms total is under the share"
        );
        // Three turns over 20.88 s of stamps (speech start to playout): 3 × 60 / 20.88 a minute.
        let wall = lv[0].wall_s;
        assert!((wall - 20.88).abs() < 1e-6, "{wall}");
        assert!((lv[0].turns_per_min - 180.0 / 20.88).abs() < 1e-6);
    }
}
