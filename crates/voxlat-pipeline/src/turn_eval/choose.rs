//! Settings chosen on one set of turns and reported on another (`eval-turns --choose-on`).
//!
//! "Latency at 5 %" read off the curve of the turns it reports picks the best of up to a
//! hundred settings on those very turns: on 31 turns, 5 % is one turn, and the pick flatters
//! every policy with many settings. Here each policy's setting is chosen on one set (the
//! fastest at or under each target rate) and then held fixed on the other, whose figures are
//! what a user with voices the choice never saw would get.

use super::{EvalReport, PolicyEval};
use serde::{Deserialize, Serialize};
use voxlat_core::cutoff::{self, Chosen};

/// The cut-off rates every policy's setting is chosen at, besides the default hangover's own.
pub const TARGETS: [f64; 2] = [0.05, 0.10];

/// One policy's chosen settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyChoice {
    pub policy: String,
    pub knob: String,
    /// One per target, in the order of [`Choices::targets`]; `None` where no setting on the
    /// choice set cuts off that rarely.
    pub chosen: Vec<Option<Chosen>>,
}

/// Every policy's choices, and the targets they were chosen at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choices {
    /// The rates chosen at: [`TARGETS`], then the default hangover's rate on the choice set.
    pub targets: Vec<f64>,
    /// The default hangover (ms) whose cut-off rate on the choice set is the last target,
    /// when the sweep ran it.
    pub hangover_ms: f64,
    pub hangover_rate: Option<f64>,
    pub policies: Vec<PolicyChoice>,
}

/// Chooses each policy of `on` at every target and reads the same setting from `report`.
/// The hangover's rate is that of the webrtc point at `hangover_ms` on `on`.
pub fn choose(on: &EvalReport, report: &EvalReport, hangover_ms: f64) -> Choices {
    let hangover_rate = on
        .policies
        .iter()
        .find(|p| p.curve.name == "webrtc")
        .and_then(|p| p.curve.points.iter().find(|pt| pt.setting == hangover_ms))
        .map(|pt| pt.cutoff);
    let targets: Vec<f64> = TARGETS.iter().copied().chain(hangover_rate).collect();
    let policies = on
        .policies
        .iter()
        .map(|p| {
            let reported = report
                .policies
                .iter()
                .find(|r| r.curve.name == p.curve.name)
                .map_or(&[][..], |r: &PolicyEval| &r.curve.points[..]);
            PolicyChoice {
                policy: p.curve.name.clone(),
                knob: p.knob.clone(),
                chosen: targets
                    .iter()
                    .map(|&rate| cutoff::choose(&p.curve.points, reported, rate))
                    .collect(),
            }
        })
        .collect();
    Choices {
        targets,
        hangover_ms,
        hangover_rate,
        policies,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::turn_eval::SpeechEndError;
    use voxlat_core::cutoff::{Curve, Point};

    fn point(setting: f64, cutoff: f64, mean: f64) -> Point {
        Point {
            setting,
            delay_ms: None,
            cutoff,
            cutoff_in_pause: cutoff,
            latency_mean_ms: Some(mean),
            latency_p50_ms: Some(mean),
        }
    }

    fn report(policies: Vec<(&str, Vec<Point>)>) -> EvalReport {
        EvalReport {
            turns: 20,
            pauses: 0,
            left_out: Vec::new(),
            policies: policies
                .into_iter()
                .map(|(name, points)| PolicyEval {
                    curve: Curve::new(name, points),
                    knob: "ms".into(),
                    turns: Vec::new(),
                })
                .collect(),
            turn_score_ms: None,
            speech_end: SpeechEndError::default(),
            stops: Vec::new(),
            asr_failures: Vec::new(),
        }
    }

    #[test]
    fn each_policy_is_chosen_on_one_set_and_read_on_the_other_at_the_hangover_s_rate_too() {
        let on = report(vec![
            (
                "webrtc",
                vec![
                    point(300.0, 0.3, 310.0),
                    point(600.0, 0.1, 610.0),
                    point(900.0, 0.05, 905.0),
                ],
            ),
            (
                "cues",
                vec![point(100.0, 0.1, 400.0), point(200.0, 0.0, 700.0)],
            ),
        ]);
        let test = report(vec![
            (
                "webrtc",
                vec![
                    point(300.0, 0.4, 320.0),
                    point(600.0, 0.2, 620.0),
                    point(900.0, 0.1, 920.0),
                ],
            ),
            (
                "cues",
                vec![point(100.0, 0.3, 450.0), point(200.0, 0.1, 800.0)],
            ),
        ]);
        let c = choose(&on, &test, 600.0);
        assert_eq!(c.hangover_rate, Some(0.1));
        assert_eq!(c.targets, vec![0.05, 0.10, 0.1]);
        let cues = &c.policies[1];
        // At the hangover's rate (10 % on the choice set) cues chooses 100 ms, and on the
        // other set that setting cuts off 30 %: the figure reported, not the other set's best.
        let at_hangover = cues.chosen[2].as_ref().unwrap();
        assert_eq!(at_hangover.chosen.setting, 100.0);
        assert_eq!(at_hangover.reported.as_ref().unwrap().cutoff, 0.3);
        let webrtc = c.policies[0].chosen[2].as_ref().unwrap();
        assert_eq!(webrtc.chosen.setting, 600.0);
        // No hangover in the sweep: only the fixed targets.
        let without = choose(&on, &test, 700.0);
        assert_eq!(without.hangover_rate, None);
        assert_eq!(without.targets.len(), 2);
    }
}
