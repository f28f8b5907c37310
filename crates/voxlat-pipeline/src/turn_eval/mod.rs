//! `eval-turns`: end-of-turn policies measured as LiveKit's eot-bench measures them. Each
//! policy is swept over its knob; at each setting every turn with a true end gets one commit
//! (the endpointer's first), judged cut off or not against the turn's labelled pauses
//! ([`voxlat_core::cutoff`]). Unpaced and deterministic: audio time, no other stage.

pub mod choose;
pub mod cue_eval;
pub mod noise;
pub mod policy;
pub mod run;
pub mod stops;

pub use cue_eval::{CueSources, StopRecord, Transcribe};
pub use policy::{EvalPolicy, SettingError};

use crate::scenario::LoadedTurn;
use run::{endpoints, Memo};
use serde::{Deserialize, Serialize};
use voxlat_core::cutoff::{self, Curve, Point, Verdict};
use voxlat_core::stats::Summary;
use voxlat_vad::{EndpointerConfig, SharedScorer, VadError};

/// A policy and the settings of its knob to run, each at every one of its second knob's
/// (`delays_ms`, empty for a policy with one knob).
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySweep {
    pub policy: EvalPolicy,
    pub settings: Vec<f64>,
    pub delays_ms: Vec<u32>,
}

impl PolicySweep {
    pub fn default_for(policy: EvalPolicy) -> PolicySweep {
        PolicySweep {
            policy,
            settings: policy.default_settings(),
            delays_ms: policy.default_delays_ms(),
        }
    }
}

/// One turn's commit at one setting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnCommit {
    pub scenario: String,
    pub turn: String,
    /// When the endpointer committed, ms from the start of the turn's audio; `None`: it never
    /// did (no speech heard), and the turn is left out of the point.
    pub commit_ms: Option<f64>,
    pub verdict: Option<Verdict>,
    pub cut_off: bool,
}

/// Every turn's commit at one setting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SettingTurns {
    pub setting: f64,
    /// The second knob's value, as [`voxlat_core::cutoff::Point::delay_ms`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u32>,
    /// Turns with no commit at all (left out of the point's rates).
    pub missed: usize,
    pub commits: Vec<TurnCommit>,
}

/// One policy's curve (eot-bench's figures and points) and the per-turn commits behind it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyEval {
    #[serde(flatten)]
    pub curve: Curve,
    /// What `points[].setting` is.
    pub knob: String,
    pub turns: Vec<SettingTurns>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EvalReport {
    /// Turns judged (those with a true end).
    pub turns: usize,
    /// Labelled pauses inside them.
    pub pauses: usize,
    /// Turns left out, with why.
    pub left_out: Vec<String>,
    pub policies: Vec<PolicyEval>,
    /// How long one Smart Turn score took (distinct scores only), ms: a decision after a score
    /// comes that much later in a live pipeline.
    pub turn_score_ms: Option<Summary>,
    /// The endpointer's own speech-end estimate against the truth, with the default settings,
    /// over the turns it did not cut off: live, `endpointing` starts at this estimate.
    pub speech_end: SpeechEndError,
    /// Every stop the stop-based rules judged, with its cues (empty without such a rule).
    pub stops: Vec<StopRecord>,
    /// Stops whose speculative transcription failed, with why.
    pub asr_failures: Vec<String>,
}

/// How far the endpointer's speech-end estimate is from the true end.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SpeechEndError {
    /// |estimate − truth|, ms.
    pub abs_ms: Option<Summary>,
    /// estimate − truth, ms, per turn (positive: the estimate is late).
    pub turns: Vec<(String, String, f64)>,
}

fn speech_end_error(
    judged: &[&LoadedTurn],
    base: &EndpointerConfig,
) -> Result<SpeechEndError, VadError> {
    let rate = f64::from(voxlat_audio::PIPELINE_RATE);
    let mut turns = Vec::new();
    for t in judged {
        let Some(first) = endpoints(t, base, None, base.hangover_ms + 1000)?
            .first()
            .copied()
        else {
            continue;
        };
        if verdict(t, first.at_ns).cut_off() {
            continue;
        }
        let truth_ms = t.speech_end_sample as f64 * 1000.0 / rate;
        turns.push((
            t.scenario.clone(),
            t.spec.id.clone(),
            first.speech_end_ns as f64 / 1e6 - truth_ms,
        ));
    }
    let abs: Vec<f64> = turns.iter().map(|t| t.2.abs()).collect();
    Ok(SpeechEndError {
        abs_ms: Summary::from_samples(&abs, 0),
        turns,
    })
}

/// The verdict on a commit `commit_ns` after the start of `t`'s audio.
pub fn verdict(t: &LoadedTurn, commit_ns: u64) -> Verdict {
    verdict_at_ms(t, commit_ns as f64 / 1e6)
}

/// The verdict on a commit `commit_ms` after the start of `t`'s audio.
pub fn verdict_at_ms(t: &LoadedTurn, commit_ms: f64) -> Verdict {
    let (end_ms, pauses) = truth(t);
    cutoff::judge(commit_ms, end_ms, &pauses)
}

/// `t`'s true end (ms from the start of its audio) and its labelled pauses.
pub fn truth(t: &LoadedTurn) -> (f64, Vec<cutoff::Pause>) {
    let rate = f64::from(voxlat_audio::PIPELINE_RATE);
    let end_ms = t.speech_end_sample as f64 * 1000.0 / rate;
    // Checked when the scenario was loaded.
    let pauses = cutoff::pauses(&t.spec.pauses_ms, end_ms).unwrap_or_default();
    (end_ms, pauses)
}

