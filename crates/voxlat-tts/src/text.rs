//! What of a chunk's text is worth speaking.
//!
//! espeak-ng reads emoji and many symbols aloud by name ("party popper"), which in a voice
//! reply is noise, and a chunk of only punctuation has nothing to say at all. Emoji are removed;
//! a chunk left without a letter or digit is skipped with a reason instead of synthesized.

use crate::error::SkipReason;

/// The text to phonemize, or why there is none.
pub fn speakable(text: &str) -> Result<String, SkipReason> {
    if text.trim().is_empty() {
        return Err(SkipReason::Empty);
    }
    let kept: String = text.chars().filter(|&c| !is_pictographic(c)).collect();
    if !kept.chars().any(char::is_alphanumeric) {
        return Err(SkipReason::NoWords);
    }
    Ok(kept.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Emoji and their joiners/modifiers: the pictographic blocks, dingbats and miscellaneous
/// symbols, regional indicators (flags), variation selectors and the zero-width joiner.
fn is_pictographic(c: char) -> bool {
    matches!(c as u32,
        0x1F000..=0x1FAFF   // mahjong .. symbols and pictographs extended-A (incl. flags, skin tones)
        | 0x2600..=0x27BF   // miscellaneous symbols, dingbats
        | 0x2B00..=0x2BFF   // arrows and shapes used as emoji (⭐, ⬆)
        | 0xFE00..=0xFE0F   // variation selectors
        | 0x200D            // zero-width joiner
        | 0x20E3            // combining enclosing keycap
        | 0xE0020..=0xE007F // tag characters (subdivision flags)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_blank_text_is_skipped() {
        assert_eq!(speakable(""), Err(SkipReason::Empty));
        assert_eq!(speakable(" \n\t"), Err(SkipReason::Empty));
    }

    #[test]
    fn punctuation_and_emoji_only_text_is_skipped() {
        for text in ["...", "!?", "🎉🎉", "👍🏽", "👨‍👩‍👧", "🇫🇷", "— * —", "❤️", "..."]
        {
            assert_eq!(speakable(text), Err(SkipReason::NoWords), "{text:?}");
        }
    }

    #[test]
    fn emoji_are_removed_from_speakable_text() {
        assert_eq!(speakable("Great job 🎉!").as_deref(), Ok("Great job !"));
        assert_eq!(speakable("I ❤️ it").as_deref(), Ok("I it"));
        assert_eq!(speakable("3 🍎").as_deref(), Ok("3"));
        assert_eq!(speakable("你好").as_deref(), Ok("你好"));
    }
}
