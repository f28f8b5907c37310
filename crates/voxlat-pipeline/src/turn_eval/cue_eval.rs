//! The stop-based rules ([`super::cues`]) over a corpus: the cues of every stop are taken
//! once (a Whisper transcript of the utterance so far, a Smart Turn score), then each rule and
//! each base wait is replayed over them, speaker by speaker in spoken order, so that the
//! speaker's pauses so far are what a live session would have seen.

use super::stops::{stops, Stop};
use super::{verdict_at_ms, EvalPolicy, PolicyEval, SettingTurns, TurnCommit};
use crate::cues::{self, CueSet, StopCues};
use crate::scenario::LoadedTurn;
use serde::{Deserialize, Serialize};
use voxlat_asr::engine::AsrError;
use voxlat_core::cutoff::{Curve, Point};
use voxlat_vad::{EndpointerConfig, SharedScorer, VadError};

/// A stop and what it offered, for the results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StopRecord {
    pub scenario: String,
    pub turn: String,
    pub at_ms: f64,
    pub quiet_from_ms: f64,
    pub resumed_ms: Option<f64>,
    #[serde(flatten)]
    pub cues: StopCues,
}

/// A speculative transcription of the utterance so far: its text, or why it failed.
pub type Transcribe<'a> = &'a mut dyn FnMut(&[f32]) -> Result<String, AsrError>;

/// Where the cues come from: a speculative transcription and Smart Turn, each when some rule
/// needs it.
pub struct CueSources<'a> {
    pub transcribe: Option<Transcribe<'a>>,
    pub model: Option<SharedScorer>,
}

/// Each turn's stops with their cues; Smart Turn's run times, ms.
pub struct Gathered {
    pub turns: Vec<Vec<(Stop, StopCues)>>,
    pub score_ms: Vec<f64>,
    /// Stops whose transcription failed (their tail counts as bare), with why.
    pub asr_failures: Vec<String>,
}

pub fn gather(
    judged: &[&LoadedTurn],
    base: &EndpointerConfig,
    mut src: CueSources<'_>,
) -> Result<Gathered, VadError> {
    let mut out = Gathered {
        turns: Vec::with_capacity(judged.len()),
        score_ms: Vec::new(),
        asr_failures: Vec::new(),
    };
    for t in judged {
        let mut with_cues = Vec::new();
        for stop in stops(t, base)? {
            let text = match src.transcribe.as_mut() {
                Some(asr) => asr(&stop.audio).unwrap_or_else(|e| {
                    out.asr_failures.push(format!(
                        "{}/{} at {:.0} ms: {e}",
                        t.scenario, t.spec.id, stop.at_ms
                    ));
                    String::new()
                }),
                None => String::new(),
            };
            let p_complete = match &src.model {
                Some(m) => {
                    let s = m
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .score(&stop.audio)?;
                    out.score_ms.push(s.took.as_secs_f64() * 1e3);
                    Some(s.probability)
                }
                None => None,
            };
            let c = StopCues {
                tail: cues::tail(&text),
                text,
                p_complete,
            };
            with_cues.push((stop, c));
        }
        out.turns.push(with_cues);
    }
    Ok(out)
}

/// One stop-based policy over its settings.
pub fn sweep(
    policy: EvalPolicy,
    settings: &[f64],
    judged: &[&LoadedTurn],
    gathered: &Gathered,
) -> PolicyEval {
    let set = policy.cue_set().unwrap_or(CueSet::ALL);
    let mut points = Vec::new();
    let mut per_setting = Vec::new();
    for &base_ms in settings {
        let mut commits = Vec::with_capacity(judged.len());
        let mut pauses: Vec<f64> = Vec::new();
        let mut speaker: Option<&str> = None;
        for (t, stops) in judged.iter().zip(&gathered.turns) {
            if speaker != Some(t.scenario.as_str()) {
                speaker = Some(&t.scenario);
                pauses.clear();
            }
            let mut commit_ms = None;
            for (stop, c) in stops {
                let wait = cues::wait_ms(base_ms, c, &pauses, set);
                if let Some(at) = stop.commit_at(wait) {
                    commit_ms = Some(at);
                    break;
                }
                pauses.extend(stop.pause_ms());
            }
            let v = commit_ms.map(|ms| verdict_at_ms(t, ms));
            commits.push(TurnCommit {
                scenario: t.scenario.clone(),
                turn: t.spec.id.clone(),
                commit_ms,
                verdict: v,
                cut_off: v.is_some_and(|v| v.cut_off()),
            });
        }
        let verdicts: Vec<_> = commits.iter().filter_map(|c| c.verdict).collect();
        if let Some(p) = Point::of(base_ms, &verdicts) {
            points.push(p);
        }
        per_setting.push(SettingTurns {
            setting: base_ms,
            delay_ms: None,
            missed: commits.iter().filter(|c| c.commit_ms.is_none()).count(),
            commits,
        });
    }
    PolicyEval {
        curve: Curve::new(policy.name(), points),
        knob: policy.knob().into(),
        turns: per_setting,
    }
}

