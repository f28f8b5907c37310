//! Keeps a greedy decode from saying the sentence it just said again.
//!
//! tiny.en's runaways on turns cut short (the speculative decode at a pause) start the same
//! way: after "7." the decoder weighs " 7" again (p 0.42) against closing the segment with a
//! timestamp, takes " 7", and from then on each copy makes the next more likely (p 0.9 and
//! up) until the token cap. The guard catches that afterwards and a second decode pays for
//! it, on the critical path when the pause is short. Here the first token of a verbatim repeat
//! of the sentence that just ended, inside the same timestamped segment, is not allowed, so
//! the decoder takes its next choice: a timestamp and end of text, or different words.
//!
//! Only one-word sentences are held to this ("7.", "Yes."), the runaways seen. A sentence
//! of two words may open the next the same way: "Press 1. Press 2." is read speech, and a
//! rule that held back every short sentence's first token could not decode it in one
//! segment. A longer loop is still the guard's to catch. A speaker who does say a word twice
//! ("No. No.") still gets it: the decoder can close the segment with a timestamp and open the
//! next with the same word. Only the back-to-back copy inside one segment, where nothing told
//! the decoder that time passed, is ruled out. A full stop after an abbreviation ("Dr.",
//! "Mr.", "St.") ends no sentence.

/// The longest sentence, in tokens with its punctuation, that may not be said again at once:
/// one word of up to two tokens and its stop. Set a priori from the loop seen ("7. 7. …");
/// checked, not fitted, on the turn corpus and the bundled clips (`docs/models.md`, "A
/// repeated short sentence").
pub const MAX_SENTENCE_TOKENS: usize = 3;

/// Words whose full stop marks an abbreviation, not a sentence's end (lower case, without the
/// stop). Not "no": "No." is a sentence more often than a number.
pub const ABBREVIATIONS: &[&str] = &[
    "dr", "mr", "mrs", "ms", "st", "prof", "mt", "jr", "sr", "vs", "etc", "e.g", "i.e",
];

/// What the rule needs to know of a token: whether it is a timestamp (a segment bound),
/// whether its text ends a sentence (".", "?", "!"), whether it starts a word (its text
/// begins with a space), and whether it is an abbreviation that a following "." belongs to.
pub trait TokenKinds {
    fn is_timestamp(&self, id: i32) -> bool;
    fn ends_sentence(&self, id: i32) -> bool;
    fn starts_word(&self, id: i32) -> bool;
    fn is_abbreviation(&self, id: i32) -> bool;
}

/// The token that would start an immediate repeat of the one-word sentence that `tokens` (the
/// decode so far, each read through `id`) ends with, if any. It reads whisper.cpp's own token
/// array in place: it runs at every decoder step.
pub fn banned_restart<T>(
    tokens: &[T],
    id: impl Fn(&T) -> i32,
    kinds: &impl TokenKinds,
) -> Option<i32> {
    // A stop ends a sentence unless it is glued to an abbreviation before it.
    let ends = |i: usize| {
        let t = id(&tokens[i]);
        !kinds.is_timestamp(t)
            && kinds.ends_sentence(t)
            && !(i > 0 && kinds.is_abbreviation(id(&tokens[i - 1])))
    };
    let last = tokens.len().checked_sub(1)?;
    if !ends(last) {
        return None;
    }
    // The sentence runs back to the previous sentence end or segment bound.
    let start = (0..last)
        .rposition(|i| kinds.is_timestamp(id(&tokens[i])) || ends(i))
        .map_or(0, |i| i + 1);
    // A sentence that is only its punctuation ("." after "..") has nothing to repeat.
    let n = last - start;
    let words = (start..last)
        .filter(|&i| i == start || kinds.starts_word(id(&tokens[i])))
        .count();
    ((1..MAX_SENTENCE_TOKENS).contains(&n) && words == 1).then(|| id(&tokens[start]))
}

/// The filter as whisper.cpp calls it.
#[cfg(feature = "engine")]
pub(crate) mod filter {
    /// What the logits filter needs to hold back a repeated sentence ([`super`]).
    pub struct RepeatBan {
        /// Per text token id: whether its text ends a sentence, starts a word, is an
        /// abbreviation.
        ends_sentence: Vec<bool>,
        starts_word: Vec<bool>,
        abbreviation: Vec<bool>,
        /// The first timestamp id.
        timestamp_0: i32,
    }

    impl RepeatBan {
        pub fn new(ctx: &whisper_rs::WhisperContext) -> Self {
            let eot = ctx.token_eot();
            let texts: Vec<String> = (0..eot)
                .map(|id| {
                    ctx.token_to_str_lossy(id)
                        .map(|t| t.into_owned())
                        .unwrap_or_default()
                })
                .collect();
            Self {
                ends_sentence: texts
                    .iter()
                    .map(|t| t.trim_end().ends_with(['.', '?', '!']))
                    .collect(),
                starts_word: texts.iter().map(|t| t.starts_with(' ')).collect(),
                abbreviation: texts
                    .iter()
                    .map(|t| super::ABBREVIATIONS.contains(&t.trim().to_lowercase().as_str()))
                    .collect(),
                timestamp_0: ctx.token_beg(),
            }
        }

        fn flag(v: &[bool], id: i32) -> bool {
            usize::try_from(id).is_ok_and(|i| v.get(i).copied().unwrap_or(false))
        }
    }

