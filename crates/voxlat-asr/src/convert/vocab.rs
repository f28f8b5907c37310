//! Whisper's text vocabulary for the ggml file. CTranslate2's `vocabulary.txt` stores GPT-2
//! byte-level tokens as printable stand-in characters (`Ġ` for a space, `Ċ` for a newline);
//! whisper.cpp wants each token's raw bytes, so the GPT-2 byte↔unicode table is inverted.

use super::ConvertError;
use std::collections::HashMap;

/// The number of ordinary text tokens. whisper.cpp appends the special and timestamp tokens
/// itself, so only these are written.
pub const N_TEXT_TOKENS: usize = 50256;

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

/// Decodes the first [`N_TEXT_TOKENS`] lines of `vocabulary.txt` into raw token bytes.
pub fn decode_vocabulary(text: &str) -> Result<Vec<Vec<u8>>, ConvertError> {
    let table = unicode_to_byte();
    let lines: Vec<&str> = text.lines().take(N_TEXT_TOKENS).collect();
    if lines.len() < N_TEXT_TOKENS {
        return Err(ConvertError::Vocabulary(format!(
            "vocabulary.txt has {} lines, expected at least {N_TEXT_TOKENS}",
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
        let v = decode_vocabulary(&fake_vocab(&["ĠHello", "Ċ", "Ã©"])).unwrap();
        assert_eq!(v.len(), N_TEXT_TOKENS);
        assert_eq!(v[0], b" Hello");
        assert_eq!(v[1], b"\n");
        assert_eq!(v[2], "é".as_bytes());
    }

    #[test]
    fn rejects_short_files_and_foreign_characters() {
        assert!(decode_vocabulary("a\nb\n").is_err());
        let err = decode_vocabulary(&fake_vocab(&["ok", "日本"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
