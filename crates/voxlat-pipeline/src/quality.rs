//! Is the reply an answer? Simple, documented checks on the text a turn spoke, with no model
//! to judge it, so that a model or prompt change can be decided by numbers beside latency.
//!
//! | check | passes when | cannot see |
//! | --- | --- | --- |
//! | `not_echo` | the reply adds at least one word of its own to the transcript's and does not open by repeating the whole transcript (3+ words) | a paraphrase of the question |
//! | `clean_end` | the reply ends at a sentence end (`. ! ? …`, then closing quotes), not an abbreviation | whether the sentence is finished in meaning |
//! | `no_foreign` | no word has a letter of a script the conversation (transcript and system prompt) does not use; English counts Latin-1 loanword letters (`é`) as its own, not Polish or Turkish ones (`ł`, `ş`) | a foreign word spelled in plain ASCII ("prochains", "sorular") or a misplaced English one ("bloodstream"); at the end of a reply those fail `clean_end` instead |
//! | `length_ok` | [`Bounds`]: enough words to be an answer, few enough to be a voice reply, no runaway "word" (a 48-digit string) | whether the length suits the question |
//! | `keywords_ok` | every keyword the scenario lists appears (case-insensitive); absent when it lists none | synonyms |
//!
//! The checks run twice per reply: on what was spoken, after the clean-end chunker's tail
//! filter (`voxlat_tts::tail`) withheld a trailing fragment or stray token, and on the text
//! before it ([`before_filter`]: the spoken text with the withheld tail put back). The filter
//! withholds exactly what `clean_end` and `no_foreign` would fail, so the spoken figure says
//! what the user heard and the unfiltered one how often the model itself wrote a clean reply.

use serde::{Deserialize, Serialize};
use voxlat_core::script;
use voxlat_core::text::normalize_words;

/// Length limits of a voice reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub min_words: usize,
    /// About 15 s of speech: more is a lecture, not a voice reply.
    pub max_words: usize,
    /// Longer "words" are runaway output (digit strings, repeated letters), not language.
    pub max_word_chars: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            min_words: 2,
            max_words: 45,
            max_word_chars: 24,
        }
    }
}

/// The checks' verdicts on one reply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyQuality {
    pub not_echo: bool,
    pub clean_end: bool,
    /// Words with letters in a script the conversation does not use (empty: the check passes).
    pub foreign_tokens: Vec<String>,
    pub length_ok: bool,
    /// `None` when the scenario lists no keywords.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keywords_ok: Option<bool>,
}

impl ReplyQuality {
    pub fn no_foreign(&self) -> bool {
        self.foreign_tokens.is_empty()
    }

    /// The three checks the acceptance rests on: echo, trailing fragment, foreign token.
    pub fn core_pass(&self) -> bool {
        self.not_echo && self.clean_end && self.no_foreign()
    }

    /// Names of the failed checks, for a report column ("" when all pass).
    pub fn failures(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if !self.not_echo {
            out.push("echo");
        }
        if !self.clean_end {
            out.push("fragment");
        }
        if !self.no_foreign() {
            out.push("foreign");
        }
        if !self.length_ok {
            out.push("length");
        }
        if self.keywords_ok == Some(false) {
            out.push("keywords");
        }
        out
    }
}

/// Checks `reply` (what was spoken) against the turn's `transcript`. `context` is the rest of
/// the conversation's own text (the system prompt), whose scripts also count as its language.
pub fn check(
    reply: &str,
    transcript: &str,
    context: &str,
    keywords: &[String],
    bounds: &Bounds,
) -> ReplyQuality {
    let lower = reply.to_lowercase();
    ReplyQuality {
        not_echo: !is_echo(reply, transcript),
        clean_end: voxlat_tts::tail::ends_sentence(reply),
        foreign_tokens: foreign_tokens(reply, &format!("{transcript} {context}")),
        length_ok: length_ok(reply, bounds),
        keywords_ok: (!keywords.is_empty())
            .then(|| keywords.iter().all(|k| lower.contains(&k.to_lowercase()))),
    }
}

