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
//! pauses_ms = [[640, 910]]  # optional: each pause of 100 ms or more inside the turn
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
    /// The truth of the pauses inside the turn, `[start, end]` ms from the WAV's start, in
    /// order, each at least 100 ms ([`voxlat_core::cutoff`]): a commit inside one cut the
    /// speaker off. Needs `speech_end_ms`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pauses_ms: Vec<[f64; 2]>,
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
    #[error(
        "{path}: an audio file, not a scenario: give a scenario TOML with a [[turn]] that names \
         it in `wav` and says what was said in `transcript` (scenarios/README.md); \
         `voxlat annotate {path}` suggests its `speech_end_ms`"
    )]
    Audio { path: PathBuf },
    #[error("{path}: turn `{turn}`: {detail}")]
    Turn {
        path: PathBuf,
        turn: String,
        detail: String,
    },
    /// A scenario name or turn id that cannot be used in a file name (`--save-replies` writes
    /// `{scenario}-{turn}-{repeat}.wav`).
    #[error(
        "{path}: {field} = {value:?} {reason}; a name may hold only ASCII letters, digits, \
         `-`, `_` and `.`, must not start with `.`, and is at most {MAX_NAME_LEN} bytes"
    )]
    Name {
        path: PathBuf,
        /// `name`, or `turn[i].id` (0-based, in file order).
        field: String,
        value: String,
        reason: &'static str,
    },
}

/// The longest scenario name or turn id, in bytes: two of them and a repeat number still fit
/// in one 255-byte file name.
pub const MAX_NAME_LEN: usize = 100;

/// Why `value` cannot be a scenario name or turn id, if it cannot. Names become file names
/// (`{scenario}-{turn}-{repeat}.wav`), so a `/` would write elsewhere (or fail every turn),
/// `..` would climb out of the directory, and a leading `.` hides the file.
fn name_problem(value: &str) -> Option<&'static str> {
    if value.is_empty() {
        Some("is empty")
    } else if value.len() > MAX_NAME_LEN {
        Some("is too long")
    } else if value.starts_with('.') {
        Some("starts with `.`")
    } else if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        Some("holds a character not allowed in a file name")
    } else {
        None
    }
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let audio = ["wav", "flac", "mp3", "ogg", "opus", "m4a"];
        if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| audio.contains(&e.to_ascii_lowercase().as_str()))
        {
            return Err(ScenarioError::Audio { path: path.into() });
        }
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
        let check = |field: String, value: &str| match name_problem(value) {
            Some(reason) => Err(ScenarioError::Name {
                path: path.into(),
                field,
                value: value.into(),
                reason,
            }),
            None => Ok(()),
        };
        check("name".into(), &s.name)?;
        for (i, t) in s.turns.iter().enumerate() {
            check(format!("turn[{i}].id"), &t.id)?;
        }
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
            if !t.pauses_ms.is_empty() {
                let turn_err = |detail: String| ScenarioError::Turn {
                    path: path.into(),
                    turn: t.id.clone(),
                    detail,
                };
                let end = t.speech_end_ms.ok_or_else(|| {
                    turn_err("pauses_ms needs speech_end_ms, the true end of the turn".into())
                })?;
                voxlat_core::cutoff::pauses(&t.pauses_ms, end)
                    .map_err(|e| turn_err(format!("pauses_ms: {e}")))?;
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

/// The longest audio a turn may have, in seconds: four times the endpointer's default
/// 30 s utterance cap, room for leading and trailing silence. A longer WAV is not one turn
/// (and would be replayed in real time for minutes), so it is refused, and skipped in a
/// directory replay, rather than truncated where the speech might still be going on.
pub const MAX_TURN_AUDIO_S: u32 = 120;

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
        let decoded = voxlat_audio::wav::read_at_limited(
            &path,
            voxlat_audio::PIPELINE_RATE,
            MAX_TURN_AUDIO_S,
        )
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

/// What [`load_all`] could and could not load.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Every scenario file that parsed, with the turns whose audio loaded (possibly none).
    pub scenarios: Vec<(Scenario, Vec<LoadedTurn>)>,
    /// One line per scenario file or turn left out, with why (file, turn, field).
    pub skipped: Vec<String>,
    /// Problems that did not stop a turn loading (e.g. a truncated WAV).
    pub warnings: Vec<String>,
}

impl LoadReport {
    pub fn turns(&self) -> impl Iterator<Item = &LoadedTurn> {
        self.scenarios.iter().flat_map(|(_, t)| t)
    }
}

