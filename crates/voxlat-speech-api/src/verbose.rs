//! Whisper's confidence in a transcript, carried by `response_format=verbose_json`, both ways.
//!
//! A short utterance after an early commit joins the turn only when Whisper's own no-speech
//! rule says it heard speech. With `json`, a remote transcriber gives text alone, so its short
//! words could not be told from words written for a cough, and were passed over. OpenAI's
//! `whisper-1`, Groq and `voxlat serve-audio` put the scores in `verbose_json`'s `segments`;
//! OpenAI's gpt-4o transcription models refuse that format (HTTP 400, "Use 'json' or 'text'
//! instead"), and the client then asks for `json`. A server whose segments lack the scores
//! gives none, as `json` does; so does one that fills them with zeros, as some
//! OpenAI-compatible servers' response models default them (a real decode's mean
//! log-probability is never exactly 0: that would be every token at probability 1).

use serde::de::IgnoredAny;
use serde::Deserialize;
use voxlat_core::whisper_scores::Scores;

/// The fields of one `verbose_json` segment that the scores come from; the rest is ignored.
#[derive(Deserialize)]
struct Segment {
    no_speech_prob: f32,
    avg_logprob: f32,
    #[serde(default)]
    tokens: Option<Vec<IgnoredAny>>,
}

/// The scores of a whole transcript from its `segments`: the first segment's no-speech
/// probability (as whisper.cpp and OpenAI's `transcribe()` take it) and the mean
/// log-probability, token-weighted when every segment lists its tokens, else the segments'
/// mean. `None` when there are no segments, any segment lacks the scores, or every
/// segment's are zeros (a server that writes `verbose_json` without Whisper's scores).
pub fn scores_of(segments: &[serde_json::Value]) -> Option<Scores> {
    let parsed: Vec<Segment> = segments
        .iter()
        .map(|s| Segment::deserialize(s).ok())
        .collect::<Option<_>>()?;
    let placeholders = parsed
        .iter()
        .all(|s| s.no_speech_prob == 0.0 && s.avg_logprob == 0.0);
    if placeholders {
        return None;
    }
    let first = parsed.first()?;
    let counts: Option<Vec<usize>> = parsed
        .iter()
        .map(|s| s.tokens.as_ref().map(Vec::len).filter(|&n| n > 0))
        .collect();
    let avg_logprob = match counts {
        Some(counts) => {
            let total: usize = counts.iter().sum();
            let sum: f64 = parsed
                .iter()
                .zip(&counts)
                .map(|(s, &n)| f64::from(s.avg_logprob) * n as f64)
                .sum();
            sum / total as f64
        }
        None => parsed.iter().map(|s| f64::from(s.avg_logprob)).sum::<f64>() / parsed.len() as f64,
    };
    // A number too large for an f32 arrives as infinity.
    Some(Scores {
        no_speech_prob: first.no_speech_prob,
        avg_logprob: avg_logprob as f32,
    })
    .filter(|s| s.no_speech_prob.is_finite() && s.avg_logprob.is_finite())
}

/// The one segment `voxlat serve-audio` writes for a transcript of `duration` seconds: its
/// engine keeps no segment times, so the segment spans the whole upload.
pub fn segment(text: &str, duration: f64, scores: Scores) -> serde_json::Value {
    serde_json::json!({
        "id": 0,
        "seek": 0,
        "start": 0.0,
        "end": duration,
        "text": text,
        "tokens": [],
        "temperature": 0.0,
        "avg_logprob": scores.avg_logprob,
        "no_speech_prob": scores.no_speech_prob,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_segment_gives_no_speech_and_tokens_weight_the_log_probability() {
        let s = scores_of(&[
            json!({"text": "Hi", "tokens": [1, 2, 3], "avg_logprob": -0.2, "no_speech_prob": 0.1}),
            json!({"text": "there", "tokens": [4], "avg_logprob": -1.0, "no_speech_prob": 0.7}),
        ])
        .unwrap();
        assert_eq!(s.no_speech_prob, 0.1);
        // (3 × −0.2 + 1 × −1.0) / 4
        assert!((s.avg_logprob - -0.4).abs() < 1e-6, "{s:?}");
    }

    #[test]
    fn segments_without_token_lists_are_averaged_alike() {
        let s = scores_of(&[
            json!({"avg_logprob": -0.2, "no_speech_prob": 0.1, "tokens": []}),
            json!({"avg_logprob": -1.0, "no_speech_prob": 0.7}),
        ])
        .unwrap();
        assert!((s.avg_logprob - -0.6).abs() < 1e-6, "{s:?}");
    }

    #[test]
    fn no_segments_or_a_segment_without_scores_gives_none() {
        assert_eq!(scores_of(&[]), None);
        assert_eq!(
            scores_of(&[
                json!({"avg_logprob": -0.2, "no_speech_prob": 0.1}),
                json!({"text": "no scores"}),
            ]),
            None
        );
        assert_eq!(
            scores_of(&[json!({"avg_logprob": "high", "no_speech_prob": 0.1})]),
            None
        );
        // Defaults that a server fills in for scores it does not have.
        assert_eq!(
            scores_of(&[json!({"avg_logprob": 0.0, "no_speech_prob": 0.0, "tokens": [1, 2]})]),
            None
        );
    }

    #[test]
    fn the_servers_segment_reads_back_as_its_scores() {
        let sent = Scores {
            no_speech_prob: 0.31,
            avg_logprob: -0.43,
        };
        assert_eq!(scores_of(&[segment("Word.", 0.4, sent)]), Some(sent));
    }
}