/// The reply as the LLM wrote it, before the tail filter: the spoken text with the withheld
/// tail (`dropped`) put back at its end. It goes through the same chunker otherwise (markup
/// stripped, chunks joined by spaces), so the two texts differ by the filter alone.
pub fn before_filter(spoken: &str, dropped: Option<&str>) -> String {
    match dropped.map(str::trim).filter(|d| !d.is_empty()) {
        Some(d) if spoken.trim().is_empty() => d.to_string(),
        Some(d) => format!("{} {d}", spoken.trim_end()),
        None => spoken.to_string(),
    }
}

/// The reply only repeats the transcript: no word of its own, or it opens with the whole
/// transcript (the base model's "Set a timer for 10 minutes. …"). Number words and digits
/// compare equal.
pub fn is_echo(reply: &str, transcript: &str) -> bool {
    let r = normalize_words(reply);
    let t = normalize_words(transcript);
    if r.is_empty() || t.is_empty() {
        return false;
    }
    let adds_nothing = r.iter().all(|w| t.contains(w));
    let opens_with_it = t.len() >= 3 && r.starts_with(&t);
    adds_nothing || opens_with_it
}

/// Words of `reply` with a letter in a script that `conversation` does not use. With no
/// letters in the conversation at all, Latin is assumed (the bundled scenarios are English).
pub fn foreign_tokens(reply: &str, conversation: &str) -> Vec<String> {
    let mut allowed = script::scripts_in(conversation);
    if allowed.is_empty() {
        allowed.insert(script::Script::Latin);
    }
    reply
        .split_whitespace()
        .filter(|w| !script::foreign_letters(w, &allowed).is_empty())
        .map(str::to_string)
        .collect()
}

fn length_ok(reply: &str, b: &Bounds) -> bool {
    let words: Vec<&str> = reply.split_whitespace().collect();
    (b.min_words..=b.max_words).contains(&words.len())
        && words.iter().all(|w| w.chars().count() <= b.max_word_chars)
}

/// Per-check pass counts over the replies that were spoken (outcome ok, not warm-up).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QualityCounts {
    pub replies: usize,
    pub not_echo: usize,
    pub clean_end: usize,
    pub no_foreign: usize,
    pub length_ok: usize,
    /// Replies whose scenario listed keywords, and how many had them all.
    pub keywords_checked: usize,
    pub keywords_ok: usize,
    /// Replies passing echo, fragment and foreign-token checks together.
    pub core_pass: usize,
    /// Replies whose trailing fragment or stray token was withheld from TTS.
    pub tails_dropped: usize,
    /// The same checks on the replies as the LLM wrote them, before the tail filter
    /// ([`before_filter`]), over the replies whose records carry that verdict (none in results
    /// from before it was recorded). Its `tails_dropped` is 0: nothing is withheld there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_filter: Option<Box<QualityCounts>>,
}