/// Loads every scenario file and turn it can. A file that does not parse, and a turn whose
/// audio cannot be read, decoded, bounded or resampled, is listed in `skipped` and the rest
/// still load: one bad file in a directory must not cost the whole run.
pub fn load_all(files: &[PathBuf]) -> LoadReport {
    let mut out = LoadReport::default();
    for f in files {
        match Scenario::load(f) {
            Ok(s) => {
                let mut turns = Vec::new();
                for spec in &s.turns {
                    match LoadedTurn::load(&s, spec) {
                        Ok(t) => {
                            out.warnings.extend(t.warnings.iter().cloned());
                            turns.push(t);
                        }
                        Err(e) => out.skipped.push(e.to_string()),
                    }
                }
                out.scenarios.push((s, turns));
            }
            Err(e) => out.skipped.push(e.to_string()),
        }
    }
    out
}

/// Why [`annotate`] has no bounds to give.
#[derive(Debug, thiserror::Error)]
pub enum AnnotateError {
    /// The WAV's own error already names the file.
    #[error("cannot read WAV: {0}")]
    Wav(#[from] voxlat_audio::wav::WavError),
    #[error("{path}: no speech found ({reason})")]
    NoSpeech {
        path: PathBuf,
        reason: voxlat_vad::annotate::NoSpeech,
    },
}

/// Where speech is in a WAV, in ms, as values a scenario file accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Annotation {
    pub start_ms: f64,
    /// Whole milliseconds, rounded down: rounded up, the loader (which works at 16 kHz) could
    /// find it past the last sample; and never 0, which the loader refuses.
    pub end_ms: f64,
}

