//! Whisper's text vocabulary for the ggml file. CTranslate2's `vocabulary.txt` stores GPT-2
//! byte-level tokens as printable stand-in characters (`Ġ` for a space, `Ċ` for a newline);
//! whisper.cpp wants each token's raw bytes, so the GPT-2 byte↔unicode table is inverted.

use super::ConvertError;
use std::collections::HashMap;

/// The number of ordinary text tokens of an English-only model (`.en`). whisper.cpp appends
/// the special and timestamp tokens itself, so only these are written.
pub const N_TEXT_TOKENS: usize = 50256;

/// A multilingual model's vocabulary (51865 tokens or more) has one text token more before
/// `<|endoftext|>`, which whisper.cpp then numbers 50257 instead of 50256.
const MULTILINGUAL_N_VOCAB: i32 = 51865;

/// The text tokens to write for a model of `n_vocab` tokens in all.
pub fn text_tokens(n_vocab: i32) -> usize {
    if n_vocab >= MULTILINGUAL_N_VOCAB {
        N_TEXT_TOKENS + 1
    } else {
        N_TEXT_TOKENS
    }
}

/// GPT-2's table: printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100 and
/// up, in byte order.
fn unicode_to_byte() -> HashMap<char, u8> {
    let printable = |b: u32| {
        (u32::from(b'!')..=u32::from(b'~')).contains(&b)
            || (0xA1..=0xAC).contains(&b)
            || (0xAE..=0xFF).contains(&b)
    };
    let mut map = HashMap::with_capacity(256);
    let mut shifted = 0u32;
    for b in 0u32..256 {
        let c = if printable(b) {
            b
        } else {
            shifted += 1;
            255 + shifted
        };
        if let Some(ch) = char::from_u32(c) {
            map.insert(ch, b as u8);
        }
    }
    map
}

/// Decodes the first `n` lines of `vocabulary.txt` into raw token bytes ([`text_tokens`]).
pub fn decode_vocabulary(text: &str, n: usize) -> Result<Vec<Vec<u8>>, ConvertError> {
    let table = unicode_to_byte();
    let lines: Vec<&str> = text.lines().take(n).collect();
    if lines.len() < n {
        return Err(ConvertError::Vocabulary(format!(
            "vocabulary.txt has {} lines, expected at least {n}",
            lines.len()
        )));
    }
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            line.chars()
                .map(|ch| {
                    table.get(&ch).copied().ok_or_else(|| {
                        ConvertError::Vocabulary(format!(
                            "line {}: character {ch:?} is not in GPT-2's byte table",
                            i + 1
                        ))
                    })
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_a_bijection_over_all_bytes() {
        let t = unicode_to_byte();
        assert_eq!(t.len(), 256);
        let mut seen = [false; 256];
        for &b in t.values() {
            seen[b as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(t[&'Ġ'], b' ');
        assert_eq!(t[&'Ċ'], b'\n');
        assert_eq!(t[&'!'], b'!');
        assert_eq!(t[&'\u{100}'], 0);
    }

    fn fake_vocab(first: &[&str]) -> String {
        let mut lines: Vec<String> = first.iter().map(|s| s.to_string()).collect();
        while lines.len() < N_TEXT_TOKENS + 3 {
            lines.push("x".into());
        }
        lines.join("\n")
    }

    #[test]
    fn decodes_space_newline_and_multibyte_and_stops_at_text_tokens() {
        let v = decode_vocabulary(&fake_vocab(&["ĠHello", "Ċ", "Ã©"]), N_TEXT_TOKENS).unwrap();
        assert_eq!(v.len(), N_TEXT_TOKENS);
        assert_eq!(v[0], b" Hello");
        assert_eq!(v[1], b"\n");
        assert_eq!(v[2], "é".as_bytes());
    }

    /// whisper.cpp's own table: tiny.en has 51864 tokens, base and the other multilingual
    /// models 51865 (large-v3 51866), and `<|endoftext|>` is 50256 or 50257.
    #[test]
    fn a_multilingual_vocabulary_keeps_the_token_before_end_of_text() {
        assert_eq!(text_tokens(51864), 50256);
        assert_eq!(text_tokens(51865), 50257);
        assert_eq!(text_tokens(51866), 50257);
        let v = decode_vocabulary(&fake_vocab(&[]), text_tokens(51865)).unwrap();
        assert_eq!(v.len(), 50257);
    }

    #[test]
    fn rejects_short_files_and_foreign_characters() {
        assert!(decode_vocabulary("a\nb\n", N_TEXT_TOKENS).is_err());
        let err = decode_vocabulary(&fake_vocab(&["ok", "日本"]), N_TEXT_TOKENS)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
