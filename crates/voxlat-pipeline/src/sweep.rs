//! The endpointing trade-off in one table: for each policy (a plain hangover, or the turn
//! model with its thresholds), how long the endpointer waits after speech ends against how
//! often it cuts a speaker off. Runs the real endpointer over the scenario audio in audio time
//! (no other stage is involved). Turn-model scores are memoised per utterance and audio
//! length, so a grid of thresholds costs one model run per distinct score point.

use crate::scenario::LoadedTurn;
use crate::turn_eval::run::{endpoints, Memo};
use serde::{Deserialize, Serialize};
use voxlat_core::cutoff::{Curve, Point};
use voxlat_core::stats::Summary;
use voxlat_vad::turn::{TurnPolicy, TurnPolicyError};
use voxlat_vad::{EndpointerConfig, SharedScorer, VadError};

/// A turn whose first endpoint places speech end this much before the truth is truncated.
pub const TRUNCATION_MS: f64 = 200.0;

/// One row's rule: the plain hangover, or the turn model under `turn`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPolicy {
    pub hangover_ms: u32,
    pub turn: Option<TurnPolicy>,
}

impl SweepPolicy {
    pub fn label(&self) -> String {
        match &self.turn {
            None => format!("webrtc, hangover {}", self.hangover_ms),
            Some(t) => format!(
                "turn model: first {} high {} low {} max {}",
                t.first_ms, t.high, t.low, t.max_ms
            ),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub policy: SweepPolicy,
    pub utterances: usize,
    /// Utterances the endpointer split into two or more turns.
    pub split: usize,
    /// Utterances whose first turn ended more than [`TRUNCATION_MS`] before the speech did.
    pub truncated: usize,
    /// (split or truncated) / utterances.
    pub cut_off_rate: f64,
    /// Decision time − true speech end, over utterances not cut off, ms (audio time; the
    /// turn model's own run time comes on top, see [`SweepReport::score_ms`]).
    pub delay_ms: Option<Summary>,
    /// eot-bench's view of the first commit, over the turns with an annotated speech end:
    /// inside a labelled pause (`pauses_ms`) or before the end is a cut-off. `None` when no
    /// turn is annotated.
    #[serde(default)]
    pub eot: Option<Point>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepReport {
    pub rows: Vec<SweepRow>,
    /// The rows' eot points as curves: the plain rule over its hangover, the turn model over
    /// its high threshold (each only with two settings or more).
    #[serde(default)]
    pub curves: Vec<Curve>,
    /// How long one turn-model score took (distinct scores only), ms.
    pub score_ms: Option<Summary>,
}

/// A turn-model high threshold that makes an inconsistent policy. Its cause's words are in
/// the message, so the cause is not chained as a source as well.
#[derive(Debug, thiserror::Error)]
#[error("high threshold {high}: {cause}")]
pub struct ThresholdError {
    pub high: f32,
    pub cause: TurnPolicyError,
}

/// The rows a sweep runs: one plain rule per hangover, then, with turn-model thresholds, the
/// plain rule at `base.hangover_ms` as the baseline (unless already there) and one turn-model
/// row per high threshold, the rest of the policy from `base.turn`. An inconsistent threshold
/// is named in the error.
pub fn policies(
    base: &EndpointerConfig,
    hangovers: &[u32],
    turn_highs: &[f32],
) -> Result<Vec<SweepPolicy>, ThresholdError> {
    let plain = |hangover_ms| SweepPolicy {
        hangover_ms,
        turn: None,
    };
    let mut out: Vec<SweepPolicy> = hangovers.iter().map(|&h| plain(h)).collect();
    if turn_highs.is_empty() {
        return Ok(out);
    }
    if !hangovers.contains(&base.hangover_ms) {
        out.insert(0, plain(base.hangover_ms));
    }
    for &high in turn_highs {
        let turn = TurnPolicy {
            high,
            ..base.turn.clone()
        };
        turn.validate(base.hangover_ms)
            .map_err(|cause| ThresholdError { high, cause })?;
        out.push(SweepPolicy {
            hangover_ms: base.hangover_ms,
            turn: Some(turn),
        });
    }
    Ok(out)
}

pub fn sweep(
    turns: &[LoadedTurn],
    base: &EndpointerConfig,
    policies: &[SweepPolicy],
    model: Option<SharedScorer>,
) -> Result<SweepReport, VadError> {
    let rate = voxlat_audio::PIPELINE_RATE as u64;
    let ns = |sample: usize| sample as u64 * 1_000_000_000 / rate;
    let memo = model.map(Memo::shared);
    let mut rows = Vec::new();
    for policy in policies {
        let h = policy.hangover_ms;
        let cfg = EndpointerConfig {
            hangover_ms: h,
            provisional_ms: base.provisional_ms.min(h.saturating_sub(1)),
            tail_ms: base.tail_ms.min(h.saturating_sub(1)),
            turn: policy.turn.clone().unwrap_or_else(|| base.turn.clone()),
            ..base.clone()
        };
        let longest = policy.turn.as_ref().map_or(h, |t| t.max_ms.max(h));
        let (mut split, mut truncated) = (0, 0);
        let mut delays = Vec::new();
        let mut verdicts = Vec::new();
        for (i, t) in turns.iter().enumerate() {
            let model = match (&policy.turn, &memo) {
                (None, _) => None,
                (Some(_), Some(m)) => Some((m, i)),
                (Some(_), None) => {
                    return Err(VadError::Config(
                        "a turn-model policy was swept without a turn model".into(),
                    ))
                }
            };
            let ends = endpoints(t, &cfg, model, longest + 1000)?;
            let Some(first) = ends.first() else {
                continue;
            };
            let truth = ns(t.speech_end_sample.saturating_sub(1));
            if t.speech_end_annotated {
                verdicts.push(crate::turn_eval::verdict(t, first.at_ns));
            }
            let is_split = ends.len() > 1;
            let is_truncated = (truth as f64 - first.speech_end_ns as f64) / 1e6 > TRUNCATION_MS;
            split += usize::from(is_split);
            truncated += usize::from(is_truncated && !is_split);
            if !is_split && !is_truncated {
                delays.push((first.at_ns as f64 - truth as f64) / 1e6);
            }
        }
        let n = turns.len();
        rows.push(SweepRow {
            policy: policy.clone(),
            utterances: n,
            split,
            truncated,
            cut_off_rate: if n == 0 {
                0.0
            } else {
                (split + truncated) as f64 / n as f64
            },
            delay_ms: Summary::from_samples(&delays, 0),
            eot: Point::of(
                policy
                    .turn
                    .as_ref()
                    .map_or(f64::from(h), |t| f64::from(t.high)),
                &verdicts,
            ),
        });
    }
    let curve = |name: &str, turn_model: bool| {
        let points: Vec<Point> = rows
            .iter()
            .filter(|r| r.policy.turn.is_some() == turn_model)
            .filter_map(|r| r.eot.clone())
            .collect();
        (points.len() > 1).then(|| Curve::new(name, points))
    };
    let curves = [curve("webrtc", false), curve("smart-turn", true)]
        .into_iter()
        .flatten()
        .collect();
    let score_ms = memo.and_then(|m| {
        let m = m.lock().unwrap_or_else(|p| p.into_inner());
        Summary::from_samples(&m.took_ms, 0)
    });
    Ok(SweepReport {
        rows,
        curves,
        score_ms,
    })
}
