//! Turn-taking measured as LiveKit's eot-bench measures it: each turn's commit against the
//! truth of where the speaker paused and where they stopped.
//!
//! - A **cut-off** is a commit before the true end of the turn: inside one of its labelled
//!   within-turn pauses, or (which a silence-driven endpointer cannot do, but a scripted one
//!   can) while the speaker was still talking.
//! - **Latency** is the silence after the true end until the commit, over the turns not cut
//!   off. It is a decision time in audio time, not the pipeline's reply time.
//! - A policy is swept over its main knob; each setting gives one [`Point`] (cut-off rate,
//!   latency). From the curve, eot-bench reports the cut-off rate within a latency budget
//!   ([`cutoff_at_budget`]) and the latency at a cut-off rate ([`latency_at_rate`]).
//!
//! Times are milliseconds from the start of the turn's audio.

use serde::{Deserialize, Serialize};

/// eot-bench counts a pause inside a turn from this length on.
pub const MIN_PAUSE_MS: f64 = 100.0;

/// A labelled pause inside a turn, `[start, end)` ms from the start of its audio.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pause {
    pub start_ms: f64,
    pub end_ms: f64,
}

/// Why a turn's pause truth cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PauseError {
    #[error("pause {index} [{start}, {end}] is not a pair of finite times with start < end")]
    Empty { index: usize, start: f64, end: f64 },
    #[error("pause {index} [{start}, {end}] is shorter than {MIN_PAUSE_MS} ms, the least that counts as a pause inside a turn")]
    TooShort { index: usize, start: f64, end: f64 },
    #[error("pause {index} starts at {start} ms, before the previous one ends ({previous_end} ms): list pauses in order, without overlap")]
    OutOfOrder {
        index: usize,
        start: f64,
        previous_end: f64,
    },
    #[error("pause {index} ends at {end} ms, not before the turn's speech end ({speech_end} ms): a pause is inside the turn")]
    AfterEnd {
        index: usize,
        end: f64,
        speech_end: f64,
    },
}

/// Checks a turn's pauses (`[start, end]` pairs, ms) against its speech end.
pub fn pauses(pairs: &[[f64; 2]], speech_end_ms: f64) -> Result<Vec<Pause>, PauseError> {
    let mut out: Vec<Pause> = Vec::with_capacity(pairs.len());
    for (index, &[start, end]) in pairs.iter().enumerate() {
        if !(start.is_finite() && end.is_finite() && start >= 0.0 && start < end) {
            return Err(PauseError::Empty { index, start, end });
        }
        if end - start < MIN_PAUSE_MS {
            return Err(PauseError::TooShort { index, start, end });
        }
        if let Some(previous) = out.last() {
            if start < previous.end_ms {
                return Err(PauseError::OutOfOrder {
                    index,
                    start,
                    previous_end: previous.end_ms,
                });
            }
        }
        if end >= speech_end_ms {
            return Err(PauseError::AfterEnd {
                index,
                end,
                speech_end: speech_end_ms,
            });
        }
        out.push(Pause {
            start_ms: start,
            end_ms: end,
        });
    }
    Ok(out)
}

/// What one commit did to its turn.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// Committed inside labelled pause `pause` (its index): the speaker was cut off.
    InPause { pause: usize },
    /// Committed before the true end, outside any labelled pause.
    BeforeEnd,
    /// Committed after the true end, `latency_ms` of silence later.
    AfterEnd { latency_ms: f64 },
}

impl Verdict {
    pub fn cut_off(&self) -> bool {
        !matches!(self, Verdict::AfterEnd { .. })
    }
}

