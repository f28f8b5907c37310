//! A transcription that goes on from one the user spoke past. A retracted provisional end was
//! still a pause: the words decoded up to it stand. The next transcription of the same
//! utterance decodes only the audio after that pause and joins the two, so the decode left
//! for a long turn's last pause covers its last phrase, not the whole turn. A part too short
//! to decode alone goes with the part before it ([`MIN_PART_SAMPLES`]); a part that runs away
//! is decoded again as the whole turn ([`instead_of`]).

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
    /// The prefix this one's own transcription went on from, for audio after this one too
    /// short to decode alone.
    before: Option<Box<Prefix>>,
}

/// The least audio after a pause that is decoded alone: 300 ms at the pipeline's rate. Less is
/// at most a short word or the end of one. A final release 30 ms after a provisional end
/// ("again", then its "n") retracts it, and the part left is 100 ms of that release: Whisper,
/// with no words to go by, ran away on it in 5 of 6 runs. "six" split at its own closure left
/// "ks" to come back as nothing; other short ends came back as other words ("hash. g" for
/// "hash key"). What the shorter part holds is decoded with the part before it instead.
const MIN_PART_SAMPLES: usize = voxlat_audio::PIPELINE_RATE as usize * 3 / 10;

impl Prefix {
    /// For a transcription of `samples` samples, from the utterance's first.
    pub fn covering(samples: usize) -> Prefix {
        Prefix {
            decoded: Arc::new(OnceLock::new()),
            samples,
            before: None,
        }
    }

    /// As `covering`, for a transcription that goes on from `before`.
    pub fn covering_after(samples: usize, before: Option<Prefix>) -> Prefix {
        Prefix {
            before: before.map(Box::new),
            ..Prefix::covering(samples)
        }
    }

    /// The compute of the decodes behind these words, once decoded.
    pub(crate) fn spent(&self) -> Duration {
        self.decoded.get().map(|d| d.compute).unwrap_or_default()
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

    /// Where `whole`'s transcription goes on from: after this prefix's words, or, if the
    /// audio after it is too short to decode alone, after the words of the one it went on
    /// from (and so on). `None`: decode the whole utterance. It checks only lengths: that
    /// `whole` is the utterance this prefix began is the session's to keep (it drops its
    /// prefixes at every speech start).
    ///
    /// A decode that found no words leads nothing: its audio may still hold words too short
    /// for Whisper alone ("Set a" before a pause, then "timer for ten minutes" decoded alone
    /// as "Timer 410 minutes."), so the whole utterance is decoded again.
    pub(crate) fn lead_for(&self, whole: &[f32]) -> Option<Lead<'_>> {
        let spent = self.decoded.get()?;
        let mut at = self;
        loop {
            let words = at.decoded.get().filter(|d| !d.text.is_empty())?;
            if at.samples >= whole.len() {
                return None;
            }
            if whole.len() - at.samples >= MIN_PART_SAMPLES {
                return Some(Lead {
                    words,
                    samples: at.samples,
                    spent,
                });
            }
            at = at.before.as_deref()?;
        }
    }
}

/// The words a transcription goes on from, and what was spent on getting there.
#[derive(Debug)]
pub(crate) struct Lead<'a> {
    words: &'a Decoded,
    samples: usize,
    /// The prefix it was asked to go on from: the compute of every decode up to it, the
    /// words of those a short part skips included, and any runaway among them.
    spent: &'a Decoded,
}

