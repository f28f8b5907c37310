//! Catches a runaway Whisper decode.
//!
//! On short real clips greedy decoding can lock into a loop ("5, 5, 5, …", "10 of clubs 10 of
//! clubs …") and run until the token limit. whisper.cpp's own fallback cannot catch these when
//! it is switched off for speed, and even when on, it only tests entropy on outputs longer than
//! 32 tokens. So the engine checks every decode here, with tests that need no model:
//!
//! - more tokens than the audio could hold ([`token_cap`]; a decode that reaches the cap ran
//!   away by definition);
//! - more words than a fast speaker says in that time;
//! - a phrase repeated back to back;
//! - text that compresses too well (OpenAI Whisper's own test: zlib ratio above 2.4).
//!
//! The checks are cheap (microseconds), so a clean decode pays nothing for them; only a failed
//! decode pays for a second one.

use std::io::Write;

/// Tokens per second of audio that a decode may produce, and a floor for very short clips.
/// Fast read speech is about 3–4 words (4–6 tokens) a second; numbers and punctuation add some.
const TOKENS_PER_SECOND: f64 = 8.0;
const MIN_TOKENS: i32 = 12;
/// Words per second, plus a floor, beyond which no speaker goes.
const WORDS_PER_SECOND: f64 = 6.0;
const MIN_WORDS: f64 = 4.0;
/// OpenAI Whisper's `compression_ratio_threshold`.
pub const MAX_COMPRESSION_RATIO: f64 = 2.4;
/// Shorter texts carry zlib's fixed overhead and cannot reach the ratio; the phrase test covers
/// them.
const MIN_BYTES_FOR_RATIO: usize = 40;
/// A phrase of two to this many words said this many times in a row is a loop: nobody says
/// "ten of clubs" four times to an assistant.
const MAX_PHRASE_WORDS: usize = 6;
const LOOP_REPEATS: usize = 4;
/// One word said again and again is a different matter: digit entry ("my PIN is 5 5 5 5") and
/// "no no no no" are real. A repeated word is a loop only when it comes faster than anyone says
/// a word on purpose, one after another: a runaway prints many copies of a word heard once.
const MAX_REPEATS_PER_SECOND: f64 = 4.0;

/// The most tokens (text and timestamps) a decode of `seconds` of audio may produce, never above
/// `max`.
pub fn token_cap(seconds: f64, max: i32) -> i32 {
    let by_duration = (seconds.max(0.0) * TOKENS_PER_SECOND)
        .ceil()
        .min(max as f64) as i32;
    (by_duration + MIN_TOKENS).min(max)
}

/// Why a decode is judged to have run away.
#[derive(Clone, Debug, PartialEq)]
pub enum DecodeFailure {
    /// The decode stopped at the token cap instead of at its end of text.
    TokenCap { tokens: usize, cap: usize },
    /// More words than the audio's duration allows.
    TooManyWords { words: usize, allowed: usize },
    /// A phrase repeated back to back.
    Loop { phrase: String, times: usize },
    /// The text compresses like a loop.
    Compressible { ratio: f64 },
}

impl std::fmt::Display for DecodeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeFailure::TokenCap { tokens, cap } => {
                write!(f, "reached the token cap ({tokens} of {cap})")
            }
            DecodeFailure::TooManyWords { words, allowed } => {
                write!(f, "{words} words where the audio allows {allowed}")
            }
            DecodeFailure::Loop { phrase, times } => {
                write!(f, "{phrase:?} repeated {times} times")
            }
            DecodeFailure::Compressible { ratio } => {
                write!(
                    f,
                    "compression ratio {ratio:.1} (above {MAX_COMPRESSION_RATIO})"
                )
            }
        }
    }
}

