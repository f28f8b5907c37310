//! The `cues` end-of-turn rule: how long to wait at a stop, from what was said so far (the
//! speculative transcript's tail), Smart Turn's vote and the speaker's own pauses. `eval-turns`
//! sweeps it over the corpus; a session runs it with `--turn-model cues` ([`CueRule`]).
//!
//! The field's systems wait on the words, not on a better audio classifier alone: Vapi waits
//! 0.1 s after terminal punctuation, 0.5 s after a number and 1.5 s without punctuation;
//! LiveKit adapts to the speaker's pauses. Here a base wait (the knob) is scaled by the tail
//! and by Smart Turn, and never falls below what this speaker's own pauses have needed so far.
//! Every constant below says which half of the turn corpus set it (`scenarios/turns/`).
//! The LLM's own P(end of message) was tried as a fourth vote and left out: on the tuning
//! half no setting of it beat the rule without it (`scripts/probe-llm-eot.py`,
//! `docs/benchmarks.md`).

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use voxlat_core::Nanos;
use voxlat_vad::StopHold;

/// What the transcript so far ends with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tail {
    /// A question mark: the user asked.
    Question,
    /// A full stop or exclamation mark after a word.
    Closed,
    /// No punctuation, or no words at all.
    Bare,
    /// A number: a phone number or PIN goes on in groups.
    Number,
    /// A comma or dash, or a word that cannot end a sentence: a conjunction, article,
    /// preposition, possessive, auxiliary or filler ("and", "to", "the", "um").
    Open,
}

/// Words after which an English sentence is not over.
const OPEN_WORDS: &[&str] = &[
    "and", "or", "but", "so", "because", "then", "if", "when", "while", "than", "that", "which",
    "who", "to", "the", "a", "an", "of", "for", "with", "in", "on", "at", "from", "by", "about",
    "into", "as", "my", "your", "his", "her", "their", "our", "its", "is", "are", "was", "were",
    "be", "will", "would", "can", "could", "should", "um", "uh", "er", "erm", "hmm", "like", "i",
    "we", "i'm", "it's", "there's", "let's",
];

const NUMBER_WORDS: &[&str] = &[
    "zero",
    "oh",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "sixty",
    "seventy",
    "eighty",
    "ninety",
    "hundred",
    "thousand",
    "double",
    "triple",
];

/// The tail of a transcript.
pub fn tail(text: &str) -> Tail {
    let t = text.trim();
    let Some(last_char) = t.chars().last() else {
        return Tail::Bare;
    };
    let last_word: String = t
        .split_whitespace()
        .last()
        .unwrap_or("")
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
        .to_lowercase();
    if last_char == '?' {
        return Tail::Question;
    }
    if last_word.chars().any(|c| c.is_ascii_digit()) || NUMBER_WORDS.contains(&last_word.as_str()) {
        return Tail::Number;
    }
    if matches!(last_char, ',' | '-' | ';' | ':' | '…') || t.ends_with("...") {
        return Tail::Open;
    }
    if OPEN_WORDS.contains(&last_word.as_str()) {
        return Tail::Open;
    }
    if matches!(last_char, '.' | '!') {
        Tail::Closed
    } else {
        Tail::Bare
    }
}

/// The base wait is scaled by the tail.
/// - Closed, bare and number: 1.0, set by the tuning half. A grid of 1.0–3.0 each found no
///   gain from telling them apart there: Whisper puts a full stop after almost any stretch
///   of speech, and on the tuning half a number ends a turn about as often as it pauses one.
/// - Question 0.5 and open 3.0: set a priori from Vapi's ratios, since the tuning half has
///   one stop of each and cannot set them.
pub fn tail_factor(t: Tail) -> f64 {
    match t {
        Tail::Question => 0.5,
        Tail::Closed | Tail::Bare | Tail::Number => 1.0,
        Tail::Open => 3.0,
    }
}

/// Smart Turn's vote: a turn it scores incomplete waits this much longer. 1.0 (no effect),
/// set by the tuning half, where factors of 1.25–2.0 at thresholds 0.3–0.7 all did worse:
/// Smart Turn scored most of the tuning half's true ends below 0.5 on this CPU family.
pub const SMART_TURN_UNSURE_FACTOR: f64 = 1.0;
/// Below this P(complete) Smart Turn votes "not done" (its own decision threshold, 0.5).
pub const SMART_TURN_THRESHOLD: f32 = 0.5;
/// The speaker's pauses count once this many were seen (tuning half).
pub const SPEAKER_MIN_PAUSES: usize = 3;
/// The wait never falls below this quantile of the speaker's pauses so far, plus
/// [`SPEAKER_MARGIN_MS`] (both set by the tuning half, from quantiles 0.75–1.0 and margins
/// 0–200 ms: the cue that paid most there).
pub const SPEAKER_QUANTILE: f64 = 0.9;
pub const SPEAKER_MARGIN_MS: f64 = 100.0;
/// The longest any stop waits, as Pipecat's Smart Turn fallback.
pub const MAX_WAIT_MS: f64 = 3000.0;

