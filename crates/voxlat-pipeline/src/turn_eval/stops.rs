//! A turn as its pauses: each time the VAD has heard [`STOP_MS`] of silence, what had been
//! said, when the silence began and whether (and when) the speaker went on. A policy that
//! waits some silence after each stop then commits at the first stop whose silence outlasts
//! its wait. The cues a stop offers (a transcript, a Smart Turn score) are taken once, so any
//! wait rule and any setting of it is judged on the same stops.

use super::run::events;
use crate::scenario::LoadedTurn;
use voxlat_vad::{EndpointerConfig, VadError, VadEvent};

/// Silence after the VAD's last voiced frame at which a stop is taken (a provisional end).
pub const STOP_MS: u32 = 200;

#[derive(Clone, Debug)]
pub struct Stop {
    /// When the stop was taken, ms from the start of the turn's audio.
    pub at_ms: f64,
    /// Where the silence began: the endpointer's refined end of speech, ms.
    pub quiet_from_ms: f64,
    /// When speech came back; `None`: it did not in the turn's audio.
    pub resumed_ms: Option<f64>,
    /// The utterance so far, as a speculative transcription would get it.
    pub audio: Vec<f32>,
}

impl Stop {
    /// When a rule that waits `wait_ms` of silence commits at this stop; `None` when the
    /// speaker went on first.
    pub fn commit_at(&self, wait_ms: f64) -> Option<f64> {
        let at = self.at_ms.max(self.quiet_from_ms + wait_ms);
        match self.resumed_ms {
            Some(r) if r <= at => None,
            _ => Some(at),
        }
    }

    /// How long the pause lasted, when the speaker went on.
    pub fn pause_ms(&self) -> Option<f64> {
        self.resumed_ms.map(|r| r - self.quiet_from_ms)
    }
}

/// The stops of `turn` under `base`'s VAD settings.
pub fn stops(turn: &LoadedTurn, base: &EndpointerConfig) -> Result<Vec<Stop>, VadError> {
    // A hangover no pause reaches: the endpointer only reports the stops and the resumptions.
    // A stop is the VAD's own silence, as Pipecat's VAD stop is.
    let cfg = EndpointerConfig {
        provisional_ms: STOP_MS,
        early_provisional: false,
        tail_ms: base.tail_ms.min(STOP_MS),
        hangover_ms: base.max_utterance_ms.saturating_sub(1).max(STOP_MS + 1),
        ..base.clone()
    };
    let ms = |ns: u64, lead: u64| ns.saturating_sub(lead) as f64 / 1e6;
    let mut out: Vec<Stop> = Vec::new();
    events(turn, &cfg, None, 500, |ev, lead| match ev {
        VadEvent::Provisional {
            speech_end,
            at,
            audio,
        } => out.push(Stop {
            at_ms: ms(at.0, lead),
            quiet_from_ms: ms(speech_end.0, lead),
            resumed_ms: None,
            audio,
        }),
        VadEvent::Retracted { at, .. } => {
            if let Some(last) = out.last_mut() {
                last.resumed_ms = Some(ms(at.0, lead));
            }
        }
        _ => {}
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_commits_only_when_its_silence_outlasts_the_wait() {
        let stop = Stop {
            at_ms: 1250.0,
            quiet_from_ms: 1050.0,
            resumed_ms: Some(1500.0),
            audio: Vec::new(),
        };
        assert_eq!(stop.commit_at(100.0), Some(1250.0), "not before the stop");
        assert_eq!(stop.commit_at(300.0), Some(1350.0));
        assert_eq!(stop.commit_at(450.0), None, "the speaker went on at 1500");
        assert_eq!(stop.pause_ms(), Some(450.0));
        let last = Stop {
            resumed_ms: None,
            ..stop
        };
        assert_eq!(last.commit_at(2000.0), Some(3050.0));
    }
}
