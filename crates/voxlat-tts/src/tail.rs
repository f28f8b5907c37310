//! The end of a spoken reply: what is left after the last complete sentence once the LLM's
//! stream is done, and whether to speak it.
//!
//! Small models often end a good answer with a stray token ("… is hot. prochains",
//! "…number.łę") or run into the token cap mid-sentence. Piper would speak either. The rule,
//! applied only to the text after the last sentence end and only when that end exists:
//!
//! - the tail is dropped when the stream was cut by the token cap (a half sentence), when it
//!   is a single word (a real sentence has more), or when it has letters of a script the
//!   reply so far does not use (see [`voxlat_core::script`]);
//! - a tail of two or more words from a model that stopped by itself is kept: an unpunctuated
//!   last sentence ("Sure. Timer set for ten minutes") is a real reply, not noise;
//! - a reply with no complete sentence before the tail is spoken whole: cutting it would
//!   leave silence, and a fragment is still better than no answer;
//! - in every case, trailing words with letters of a script foreign to the conversation
//!   (`language`: the user's words and the system prompt) are withheld, as long as a word is
//!   left to speak ("Hello 되었다" → "Hello").
//!
//! A glued tail ("number.łę", no space after the period) is split off only when it has
//! foreign letters, so "example.com" and "3.14" stay whole. Abbreviations ("Dr. Smith") and
//! decimals are not sentence ends here, as in the chunker.

use crate::chunker::{
    abbreviation_before_dot, Chunker, ChunkerConfig, CLOSERS, SENTENCE_ENDS, WIDE_SENTENCE_ENDS,
};
use voxlat_core::script;

/// One chunk at the end of a reply, split into what is spoken and what is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tail {
    /// The part to speak (possibly empty).
    pub keep: String,
    /// The withheld tail, if any.
    pub dropped: Option<String>,
}

fn is_end_mark(c: char) -> bool {
    SENTENCE_ENDS.contains(&c) || WIDE_SENTENCE_ENDS.contains(&c) || c == '…'
}

/// Whether `text` (trimmed) ends at a sentence end: a terminator, then any closing quotes or
/// brackets.
pub fn ends_sentence(text: &str) -> bool {
    let t = text.trim_end().trim_end_matches(CLOSERS);
    t.chars().next_back().is_some_and(is_end_mark) && !ends_with_abbreviation(t)
}

fn ends_with_abbreviation(t: &str) -> bool {
    let Some(stem) = t.strip_suffix('.') else {
        return false;
    };
    let word = stem.rsplit(char::is_whitespace).next().unwrap_or(stem);
    // "Dr." ends nothing, but a lone "." after a real word does.
    word.chars().count() > 1 && abbreviation_before_dot(word, None)
}

/// Byte offset just past the last sentence end inside `t` that has text after it, with the
/// text after it glued (no whitespace between) or not.
fn last_inner_end(t: &str) -> Option<(usize, bool)> {
    let chars: Vec<(usize, char)> = t.char_indices().collect();
    let mut k = chars.len();
    while k > 0 {
        k -= 1;
        let (_, c) = chars[k];
        if !is_end_mark(c) {
            continue;
        }
        let mut j = k + 1;
        while j < chars.len() && (is_end_mark(chars[j].1) || CLOSERS.contains(&chars[j].1)) {
            j += 1;
        }
        let Some(&(after, next)) = chars.get(j) else {
            continue;
        };
        let prev = k.checked_sub(1).map(|p| chars[p].1);
        // Decimals, times and version numbers: "3.14", "v1.2".
        if c == '.' && prev.is_some_and(|p| p.is_ascii_digit()) && next.is_ascii_digit() {
            continue;
        }
        if c == '.' {
            let start = chars[..k]
                .iter()
                .rposition(|&(_, c)| c.is_whitespace())
                .map_or(0, |p| p + 1);
            let word = &t[chars[start].0..chars[k].0];
            let next_word = t[after..].trim_start().chars().next();
            if abbreviation_before_dot(word, next_word) {
                continue;
            }
        }
        return Some((after, !next.is_whitespace()));
    }
    None
}

/// Decides what of `chunk`, the last piece of a reply, is spoken. `before` is the reply text
/// already handed to TTS; `language` is text in the conversation's language (its scripts are
/// the allowed ones; may be empty); `truncated` says the stream ended at the token cap.
pub fn split_tail(before: &str, language: &str, chunk: &str, truncated: bool) -> Tail {
    let mut tail = sentence_tail(before, chunk, truncated);
    strip_foreign_words(&format!("{language} {before}"), &mut tail);
    tail
}