/// Runs every sweep over the turns that have a true end. `model` is needed by a policy that
/// scores with Smart Turn, `transcribe` by one that reads the transcript's tail; without
/// them such a policy is an error.
pub fn evaluate(
    turns: &[LoadedTurn],
    base: &EndpointerConfig,
    sweeps: &[PolicySweep],
    model: Option<SharedScorer>,
    transcribe: Option<cue_eval::Transcribe<'_>>,
) -> Result<EvalReport, VadError> {
    let (judged, left): (Vec<&LoadedTurn>, Vec<&LoadedTurn>) =
        turns.iter().partition(|t| t.speech_end_annotated);
    let left_out = left
        .iter()
        .map(|t| {
            format!(
                "{}/{}: no speech_end_ms, so no true end to judge a commit by",
                t.scenario, t.spec.id
            )
        })
        .collect();
    let memo = model.clone().map(Memo::shared);
    let stop_rules: Vec<&PolicySweep> = sweeps
        .iter()
        .filter(|s| s.policy.cue_set().is_some())
        .collect();
    let gathered = if stop_rules.is_empty() {
        None
    } else {
        if stop_rules.iter().any(|s| s.policy.needs_asr()) && transcribe.is_none() {
            return Err(VadError::Config(
                "a rule that reads the transcript's tail needs a transcriber".into(),
            ));
        }
        let sources = CueSources {
            transcribe,
            model: model
                .clone()
                .filter(|_| stop_rules.iter().any(|s| s.policy.needs_turn_model())),
        };
        if stop_rules.iter().any(|s| s.policy.needs_turn_model()) && sources.model.is_none() {
            return Err(VadError::Config(
                "a rule that takes Smart Turn's vote needs the turn model".into(),
            ));
        }
        Some(cue_eval::gather(&judged, base, sources)?)
    };
    let mut policies = Vec::new();
    for sweep in sweeps {
        if let Some(g) = gathered
            .as_ref()
            .filter(|_| sweep.policy.cue_set().is_some())
        {
            let mut settings = sweep.settings.clone();
            settings.sort_by(f64::total_cmp);
            settings.dedup();
            policies.push(cue_eval::sweep(sweep.policy, &settings, &judged, g));
            continue;
        }
        let mut points = Vec::new();
        let mut per_setting = Vec::new();
        // In order and once each, as the curve lists its points.
        let mut settings = sweep.settings.clone();
        settings.sort_by(f64::total_cmp);
        settings.dedup();
        let mut delays: Vec<Option<u32>> = sweep.delays_ms.iter().copied().map(Some).collect();
        delays.sort();
        delays.dedup();
        if delays.is_empty() {
            delays.push(None);
        }
        let grid = delays
            .iter()
            .flat_map(|&d| settings.iter().map(move |&s| (d, s)));
        for (delay_ms, setting) in grid {
            let cfg = sweep.policy.endpointer(base, setting, delay_ms)?;
            let trail = sweep.policy.longest_hold_ms(setting) + 1000;
            let mut commits = Vec::with_capacity(judged.len());
            let mut verdicts = Vec::with_capacity(judged.len());
            for (i, t) in judged.iter().enumerate() {
                let model = match (&memo, sweep.policy.needs_turn_model()) {
                    (_, false) => None,
                    (Some(m), true) => Some((m, i)),
                    (None, true) => {
                        return Err(VadError::Config(format!(
                            "policy {} needs the turn model, and none was given",
                            sweep.policy.name()
                        )))
                    }
                };
                let first = endpoints(t, &cfg, model, trail)?.first().copied();
                let v = first.map(|c| verdict(t, c.at_ns));
                if let Some(v) = v {
                    verdicts.push(v);
                }
                commits.push(TurnCommit {
                    scenario: t.scenario.clone(),
                    turn: t.spec.id.clone(),
                    commit_ms: first.map(|c| c.at_ns as f64 / 1e6),
                    verdict: v,
                    cut_off: v.is_some_and(|v| v.cut_off()),
                });
            }
            if let Some(p) = Point::of(setting, &verdicts) {
                points.push(Point { delay_ms, ..p });
            }
            per_setting.push(SettingTurns {
                setting,
                delay_ms,
                missed: commits.iter().filter(|c| c.commit_ms.is_none()).count(),
                commits,
            });
        }
        policies.push(PolicyEval {
            curve: Curve::new(sweep.policy.name(), points),
            knob: sweep.policy.knob().into(),
            turns: per_setting,
        });
    }
    let mut took_ms: Vec<f64> = memo
        .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).took_ms.clone())
        .unwrap_or_default();
    if let Some(g) = &gathered {
        took_ms.extend(&g.score_ms);
    }
    let turn_score_ms = Summary::from_samples(&took_ms, 0);
    let speech_end = speech_end_error(&judged, base)?;
    Ok(EvalReport {
        stops: gathered
            .as_ref()
            .map(|g| cue_eval::records(&judged, g))
            .unwrap_or_default(),
        asr_failures: gathered.map(|g| g.asr_failures).unwrap_or_default(),
        speech_end,
        turns: judged.len(),
        pauses: judged.iter().map(|t| t.spec.pauses_ms.len()).sum(),
        left_out,
        policies,
        turn_score_ms,
    })
}
