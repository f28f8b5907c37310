//! When to score the turn and when to commit, given the silence so far and the last score.
//!
//! - After `first_ms` of silence, score; commit at once if P ≥ `high`.
//! - Re-score every `every_ms` of further silence.
//! - From the hangover on, commit if the latest P ≥ `low`.
//! - Otherwise hold on, up to `max_ms` of silence, so a speaker who pauses mid-sentence is
//!   not cut off; at `max_ms` the turn ends whatever the score.
//!
//! Silence is counted from the refined end of speech, as the plain hangover rule counts it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TurnPolicy {
    pub first_ms: u32,
    pub every_ms: u32,
    pub high: f32,
    pub low: f32,
    pub max_ms: u32,
}

impl Default for TurnPolicy {
    fn default() -> Self {
        TurnPolicy {
            first_ms: 200,
            every_ms: 200,
            high: 0.9,
            low: 0.5,
            max_ms: 1600,
        }
    }
}

/// Why a turn policy cannot run; the caller names the flags or keys that set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TurnPolicyError {
    #[error("the turn model's re-score interval must be positive")]
    Interval,
    #[error("turn-model thresholds are probabilities, 0 to 1")]
    Threshold,
    #[error("the low turn-model threshold must not exceed the high one")]
    LowAboveHigh,
    #[error("the turn model's longest hold must be at least the hangover and the first score")]
    LongestHold,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Wait,
    Score,
    Commit,
}

/// The last score: at how much silence (ns) it was taken, and its probability.
pub type LastScore = Option<(u64, f32)>;

impl TurnPolicy {
    pub fn validate(&self, hangover_ms: u32) -> Result<(), TurnPolicyError> {
        if self.every_ms == 0 {
            return Err(TurnPolicyError::Interval);
        }
        if !(0.0..=1.0).contains(&self.low) || !(0.0..=1.0).contains(&self.high) {
            return Err(TurnPolicyError::Threshold);
        }
        if self.low > self.high {
            return Err(TurnPolicyError::LowAboveHigh);
        }
        if self.max_ms < hangover_ms || self.first_ms > self.max_ms {
            return Err(TurnPolicyError::LongestHold);
        }
        Ok(())
    }

    /// What to do at `quiet_ns` of silence. After a `Score`, call again with the new score.
    pub fn decide(&self, quiet_ns: u64, hangover_ms: u32, last: LastScore) -> Decision {
        let ms = |v: u32| u64::from(v) * 1_000_000;
        if quiet_ns >= ms(self.max_ms) {
            return Decision::Commit;
        }
        // The low threshold applies only to a score taken at or after the hangover: one from
        // before it was not confident enough then, and the speaker may have been pausing.
        if let Some((at, p)) = last {
            if p >= self.high || (at >= ms(hangover_ms) && p >= self.low) {
                return Decision::Commit;
            }
        }
        let due = match last {
            None => ms(self.first_ms),
            Some((at, _)) => at + ms(self.every_ms),
        };
        let stale_at_hangover =
            matches!(last, Some((at, _)) if at < ms(hangover_ms)) && quiet_ns >= ms(hangover_ms);
        if quiet_ns >= due || stale_at_hangover {
            Decision::Score
        } else {
            Decision::Wait
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Runs the policy over 20 ms steps with a probability per silence; returns the silence
    /// at which it commits and how many scores it took.
    fn run(policy: &TurnPolicy, p: impl Fn(u64) -> f32) -> (u64, usize) {
        let mut last = None;
        let mut scores = 0;
        for step in 1..=200u64 {
            let q = step * 20 * MS;
            loop {
                match policy.decide(q, 600, last) {
                    Decision::Wait => break,
                    Decision::Commit => return (q / MS, scores),
                    Decision::Score => {
                        scores += 1;
                        last = Some((q, p(q / MS)));
                    }
                }
            }
        }
        panic!("never committed");
    }

    #[test]
    fn a_confident_score_commits_at_the_first_check() {
        assert_eq!(run(&TurnPolicy::default(), |_| 0.95), (200, 1));
    }

    #[test]
    fn a_middling_score_waits_for_the_hangover_and_a_fresh_score() {
        assert_eq!(run(&TurnPolicy::default(), |_| 0.7), (600, 3));
    }

    #[test]
    fn a_low_score_holds_past_the_hangover_until_it_rises_or_the_cap() {
        assert_eq!(run(&TurnPolicy::default(), |_| 0.1).0, 1600);
        assert_eq!(
            run(&TurnPolicy::default(), |q| if q >= 1000 {
                0.6
            } else {
                0.2
            }),
            (1000, 5)
        );
    }

    #[test]
    fn thresholds_are_checked() {
        let bad = TurnPolicy {
            low: 0.95,
            ..TurnPolicy::default()
        };
        assert_eq!(bad.validate(600), Err(TurnPolicyError::LowAboveHigh));
        assert!(TurnPolicy::default().validate(600).is_ok());
        assert_eq!(
            TurnPolicy::default().validate(2000),
            Err(TurnPolicyError::LongestHold)
        );
    }
}