impl Lead<'_> {
    /// The first sample of the audio still to decode.
    pub(crate) fn from(&self) -> usize {
        self.samples
    }

    /// `rest`, the decode of the audio after the lead, as the transcript of the whole: the
    /// words joined, the compute of all (the prefix's ran while the user spoke on).
    pub(crate) fn join(&self, rest: Transcript, whole_samples: usize) -> Transcript {
        let p = self.words;
        let audio =
            Duration::from_secs_f64(whole_samples as f64 / f64::from(voxlat_audio::PIPELINE_RATE));
        let compute = self.spent.compute + rest.compute;
        Transcript {
            text: joined(&p.text, &rest.text),
            raw: joined(&p.raw, &rest.raw),
            // The lead has words (a cough after the pause keeps them).
            rejected: None,
            compute,
            audio,
            real_time_factor: compute.as_secs_f64() / audio.as_secs_f64().max(1e-9),
            tokens: p.tokens + rest.tokens,
            // Whisper's belief about the rest alone says nothing of the lead's words.
            scores: None,
            // A part that ran away is counted, whichever it was.
            fallback: rest.fallback.or_else(|| self.spent.fallback.clone()),
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

/// `t`, decoded from the utterance's first sample, with the compute of `before`: decodes of
/// its start whose words it did not go on from (they had none, or a part after them ran
/// away). It was spent on this transcript and is nobody's waste.
pub(crate) fn counting(t: Transcript, before: Duration) -> Transcript {
    let compute = t.compute + before;
    Transcript {
        compute,
        real_time_factor: compute.as_secs_f64() / t.audio.as_secs_f64().max(1e-9),
        // Still only the retry's cost past the first decodes.
        fallback: t.fallback.map(|f| FallbackReport {
            first_compute: f.first_compute + before,
            ..f
        }),
        ..t
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

    /// `whole` samples of audio.
    fn audio(whole: usize) -> Vec<f32> {
        vec![0.0; whole]
    }

    #[test]
    fn the_words_before_the_pause_lead_the_words_after_it() {
        let p = Prefix::covering(16_000);
        assert!(p.lead_for(&audio(32_000)).is_none(), "not decoded yet");
        p.fill(&transcript(" What's the weather", 300, None));
        let whole = audio(32_000);
        let lead = p.lead_for(&whole).expect("the words lead");
        assert_eq!(lead.from(), 16_000);
        assert!(p.lead_for(&audio(16_000)).is_none(), "nothing after it");
        let t = lead.join(transcript(" in Paris?", 100, None), 32_000);
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
        assert!(p.lead_for(&audio(32_000)).is_none());
        // Its compute still counts with the whole utterance's decode.
        let t = counting(transcript("Call me", 250, None), p.spent());
        assert_eq!(t.compute, Duration::from_millis(550));
    }

    #[test]
    fn audio_too_short_to_decode_alone_goes_with_the_part_before_it() {
        let first = Prefix::covering(16_000);
        first.fill(&transcript("Please", 200, None));
        let second = Prefix::covering_after(32_000, Some(first.clone()));
        // Cumulative, as a join leaves it: "Please"'s 200 ms and "try again."'s 250.
        second.fill(&transcript("Please try again.", 450, None));
        let from = |whole: usize| second.lead_for(&audio(whole)).map(|l| l.from());
        assert_eq!(from(32_000 + MIN_PART_SAMPLES), Some(32_000));

        // A 100 ms release after "again": decoded with "try again.", after "Please".
        let whole = audio(32_000 + 1_600);
        let lead = second.lead_for(&whole).expect("a lead");
        assert_eq!(lead.from(), 16_000);
        let t = lead.join(transcript("try again.", 260, None), whole.len());
        assert_eq!(t.text, "Please try again.");
        // The skipped decode of "try again." was spent too.
        assert_eq!(t.compute, Duration::from_millis(450 + 260));

        // With no part before it, the whole utterance.
        assert!(first.lead_for(&audio(16_100)).is_none());
    }

    #[test]
    fn a_rejected_rest_keeps_the_words_before_it() {
        let p = Prefix::covering(16_000);
        p.fill(&transcript("Call me", 10, None));
        let whole = audio(32_000);
        let t = p
            .lead_for(&whole)
            .expect("a lead")
            .join(transcript("", 5, Some("quiet")), whole.len());
        assert_eq!((t.text.as_str(), t.rejected), ("Call me", None));
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
