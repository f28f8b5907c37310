//! Which part of a slot's KV cache the next prompt can keep.
//!
//! A slot remembers the tokens whose keys and values sit in its KV cache (the last prompt and
//! the reply decoded after it). The next prompt keeps the longest common prefix and evaluates
//! only the rest. Two limits:
//! - at least one prompt token is always evaluated, because sampling needs fresh logits;
//! - with a sliding-window model (Gemma 3: window 512 on most layers) and llama.cpp's default
//!   window-sized SWA cache, the windowed layers only hold the last ~window positions. The
//!   first new token at position `keep` needs the window before it, so if the old sequence ran
//!   too far past `keep`, those entries are gone and the whole prompt is evaluated again.

/// What to do with a slot's cache for the next prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reuse {
    /// Keep the first `keep` cached tokens, drop the rest, evaluate the prompt from `keep` on.
    Keep { keep: usize },
    /// Drop everything and evaluate the whole prompt; `lost` says why, for the log.
    Full { lost: Lost },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// Nothing in common (or an empty cache).
    NoCommonPrefix,
    /// The sliding-window layers no longer hold the positions before the divergence.
    SlidingWindow,
}

/// `cached`: tokens in the slot's cache; `prompt`: the new prompt; `swa_pos_min`: the lowest
/// position the sliding-window cache still holds for this sequence (llama.cpp's
/// `llama_memory_seq_pos_min`, -1 when it holds none); `n_swa`: the window, 0 for none.
pub fn plan(cached: &[i32], prompt: &[i32], swa_pos_min: i32, n_swa: u32) -> Reuse {
    let common = cached
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count();
    let keep = common.min(prompt.len().saturating_sub(1));
    if keep == 0 {
        return Reuse::Full {
            lost: Lost::NoCommonPrefix,
        };
    }
    if n_swa > 0 && keep < cached.len() {
        // The same test llama.cpp's server makes: every position the first new token can see
        // through the window must still be cached.
        let needed_from = keep.saturating_sub(n_swa as usize) as i64;
        let have_from = i64::from(swa_pos_min);
        if have_from < 0 || have_from > needed_from {
            return Reuse::Full {
                lost: Lost::SlidingWindow,
            };
        }
    }
    Reuse::Keep { keep }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(r: std::ops::Range<i32>) -> Vec<i32> {
        r.collect()
    }

    #[test]
    fn longest_common_prefix_is_kept() {
        let cached = toks(0..100);
        let mut prompt = toks(0..60);
        prompt.extend([7, 7, 7]);
        assert_eq!(plan(&cached, &prompt, 0, 0), Reuse::Keep { keep: 60 });
    }

    #[test]
    fn identical_prompt_still_evaluates_its_last_token() {
        let p = toks(0..50);
        assert_eq!(plan(&p, &p, 0, 512), Reuse::Keep { keep: 49 });
    }

    #[test]
    fn grown_conversation_keeps_everything_cached() {
        let cached = toks(0..300);
        let prompt = toks(0..400);
        // Nothing is removed, so the window is intact whatever the SWA cache holds.
        assert_eq!(plan(&cached, &prompt, 0, 512), Reuse::Keep { keep: 300 });
        assert_eq!(plan(&cached, &prompt, 250, 512), Reuse::Keep { keep: 300 });
    }

    #[test]
    fn early_divergence_or_empty_cache_reuses_nothing() {
        assert_eq!(
            plan(&[1, 2, 3], &[9, 2, 3], 0, 0),
            Reuse::Full {
                lost: Lost::NoCommonPrefix
            }
        );
        assert_eq!(
            plan(&[], &[1, 2], -1, 512),
            Reuse::Full {
                lost: Lost::NoCommonPrefix
            }
        );
    }

    #[test]
    fn sliding_window_decides_when_the_tail_is_removed() {
        let cached = toks(0..2000);
        let mut prompt = toks(0..1800);
        prompt.push(-5);
        // The SWA cache holds 1480..2000: position 1800 needs 1288.. → lost.
        assert_eq!(
            plan(&cached, &prompt, 1480, 512),
            Reuse::Full {
                lost: Lost::SlidingWindow
            }
        );
        // A short divergent tail is fine: position 1995 needs 1483.., and 1480.. is cached.
        let mut p2 = toks(0..1995);
        p2.push(-5);
        assert_eq!(plan(&cached, &p2, 1480, 512), Reuse::Keep { keep: 1995 });
        // A window-less model keeps any prefix.
        assert_eq!(plan(&cached, &prompt, 1480, 0), Reuse::Keep { keep: 1800 });
        // An emptied SWA cache cannot serve a prefix.
        assert_eq!(
            plan(&cached, &prompt, -1, 512),
            Reuse::Full {
                lost: Lost::SlidingWindow
            }
        );
    }
}
