//! A transcription that goes on from one the user spoke past. A retracted provisional end was
//! still a pause: the words decoded up to it stand. The next transcription of the same
//! utterance decodes only the audio after that pause and joins the two, so the decode left
//! for a long turn's last pause covers its last phrase, not the whole turn. A part that runs
//! away is decoded again as the whole turn ([`instead_of`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;
use voxlat_asr::engine::{Fallback, FallbackReport, Transcript};

/// What a finished decode leaves for one that goes on from it.
#[derive(Debug, Clone, PartialEq)]
struct Decoded {
    text: String,
    raw: String,
    compute: Duration,
    tokens: usize,
    fallback: Option<FallbackReport>,
}

/// The words of a transcription of an utterance's first `samples`, once its decode is done.
/// The ASR worker fills it; while anyone else holds a clone, the decode is wanted even if
/// nobody awaits its own result.
#[derive(Debug, Clone)]
pub struct Prefix {
    decoded: Arc<OnceLock<Decoded>>,
    samples: usize,
}

impl Prefix {
    /// For a transcription of `samples` samples, from the utterance's first.
    pub fn covering(samples: usize) -> Prefix {
        Prefix {
            decoded: Arc::new(OnceLock::new()),
            samples,
        }
    }

    /// Someone besides the job that fills it may still go on from it.
    pub(crate) fn wanted(&self) -> bool {
        Arc::strong_count(&self.decoded) > 1
    }

    pub(crate) fn fill(&self, t: &Transcript) {
        let _ = self.decoded.set(Decoded {
            text: t.text.clone(),
            raw: t.raw.clone(),
            compute: t.compute,
            tokens: t.tokens,
            fallback: t.fallback.clone(),
        });
    }

    /// Where the audio still to decode starts in `whole`, if the words before it are known
    /// and `whole` is longer. It checks only the length: that `whole` is the utterance this
    /// prefix began is the session's to keep (it drops its prefixes at every speech start).
    ///
    /// A decode that found no words leads nothing: its audio may still hold words too short
    /// for Whisper alone ("Set a" before a pause, then "timer for ten minutes" decoded alone
    /// as "Timer 410 minutes."), so the whole utterance is decoded again.
    pub(crate) fn resume_at(&self, whole: &[f32]) -> Option<usize> {
        let words = self.decoded.get().is_some_and(|d| !d.text.is_empty());
        (words && self.samples < whole.len()).then_some(self.samples)
    }

    /// `rest`, the decode of the audio after this prefix, as the transcript of the whole:
    /// the words joined, the compute of both (the prefix's ran while the user spoke on).
    pub(crate) fn join(&self, rest: Transcript, whole_samples: usize) -> Transcript {
        let Some(p) = self.decoded.get() else {
            return rest;
        };
        let audio =
            Duration::from_secs_f64(whole_samples as f64 / f64::from(voxlat_audio::PIPELINE_RATE));
        let compute = p.compute + rest.compute;
        Transcript {
            text: joined(&p.text, &rest.text),
            raw: joined(&p.raw, &rest.raw),
            // Rejected only if neither part had words (a cough after the pause keeps the rest).
            rejected: rest.rejected.filter(|_| p.text.is_empty()),
            compute,
            audio,
            real_time_factor: compute.as_secs_f64() / audio.as_secs_f64().max(1e-9),
            tokens: p.tokens + rest.tokens,
            // Whisper's belief about the rest alone says nothing of words the part before
            // it had.
            scores: rest.scores.filter(|_| p.text.is_empty()),
            // A part that ran away is counted, whichever it was.
            fallback: rest.fallback.or_else(|| p.fallback.clone()),
            ..rest
        }
    }
}

/// `whole`, the turn decoded from its first sample, in place of `part`, the decode of the
/// audio after a pause that ran away. A part starts mid-turn, often with a few hundred ms of
/// it (north-wind's last part, live, was under 130 ms), and Whisper with no context before it
/// looped to the token cap; decoding the same part in a wider window then cost 1.5 s. The
/// whole turn costs one decode of its length and brings the context. The report keeps the
/// part's failure, and the compute is both decodes'.
pub(crate) fn instead_of(part: Transcript, whole: Transcript) -> Transcript {
    let Some(failed) = part.fallback else {
        return whole;
    };
    let compute = part.compute + whole.compute;
    let again = whole.fallback.as_ref();
    Transcript {
        compute,
        real_time_factor: compute.as_secs_f64() / whole.audio.as_secs_f64().max(1e-9),
        fallback: Some(FallbackReport {
            reason: failed.reason,
            strategy: Fallback::WholeTurn,
            retries: 1 + again.map_or(0, |f| f.retries),
            recovered: again.is_none_or(|f| f.recovered),
            first_compute: part.compute,
        }),
        ..whole
    }
}

fn joined(a: &str, b: &str) -> String {
    match (a.trim(), b.trim()) {
        ("", b) => b.to_string(),
        (a, "") => a.to_string(),
        (a, b) => format!("{a} {b}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript(text: &str, ms: u64, rejected: Option<&str>) -> Transcript {
        Transcript {
            text: text.into(),
            raw: text.into(),
            rejected: rejected.map(String::from),
            levels: voxlat_asr::filter::levels(&[]),
            compute: Duration::from_millis(ms),
            audio: Duration::from_secs(1),
            real_time_factor: 0.0,
            tokens: text.split_whitespace().count(),
            scores: None,
            fallback: None,
            remote: None,
        }
    }

    #[test]
    fn the_words_before_the_pause_lead_the_words_after_it() {
        let p = Prefix::covering(16_000);
        assert_eq!(p.resume_at(&[0.0; 32_000]), None, "not decoded yet");
        p.fill(&transcript(" What's the weather", 300, None));
        assert_eq!(p.resume_at(&[0.0; 32_000]), Some(16_000));
        assert_eq!(p.resume_at(&[0.0; 16_000]), None, "nothing after it");
        let t = p.join(transcript(" in Paris?", 100, None), 32_000);
        assert_eq!(t.text, "What's the weather in Paris?");
        assert_eq!(t.compute, Duration::from_millis(400));
        assert_eq!(t.audio, Duration::from_secs(2));
        assert_eq!(t.tokens, 5);
        assert!(t.rejected.is_none());
    }

    #[test]
    fn a_decode_that_found_no_words_leads_nothing() {
        let p = Prefix::covering(16_000);
        p.fill(&transcript("", 300, Some("no words")));
        assert_eq!(p.resume_at(&[0.0; 32_000]), None);
    }

    #[test]
    fn a_rejected_rest_keeps_the_words_before_it_and_no_words_stay_rejected() {
        let p = Prefix::covering(100);
        p.fill(&transcript("Call me", 10, None));
        let t = p.join(transcript("", 5, Some("quiet")), 200);
        assert_eq!((t.text.as_str(), t.rejected), ("Call me", None));

        let empty = Prefix::covering(100);
        empty.fill(&transcript("", 10, Some("quiet")));
        let t = empty.join(transcript("", 5, Some("quiet")), 200);
        assert_eq!(
            (t.text.as_str(), t.rejected.as_deref()),
            ("", Some("quiet"))
        );
    }

    #[test]
    fn only_a_holder_besides_the_job_wants_it() {
        let job = Prefix::covering(1);
        assert!(!job.wanted());
        let session = job.clone();
        assert!(job.wanted());
        drop(session);
        assert!(!job.wanted());
    }
}