/// The stops and their cues, for the results.
pub fn records(judged: &[&LoadedTurn], gathered: &Gathered) -> Vec<StopRecord> {
    judged
        .iter()
        .zip(&gathered.turns)
        .flat_map(|(t, stops)| {
            stops.iter().map(|(s, c)| StopRecord {
                scenario: t.scenario.clone(),
                turn: t.spec.id.clone(),
                at_ms: s.at_ms,
                quiet_from_ms: s.quiet_from_ms,
                resumed_ms: s.resumed_ms,
                cues: c.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::TurnSpec;
    use voxlat_audio::Audio;

    fn turn(scenario: &str, id: &str, end_ms: f64) -> LoadedTurn {
        LoadedTurn {
            scenario: scenario.into(),
            spec: TurnSpec {
                id: id.into(),
                wav: "x.wav".into(),
                transcript: String::new(),
                speech_end_ms: Some(end_ms),
                pauses_ms: Vec::new(),
                source: None,
                expect_keywords: Vec::new(),
            },
            audio: Audio {
                samples: Vec::new(),
                rate: voxlat_audio::PIPELINE_RATE,
            },
            speech_end_sample: (end_ms * 16.0) as usize,
            speech_end_annotated: true,
            warnings: Vec::new(),
        }
    }

    fn stop(quiet_from_ms: f64, pause_ms: Option<f64>) -> (Stop, StopCues) {
        (
            Stop {
                at_ms: quiet_from_ms + 200.0,
                quiet_from_ms,
                resumed_ms: pause_ms.map(|p| quiet_from_ms + p),
                audio: Vec::new(),
            },
            StopCues {
                text: "Done.".into(),
                tail: cues::Tail::Closed,
                p_complete: Some(0.9),
            },
        )
    }

    /// A speaker's pauses carry from one of their turns to the next, and not to another
    /// speaker: with a base wait of 450 ms, pauses of 300, 350 and 400 ms are waited out and
    /// remembered; from then on that speaker's ends wait 500 ms (the 90th percentile and
    /// 100 ms), another speaker's the base 450.
    #[test]
    fn the_speakers_pauses_so_far_set_the_least_wait() {
        let turns = [
            turn("alice", "a", 3000.0),
            turn("alice", "b", 1000.0),
            turn("bob", "c", 1000.0),
        ];
        let judged: Vec<&LoadedTurn> = turns.iter().collect();
        let gathered = Gathered {
            turns: vec![
                vec![
                    stop(500.0, Some(300.0)),
                    stop(1200.0, Some(350.0)),
                    stop(2000.0, Some(400.0)),
                    stop(3000.0, None),
                ],
                vec![stop(1000.0, None)],
                vec![stop(1000.0, None)],
            ],
            score_ms: Vec::new(),
            asr_failures: Vec::new(),
        };
        let at = |policy| {
            let eval = sweep(policy, &[450.0], &judged, &gathered);
            assert_eq!(eval.curve.points[0].cutoff, 0.0);
            eval.turns[0]
                .commits
                .iter()
                .map(|c| c.commit_ms)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            at(EvalPolicy::Cues),
            vec![Some(3500.0), Some(1500.0), Some(1450.0)]
        );
        assert_eq!(
            at(EvalPolicy::CuesNoSpeaker),
            vec![Some(3450.0), Some(1450.0), Some(1450.0)]
        );
    }
}