/// Checks one decode of `seconds` of audio that produced `text` in `tokens` tokens (text and
/// timestamps) under a cap of `cap` tokens.
pub fn check(text: &str, tokens: usize, cap: usize, seconds: f64) -> Option<DecodeFailure> {
    if cap > 0 && tokens >= cap {
        return Some(DecodeFailure::TokenCap { tokens, cap });
    }
    let words = words(text);
    let allowed = (seconds.max(0.0) * WORDS_PER_SECOND + MIN_WORDS).ceil() as usize;
    if words.len() > allowed {
        return Some(DecodeFailure::TooManyWords {
            words: words.len(),
            allowed,
        });
    }
    let too_fast = |times: usize| times as f64 > seconds.max(0.0) * MAX_REPEATS_PER_SECOND;
    if let Some(l) = loops(&words)
        .into_iter()
        .find(|l| l.words > 1 || too_fast(l.times))
    {
        return Some(DecodeFailure::Loop {
            phrase: l.phrase(&words),
            times: l.times,
        });
    }
    if text.len() >= MIN_BYTES_FOR_RATIO {
        let ratio = compression_ratio(text);
        if ratio > MAX_COMPRESSION_RATIO {
            return Some(DecodeFailure::Compressible { ratio });
        }
    }
    None
}

/// Lower-cased words without punctuation, so "5, 5, 5." is three equal words.
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric() || *c == '\'')
                .flat_map(char::to_lowercase)
                .collect::<String>()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// A phrase repeated back to back.
#[derive(Clone, Copy, Debug)]
struct Repeat {
    start: usize,
    words: usize,
    times: usize,
}

impl Repeat {
    fn phrase(&self, words: &[String]) -> String {
        words[self.start..self.start + self.words].join(" ")
    }
}

/// Every phrase (1 to [`MAX_PHRASE_WORDS`] words) repeated back to back at least
/// [`LOOP_REPEATS`] times, most repeated first. A phrase that is itself a repetition ("5 5")
/// is left out: its shorter unit is the loop, and must be judged as one word.
fn loops(words: &[String]) -> Vec<Repeat> {
    let mut found = Vec::new();
    for n in 1..=MAX_PHRASE_WORDS.min(words.len() / LOOP_REPEATS) {
        for start in 0..n {
            let mut i = start;
            while i + 2 * n <= words.len() {
                let mut times = 1;
                while i + (times + 1) * n <= words.len()
                    && words[i..i + n] == words[i + times * n..i + (times + 1) * n]
                {
                    times += 1;
                }
                if times >= LOOP_REPEATS && is_primitive(&words[i..i + n]) {
                    found.push(Repeat {
                        start: i,
                        words: n,
                        times,
                    });
                }
                i += n * times;
            }
        }
    }
    found.sort_by_key(|r| std::cmp::Reverse(r.times));
    found
}

/// Whether `phrase` is not a shorter phrase said several times over.
fn is_primitive(phrase: &[String]) -> bool {
    let n = phrase.len();
    (1..n)
        .filter(|d| n.is_multiple_of(*d))
        .all(|d| (d..n).any(|i| phrase[i] != phrase[i % d]))
}