/// The verdict on a commit at `commit_ms` for a turn that ends at `speech_end_ms`.
pub fn judge(commit_ms: f64, speech_end_ms: f64, pauses: &[Pause]) -> Verdict {
    if let Some(pause) = pauses
        .iter()
        .position(|p| p.start_ms <= commit_ms && commit_ms < p.end_ms)
    {
        return Verdict::InPause { pause };
    }
    if commit_ms < speech_end_ms {
        return Verdict::BeforeEnd;
    }
    Verdict::AfterEnd {
        latency_ms: commit_ms - speech_end_ms,
    }
}

/// One setting of a policy's knob, over every turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub setting: f64,
    /// The second knob of a policy swept over two (Smart Turn's action delay, ms): eot-bench
    /// sweeps the operating point over every knob, not the threshold alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u32>,
    /// Turns cut off / turns, a fraction: a commit inside a labelled pause or anywhere
    /// before the true end (stricter than eot-bench).
    pub cutoff: f64,
    /// Turns committed inside a labelled pause / turns: eot-bench's own figure, which does not
    /// count a commit before the end outside every labelled pause.
    #[serde(default)]
    pub cutoff_in_pause: f64,
    /// Over the turns not cut off; `None` when every turn was.
    pub latency_mean_ms: Option<f64>,
    pub latency_p50_ms: Option<f64>,
}

impl Point {
    /// The point of `setting` from its turns' verdicts; `None` without turns.
    pub fn of(setting: f64, verdicts: &[Verdict]) -> Option<Point> {
        if verdicts.is_empty() {
            return None;
        }
        let cut = verdicts.iter().filter(|v| v.cut_off()).count();
        let in_pause = verdicts
            .iter()
            .filter(|v| matches!(v, Verdict::InPause { .. }))
            .count();
        let mut latencies: Vec<f64> = verdicts
            .iter()
            .filter_map(|v| match v {
                Verdict::AfterEnd { latency_ms } => Some(*latency_ms),
                _ => None,
            })
            .collect();
        latencies.sort_by(f64::total_cmp);
        let mean =
            (!latencies.is_empty()).then(|| latencies.iter().sum::<f64>() / latencies.len() as f64);
        let p50 =
            (!latencies.is_empty()).then(|| crate::stats::percentile_sorted(&latencies, 50.0));
        Some(Point {
            setting,
            delay_ms: None,
            cutoff: cut as f64 / verdicts.len() as f64,
            cutoff_in_pause: in_pause as f64 / verdicts.len() as f64,
            latency_mean_ms: mean,
            latency_p50_ms: p50,
        })
    }
}

/// The lowest cut-off rate among the settings whose mean latency is within `budget_ms`;
/// `None` when no setting is that fast.
pub fn cutoff_at_budget(points: &[Point], budget_ms: f64) -> Option<f64> {
    points
        .iter()
        .filter(|p| p.latency_mean_ms.is_some_and(|l| l <= budget_ms))
        .map(|p| p.cutoff)
        .min_by(f64::total_cmp)
}

/// The fastest setting (least mean latency) whose cut-off rate is at or under `rate` (a
/// fraction); `None` when no setting cuts off that rarely ("not reached").
pub fn point_at_rate(points: &[Point], rate: f64) -> Option<&Point> {
    // A float rate such as 1/20 must count as "at" 5 %.
    const EPSILON: f64 = 1e-9;
    points
        .iter()
        .filter(|p| p.cutoff <= rate + EPSILON && p.latency_mean_ms.is_some())
        .min_by(|a, b| {
            let mean = |p: &Point| p.latency_mean_ms.unwrap_or(f64::INFINITY);
            mean(a).total_cmp(&mean(b))
        })
}

/// A setting chosen on one set of turns, and what it does on another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chosen {
    /// The cut-off rate the setting was chosen at (a fraction): the fastest at or under it.
    pub target: f64,
    /// The point on the set it was chosen on.
    pub chosen: Point,
    /// The same setting on the set it is reported on; `None` when that set has no such point.
    pub reported: Option<Point>,
}