/// Which cues a rule listens to: all of them, or one left out (the ablation rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CueSet {
    pub tail: bool,
    pub smart_turn: bool,
    pub speaker: bool,
}

impl CueSet {
    pub const ALL: CueSet = CueSet {
        tail: true,
        smart_turn: true,
        speaker: true,
    };
}

/// What one stop offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StopCues {
    /// The speculative transcript of the utterance so far.
    pub text: String,
    pub tail: Tail,
    /// Smart Turn's P(complete).
    pub p_complete: Option<f32>,
}

/// The silence to wait at a stop, ms, for base wait `base_ms`, given the pauses this
/// speaker has made so far (`pauses_ms`).
pub fn wait_ms(base_ms: f64, cues: &StopCues, pauses_ms: &[f64], set: CueSet) -> f64 {
    let mut wait = base_ms;
    if set.tail {
        wait *= tail_factor(cues.tail);
    }
    let unsure = cues.p_complete.is_some_and(|p| p < SMART_TURN_THRESHOLD);
    if set.smart_turn && unsure {
        wait *= SMART_TURN_UNSURE_FACTOR;
    }
    // A question Smart Turn agrees is done needs no waiting out of the speaker's habits.
    let asked = set.tail && cues.tail == Tail::Question && !(set.smart_turn && unsure);
    if set.speaker && !asked && pauses_ms.len() >= SPEAKER_MIN_PAUSES {
        let mut sorted = pauses_ms.to_vec();
        sorted.sort_by(f64::total_cmp);
        let q = voxlat_core::stats::percentile_sorted(&sorted, SPEAKER_QUANTILE * 100.0);
        wait = wait.max(q + SPEAKER_MARGIN_MS);
    }
    wait.min(MAX_WAIT_MS)
}

/// Pauses shorter than this are not counted as the speaker's. `eval-turns` takes a stop only
/// after 200 ms of the VAD's own silence, which begins 50–300 ms after the refined end of
/// speech that a session's pause is timed from; so a session counts some shorter pauses than
/// `eval-turns` does, and its floor sits lower (docs/benchmarks.md, 2026-12-07).
pub const SPEAKER_PAUSE_MIN_MS: f64 = 200.0;
/// The speaker's most recent pauses kept (a long live session forgets the oldest).
pub const SPEAKER_PAUSES_KEPT: usize = 200;

/// The pauses a speaker has made so far, in ms, shared by the sessions that hear one speaker
/// (replay makes one per utterance).
#[derive(Clone, Debug, Default)]
pub struct SpeakerPauses(Arc<Mutex<VecDeque<f64>>>);

impl SpeakerPauses {
    /// The speaker went on after `pause_ms` of silence.
    pub fn heard(&self, pause_ms: f64) {
        if !(pause_ms.is_finite() && pause_ms >= SPEAKER_PAUSE_MIN_MS) {
            return;
        }
        let mut p = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() == SPEAKER_PAUSES_KEPT {
            p.pop_front();
        }
        p.push_back(pause_ms);
    }

    pub fn so_far(&self) -> Vec<f64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect()
    }
}

/// The `cues` rule as a session runs it: it sets each stop's wait on the endpointer's
/// [`StopHold`]. At the provisional end the words are not known yet, so the wait is the base
/// (or the speaker's floor); once the speculative transcription has them, the tail scales it.
/// A transcript that comes after the wait has passed changes nothing: the turn has ended.
#[derive(Clone, Debug)]
pub struct CueRule {
    /// The wait after a full stop, ms (the hangover's place).
    pub base_ms: f64,
    pub hold: StopHold,
    pub speaker: SpeakerPauses,
}

