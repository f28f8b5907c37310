//! The endpointing trade-off in one table: for each hangover, how long the endpointer waits
//! after speech ends against how often it cuts a speaker off. Runs the real endpointer over
//! the scenario audio in audio time (no other stage is involved, so it takes milliseconds).

use crate::scenario::LoadedTurn;
use serde::{Deserialize, Serialize};
use voxlat_core::stats::Summary;
use voxlat_core::Nanos;
use voxlat_vad::{Endpointer, EndpointerConfig, VadEvent, WebRtcDetector};

/// A turn whose first endpoint places speech end this much before the truth is truncated.
pub const TRUNCATION_MS: f64 = 200.0;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    pub hangover_ms: u32,
    pub utterances: usize,
    /// Utterances the endpointer split into two or more turns.
    pub split: usize,
    /// Utterances whose first turn ended more than [`TRUNCATION_MS`] before the speech did.
    pub truncated: usize,
    /// (split or truncated) / utterances.
    pub cut_off_rate: f64,
    /// Decision time − true speech end, over utterances not cut off, ms.
    pub delay_ms: Option<Summary>,
}

pub fn sweep(
    turns: &[LoadedTurn],
    base: &EndpointerConfig,
    hangovers: &[u32],
) -> Result<Vec<SweepRow>, voxlat_vad::VadError> {
    let rate = voxlat_audio::PIPELINE_RATE as u64;
    let ns = |sample: usize| Nanos(sample as u64 * 1_000_000_000 / rate);
    let mut rows = Vec::new();
    for &h in hangovers {
        let cfg = EndpointerConfig {
            hangover_ms: h,
            provisional_ms: base.provisional_ms.min(h.saturating_sub(1)),
            tail_ms: base.tail_ms.min(h.saturating_sub(1)),
            ..base.clone()
        };
        let (mut split, mut truncated) = (0, 0);
        let mut delays = Vec::new();
        for t in turns {
            let lead = rate as usize / 2;
            let mut x = vec![0.0f32; lead];
            x.extend_from_slice(&t.audio.samples);
            x.extend(std::iter::repeat_n(
                0.0,
                (h as usize + 1000) * rate as usize / 1000,
            ));
            let truth = ns(lead + t.speech_end_sample.saturating_sub(1));
            let mut ep =
                Endpointer::new(cfg.clone(), WebRtcDetector::new(cfg.mode, cfg.frame_ms)?)?;
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
            hangover_ms: h,
            utterances: n,
            split,
            truncated,
            cut_off_rate: if n == 0 {
                0.0
            } else {
                (split + truncated) as f64 / n as f64
            },
            delay_ms: Summary::from_samples(&delays, 0),
        });
    }
    Ok(rows)
}
