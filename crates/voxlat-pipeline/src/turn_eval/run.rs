//! One turn's audio through a fresh endpointer, in audio time: what the sweep and
//! `eval-turns` both measure. No other stage runs.

use crate::scenario::LoadedTurn;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use voxlat_core::Nanos;
use voxlat_vad::{
    Endpointer, EndpointerConfig, SharedScorer, TurnScore, TurnScorer, VadError, VadEvent,
    WebRtcDetector,
};

/// Silence put before each turn's audio, so the detector settles before the speech.
pub const LEAD_MS: u64 = 500;

/// Remembers scores by (utterance, audio length): the same audio always scores the same, so
/// a grid of thresholds costs one model run per distinct point where a score is taken.
pub struct Memo {
    model: SharedScorer,
    utterance: usize,
    seen: HashMap<(usize, usize), f32>,
    /// How long each distinct score took, ms.
    pub took_ms: Vec<f64>,
}

impl Memo {
    pub fn shared(model: SharedScorer) -> Arc<Mutex<Memo>> {
        Arc::new(Mutex::new(Memo {
            model,
            utterance: 0,
            seen: HashMap::new(),
            took_ms: Vec::new(),
        }))
    }
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
        // Audio time only: rules are compared on the audio, and the run time is reported apart.
        Ok(TurnScore {
            probability: s.probability,
            took: Duration::ZERO,
        })
    }
}

/// One endpoint of a replayed turn, in ns from the start of the turn's own audio (the lead
/// is taken off). A commit before the lead ends is reported at 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Commit {
    pub speech_end_ns: u64,
    pub at_ns: u64,
}

/// Every endpoint the endpointer emits over `turn`'s audio, with [`LEAD_MS`] of silence
/// before it and `trail_ms` after it. `model` (with `utterance`, the key its memo files the
/// scores under) is attached when given.
pub fn endpoints(
    turn: &LoadedTurn,
    cfg: &EndpointerConfig,
    model: Option<(&Arc<Mutex<Memo>>, usize)>,
    trail_ms: u32,
) -> Result<Vec<Commit>, VadError> {
    let mut out = Vec::new();
    events(turn, cfg, model, trail_ms, |ev, lead_ns| {
        if let VadEvent::Endpoint { speech_end, at, .. } = ev {
            out.push(Commit {
                speech_end_ns: speech_end.0.saturating_sub(lead_ns),
                at_ns: at.0.saturating_sub(lead_ns),
            });
        }
    })?;
    Ok(out)
}

/// Runs the endpointer over `turn`'s audio as [`endpoints`] does and hands every event to
/// `on`, with the lead (ns) to take off its times.
pub fn events(
    turn: &LoadedTurn,
    cfg: &EndpointerConfig,
    model: Option<(&Arc<Mutex<Memo>>, usize)>,
    trail_ms: u32,
    mut on: impl FnMut(VadEvent, u64),
) -> Result<(), VadError> {
    let rate = voxlat_audio::PIPELINE_RATE as u64;
    let ns = |sample: usize| sample as u64 * 1_000_000_000 / rate;
    let lead = (rate * LEAD_MS / 1000) as usize;
    let mut x = vec![0.0f32; lead];
    x.extend_from_slice(&turn.audio.samples);
    x.extend(std::iter::repeat_n(
        0.0,
        trail_ms as usize * rate as usize / 1000,
    ));
    let mut ep = Endpointer::new(cfg.clone(), WebRtcDetector::new(cfg.mode, cfg.frame_ms)?)?;
    if let Some((memo, utterance)) = model {
        memo.lock().unwrap_or_else(|p| p.into_inner()).utterance = utterance;
        ep = ep.with_turn_model(memo.clone())?;
    }
    let lead_ns = ns(lead);
    for (k, chunk) in x.chunks(320).enumerate() {
        for ev in ep.push(chunk, Nanos(ns(k * 320 + chunk.len() - 1)))? {
            on(ev, lead_ns);
        }
    }
    Ok(())
}