/// Speech bounds of a WAV (energy, with noise, dither and clicks refused as not speech), for
/// writing into a scenario file.
pub fn annotate(path: &Path) -> Result<Annotation, AnnotateError> {
    let d =
        voxlat_audio::wav::read_at_limited(path, voxlat_audio::PIPELINE_RATE, MAX_TURN_AUDIO_S)?;
    let rate = f64::from(d.audio.rate);
    let (a, b) =
        voxlat_vad::annotate::speech_bounds(&d.audio.samples, d.audio.rate).map_err(|reason| {
            AnnotateError::NoSpeech {
                path: path.into(),
                reason,
            }
        })?;
    Ok(Annotation {
        start_ms: (a as f64 * 1000.0 / rate).round(),
        // speech_bounds spans at least MIN_SPEECH_MS, so this is at least that, never 0.
        end_ms: (b as f64 * 1000.0 / rate).floor().max(1.0),
    })
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
        // A recording given where its scenario belongs is named as audio, with the way on.
        let p = d.path().join("question.WAV");
        std::fs::write(&p, b"RIFF....WAVE").unwrap();
        let e = Scenario::load(&p).unwrap_err();
        assert!(matches!(e, ScenarioError::Audio { .. }), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("question.WAV") && e.contains("voxlat annotate"),
            "{e}"
        );
    }

    /// An 8-bit mono WAV header at `rate` over `data` (raw bytes), as a corrupt file has it
    /// (8-bit mono, so that the header's byte rate equals the rate and stays consistent).
    fn raw_wav(rate: u32, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(b"RIFF");
        v.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
        v.extend_from_slice(b"WAVEfmt ");
        v.extend_from_slice(&16u32.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&rate.to_le_bytes());
        v.extend_from_slice(&rate.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&8u16.to_le_bytes());
        v.extend_from_slice(b"data");
        v.extend_from_slice(&(data.len() as u32).to_le_bytes());
        v.extend_from_slice(data);
        v
    }

    fn speech_like(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let env = if (4000..n - 4000).contains(&i) {
                    0.4
                } else {
                    0.0
                };
                (i as f32 * 0.07).sin() * env
            })
            .collect()
    }

    #[test]
    fn a_directory_with_broken_wavs_still_loads_every_other_turn() {
        let d = tempfile::tempdir().unwrap();
        voxlat_audio::wav::write(&d.path().join("good.wav"), &speech_like(16_000), 16_000).unwrap();
        // 0 Hz panicked in the resampler; 4,294,967,291 Hz aborted on a 17 GB allocation.
        std::fs::write(d.path().join("zero.wav"), raw_wav(0, &[1; 2000])).unwrap();
        std::fs::write(
            d.path().join("huge.wav"),
            raw_wav(4_294_967_291, &[1; 2000]),
        )
        .unwrap();
        std::fs::write(d.path().join("junk.wav"), b"not a wav").unwrap();
        let turn = |id: &str, wav: &str| {
            format!("[[turn]]\nid = \"{id}\"\nwav = \"{wav}\"\ntranscript = \"t\"\n")
        };
        let a = write(
            d.path(),
            "a.toml",
            &format!(
                "name = \"a\"\n{}{}",
                turn("zero", "zero.wav"),
                turn("good", "good.wav")
            ),
        );
        let b = write(
            d.path(),
            "b.toml",
            &format!("name = \"b\"\n{}", turn("huge", "huge.wav")),
        );
        let c = write(
            d.path(),
            "c.toml",
            &format!(
                "name = \"c\"\n{}{}",
                turn("junk", "junk.wav"),
                turn("good-again", "good.wav")
            ),
        );
        let unparsable = write(d.path(), "d.toml", "name = ");
        let r = load_all(&[a, b, c, unparsable]);
        let ids: Vec<&str> = r.turns().map(|t| t.spec.id.as_str()).collect();
        assert_eq!(ids, ["good", "good-again"]);
        assert_eq!(r.scenarios.len(), 3, "b.toml parsed, with no loadable turn");
        assert_eq!(r.skipped.len(), 4, "{:#?}", r.skipped);
        assert!(
            r.skipped[0].contains("a.toml")
                && r.skipped[0].contains("`zero`")
                && r.skipped[0].contains("zero.wav")
                && r.skipped[0].contains("sample_rate = 0 Hz"),
            "{}",
            r.skipped[0]
        );
        assert!(
            r.skipped[1].contains("b.toml") && r.skipped[1].contains("4294967291"),
            "{}",
            r.skipped[1]
        );
        assert!(r.skipped[2].contains("junk.wav"), "{}", r.skipped[2]);
        assert!(r.skipped[3].contains("d.toml"), "{}", r.skipped[3]);
    }

    #[test]
    fn audio_longer_than_a_turn_is_refused() {
        let d = tempfile::tempdir().unwrap();
        // One second past the cap, at the lowest rate to keep the file small (2 MB).
        let n = (MAX_TURN_AUDIO_S as usize + 1) * 8_000;
        voxlat_audio::wav::write(&d.path().join("long.wav"), &speech_like(n), 8_000).unwrap();
        let p = write(
            d.path(),
            "s.toml",
            "name = \"x\"\n[[turn]]\nid = \"long\"\nwav = \"long.wav\"\ntranscript = \"t\"\n",
        );
        let s = Scenario::load(&p).unwrap();
        let e = LoadedTurn::load(&s, &s.turns[0]).unwrap_err().to_string();
        assert!(
            e.contains("long.wav") && e.contains(&format!("{MAX_TURN_AUDIO_S} s")),
            "{e}"
        );
    }

    /// Syllable-like sound: a 150 Hz buzz under a 4 Hz envelope, `n` samples at `rate`.
    fn syllables(n: usize, rate: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let t = i as f32 / rate as f32;
                (2.0 * std::f32::consts::PI * 4.0 * t).sin().abs()
                    * (2.0 * std::f32::consts::PI * 150.0 * t).sin()
                    * 0.5
            })
            .collect()
    }

    #[test]
    fn annotations_are_values_the_loader_accepts() {
        let d = tempfile::tempdir().unwrap();
        // Rates and lengths where whole milliseconds do not land on whole samples, and speech
        // that runs to the very last sample (9/16 s ends on a syllable's peak).
        for (rate, silence, speech) in [
            (16_000u32, 3_000usize, 9_001usize),
            (44_100, 0, 24_807),
            (22_050, 1_000, 12_404),
            (8_000, 801, 4_501),
        ] {
            let mut x = vec![0.0f32; silence];
            x.extend(syllables(speech, rate));
            let wav = d.path().join(format!("s{rate}.wav"));
            voxlat_audio::wav::write(&wav, &x, rate).unwrap();
            let a = annotate(&wav).unwrap();
            assert!(a.end_ms > 0.0 && a.start_ms < a.end_ms, "{rate}: {a:?}");
            let toml = format!(
                "name = \"x\"\n[[turn]]\nid = \"a\"\nwav = \"s{rate}.wav\"\ntranscript = \"t\"\nspeech_end_ms = {}\n",
                a.end_ms
            );
            let p = write(d.path(), &format!("s{rate}.toml"), &toml);
            let s = Scenario::load(&p).unwrap();
            let t = LoadedTurn::load(&s, &s.turns[0]).unwrap_or_else(|e| panic!("{rate}: {e}"));
            assert!(t.speech_end_sample <= t.audio.samples.len());
        }
    }

    #[test]
    fn annotate_refuses_noise_and_names_the_wav_once() {
        let d = tempfile::tempdir().unwrap();
        let mut s = 1u32;
        let noise: Vec<f32> = (0..32_000)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
            })
            .collect();
        let wav = d.path().join("noise.wav");
        voxlat_audio::wav::write(&wav, &noise, 16_000).unwrap();
        let e = annotate(&wav).unwrap_err();
        assert!(
            matches!(
                e,
                AnnotateError::NoSpeech {
                    reason: voxlat_vad::annotate::NoSpeech::Steady { .. },
                    ..
                }
            ),
            "{e:?}"
        );
        // A one-sample file gave speech_end_ms = 0, which the loader refuses.
        let one = d.path().join("one.wav");
        voxlat_audio::wav::write(&one, &[0.5], 16_000).unwrap();
        assert!(matches!(
            annotate(&one),
            Err(AnnotateError::NoSpeech { .. })
        ));
        let junk = d.path().join("junk.wav");
        std::fs::write(&junk, b"RIFF nonsense").unwrap();
        let msg = annotate(&junk).unwrap_err().to_string();
        assert!(msg.starts_with("cannot read WAV: "), "{msg}");
        assert!(!msg.contains("scenario"), "{msg}");
        assert_eq!(msg.matches("junk.wav").count(), 1, "{msg}");
    }

    #[test]
    fn names_that_cannot_be_file_names_are_refused_at_load() {
        let d = tempfile::tempdir().unwrap();
        let scenario = |name: &str, id: &str| {
            // Literal strings, so that `\` reaches the loader as itself.
            format!("name = '{name}'\n[[turn]]\nid = \"ok\"\nwav = \"a.wav\"\ntranscript = \"t\"\n[[turn]]\nid = '{id}'\nwav = \"a.wav\"\ntranscript = \"t\"\n")
        };
        let long = "x".repeat(MAX_NAME_LEN + 1);
        for id in ["a/b", "..", ".", ".hidden", "a\\b", "", "a b", &long] {
            let p = write(d.path(), "s.toml", &scenario("x", id));
            let e = Scenario::load(&p).unwrap_err();
            assert!(
                matches!(&e, ScenarioError::Name { field, value, .. } if field == "turn[1].id" && value == id),
                "{id:?}: {e:?}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains("s.toml") && msg.contains("turn[1].id") && msg.contains("`_`"),
                "{msg}"
            );
        }
        for name in ["../up", "a/b", ".."] {
            let p = write(d.path(), "n.toml", &scenario(name, "fine"));
            let msg = Scenario::load(&p).unwrap_err().to_string();
            assert!(
                msg.contains("n.toml") && msg.contains("name = ") && msg.contains(name),
                "{msg}"
            );
        }
        let p = write(d.path(), "ok.toml", &scenario("v1.2_a-b", "Turn_3.x-y"));
        assert!(Scenario::load(&p).is_ok());
    }

    #[test]
    fn pause_truth_is_read_and_checked_at_load() {
        let d = tempfile::tempdir().unwrap();
        let scenario = |extra: &str| {
            format!("name = \"x\"\n[[turn]]\nid = \"a\"\nwav = \"a.wav\"\ntranscript = \"t\"\n{extra}\n")
        };
        let p = write(
            d.path(),
            "ok.toml",
            &scenario("speech_end_ms = 3000\npauses_ms = [[800, 1200], [2000, 2450]]"),
        );
        let s = Scenario::load(&p).unwrap();
        assert_eq!(
            s.turns[0].pauses_ms,
            vec![[800.0, 1200.0], [2000.0, 2450.0]]
        );
        for (extra, says) in [
            ("pauses_ms = [[800, 1200]]", "needs speech_end_ms"),
            (
                "speech_end_ms = 3000\npauses_ms = [[800, 850]]",
                "shorter than 100",
            ),
            (
                "speech_end_ms = 3000\npauses_ms = [[2800, 3100]]",
                "inside the turn",
            ),
            (
                "speech_end_ms = 3000\npauses_ms = [[800, 1200], [1000, 1500]]",
                "in order",
            ),
        ] {
            let p = write(d.path(), "bad.toml", &scenario(extra));
            let msg = Scenario::load(&p).unwrap_err().to_string();
            assert!(
                msg.contains("bad.toml") && msg.contains("`a`") && msg.contains(says),
                "{extra}: {msg}"
            );
        }
        // A turn without pause truth writes none back.
        let plain = Scenario::load(&write(d.path(), "p.toml", &scenario(""))).unwrap();
        assert!(!toml::to_string(&plain.turns[0])
            .unwrap()
            .contains("pauses_ms"));
    }

    #[test]
    fn the_bundled_scenarios_load_whole() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        assert!(files.len() >= 5, "{files:?}");
        let r = load_all(&files);
        assert!(r.skipped.is_empty(), "{:#?}", r.skipped);
        assert_eq!(r.scenarios.len(), files.len());
        for (s, turns) in &r.scenarios {
            assert_eq!(turns.len(), s.turns.len(), "{}", s.path.display());
        }
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
