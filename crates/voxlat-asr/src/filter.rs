//! Whisper hallucinates on silence and near-silence: "Thank you.", "you", "Thanks for
//! watching!", "[BLANK_AUDIO]". Such output must not become a turn. Non-speech annotations
//! are always removed; a known hallucination is rejected only when the audio is quiet, so a
//! user who really says "thank you" is still heard.

/// Below this peak level the audio cannot hold intelligible speech, whatever Whisper says.
pub const SILENT_PEAK_DBFS: f32 = -45.0;
/// Known hallucinations are rejected when the audio's RMS is below this.
pub const QUIET_RMS_DBFS: f32 = -35.0;

const KNOWN: &[&str] = &[
    "you",
    "thank you",
    "thank you very much",
    "thanks",
    "thanks for watching",
    "thank you for watching",
    "thank you so much for watching",
    "please subscribe",
    "bye",
    "bye bye",
    "okay",
    "so",
    "the end",
    "oh",
    "uh",
    "um",
    "hmm",
];

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Levels {
    pub peak_dbfs: f32,
    pub rms_dbfs: f32,
}

pub fn levels(samples: &[f32]) -> Levels {
    let db = |x: f32| 20.0 * x.max(1e-10).log10();
    let peak = samples.iter().fold(0f32, |m, v| m.max(v.abs()));
    let rms = (samples.iter().map(|v| v * v).sum::<f32>() / samples.len().max(1) as f32).sqrt();
    Levels {
        peak_dbfs: db(peak),
        rms_dbfs: db(rms),
    }
}

/// Removes `[BLANK_AUDIO]`, `(music)`, `*sighs*` and the like. Only a closed bracket of words
/// is an annotation: an unclosed `(`, `[` or `*`, a bracket holding a digit ("(555) 123 4567")
/// and a spaced asterisk ("5 * 3") are what the user said, and stay.
pub fn strip_annotations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open_at) = rest.find(['[', '(', '*']) {
        let open = rest[open_at..].chars().next().unwrap_or('(');
        let close = match open {
            '[' => ']',
            '(' => ')',
            _ => '*',
        };
        out.push_str(&rest[..open_at]);
        let after = &rest[open_at + open.len_utf8()..];
        match after.find(close).map(|end| (&after[..end], end)) {
            Some((inner, end)) if is_annotation(open, inner) => {
                rest = &after[end + close.len_utf8()..];
            }
            _ => {
                out.push(open);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether the text between an opening and a closing bracket reads as a sound description.
fn is_annotation(open: char, inner: &str) -> bool {
    let words = !inner.trim().is_empty() && !inner.chars().any(|c| c.is_ascii_digit());
    // "*sighs*" hugs its word; "5 * 3 * 2" has spaces inside its asterisks.
    let hugged = open != '*' || inner.trim() == inner;
    words && hugged
}

fn normalized(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace() || *c == '\'')
        .flat_map(char::to_lowercase)
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why Whisper's whole output was rejected; each quotes what Whisper said.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Rejection {
    #[error("no words (Whisper said {text:?})")]
    NoWords { text: String },
    #[error("audio too quiet for speech (peak {peak_dbfs:.0} dBFS): {text:?} is a hallucination")]
    TooQuiet { text: String, peak_dbfs: f32 },
    #[error("{text:?} on quiet audio (RMS {rms_dbfs:.0} dBFS) is a known Whisper hallucination")]
    Known { text: String, rms_dbfs: f32 },
}

/// The text to keep (annotations removed), or why the whole output is rejected.
pub fn filter(text: &str, levels: Levels) -> Result<String, Rejection> {
    let kept = strip_annotations(text);
    let norm = normalized(&kept);
    if norm.is_empty() {
        return Err(Rejection::NoWords { text: text.into() });
    }
    if levels.peak_dbfs < SILENT_PEAK_DBFS {
        return Err(Rejection::TooQuiet {
            text: text.into(),
            peak_dbfs: levels.peak_dbfs,
        });
    }
    if KNOWN.contains(&norm.as_str()) && levels.rms_dbfs < QUIET_RMS_DBFS {
        return Err(Rejection::Known {
            text: text.into(),
            rms_dbfs: levels.rms_dbfs,
        });
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOUD: Levels = Levels {
        peak_dbfs: -6.0,
        rms_dbfs: -22.0,
    };
    const QUIET: Levels = Levels {
        peak_dbfs: -30.0,
        rms_dbfs: -48.0,
    };
    const SILENT: Levels = Levels {
        peak_dbfs: -70.0,
        rms_dbfs: -90.0,
    };

    #[test]
    fn annotations_are_removed() {
        assert_eq!(strip_annotations("[BLANK_AUDIO]"), "");
        assert_eq!(
            strip_annotations("Hello (upbeat music) world *sighs*"),
            "Hello world"
        );
        assert!(filter("[BLANK_AUDIO]", LOUD).is_err());
        assert_eq!(
            filter(" Set a timer. [Music]", LOUD).unwrap(),
            "Set a timer."
        );
    }

    #[test]
    fn what_the_user_said_is_never_taken_for_an_annotation() {
        assert_eq!(strip_annotations("What is 5 * 3"), "What is 5 * 3");
        assert_eq!(
            strip_annotations("What is 5 * 3 * 2?"),
            "What is 5 * 3 * 2?"
        );
        assert_eq!(strip_annotations("Call me (at home"), "Call me (at home");
        assert_eq!(strip_annotations("Dial [nine then"), "Dial [nine then");
        assert_eq!(
            strip_annotations("Call (555) 123 4567."),
            "Call (555) 123 4567."
        );
        assert_eq!(strip_annotations("What is 5 * 3 *laughs*"), "What is 5 * 3");
        assert_eq!(filter("What is 5 * 3", LOUD).unwrap(), "What is 5 * 3");
    }

    #[test]
    fn known_phrases_pass_when_loud_and_fail_when_quiet() {
        assert_eq!(filter(" Thank you.", LOUD).unwrap(), "Thank you.");
        assert!(filter(" Thank you.", QUIET)
            .unwrap_err()
            .to_string()
            .contains("hallucination"));
        assert!(filter("Thanks for watching!", QUIET).is_err());
        assert_eq!(
            filter("Turn the lights off.", QUIET).unwrap(),
            "Turn the lights off."
        );
    }

    #[test]
    fn nothing_passes_on_silence() {
        assert!(filter("Turn the lights off.", SILENT).is_err());
    }

    #[test]
    fn levels_of_known_signals() {
        let l = levels(&[0.5, -0.5, 0.5, -0.5]);
        assert!((l.peak_dbfs + 6.02).abs() < 0.01 && (l.rms_dbfs + 6.02).abs() < 0.01);
        assert!(levels(&[0.0; 10]).peak_dbfs < -150.0);
    }
}