/// Moves trailing words with letters foreign to `context` (or, with no letters there, to the
/// kept text's first word) from `keep` to `dropped`, leaving at least one word.
fn strip_foreign_words(context: &str, tail: &mut Tail) {
    let mut allowed = script::scripts_in(context);
    if allowed.is_empty() {
        let first = tail
            .keep
            .split_whitespace()
            .find(|w| !script::scripts_in(w).is_empty());
        allowed = first.map(script::scripts_in).unwrap_or_default();
    }
    if allowed.is_empty() {
        return;
    }
    let words: Vec<&str> = tail.keep.split_whitespace().collect();
    let mut n = words.len();
    while n > 1 && !script::foreign_letters(words[n - 1], &allowed).is_empty() {
        n -= 1;
    }
    if n == words.len() {
        return;
    }
    let mut dropped = words[n..].join(" ");
    if let Some(d) = tail.dropped.take() {
        dropped.push(' ');
        dropped.push_str(&d);
    }
    tail.keep = words[..n].join(" ");
    tail.dropped = Some(dropped);
}

fn sentence_tail(before: &str, chunk: &str, truncated: bool) -> Tail {
    let t = chunk.trim();
    let keep_all = || Tail {
        keep: t.to_string(),
        dropped: None,
    };
    if t.is_empty() || ends_sentence(t) {
        return keep_all();
    }
    let (head, tail, glued) = match last_inner_end(t) {
        Some((p, glued)) => (t[..p].trim_end(), t[p..].trim(), glued),
        None if ends_sentence(before) => ("", t, false),
        // Nothing complete precedes it: speaking the fragment beats silence.
        None => return keep_all(),
    };
    let mut context = String::with_capacity(before.len() + head.len());
    context.push_str(before);
    context.push_str(head);
    let foreign = !script::foreign_letters(tail, &script::scripts_in(&context)).is_empty()
        // With no context at all (an empty `before`), nothing can be foreign.
        && !script::scripts_in(&context).is_empty();
    let one_word = tail.split_whitespace().count() <= 1;
    let drop = if glued {
        foreign
    } else {
        truncated || one_word || foreign
    };
    if drop {
        Tail {
            keep: head.to_string(),
            dropped: Some(tail.to_string()),
        }
    } else {
        keep_all()
    }
}

/// The chunker with a clean end: the same chunks while the stream runs, and at its end the
/// last chunk passed through [`split_tail`].
#[derive(Debug)]
pub struct CleanEndChunker {
    chunker: Chunker,
    /// Text in the conversation's language (see [`split_tail`]).
    language: String,
    /// Everything handed out so far, for the tail rule's context.
    spoken: String,
}

/// What the end of a stream yields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finished {
    pub chunks: Vec<String>,
    pub dropped: Option<String>,
}

impl CleanEndChunker {
    pub fn new(config: ChunkerConfig) -> Self {
        CleanEndChunker {
            chunker: Chunker::new(config),
            language: String::new(),
            spoken: String::new(),
        }
    }

    /// Sets the conversation's language by example: the user's words and the system prompt.
    pub fn with_language_of(mut self, text: &str) -> Self {
        self.language = text.to_string();
        self
    }

    pub fn push(&mut self, delta: &str) -> Vec<String> {
        let out = self.chunker.push(delta);
        self.note(&out);
        out
    }

    /// End of the stream. `truncated`: it ended at the token cap (`finish_reason` "length").
    pub fn finish(&mut self, truncated: bool) -> Finished {
        let mut chunks = self.chunker.finish();
        let Some(last) = chunks.pop() else {
            return Finished::default();
        };
        self.note(&chunks);
        let tail = split_tail(&self.spoken, &self.language, &last, truncated);
        if !tail.keep.is_empty() {
            chunks.push(tail.keep);
            self.note(&chunks[chunks.len() - 1..]);
        }
        Finished {
            chunks,
            dropped: tail.dropped,
        }
    }