impl QualityCounts {
    pub fn from_turns<'a>(turns: impl IntoIterator<Item = &'a crate::TurnRecord>) -> Self {
        let mut c = QualityCounts::default();
        let mut before = QualityCounts::default();
        for t in turns {
            let Some(q) = &t.quality else { continue };
            c.add(q);
            c.tails_dropped += usize::from(t.dropped_tail.is_some());
            if let Some(b) = &t.quality_before_filter {
                before.add(b);
            }
        }
        c.before_filter = (before.replies > 0).then(|| Box::new(before));
        c
    }

    fn add(&mut self, q: &ReplyQuality) {
        self.replies += 1;
        self.not_echo += usize::from(q.not_echo);
        self.clean_end += usize::from(q.clean_end);
        self.no_foreign += usize::from(q.no_foreign());
        self.length_ok += usize::from(q.length_ok);
        self.core_pass += usize::from(q.core_pass());
        if let Some(ok) = q.keywords_ok {
            self.keywords_checked += 1;
            self.keywords_ok += usize::from(ok);
        }
    }

    /// `part` of the replies as a percentage ("-" with no replies).
    pub fn pct(part: usize, of: usize) -> String {
        if of == 0 {
            "-".into()
        } else {
            format!("{:.0}%", part as f64 * 100.0 / of as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(reply: &str, transcript: &str) -> ReplyQuality {
        check(reply, transcript, "", &[], &Bounds::default())
    }

    #[test]
    fn echoes_of_the_question_fail_and_answers_pass() {
        let t = "Set a timer for ten minutes.";
        assert!(!q("Set a timer for 10 minutes.", t).not_echo);
        assert!(!q("set a timer", t).not_echo);
        assert!(!q("Set a timer for ten minutes. It is done.", t).not_echo);
        assert!(q("Okay, your timer is running.", t).not_echo);
        assert!(q("I set a timer for ten minutes.", t).not_echo);
        assert!(
            q(
                "Paris is sunny today.",
                "What's the weather like in Paris today?"
            )
            .not_echo
        );
    }

    #[test]
    fn a_trailing_fragment_or_stray_token_fails_the_clean_end() {
        let t = "What's the weather like in Paris today?";
        assert!(q("It is hot in Paris.", t).clean_end);
        assert!(q("It is \"hot.\"", t).clean_end);
        assert!(!q("It is hot. prochains", t).clean_end);
        assert!(!q("It is hot in", t).clean_end);
        assert!(!q("Ask Dr.", t).clean_end);
    }

    #[test]
    fn tokens_in_another_script_are_listed() {
        let t = "What is my number?";
        assert_eq!(q("Your number is 42.łę", t).foreign_tokens, vec!["42.łę"]);
        assert_eq!(q("It is очень hot.", t).foreign_tokens, vec!["очень"]);
        assert!(q("Meet at the café in Zürich.", t)
            .foreign_tokens
            .is_empty());
        // Plain-ASCII foreign words are out of reach of a script check (documented).
        assert!(q("It is hot sorular.", t).foreign_tokens.is_empty());
        // A Polish conversation may use Polish letters.
        assert!(check(
            "Jest ósma, łóżko.",
            "Która godzina? Łódź",
            "",
            &[],
            &Bounds::default()
        )
        .foreign_tokens
        .is_empty());
    }

    #[test]
    fn length_bounds_catch_empty_long_and_runaway_replies() {
        let t = "How far is the moon?";
        assert!(!q("Far.", t).length_ok);
        assert!(q("About 384,000 kilometres away.", t).length_ok);
        assert!(!q(&"word ".repeat(46), t).length_ok);
        assert!(!q(&format!("It is {}.", "1".repeat(48)), t).length_ok);
    }

    #[test]
    fn keywords_are_checked_only_when_listed() {
        let b = Bounds::default();
        let kw = vec!["Paris".to_string(), "sunny".to_string()];
        assert_eq!(
            check("It is sunny in paris.", "x", "", &kw, &b).keywords_ok,
            Some(true)
        );
        assert_eq!(
            check("It is sunny.", "x", "", &kw, &b).keywords_ok,
            Some(false)
        );
        assert_eq!(check("It is sunny.", "x", "", &[], &b).keywords_ok, None);
    }

    #[test]
    fn failures_name_each_failed_check() {
        let r = q(
            "Set a timer for ten minutes. łę",
            "Set a timer for ten minutes.",
        );
        assert_eq!(r.failures(), vec!["echo", "fragment", "foreign"]);
        assert!(!r.core_pass());
        let ok = q(
            "Okay, the timer is running.",
            "Set a timer for ten minutes.",
        );
        assert!(ok.failures().is_empty() && ok.core_pass());
    }

    /// A reply whose stray tail fails the checks until the filter withholds it: failed before
    /// the filter, clean after it, and the two figures say so apart.
    #[test]
    fn a_reply_cleaned_by_the_tail_filter_counts_as_failed_before_and_clean_after() {
        use crate::aggregate::Aggregate;
        use crate::record::{TurnOutcome, TurnRecord};
        let transcript = "What's the weather like in Paris today?";
        let spoken = "It is sunny in Paris.";
        let dropped = Some("prochains łę");
        let raw = before_filter(spoken, dropped);
        assert_eq!(raw, "It is sunny in Paris. prochains łę");
        let mut t = TurnRecord::blank("s", "a", "r1", transcript);
        t.outcome = TurnOutcome::Ok;
        t.quality = Some(q(spoken, transcript));
        t.quality_before_filter = Some(q(&raw, transcript));
        t.dropped_tail = dropped.map(str::to_string);
        let mut plain = TurnRecord::blank("s", "b", "r2", transcript);
        plain.outcome = TurnOutcome::Ok;
        plain.quality = Some(q(spoken, transcript));
        plain.quality_before_filter = Some(q(&before_filter(spoken, None), transcript));
        let c = Aggregate::from_turns(&[t, plain]).quality;
        assert_eq!((c.replies, c.core_pass, c.clean_end), (2, 2, 2));
        let b = c.before_filter.expect("the unfiltered verdicts");
        assert_eq!(
            (b.replies, b.core_pass, b.clean_end, b.no_foreign),
            (2, 1, 1, 1)
        );
        assert_eq!(b.tails_dropped, 0);
        assert_eq!(c.tails_dropped, 1);
    }

    #[test]
    fn the_text_before_the_filter_is_the_spoken_text_and_the_withheld_tail() {
        assert_eq!(before_filter("Hello.", None), "Hello.");
        assert_eq!(before_filter("Hello.", Some("  ")), "Hello.");
        assert_eq!(before_filter("", Some("łę")), "łę");
        assert_eq!(before_filter("Hello 되었다", None), "Hello 되었다");
        assert_eq!(before_filter("Hello", Some("되었다")), "Hello 되었다");
    }

    #[test]
    fn counts_cover_spoken_replies_and_old_results_still_load() {
        use crate::aggregate::Aggregate;
        use crate::record::{TurnOutcome, TurnRecord};
        let mut good = TurnRecord::blank("s", "a", "r1", "Set a timer.");
        good.outcome = TurnOutcome::Ok;
        good.quality = Some(q("Okay, the timer is running.", "Set a timer."));
        let mut bad = TurnRecord::blank("s", "b", "r2", "Set a timer.");
        bad.outcome = TurnOutcome::Ok;
        bad.quality = Some(q("Set a timer. prochains", "Set a timer."));
        bad.dropped_tail = Some("sorular".into());
        let failed = TurnRecord::blank("s", "c", "r3", "x");
        let agg = Aggregate::from_turns(&[good.clone(), bad, failed]);
        let c = &agg.quality;
        assert_eq!(
            (c.replies, c.not_echo, c.clean_end, c.core_pass),
            (2, 1, 1, 1)
        );
        assert_eq!((c.no_foreign, c.tails_dropped), (2, 1));
        assert_eq!(QualityCounts::pct(c.core_pass, c.replies), "50%");
        assert_eq!(QualityCounts::pct(0, 0), "-");

        // Results written before these fields existed.
        let mut rec = serde_json::to_value(&good).unwrap();
        let obj = rec.as_object_mut().unwrap();
        obj.remove("quality");
        obj.remove("dropped_tail");
        let back: TurnRecord = serde_json::from_value(rec).unwrap();
        assert_eq!((back.quality, back.dropped_tail), (None, None));
        let mut a = serde_json::to_value(&agg).unwrap();
        a.as_object_mut().unwrap().remove("quality");
        let back: Aggregate = serde_json::from_value(a).unwrap();
        assert_eq!(back.quality, QualityCounts::default());
    }
}