/// Bytes of `text` over bytes of its zlib compression, as OpenAI Whisper computes it.
pub fn compression_ratio(text: &str) -> f64 {
    if text.is_empty() {
        return 0.0;
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let compressed = z
        .write_all(text.as_bytes())
        .and_then(|()| z.finish())
        .map(|v| v.len())
        .unwrap_or(text.len());
    text.len() as f64 / compressed.max(1) as f64
}

/// The last resort when every decode ran away: cuts the text at the second occurrence of its
/// loop, so "5, 5, 5, 5, 5" becomes "5," — what was heard once, not forty times. Every decode
/// failed, so any repetition counts here, however slow. Returns the text unchanged when it holds
/// no loop.
pub fn cut_loop(text: &str) -> String {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let normal: Vec<String> = words(text);
    // Only cut when word positions line up (every token kept a word).
    if tokens.len() != normal.len() {
        return text.to_string();
    }
    match loops(&normal).first() {
        Some(l) => tokens[..l.start + l.words].join(" "),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_cap_grows_with_the_audio_and_stops_at_the_maximum() {
        assert_eq!(token_cap(0.0, 96), 12);
        assert_eq!(token_cap(0.8, 96), 7 + 12);
        assert_eq!(token_cap(5.0, 96), 52);
        assert_eq!(token_cap(30.0, 96), 96);
        assert_eq!(token_cap(f64::MAX, 96), 96);
        assert_eq!(token_cap(-3.0, 96), 12);
    }

    #[test]
    fn the_loops_seen_on_real_commands_fail() {
        let five = vec!["5,"; 49].join(" ");
        assert!(matches!(
            check(&five, 60, 96, 0.8),
            Some(DecodeFailure::TooManyWords { .. })
        ));
        let clubs = "10 of clubs 10 of clubs 10 of clubs 10 of clubs";
        match check(clubs, 16, 40, 3.0) {
            Some(DecodeFailure::Loop { phrase, times }) => {
                assert_eq!(phrase, "10 of clubs");
                assert_eq!(times, 4);
            }
            other => panic!("{other:?}"),
        }
        let queen =
            "4. Queen of Cloves. 4. Queen of Cloves. 4. Queen of Cloves. 4. Queen of Cloves.";
        assert!(check(queen, 30, 60, 6.0).is_some());
    }

    #[test]
    fn a_word_repeated_faster_than_anyone_says_it_is_a_loop() {
        // Four "5"s from 0.8 s of audio: one "five" heard four times.
        assert!(matches!(
            check("5, 5, 5, 5, 5.", 8, 19, 0.8),
            Some(DecodeFailure::Loop { times: 5, .. })
        ));
        // "5 5" is not a two-word phrase of its own: eight fives over 4 s are digit entry.
        assert_eq!(check("5 5 5 5 5 5 5 5", 8, 96, 4.0), None);
    }

    #[test]
    fn a_decode_that_reaches_its_cap_failed() {
        assert_eq!(
            check("Five", 19, 19, 0.8),
            Some(DecodeFailure::TokenCap {
                tokens: 19,
                cap: 19
            })
        );
    }

    #[test]
    fn ordinary_speech_passes() {
        for (text, seconds) in [
            ("Please enter your phone number, starting with the area code.", 3.5),
            ("Five.", 0.6),
            ("No, no, no.", 1.2),
            ("Set a timer for ten minutes.", 1.8),
            ("5 5 5 1 2 3 4", 3.0),
            ("My PIN is 5 5 5 5.", 3.0),
            ("No, no, no, no.", 1.5),
            ("5 5 5 5 5 5 5 5", 4.0),
            ("Call 555 5555 5555 5555 5555.", 6.0),
            (
                "That agent is already logged on. Please enter your agent number followed by the pound key.",
                5.5,
            ),
        ] {
            assert_eq!(check(text, 10, 96, seconds), None, "{text}");
        }
    }

    #[test]
    fn compression_ratio_separates_loops_from_sentences() {
        let sentence =
            "How far is the moon from the earth, and how long would it take to fly there?";
        assert!(compression_ratio(sentence) < 1.5);
        let looped = "the pound key ".repeat(12);
        assert!(compression_ratio(&looped) > MAX_COMPRESSION_RATIO);
        // A loop that the phrase test cannot see (it varies) is still caught by compression.
        let varied = "clubs and more clubs, clubs and more clubs; clubs and more clubs! clubs and more clubs? ";
        assert!(matches!(
            check(varied, 20, 96, 10.0),
            Some(DecodeFailure::Loop { .. } | DecodeFailure::Compressible { .. })
        ));
    }

    #[test]
    fn cut_loop_keeps_what_was_said_once() {
        assert_eq!(cut_loop("5, 5, 5, 5, 5, 5"), "5,");
        assert_eq!(
            cut_loop("ten of clubs ten of clubs ten of clubs ten of clubs"),
            "ten of clubs"
        );
        assert_eq!(cut_loop("Set a timer."), "Set a timer.");
    }
}