/// Chooses the fastest setting at or under `rate` on `choose_on` ([`point_at_rate`]) and
/// reads the same setting (and second knob) from `report_on`: a figure that no choice made on
/// the turns it reports. `None` when no setting on `choose_on` is that rare a cut-off.
pub fn choose(choose_on: &[Point], report_on: &[Point], rate: f64) -> Option<Chosen> {
    let chosen = point_at_rate(choose_on, rate)?.clone();
    let reported = report_on
        .iter()
        .find(|p| p.setting == chosen.setting && p.delay_ms == chosen.delay_ms)
        .cloned();
    Some(Chosen {
        target: rate,
        chosen,
        reported,
    })
}

/// The mean latency of [`point_at_rate`], as eot-bench reports it.
pub fn latency_at_rate(points: &[Point], rate: f64) -> Option<f64> {
    point_at_rate(points, rate).and_then(|p| p.latency_mean_ms)
}

/// A policy's curve over its knob and the figures eot-bench publishes from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    pub name: String,
    /// [`cutoff_at_budget`] at 300 and 600 ms; `None`: no setting that fast.
    pub cutoff_at_300ms: Option<f64>,
    pub cutoff_at_600ms: Option<f64>,
    /// [`latency_at_rate`] at 5 % and 10 %; `None`: not reached.
    pub latency_at_5pct_ms: Option<f64>,
    pub latency_at_10pct_ms: Option<f64>,
    /// The median latency of the same settings as `latency_at_*`.
    #[serde(default)]
    pub latency_p50_at_5pct_ms: Option<f64>,
    #[serde(default)]
    pub latency_p50_at_10pct_ms: Option<f64>,
    pub points: Vec<Point>,
}

/// The points no other point beats on both cut-off rate and mean latency, from the fewest
/// cut-offs to the most: the trade-off a policy offers, whatever knob gives each point.
pub fn front(points: &[Point]) -> Vec<&Point> {
    let mut by_rate: Vec<&Point> = points
        .iter()
        .filter(|p| p.latency_mean_ms.is_some())
        .collect();
    let mean = |p: &Point| p.latency_mean_ms.unwrap_or(f64::INFINITY);
    by_rate.sort_by(|a, b| {
        a.cutoff
            .total_cmp(&b.cutoff)
            .then(mean(a).total_cmp(&mean(b)))
    });
    let mut out: Vec<&Point> = Vec::new();
    for p in by_rate {
        if out.last().is_none_or(|last| mean(p) < mean(last)) {
            out.push(p);
        }
    }
    out
}

