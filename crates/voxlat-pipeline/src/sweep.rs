//! The endpointing trade-off in one table: for each policy (a plain hangover, or the turn
//! model with its thresholds), how long the endpointer waits after speech ends against how
//! often it cuts a speaker off. Runs the real endpointer over the scenario audio in audio time
//! (no other stage is involved). Turn-model scores are memoised per utterance and audio
//! length, so a grid of thresholds costs one model run per distinct score point.

use crate::scenario::LoadedTurn;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use voxlat_core::cutoff::{self, Curve, Point, Verdict};
use voxlat_core::stats::Summary;
use voxlat_core::Nanos;
use voxlat_vad::turn::TurnPolicy;
use voxlat_vad::{
    Endpointer, EndpointerConfig, SharedScorer, TurnScore, TurnScorer, VadError, VadEvent,
    WebRtcDetector,
};

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

/// Remembers scores by (utterance, audio length): the same audio always scores the same.
struct Memo {
    model: SharedScorer,
    utterance: usize,
    seen: HashMap<(usize, usize), f32>,
    took_ms: Vec<f64>,
}

impl TurnScorer for Memo {
    fn name(&self) -> &'static str {
        "memoised"
    }

    fn score(&mut self, audio: &[f32]) -> Result<TurnScore, VadError> {
        let key = (self.utterance, audio.len());
        if let Some(&p) = self.seen.get(&key) {
            return Ok(TurnScore {
                probability: p,
                took: Duration::ZERO,
            });
        }
        let s = self
            .model
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .score(audio)?;
        self.took_ms.push(s.took.as_secs_f64() * 1e3);
        self.seen.insert(key, s.probability);
        // Audio time only: the sweep compares rules, and the run time is reported apart.
        Ok(TurnScore {
            probability: s.probability,
            took: Duration::ZERO,
        })
    }
}

/// The rows a sweep runs: one plain rule per hangover, then, with turn-model thresholds, the
/// plain rule at `base.hangover_ms` as the baseline (unless already there) and one turn-model
/// row per high threshold, the rest of the policy from `base.turn`. An inconsistent threshold
/// is named in the error.
pub fn policies(
    base: &EndpointerConfig,
    hangovers: &[u32],
    turn_highs: &[f32],
) -> Result<Vec<SweepPolicy>, String> {
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
            .map_err(|e| format!("high threshold {high}: {e}"))?;
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
    let ns = |sample: usize| Nanos(sample as u64 * 1_000_000_000 / rate);
    let memo = model.map(|model| {
        Arc::new(Mutex::new(Memo {
            model,
            utterance: 0,
            seen: HashMap::new(),
            took_ms: Vec::new(),
        }))
    });
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
            let lead = rate as usize / 2;
            let mut x = vec![0.0f32; lead];
            x.extend_from_slice(&t.audio.samples);
            x.extend(std::iter::repeat_n(
                0.0,
                (longest as usize + 1000) * rate as usize / 1000,
            ));
            let truth = ns(lead + t.speech_end_sample.saturating_sub(1));
            let mut ep =
                Endpointer::new(cfg.clone(), WebRtcDetector::new(cfg.mode, cfg.frame_ms)?)?;
            if policy.turn.is_some() {
                let Some(m) = &memo else {
                    return Err(VadError::Config(
                        "a turn-model policy was swept without a turn model".into(),
                    ));
                };
                m.lock().unwrap_or_else(|p| p.into_inner()).utterance = i;
                ep = ep.with_turn_model(m.clone())?;
            }
            let mut ends = Vec::new();
            for (k, chunk) in x.chunks(320).enumerate() {
                for ev in ep.push(chunk, ns(k * 320 + chunk.len() - 1))? {
                    if let VadEvent::Endpoint { speech_end, at, .. } = ev {
                        ends.push((speech_end, at));
                    }
                }
            }
            let Some(&(first_end, first_at)) = ends.first() else {
                continue;
            };
            if t.speech_end_annotated {
                verdicts.push(eot_verdict(t, first_at.0.saturating_sub(ns(lead).0)));
            }
            let is_split = ends.len() > 1;
            let is_truncated = (truth.signed_since(first_end) as f64 / 1e6) > TRUNCATION_MS;
            split += usize::from(is_split);
            truncated += usize::from(is_truncated && !is_split);
            if !is_split && !is_truncated {
                delays.push(first_at.signed_since(truth) as f64 / 1e6);
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

/// The verdict on a commit `commit_ns` after the start of `t`'s audio.
fn eot_verdict(t: &LoadedTurn, commit_ns: u64) -> Verdict {
    let rate = f64::from(voxlat_audio::PIPELINE_RATE);
    let end_ms = t.speech_end_sample as f64 * 1000.0 / rate;
    // Checked when the scenario was loaded.
    let pauses = cutoff::pauses(&t.spec.pauses_ms, end_ms).unwrap_or_default();
    cutoff::judge(commit_ns as f64 / 1e6, end_ms, &pauses)
}
