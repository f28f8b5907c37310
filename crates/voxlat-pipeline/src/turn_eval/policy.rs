//! The end-of-turn policies `eval-turns` compares, each with the one knob it sweeps.

use crate::cues::CueSet;
use serde::{Deserialize, Serialize};
use voxlat_vad::turn::TurnPolicy;
use voxlat_vad::{EndpointerConfig, VadError};

/// Pipecat runs Smart Turn when its VAD has heard this much silence (`VADParams.stop_secs`
/// 0.2, which Pipecat recommends with Smart Turn).
pub const SMART_TURN_VAD_STOP_MS: u32 = 200;
/// Pipecat's silence fallback: an "incomplete" turn is committed anyway after this much
/// silence (`SmartTurnParams.stop_secs`, 3 s by default).
pub const SMART_TURN_FALLBACK_MS: u32 = 3000;
/// The silences before Smart Turn's score that the sweep tries besides Pipecat's 200 ms.
/// eot-bench sweeps this action delay with the threshold (its 5 % point: 0.09 at 0.7 s); a
/// threshold alone leaves Smart Turn the 3 s fallback at every end it scores unsure.
pub const SMART_TURN_DELAYS_MS: [u32; 7] = [200, 300, 400, 500, 700, 1000, 1500];

/// A setting a policy cannot run, and the range to give instead.
#[derive(Debug, thiserror::Error)]
pub enum SettingError {
    #[error(
        "{policy} base wait {setting} ms: give ms from 0 to {max}",
        max = crate::cues::MAX_WAIT_MS
    )]
    BaseWait { policy: &'static str, setting: f64 },
    #[error("webrtc hangover {setting} ms: give a whole number of ms from 1 to 30000")]
    Hangover { setting: f64 },
    #[error("smart-turn threshold {setting}: give a probability from 0 to 1")]
    Threshold { setting: f64 },
    #[error(
        "smart-turn delay {delay} ms: give ms from 1 to {max}",
        max = SMART_TURN_FALLBACK_MS - 1
    )]
    Delay { delay: u32 },
    #[error("{policy} runs on the stops, not as an endpointer setting")]
    NotEndpointer { policy: &'static str },
    /// The endpointer refused the configuration the setting made.
    #[error(transparent)]
    Endpointer(VadError),
}

// For the evaluation, whose errors are the endpointer's: the endpointer's own refusal stays
// itself rather than being worded twice.
impl From<SettingError> for VadError {
    fn from(e: SettingError) -> VadError {
        match e {
            SettingError::Endpointer(e) => e,
            other => VadError::Config(other.to_string()),
        }
    }
}

/// A rule for ending a turn, as `eval-turns` runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvalPolicy {
    /// The plain silence hangover after webrtc-vad's last voiced frame; the knob is the
    /// hangover (ms).
    Webrtc,
    /// Smart Turn v3.2 as Pipecat uses it: scored once each time the VAD has heard the
    /// action delay of silence ([`SMART_TURN_VAD_STOP_MS`] in Pipecat, swept over
    /// [`SMART_TURN_DELAYS_MS`] here), committed when P(complete) reaches the knob, else held
    /// until the speaker goes on (then scored again at the next stop) or
    /// [`SMART_TURN_FALLBACK_MS`] of silence.
    SmartTurn,
    /// [`super::cues`]: at each stop, a wait from the speculative transcript's tail, Smart
    /// Turn's vote and the speaker's own pauses; the knob is the base wait (ms).
    Cues,
    /// The same without the transcript's tail, without Smart Turn, or without the speaker's
    /// pauses: what each cue contributes.
    CuesNoTail,
    CuesNoSmartTurn,
    CuesNoSpeaker,
}