impl CueRule {
    /// A stop came at `provisional_at`: sets its wait before the words are known, and
    /// returns what sets it once they are (to run on the transcriber's thread).
    pub fn at_stop(&self, provisional_at: Nanos) -> impl FnOnce(&str) + Send + 'static {
        let pauses = self.speaker.so_far();
        let unknown = StopCues {
            text: String::new(),
            tail: Tail::Bare,
            p_complete: None,
        };
        let wait = |c: &StopCues, pauses: &[f64], base: f64| {
            wait_ms(base, c, pauses, CueSet::ALL).round() as u32
        };
        self.hold
            .set(provisional_at, wait(&unknown, &pauses, self.base_ms));
        let (hold, base) = (self.hold.clone(), self.base_ms);
        move |text: &str| {
            let said = StopCues {
                text: String::new(),
                tail: tail(text),
                p_complete: None,
            };
            hold.set(provisional_at, wait(&said, &pauses, base));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails() {
        assert_eq!(tail("What's the weather in Paris?"), Tail::Question);
        assert_eq!(tail("Set a timer for ten minutes."), Tail::Closed);
        assert_eq!(tail("My number is 555,"), Tail::Number);
        assert_eq!(tail("five five five."), Tail::Number);
        assert_eq!(tail("I want to go to the"), Tail::Open);
        assert_eq!(tail("and then, um."), Tail::Open);
        assert_eq!(tail("Book a table for two, and"), Tail::Open);
        assert_eq!(tail("Please enter your phone number,"), Tail::Open);
        assert_eq!(tail("hello there"), Tail::Bare);
        assert_eq!(tail("  "), Tail::Bare);
    }

    fn cues(t: Tail, p: f32) -> StopCues {
        StopCues {
            text: String::new(),
            tail: t,
            p_complete: Some(p),
        }
    }

    #[test]
    fn a_session_s_stop_waits_the_base_until_its_words_say_otherwise() {
        let rule = CueRule {
            base_ms: 500.0,
            hold: StopHold::default(),
            speaker: SpeakerPauses::default(),
        };
        let at = Nanos(1_000);
        let said = rule.at_stop(at);
        assert_eq!(rule.hold.get(at), Some(500), "before the words");
        said("Book a table for two, and");
        assert_eq!(rule.hold.get(at), Some(1500), "an open tail holds on");
        rule.at_stop(Nanos(2_000))("What's the weather in Paris?");
        assert_eq!(rule.hold.get(Nanos(2_000)), Some(250), "a question");
        // Gaps between words are not the speaker's pauses; pauses of 700 ms are.
        for ms in [60.0, 120.0, 700.0, 700.0, 700.0] {
            rule.speaker.heard(ms);
        }
        assert_eq!(rule.speaker.so_far().len(), 3);
        let _ = rule.at_stop(Nanos(3_000));
        assert_eq!(rule.hold.get(Nanos(3_000)), Some(800), "their floor");
        rule.at_stop(Nanos(4_000))("Is it raining?");
        assert_eq!(
            rule.hold.get(Nanos(4_000)),
            Some(250),
            "a question skips it"
        );
    }

    #[test]
    fn the_wait_follows_the_tail_and_the_speaker() {
        let all = CueSet::ALL;
        assert_eq!(wait_ms(400.0, &cues(Tail::Question, 0.9), &[], all), 200.0);
        assert_eq!(wait_ms(400.0, &cues(Tail::Closed, 0.9), &[], all), 400.0);
        assert_eq!(wait_ms(400.0, &cues(Tail::Open, 0.9), &[], all), 1200.0);
        // This speaker pauses up to 700 ms mid-turn: never commit sooner than 800.
        let pauses = [300.0, 500.0, 700.0, 400.0];
        assert_eq!(
            wait_ms(400.0, &cues(Tail::Closed, 0.9), &pauses, all),
            800.0
        );
        // ...unless they asked, and Smart Turn does not object.
        assert_eq!(
            wait_ms(400.0, &cues(Tail::Question, 0.9), &pauses, all),
            200.0
        );
        assert_eq!(
            wait_ms(400.0, &cues(Tail::Question, 0.1), &pauses, all),
            800.0
        );
        // Ablations leave a cue out.
        let no_tail = CueSet { tail: false, ..all };
        assert_eq!(wait_ms(400.0, &cues(Tail::Open, 0.9), &[], no_tail), 400.0);
        let no_speaker = CueSet {
            speaker: false,
            ..all
        };
        assert_eq!(
            wait_ms(400.0, &cues(Tail::Closed, 0.9), &pauses, no_speaker),
            400.0
        );
        assert_eq!(
            wait_ms(2000.0, &cues(Tail::Open, 0.1), &[], all),
            MAX_WAIT_MS
        );
    }
}
