//! What an utterance soon after a commit adds to the turn: words the user went on with, or
//! nothing (a cough, an "mm-hm", a noise Whisper wrote words for).
//!
//! Length alone cannot tell them apart. A last word after a pause ("… word word. Word.") is
//! often shorter than LiveKit's 0.5 s `min_interruption_duration`, and passing it over loses
//! it: the LLM answers without it. So a short utterance the source heard before it could
//! hear the reply is judged by what Whisper heard: it adds nothing when its words are only acknowledgements or
//! fillers, or when Whisper's own no-speech rule says it wrote them for a noise; any other
//! words join the turn.
//!
//! Acknowledgements and fillers add nothing at any length: "okay, yeah" over a reply lets it
//! play on, as an "mm-hm" does, and so does a "thank you" (LiveKit and Pipecat treat such
//! words alike, as a listener's, not a turn's).
//!
//! Once the source may have heard the reply, the 0.5 s rule stands for other words. With
//! no echo cancellation a microphone hears the reply too, and Whisper writes the reply's words
//! for a noise over it: 300 ms of white noise over the loopback's playing reply came back as
//! "I'm gonna..." (which Whisper's no-speech rule called speech), and in an earlier round as
//! "minutes". A replayed recording never hears the reply
//! ([`crate::SessionOptions::source_hears_output`]), so there a short word is judged by its
//! words whenever it comes.

use crate::workers::AsrResult;
use tokio::sync::oneshot;

/// Speech at least this long after a commit is the user going on, whatever its words:
/// LiveKit's default `min_interruption_duration` (0.5 s). Shorter speech goes on only with
/// words of its own, and only before the source may have heard the reply (see the module's
/// comment).
pub const MIN_GOING_ON_MS: f64 = 500.0;

/// What the deciding utterance adds to the turn: words, nothing (no transcript, or speech
/// too short to be more than a backchannel or a noise: its text, if any, is kept), or no one
/// knows (its transcription failed).
pub(super) enum Adds {
    Words,
    Nothing(Option<String>),
    Unknown,
}

/// What an utterance of `speech_ms` adds, given its transcription, and whether the source
/// may have heard the reply before it began.
pub(super) fn adds(
    r: &Result<AsrResult, oneshot::error::RecvError>,
    speech_ms: f64,
    reply_heard: bool,
) -> Adds {
    let Ok(AsrResult {
        transcript: Ok(t), ..
    }) = r
    else {
        return Adds::Unknown;
    };
    let text = t.text.trim();
    if text.is_empty() {
        return Adds::Nothing(None);
    }
    // A remote transcriber asked for `json` gives no scores: its short words are taken at
    // their length.
    if only_backchannel(text) {
        return Adds::Nothing(Some(text.to_string()));
    }
    let heard_speech = t.scores.is_some_and(|s| !s.no_speech());
    let own_words = !reply_heard && heard_speech;
    if speech_ms >= MIN_GOING_ON_MS || own_words {
        Adds::Words
    } else {
        Adds::Nothing(Some(text.to_string()))
    }
}

/// Acknowledgements and fillers: what a listener says while the other speaks, not a turn's
/// words. Phrases of two words come first, so "thank you" is one.
const BACKCHANNEL: &[&[&str]] = &[
    &["thank", "you"],
    &["all", "right"],
    &["i", "see"],
    &["got", "it"],
    &["mm"],
    &["mmm"],
    &["mhm"],
    &["hm"],
    &["hmm"],
    &["uh"],
    &["huh"],
    &["um"],
    &["er"],
    &["erm"],
    &["ah"],
    &["oh"],
    &["yeah"],
    &["yes"],
    &["yep"],
    &["yup"],
    &["ok"],
    &["okay"],
    &["alright"],
    &["right"],
    &["sure"],
    &["cool"],
    &["great"],
    &["nice"],
    &["wow"],
    &["thanks"],
];

/// Whether every word of `text` belongs to a backchannel.
fn only_backchannel(text: &str) -> bool {
    let words = voxlat_core::text::normalize_words(text);
    let mut rest = words.as_slice();
    while !rest.is_empty() {
        let Some(n) = BACKCHANNEL
            .iter()
            .find(|p| rest.len() >= p.len() && rest.iter().zip(p.iter()).all(|(w, p)| w == p))
            .map(|p| p.len())
        else {
            return false;
        };
        rest = &rest[n..];
    }
    !words.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use voxlat_asr::engine::{Scores, Transcript};
    use voxlat_core::Nanos;

    fn heard(
        text: &str,
        scores: Option<(f32, f32)>,
    ) -> Result<AsrResult, oneshot::error::RecvError> {
        Ok(AsrResult {
            transcript: Ok(Transcript {
                text: text.into(),
                scores: scores.map(|(no_speech_prob, avg_logprob)| Scores {
                    no_speech_prob,
                    avg_logprob,
                }),
                audio: Duration::from_millis(300),
                ..Transcript::no_new_words()
            }),
            started: Nanos(0),
            finished: Nanos(0),
        })
    }

    fn words(r: Adds) -> bool {
        matches!(r, Adds::Words)
    }

    /// The scores Whisper gave "Word." (the last word of `mfa-words`) on this machine, and
    /// scores its no-speech rule rejects.
    const SURE: Option<(f32, f32)> = Some((0.31, -0.43));
    const NOISE: Option<(f32, f32)> = Some((0.9, -1.5));

    #[test]
    fn a_short_word_whisper_heard_as_speech_is_the_user_going_on() {
        assert!(words(adds(&heard("Word.", SURE), 325.0, false)));
        assert!(words(adds(&heard("No, Paris.", SURE), 400.0, false)));
    }

    #[test]
    fn a_short_backchannel_or_filler_adds_nothing_and_keeps_its_text() {
        for said in [
            "Mm-hm.",
            "Uh-huh.",
            "Yeah, okay.",
            "Thank you.",
            "Um...",
            "All right!",
        ] {
            match adds(&heard(said, SURE), 300.0, false) {
                Adds::Nothing(Some(t)) => assert_eq!(t, said),
                _ => panic!("{said:?} went on"),
            }
        }
        // Only the whole phrase is one: "I see you" has words of its own.
        assert!(words(adds(&heard("I see you.", SURE), 300.0, false)));
    }

    #[test]
    fn short_words_written_for_a_noise_or_with_no_scores_add_nothing() {
        assert!(!words(adds(&heard("minutes", NOISE), 300.0, false)));
        assert!(!words(adds(&heard("minutes", None), 300.0, false)));
    }

    /// Over an audible reply, Whisper may have written the reply's own words, heard through
    /// the microphone: only the length counts there.
    #[test]
    fn short_words_over_an_audible_reply_add_nothing() {
        assert!(!words(adds(&heard("I'm gonna...", SURE), 300.0, true)));
        assert!(words(adds(&heard("I'm gonna...", SURE), 300.0, false)));
    }

    #[test]
    fn long_speech_with_words_goes_on_unless_they_are_all_acknowledgements() {
        assert!(!words(adds(&heard("Mm-hm, yeah.", SURE), 600.0, true)));
        assert!(!words(adds(&heard("Okay, yeah.", SURE), 900.0, false)));
        assert!(words(adds(
            &heard("Okay, and tomorrow?", SURE),
            900.0,
            true
        )));
        assert!(words(adds(&heard("minutes", None), 600.0, true)));
        assert!(matches!(
            adds(&heard(" ", SURE), 900.0, false),
            Adds::Nothing(None)
        ));
    }
}