impl EvalPolicy {
    pub const ALL: [EvalPolicy; 6] = [
        EvalPolicy::Webrtc,
        EvalPolicy::SmartTurn,
        EvalPolicy::Cues,
        EvalPolicy::CuesNoTail,
        EvalPolicy::CuesNoSmartTurn,
        EvalPolicy::CuesNoSpeaker,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EvalPolicy::Webrtc => "webrtc",
            EvalPolicy::SmartTurn => "smart-turn",
            EvalPolicy::Cues => "cues",
            EvalPolicy::CuesNoTail => "cues-no-tail",
            EvalPolicy::CuesNoSmartTurn => "cues-no-smart-turn",
            EvalPolicy::CuesNoSpeaker => "cues-no-speaker",
        }
    }

    /// The cues a stop-based rule listens to; `None` for the endpointer's own rules.
    pub fn cue_set(self) -> Option<CueSet> {
        let all = CueSet::ALL;
        match self {
            EvalPolicy::Webrtc | EvalPolicy::SmartTurn => None,
            EvalPolicy::Cues => Some(all),
            EvalPolicy::CuesNoTail => Some(CueSet { tail: false, ..all }),
            EvalPolicy::CuesNoSmartTurn => Some(CueSet {
                smart_turn: false,
                ..all
            }),
            EvalPolicy::CuesNoSpeaker => Some(CueSet {
                speaker: false,
                ..all
            }),
        }
    }

    /// Whether the rule needs a speculative transcript at each stop.
    pub fn needs_asr(self) -> bool {
        self.cue_set().is_some_and(|c| c.tail)
    }

    pub fn from_name(name: &str) -> Option<EvalPolicy> {
        EvalPolicy::ALL.into_iter().find(|p| p.name() == name)
    }

    /// What the swept setting is.
    pub fn knob(self) -> &'static str {
        match self {
            EvalPolicy::Webrtc => "hangover_ms",
            EvalPolicy::SmartTurn => "threshold",
            _ => "base_wait_ms",
        }
    }

    pub fn needs_turn_model(self) -> bool {
        match self.cue_set() {
            Some(c) => c.smart_turn,
            None => self == EvalPolicy::SmartTurn,
        }
    }

    /// The default sweep: fine where the trade-off turns (100–800 ms of silence, or the
    /// whole probability range), coarse past it.
    pub fn default_settings(self) -> Vec<f64> {
        match self {
            EvalPolicy::Webrtc => vec![
                100.0, 150.0, 200.0, 250.0, 300.0, 350.0, 400.0, 450.0, 500.0, 600.0, 700.0, 800.0,
                1000.0, 1200.0, 1500.0, 2000.0, 2500.0,
            ],
            EvalPolicy::SmartTurn => vec![
                0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999,
            ],
            _ => vec![
                100.0, 150.0, 200.0, 250.0, 300.0, 350.0, 400.0, 500.0, 600.0, 800.0, 1000.0,
                1200.0, 1500.0,
            ],
        }
    }

    /// The second knob's default settings (Smart Turn's action delay, ms); empty for a
    /// policy with one knob.
    pub fn default_delays_ms(self) -> Vec<u32> {
        match self {
            EvalPolicy::SmartTurn => SMART_TURN_DELAYS_MS.to_vec(),
            _ => Vec::new(),
        }
    }

    /// Whether `setting` is one this policy can run, and if not why.
    pub fn check(self, base: &EndpointerConfig, setting: f64) -> Result<(), SettingError> {
        if self.cue_set().is_some() {
            return if setting.is_finite() && (0.0..=crate::cues::MAX_WAIT_MS).contains(&setting) {
                Ok(())
            } else {
                Err(SettingError::BaseWait {
                    policy: self.name(),
                    setting,
                })
            };
        }
        self.endpointer(base, setting, None).map(|_| ())
    }

    /// The endpointer that runs this policy at `setting` (and Smart Turn's at `delay_ms` of
    /// silence, Pipecat's 200 ms when `None`), on top of `base` (its VAD); the error says why
    /// a setting is out of range, or that the policy is not the endpointer's.
    pub fn endpointer(
        self,
        base: &EndpointerConfig,
        setting: f64,
        delay_ms: Option<u32>,
    ) -> Result<EndpointerConfig, SettingError> {
        let cfg = match self {
            EvalPolicy::Webrtc => {
                if !(setting.is_finite() && (1.0..=30_000.0).contains(&setting)) {
                    return Err(SettingError::Hangover { setting });
                }
                let h = setting.round() as u32;
                EndpointerConfig {
                    hangover_ms: h,
                    provisional_ms: base.provisional_ms.min(h - 1),
                    tail_ms: base.tail_ms.min(h - 1),
                    ..base.clone()
                }
            }
            EvalPolicy::SmartTurn => {
                if !(setting.is_finite() && (0.0..=1.0).contains(&setting)) {
                    return Err(SettingError::Threshold { setting });
                }
                let p = setting as f32;
                let delay = delay_ms.unwrap_or(SMART_TURN_VAD_STOP_MS);
                if !(1..SMART_TURN_FALLBACK_MS).contains(&delay) {
                    return Err(SettingError::Delay { delay });
                }
                // The hangover is the fallback, so the low threshold never gets a second look
                // and no score is retaken before the speaker goes on: one score per VAD stop.
                EndpointerConfig {
                    hangover_ms: SMART_TURN_FALLBACK_MS,
                    provisional_ms: base.provisional_ms.min(delay),
                    tail_ms: base.tail_ms.min(delay),
                    turn: TurnPolicy {
                        first_ms: delay,
                        every_ms: SMART_TURN_FALLBACK_MS,
                        high: p,
                        low: p,
                        max_ms: SMART_TURN_FALLBACK_MS,
                    },
                    ..base.clone()
                }
            }
            _ => {
                return Err(SettingError::NotEndpointer {
                    policy: self.name(),
                })
            }
        };
        cfg.validate().map_err(SettingError::Endpointer)?;
        Ok(cfg)
    }

    /// The longest silence this policy can hold at `setting`, ms.
    pub fn longest_hold_ms(self, setting: f64) -> u32 {
        match self {
            EvalPolicy::Webrtc => setting.round() as u32,
            _ => SMART_TURN_FALLBACK_MS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_setting_makes_a_valid_endpointer() {
        let base = EndpointerConfig::default();
        for p in EvalPolicy::ALL {
            for s in p.default_settings() {
                p.check(&base, s).unwrap();
                if p.cue_set().is_some() {
                    continue;
                }
                let delays = p.default_delays_ms();
                let delays: Vec<Option<u32>> = if delays.is_empty() {
                    vec![None]
                } else {
                    delays.into_iter().map(Some).collect()
                };
                for d in delays {
                    let cfg = p.endpointer(&base, s, d).unwrap();
                    if p.needs_turn_model() {
                        cfg.turn.validate(cfg.hangover_ms).unwrap();
                    }
                }
            }
            assert_eq!(EvalPolicy::from_name(p.name()), Some(p));
        }
        assert!(EvalPolicy::Webrtc.endpointer(&base, 0.0, None).is_err());
        assert!(EvalPolicy::SmartTurn.endpointer(&base, 1.5, None).is_err());
        assert!(EvalPolicy::SmartTurn
            .endpointer(&base, f64::NAN, None)
            .is_err());
        assert!(EvalPolicy::SmartTurn
            .endpointer(&base, 0.5, Some(SMART_TURN_FALLBACK_MS))
            .is_err());
        let late = EvalPolicy::SmartTurn
            .endpointer(&base, 0.5, Some(700))
            .unwrap();
        assert_eq!((late.turn.first_ms, late.hangover_ms), (700, 3000));
    }
}
