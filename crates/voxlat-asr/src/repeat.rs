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
//! Only short sentences are held to this: a word or two and the full stop
//! ([`MAX_SENTENCE_TOKENS`]), the runaways seen. Sentences that open the same way are common
//! in longer speech ("Press 2 to change folders. Press 3 for …", from the tuning half, lost
//! its second "Press" to an unbounded rule), and a longer loop is still the guard's to catch.
//! A speaker who does say a short sentence twice ("No. No.") still gets it: the decoder can
//! close the segment with a timestamp and open the next with the same words. Only the
//! back-to-back copy inside one segment, where nothing told the decoder that time passed, is
//! ruled out.

/// The longest sentence, in tokens with its punctuation, that may not be said again at once.
/// Set a priori from the loop seen ("7. 7. …": one word and a stop) with room for a word of
/// two tokens; checked, not fitted, on the turn corpus and the bundled clips
/// (`docs/models.md`, "A repeated short sentence").
pub const MAX_SENTENCE_TOKENS: usize = 3;

/// The token that would start an immediate repeat of the sentence that `tokens` (the decode so
/// far, each read through `id`) ends with, if any. `is_timestamp` says which ids are
/// timestamps (segment bounds), and `ends_sentence` which text tokens end a sentence (".",
/// "?", "!"). It reads whisper.cpp's own token array in place: it runs at every decoder step.
pub fn banned_restart<T>(
    tokens: &[T],
    id: impl Fn(&T) -> i32,
    is_timestamp: impl Fn(i32) -> bool,
    ends_sentence: impl Fn(i32) -> bool,
) -> Option<i32> {
    let (last, before) = tokens.split_last()?;
    let last = id(last);
    if is_timestamp(last) || !ends_sentence(last) {
        return None;
    }
    // The sentence runs back to the previous sentence end or segment bound.
    let start = before
        .iter()
        .map(&id)
        .rposition(|t| is_timestamp(t) || ends_sentence(t))
        .map_or(0, |i| i + 1);
    // A sentence that is only its punctuation ("." after "..") has nothing to repeat.
    let words = before.len() - start;
    (1..MAX_SENTENCE_TOKENS)
        .contains(&words)
        .then(|| id(&tokens[start]))
}

/// The filter as whisper.cpp calls it.
#[cfg(feature = "engine")]
pub(crate) mod filter {
    /// What the logits filter needs to hold back a repeated sentence ([`super`]).
    pub struct RepeatBan {
        /// Per text token id: whether its text ends a sentence.
        ends_sentence: Vec<bool>,
        /// The first timestamp id.
        timestamp_0: i32,
    }

    impl RepeatBan {
        pub fn new(ctx: &whisper_rs::WhisperContext) -> Self {
            let eot = ctx.token_eot();
            let ends_sentence = (0..eot)
                .map(|id| {
                    ctx.token_to_str_lossy(id)
                        .is_ok_and(|t| t.trim_end().ends_with(['.', '?', '!']))
                })
                .collect();
            Self {
                ends_sentence,
                timestamp_0: ctx.token_beg(),
            }
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
        let restart = super::banned_restart(
            tokens,
            |t| t.id,
            |t| t >= ban.timestamp_0,
            |t| {
                usize::try_from(t).is_ok_and(|i| ban.ends_sentence.get(i).copied().unwrap_or(false))
            },
        );
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

    fn ban(tokens: &[i32]) -> Option<i32> {
        banned_restart(tokens, |&t| t, |t| t >= TS, |t| t == DOT || t == Q)
    }

    #[test]
    fn a_sentence_just_ended_may_not_start_again() {
        assert_eq!(ban(&[TS, SEVEN, DOT]), Some(SEVEN));
        assert_eq!(ban(&[TS, NO, SEVEN, Q]), Some(NO));
        // The sentence after another one: only its own first token is held back.
        assert_eq!(ban(&[TS, NO, DOT, SEVEN, DOT]), Some(SEVEN));
    }

    #[test]
    fn a_longer_sentence_may_open_the_next_one_the_same_way() {
        // "Press 2 to change folders." then "Press 3 …".
        assert_eq!(ban(&[TS, NO, COMMA, SEVEN, Q]), None);
        assert_eq!(ban(&[TS, NO, SEVEN, SEVEN, SEVEN, DOT]), None);
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