impl Curve {
    pub fn new(name: impl Into<String>, mut points: Vec<Point>) -> Curve {
        points.sort_by(|a, b| {
            a.delay_ms
                .cmp(&b.delay_ms)
                .then(a.setting.total_cmp(&b.setting))
        });
        Curve {
            name: name.into(),
            cutoff_at_300ms: cutoff_at_budget(&points, 300.0),
            cutoff_at_600ms: cutoff_at_budget(&points, 600.0),
            latency_at_5pct_ms: latency_at_rate(&points, 0.05),
            latency_at_10pct_ms: latency_at_rate(&points, 0.10),
            latency_p50_at_5pct_ms: point_at_rate(&points, 0.05).and_then(|p| p.latency_p50_ms),
            latency_p50_at_10pct_ms: point_at_rate(&points, 0.10).and_then(|p| p.latency_p50_ms),
            points,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(start_ms: f64, end_ms: f64) -> Pause {
        Pause { start_ms, end_ms }
    }

    #[test]
    fn a_commit_inside_a_pause_is_a_cut_off_and_one_after_the_end_is_not() {
        // "Call me back, at ... five five five": pauses at 800–1200 and 2000–2450, end 3000.
        let pauses = [p(800.0, 1200.0), p(2000.0, 2450.0)];
        assert_eq!(judge(900.0, 3000.0, &pauses), Verdict::InPause { pause: 0 });
        assert_eq!(
            judge(2000.0, 3000.0, &pauses),
            Verdict::InPause { pause: 1 }
        );
        assert!(judge(2449.0, 3000.0, &pauses).cut_off());
        // Speech again at 2450: a commit then is before the end, outside a pause.
        assert_eq!(judge(2450.0, 3000.0, &pauses), Verdict::BeforeEnd);
        assert!(judge(2450.0, 3000.0, &pauses).cut_off());
        assert_eq!(
            judge(3250.0, 3000.0, &pauses),
            Verdict::AfterEnd { latency_ms: 250.0 }
        );
        assert!(!judge(3000.0, 3000.0, &pauses).cut_off());
        assert!(!judge(3250.0, 3000.0, &[]).cut_off());
    }

    #[test]
    fn pause_truth_is_checked() {
        assert_eq!(
            pauses(&[[800.0, 1200.0], [2000.0, 2450.0]], 3000.0).unwrap(),
            vec![p(800.0, 1200.0), p(2000.0, 2450.0)]
        );
        assert!(matches!(
            pauses(&[[800.0, 850.0]], 3000.0),
            Err(PauseError::TooShort { index: 0, .. })
        ));
        assert!(matches!(
            pauses(&[[1200.0, 800.0]], 3000.0),
            Err(PauseError::Empty { .. })
        ));
        assert!(matches!(
            pauses(&[[f64::NAN, 800.0]], 3000.0),
            Err(PauseError::Empty { .. })
        ));
        assert!(matches!(
            pauses(&[[800.0, 1200.0], [1100.0, 1500.0]], 3000.0),
            Err(PauseError::OutOfOrder { index: 1, .. })
        ));
        assert!(matches!(
            pauses(&[[2800.0, 3100.0]], 3000.0),
            Err(PauseError::AfterEnd { .. })
        ));
        let message = pauses(&[[2800.0, 3100.0]], 3000.0).unwrap_err().to_string();
        assert!(message.contains("3000"), "{message}");
    }

    #[test]
    fn a_point_counts_cut_offs_over_all_turns_and_latency_over_the_rest() {
        let v = [
            Verdict::InPause { pause: 0 },
            Verdict::AfterEnd { latency_ms: 200.0 },
            Verdict::AfterEnd { latency_ms: 400.0 },
            Verdict::AfterEnd { latency_ms: 900.0 },
        ];
        let point = Point::of(0.5, &v).unwrap();
        assert_eq!(point.cutoff, 0.25);
        assert_eq!(point.cutoff_in_pause, 0.25);
        assert_eq!(point.latency_mean_ms, Some(500.0));
        assert_eq!(point.latency_p50_ms, Some(400.0));
        let all_cut = Point::of(0.1, &[Verdict::BeforeEnd]).unwrap();
        assert_eq!((all_cut.cutoff, all_cut.latency_mean_ms), (1.0, None));
        assert_eq!(all_cut.cutoff_in_pause, 0.0, "eot-bench counts pauses only");
        assert_eq!(Point::of(0.1, &[]), None);
    }

    /// A curve worked by hand: a hangover swept from 200 to 1000 ms over 20 turns.
    fn curve() -> Vec<Point> {
        let point = |setting: f64, cut: usize, mean: f64| Point {
            setting,
            delay_ms: None,
            cutoff: cut as f64 / 20.0,
            cutoff_in_pause: cut as f64 / 20.0,
            latency_mean_ms: Some(mean),
            latency_p50_ms: Some(mean),
        };
        vec![
            point(200.0, 9, 210.0),   // 45 %
            point(300.0, 5, 305.0),   // 25 %
            point(400.0, 3, 410.0),   // 15 %
            point(500.0, 2, 520.0),   // 10 %
            point(600.0, 2, 615.0),   // 10 %, slower: never the answer
            point(800.0, 1, 810.0),   // 5 %
            point(1000.0, 0, 1020.0), // 0 %
        ]
    }

    #[test]
    fn the_front_keeps_only_points_that_no_other_beats_on_both_figures() {
        let c = curve();
        let one: Vec<f64> = front(&c).iter().map(|p| p.setting).collect();
        // 600 ms cuts off as often as 500 ms and waits longer, so it is not on the front.
        assert_eq!(one, vec![1000.0, 800.0, 500.0, 400.0, 300.0, 200.0]);
        // A second knob's point that beats 800 ms on both replaces it.
        let mut two = c.clone();
        two.push(Point {
            delay_ms: Some(700),
            latency_mean_ms: Some(700.0),
            ..c[5].clone()
        });
        let both: Vec<(f64, Option<u32>)> = front(&two)
            .iter()
            .map(|p| (p.setting, p.delay_ms))
            .collect();
        assert_eq!(both[1], (800.0, Some(700)));
        assert_eq!(both.len(), 6);
    }

    #[test]
    fn the_5_and_10_percent_points_of_a_hand_computed_curve() {
        let c = curve();
        // The fastest setting at or under 5 % is 800 ms (1 of 20 exactly 5 %), at 10 % 500 ms.
        assert_eq!(latency_at_rate(&c, 0.05), Some(810.0));
        assert_eq!(latency_at_rate(&c, 0.10), Some(520.0));
        // No setting cuts off fewer than none.
        assert_eq!(latency_at_rate(&c[..5], 0.05), None);
        // Within 300 ms only the 200 ms setting (45 %); within 600 ms the best is 10 %.
        assert_eq!(cutoff_at_budget(&c, 300.0), Some(0.45));
        assert_eq!(cutoff_at_budget(&c, 600.0), Some(0.10));
        assert_eq!(cutoff_at_budget(&c, 100.0), None);
        let mut shuffled = c.clone();
        shuffled.reverse();
        let curve = Curve::new("webrtc", shuffled);
        assert_eq!(curve.points, c);
        assert_eq!(
            (curve.latency_at_5pct_ms, curve.latency_at_10pct_ms),
            (Some(810.0), Some(520.0))
        );
        assert_eq!(
            (curve.cutoff_at_300ms, curve.cutoff_at_600ms),
            (Some(0.45), Some(0.10))
        );
    }

    #[test]
    fn a_setting_chosen_on_one_set_is_reported_as_it_does_on_the_other() {
        let tune = curve();
        // On the other set every setting cuts off more and waits a little longer.
        let test: Vec<Point> = tune
            .iter()
            .map(|p| Point {
                cutoff: p.cutoff + 0.1,
                latency_mean_ms: p.latency_mean_ms.map(|l| l + 30.0),
                ..p.clone()
            })
            .collect();
        let c = choose(&tune, &test, 0.05).unwrap();
        assert_eq!(c.chosen.setting, 800.0, "chosen on the first set");
        let r = c.reported.unwrap();
        assert_eq!(
            r.setting, 800.0,
            "the same setting, not the other set's best"
        );
        assert!((r.cutoff - 0.15).abs() < 1e-9);
        assert_eq!(r.latency_mean_ms, Some(840.0));
        // The choice ignores the other set: there no setting reaches 5 %, and its own 10 %
        // point is 1000 ms, not the 500 ms chosen on the first set.
        assert!(point_at_rate(&test, 0.05).is_none());
        assert_eq!(point_at_rate(&test, 0.10).unwrap().setting, 1000.0);
        assert_eq!(choose(&tune, &test, 0.10).unwrap().chosen.setting, 500.0);
        // A second knob must match too.
        let delayed: Vec<Point> = test
            .iter()
            .map(|p| Point {
                delay_ms: Some(200),
                ..p.clone()
            })
            .collect();
        assert_eq!(choose(&tune, &delayed, 0.05).unwrap().reported, None);
        assert_eq!(choose(&tune[..5], &test, 0.05), None);
    }
}