    fn note(&mut self, chunks: &[String]) {
        for c in chunks {
            if !self.spoken.is_empty() {
                self.spoken.push(' ');
            }
            self.spoken.push_str(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(before: &str, chunk: &str, truncated: bool) -> (String, Option<String>) {
        let t = split_tail(before, "", chunk, truncated);
        (t.keep, t.dropped)
    }

    /// Streams `deltas` through a clean-end chunker: (everything spoken, the dropped tail).
    fn stream(deltas: &[&str], truncated: bool) -> (Vec<String>, Option<String>) {
        let mut c = CleanEndChunker::new(ChunkerConfig::default());
        let mut out: Vec<String> = deltas.iter().flat_map(|d| c.push(d)).collect();
        let f = c.finish(truncated);
        out.extend(f.chunks);
        (out, f.dropped)
    }

    #[test]
    fn a_stray_word_after_the_last_sentence_is_not_spoken() {
        let (spoken, dropped) = stream(
            &["The weather", " in Paris is", " hot.", " pro", "chains"],
            false,
        );
        assert_eq!(spoken.join(" "), "The weather in Paris is hot.");
        assert_eq!(dropped.as_deref(), Some("prochains"));
        assert_eq!(
            tail("It is hot.", "sorular", false),
            (String::new(), Some("sorular".into()))
        );
    }

    #[test]
    fn a_glued_foreign_token_is_cut_at_the_period() {
        let (spoken, dropped) = stream(&["Call me at", " that number", ".ł", "ę"], false);
        assert_eq!(spoken.join(" "), "Call me at that number.");
        assert_eq!(dropped.as_deref(), Some("łę"));
    }

    #[test]
    fn glued_ascii_decimals_and_abbreviations_are_not_sentence_ends() {
        for text in ["Visit example.com", "Pi is about 3.14", "Ask Dr. Smith"] {
            assert_eq!(tail("Hello there.", text, false).1, None, "{text}");
            assert_eq!(tail("", text, true), (text.to_string(), None), "{text}");
        }
    }

    #[test]
    fn the_token_cap_cuts_an_unfinished_last_sentence() {
        let (spoken, dropped) = stream(&["Paris is lovely. ", "Today it will be"], true);
        assert_eq!(spoken, vec!["Paris is lovely."]);
        assert_eq!(dropped.as_deref(), Some("Today it will be"));
    }

    #[test]
    fn an_unpunctuated_last_sentence_from_a_model_that_stopped_is_kept() {
        let (spoken, dropped) = stream(&["Sure. ", "Timer set for ten minutes"], false);
        assert_eq!(spoken.join(" "), "Sure. Timer set for ten minutes");
        assert_eq!(dropped, None);
    }

    #[test]
    fn a_foreign_script_tail_is_dropped_whatever_its_length() {
        assert_eq!(
            tail("", "It is sunny. очень хорошо", false),
            ("It is sunny.".into(), Some("очень хорошо".into()))
        );
    }

    #[test]
    fn a_reply_without_a_complete_sentence_is_spoken_whole() {
        assert_eq!(tail("", "ten minutes", true), ("ten minutes".into(), None));
        // The first chunk ended early at a clause: the rest completes that sentence.
        assert_eq!(
            tail("Paris is known for its weather,", "and it rains", true),
            ("and it rains".into(), None)
        );
    }

    #[test]
    fn trailing_foreign_script_words_go_even_without_a_sentence_end() {
        assert_eq!(
            tail("", "Hello 되었다", false),
            ("Hello".into(), Some("되었다".into()))
        );
        let mut c = CleanEndChunker::new(ChunkerConfig::default()).with_language_of("Hello");
        c.push("Hello");
        c.push(" 되었다");
        let f = c.finish(false);
        assert_eq!(
            (f.chunks, f.dropped.as_deref()),
            (vec!["Hello".to_string()], Some("되었다"))
        );
        // A reply that is nothing but a foreign word is still spoken: never silence.
        let t = split_tail("", "You are an assistant.", "אות", false);
        assert_eq!((t.keep.as_str(), t.dropped), ("אות", None));
        // A Korean conversation keeps its Korean.
        let t = split_tail("", "안녕하세요", "네 안녕하세요", false);
        assert_eq!(t.dropped, None);
    }

    #[test]
    fn clean_replies_pass_through_unchanged() {
        let (spoken, dropped) = stream(&["Paris is nice", ". It is ", "sunny today!\""], true);
        assert_eq!(spoken.join(" "), "Paris is nice. It is sunny today!\"");
        assert_eq!(dropped, None);
        assert!(ends_sentence("He said \"hi.\""));
        assert!(ends_sentence("Well…"));
        assert!(!ends_sentence("Ask Dr."));
        assert!(!ends_sentence("It is"));
        assert_eq!(stream(&[], false), (Vec::<String>::new(), None));
    }
}