    impl super::TokenKinds for RepeatBan {
        fn is_timestamp(&self, id: i32) -> bool {
            id >= self.timestamp_0
        }
        fn ends_sentence(&self, id: i32) -> bool {
            Self::flag(&self.ends_sentence, id)
        }
        fn starts_word(&self, id: i32) -> bool {
            Self::flag(&self.starts_word, id)
        }
        fn is_abbreviation(&self, id: i32) -> bool {
            Self::flag(&self.abbreviation, id)
        }
    }

    /// whisper.cpp's logits filter: `user_data` points at the engine's [`RepeatBan`].
    pub unsafe extern "C" fn hold_back_repeats(
        _ctx: *mut whisper_rs::WhisperSysContext,
        _state: *mut whisper_rs::WhisperSysState,
        tokens: *const whisper_rs::WhisperTokenData,
        n_tokens: std::ffi::c_int,
        logits: *mut f32,
        user_data: *mut std::ffi::c_void,
    ) {
        if tokens.is_null() || logits.is_null() || user_data.is_null() {
            return;
        }
        // SAFETY: set by `decode` to the engine's `RepeatBan`, which outlives the `full` call;
        // whisper.cpp passes its `n_tokens` decoded tokens and the logits of every vocabulary id
        // (text ids, which `banned_restart` returns, come before the timestamps).
        let (ban, tokens) = unsafe {
            (
                &*(user_data as *const RepeatBan),
                std::slice::from_raw_parts(tokens, usize::try_from(n_tokens).unwrap_or(0)),
            )
        };
        let restart = super::banned_restart(tokens, |t| t.id, ban);
        if let Some(id) = restart.and_then(|id| usize::try_from(id).ok()) {
            if id < ban.ends_sentence.len() {
                // SAFETY: `id` is a text token id, inside the logits array (see above).
                unsafe { *logits.add(id) = f32::NEG_INFINITY };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TS: i32 = 1000;
    const DOT: i32 = 13;
    const Q: i32 = 30;
    const SEVEN: i32 = 767;
    const NO: i32 = 400;
    const COMMA: i32 = 11;
    /// " Press", " 1", " Dr", " Smith", and "s" (a word's second token).
    const PRESS: i32 = 500;
    const ONE: i32 = 501;
    const DR: i32 = 502;
    const SMITH: i32 = 503;
    const S: i32 = 504;

    struct Kinds;
    impl TokenKinds for Kinds {
        fn is_timestamp(&self, id: i32) -> bool {
            id >= TS
        }
        fn ends_sentence(&self, id: i32) -> bool {
            id == DOT || id == Q
        }
        fn starts_word(&self, id: i32) -> bool {
            ![DOT, Q, COMMA, S].contains(&id)
        }
        fn is_abbreviation(&self, id: i32) -> bool {
            id == DR
        }
    }

    fn ban(tokens: &[i32]) -> Option<i32> {
        banned_restart(tokens, |&t| t, &Kinds)
    }

    #[test]
    fn a_one_word_sentence_just_ended_may_not_start_again() {
        assert_eq!(ban(&[TS, SEVEN, DOT]), Some(SEVEN));
        assert_eq!(ban(&[TS, NO, Q]), Some(NO));
        // One word of two tokens.
        assert_eq!(ban(&[TS, SEVEN, S, DOT]), Some(SEVEN));
        // The sentence after another one: only its own first token is held back.
        assert_eq!(ban(&[TS, NO, DOT, SEVEN, DOT]), Some(SEVEN));
    }

    #[test]
    fn a_sentence_of_two_words_may_open_the_next_one_the_same_way() {
        // "Press 1." then "Press 2.", in one segment.
        assert_eq!(ban(&[TS, PRESS, ONE, DOT]), None);
        assert_eq!(ban(&[TS, NO, SEVEN, Q]), None);
        // "Press 2 to change folders." then "Press 3 …".
        assert_eq!(ban(&[TS, NO, COMMA, SEVEN, Q]), None);
        assert_eq!(ban(&[TS, NO, SEVEN, SEVEN, SEVEN, DOT]), None);
    }

    #[test]
    fn a_stop_after_an_abbreviation_ends_no_sentence() {
        // "Dr." is no sentence, and "Dr. Smith." is one of two words.
        assert_eq!(ban(&[TS, DR, DOT]), None);
        assert_eq!(ban(&[TS, DR, DOT, SMITH, DOT]), None);
        // "Smith." after "Call Dr." runs back past the abbreviation's stop.
        assert_eq!(ban(&[TS, NO, DOT, DR, DOT, SMITH, DOT]), None);
    }

    #[test]
    fn nothing_is_held_back_mid_sentence_or_after_a_timestamp() {
        assert_eq!(ban(&[]), None);
        assert_eq!(ban(&[TS, SEVEN]), None);
        assert_eq!(ban(&[TS, SEVEN, COMMA]), None);
        // A new segment may repeat the last one: the decoder placed it in time.
        assert_eq!(ban(&[TS, SEVEN, DOT, TS + 40]), None);
        assert_eq!(ban(&[TS, SEVEN, DOT, TS + 40, TS + 45]), None);
        // Punctuation alone is no sentence.
        assert_eq!(ban(&[TS, DOT]), None);
        assert_eq!(ban(&[TS, SEVEN, DOT, DOT]), None);
    }
}
