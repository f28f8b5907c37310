//! Scenario files: a small TOML format describing utterances to replay.
//!
//! ```toml
//! name = "assistant"
//! system_prompt = "You are a voice assistant. Answer in one short sentence."  # optional
//! conversation = false      # true: turns share one conversation history, in order
//!
//! [[turn]]
//! id = "weather"
//! wav = "audio/synthetic-weather.wav"   # relative to this file
//! transcript = "What's the weather like in Paris today?"
//! speech_end_ms = 2310      # where speech ends in the WAV (`voxlat scenario annotate`)
//! source = "synthetic"      # or "real"
//! expect_keywords = ["Paris"]           # optional check of the reply
//! ```

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use voxlat_audio::Audio;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub conversation: bool,
    #[serde(rename = "turn")]
    pub turns: Vec<TurnSpec>,
    /// The file it came from (set on load).
    #[serde(skip)]
    pub path: PathBuf,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnSpec {
    pub id: String,
    pub wav: PathBuf,
    pub transcript: String,
    /// Where speech ends in the WAV, in milliseconds from its start.
    pub speech_end_ms: Option<f64>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub expect_keywords: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{path}: cannot read scenario: {detail}")]
    Read { path: PathBuf, detail: String },
    #[error("{path}: invalid scenario: {detail}")]
    Parse { path: PathBuf, detail: String },
    #[error("{path}: turn `{turn}`: {detail}")]
    Turn {
        path: PathBuf,
        turn: String,
        detail: String,
    },
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Read {
            path: path.into(),
            detail: e.to_string(),
        })?;
        Scenario::parse(&text, path)
    }

    /// Parses and validates scenario TOML; `path` names the file in errors and anchors the
    /// relative WAV paths.
    pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
        let mut s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            path: path.into(),
            detail: e.to_string(),
        })?;
        s.path = path.to_path_buf();
        if s.turns.is_empty() {
            return Err(ScenarioError::Parse {
                path: path.into(),
                detail: "no [[turn]] entries".into(),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for t in &s.turns {
            if !seen.insert(t.id.clone()) {
                return Err(ScenarioError::Turn {
                    path: path.into(),
                    turn: t.id.clone(),
                    detail: "duplicate id".into(),
                });
            }
            if let Some(ms) = t.speech_end_ms {
                if !(ms.is_finite() && ms > 0.0) {
                    return Err(ScenarioError::Turn {
                        path: path.into(),
                        turn: t.id.clone(),
                        detail: format!("speech_end_ms = {ms} is not a positive number"),
                    });
                }
            }
        }
        Ok(s)
    }

    /// The WAV of a turn, resolved against the scenario file's directory.
    pub fn wav_path(&self, turn: &TurnSpec) -> PathBuf {
        if turn.wav.is_absolute() {
            turn.wav.clone()
        } else {
            self.path.parent().unwrap_or(Path::new(".")).join(&turn.wav)
        }
    }
}

/// A turn's audio, ready to replay: 16 kHz mono, with its speech end in samples.
#[derive(Clone, Debug)]
pub struct LoadedTurn {
    pub scenario: String,
    pub spec: TurnSpec,
    pub audio: Audio,
    /// Sample index (16 kHz) of the end of speech: the annotation, else the energy estimate.
    pub speech_end_sample: usize,
    pub speech_end_annotated: bool,
    pub warnings: Vec<String>,
}

impl LoadedTurn {
    pub fn load(scenario: &Scenario, spec: &TurnSpec) -> Result<LoadedTurn, ScenarioError> {
        let path = scenario.wav_path(spec);
        let turn_err = |detail: String| ScenarioError::Turn {
            path: scenario.path.clone(),
            turn: spec.id.clone(),
            detail,
        };
        let decoded = voxlat_audio::wav::read_at(&path, voxlat_audio::PIPELINE_RATE)
            .map_err(|e| turn_err(e.to_string()))?;
        let audio = decoded.audio;
        let (speech_end_sample, annotated) = match spec.speech_end_ms {
            Some(ms) => ((ms * f64::from(audio.rate) / 1000.0).round() as usize, true),
            None => match voxlat_vad::annotate::energy_bounds(&audio.samples, audio.rate, 40.0) {
                Some((_, end)) => (end, false),
                None => {
                    return Err(turn_err(format!(
                        "{}: no speech found (silent audio)",
                        path.display()
                    )))
                }
            },
        };
        if speech_end_sample > audio.samples.len() {
            return Err(turn_err(format!(
                "speech_end_ms = {:.0} is past the end of {} ({:.0} ms)",
                speech_end_sample as f64 * 1000.0 / f64::from(audio.rate),
                path.display(),
                audio.duration_s() * 1000.0
            )));
        }
        Ok(LoadedTurn {
            scenario: scenario.name.clone(),
            spec: spec.clone(),
            audio,
            speech_end_sample,
            speech_end_annotated: annotated,
            warnings: decoded.warnings,
        })
    }
}

/// Energy-based speech bounds of a WAV, in ms, for writing into a scenario file.
pub fn annotate(path: &Path) -> Result<(f64, f64), ScenarioError> {
    let d = voxlat_audio::wav::read_at(path, voxlat_audio::PIPELINE_RATE).map_err(|e| {
        ScenarioError::Read {
            path: path.into(),
            detail: e.to_string(),
        }
    })?;
    let (a, b) = voxlat_vad::annotate::energy_bounds(&d.audio.samples, d.audio.rate, 40.0)
        .ok_or_else(|| ScenarioError::Read {
            path: path.into(),
            detail: "no speech found".into(),
        })?;
    let ms = |s: usize| (s as f64 * 1000.0 / f64::from(d.audio.rate)).round();
    Ok((ms(a), ms(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn bad_files_name_the_file_and_the_problem() {
        let d = tempfile::tempdir().unwrap();
        let e = Scenario::load(&d.path().join("none.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.toml"), "{e}");
        let p = write(
            d.path(),
            "bad.toml",
            "name = \"x\"\n[[turn]]\nid = \"a\"\nwav = \"a.wav\"\n",
        );
        let e = Scenario::load(&p).unwrap_err().to_string();
        assert!(e.contains("bad.toml") && e.contains("transcript"), "{e}");
        let p = write(d.path(), "dup.toml", "name = \"x\"\n[[turn]]\nid = \"a\"\nwav = \"a.wav\"\ntranscript = \"t\"\n[[turn]]\nid = \"a\"\nwav = \"b.wav\"\ntranscript = \"t\"\n");
        assert!(Scenario::load(&p)
            .unwrap_err()
            .to_string()
            .contains("duplicate"));
        let p = write(d.path(), "typo.toml", "name = \"x\"\nconversaton = true\n[[turn]]\nid = \"a\"\nwav = \"a.wav\"\ntranscript = \"t\"\n");
        assert!(Scenario::load(&p)
            .unwrap_err()
            .to_string()
            .contains("conversaton"));
    }

    #[test]
    fn missing_wav_is_a_turn_error_naming_both_files() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "s.toml",
            "name = \"x\"\n[[turn]]\nid = \"a\"\nwav = \"missing.wav\"\ntranscript = \"t\"\n",
        );
        let s = Scenario::load(&p).unwrap();
        let e = LoadedTurn::load(&s, &s.turns[0]).unwrap_err().to_string();
        assert!(
            e.contains("s.toml") && e.contains("missing.wav") && e.contains("`a`"),
            "{e}"
        );
    }
}
