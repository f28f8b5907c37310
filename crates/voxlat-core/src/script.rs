//! Which writing system a letter belongs to, coarsely: enough to notice a reply that drifts
//! into another language's alphabet ("…number.łę", "…а потом"), not a language identifier.
//!
//! Latin is split in two on purpose. [`Script::Latin`] is ASCII plus the Latin-1 letters
//! (`é`, `ñ`, `ü`) that English borrows in loanwords and names ("café", "Zürich").
//! [`Script::LatinExtended`] holds the letters of Polish, Turkish, Czech, Vietnamese and the
//! like (`ł`, `ę`, `ş`, `ğ`, `ő`, `ư`): an English reply practically never contains them,
//! so a small base model leaking a Polish or Turkish token is caught when the token has one.
//! A foreign word spelled in plain ASCII ("prochains", "sorular") is invisible here.

/// A coarse writing system. Digits, punctuation, symbols and emoji have none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Script {
    Latin,
    LatinExtended,
    Greek,
    Cyrillic,
    Armenian,
    Hebrew,
    Arabic,
    Indic,
    Thai,
    Hangul,
    Kana,
    Han,
    /// Any other letter (Georgian, Ethiopic, …).
    Other,
}

/// The script of `c`, or `None` when it is not a letter.
pub fn of(c: char) -> Option<Script> {
    if !c.is_alphabetic() {
        return None;
    }
    let u = c as u32;
    Some(match u {
        0x41..=0x5A | 0x61..=0x7A => Script::Latin,
        // Latin-1 letters (× and ÷ are not alphabetic, so they never get here).
        0xAA | 0xB5 | 0xBA | 0xC0..=0xFF => Script::Latin,
        0x100..=0x24F | 0x1E00..=0x1EFF | 0x2C60..=0x2C7F | 0xA720..=0xA7FF => {
            Script::LatinExtended
        }
        0x370..=0x3FF | 0x1F00..=0x1FFF => Script::Greek,
        0x400..=0x52F | 0x1C80..=0x1C8F | 0x2DE0..=0x2DFF | 0xA640..=0xA69F => Script::Cyrillic,
        0x530..=0x58F => Script::Armenian,
        0x590..=0x5FF => Script::Hebrew,
        0x600..=0x6FF | 0x750..=0x77F | 0x8A0..=0x8FF | 0xFB50..=0xFDFF | 0xFE70..=0xFEFF => {
            Script::Arabic
        }
        0x900..=0xDFF => Script::Indic,
        0xE00..=0xE7F => Script::Thai,
        0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF => Script::Hangul,
        0x3040..=0x30FF | 0x31F0..=0x31FF => Script::Kana,
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FFFF => Script::Han,
        _ => Script::Other,
    })
}

/// Every script used by the letters of `text`, in a fixed order.
pub fn scripts_in(text: &str) -> std::collections::BTreeSet<Script> {
    text.chars().filter_map(of).collect()
}

/// The letters of `text` whose script is not in `allowed`, in order (duplicates kept).
pub fn foreign_letters(text: &str, allowed: &std::collections::BTreeSet<Script>) -> Vec<char> {
    text.chars()
        .filter(|&c| of(c).is_some_and(|s| !allowed.contains(&s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_and_its_loanwords_are_latin() {
        assert_eq!(
            scripts_in("Café in Zürich, naïve señor!"),
            [Script::Latin].into()
        );
        assert!(scripts_in("3.14, 7:30 — 🙂").is_empty());
    }

    #[test]
    fn polish_turkish_and_vietnamese_letters_are_latin_extended() {
        for c in ['ł', 'ę', 'ş', 'ğ', 'ő', 'ư', 'ạ'] {
            assert_eq!(of(c), Some(Script::LatinExtended), "{c}");
        }
    }

    #[test]
    fn other_alphabets_are_told_apart() {
        assert_eq!(of('я'), Some(Script::Cyrillic));
        assert_eq!(of('λ'), Some(Script::Greek));
        assert_eq!(of('ש'), Some(Script::Hebrew));
        assert_eq!(of('ب'), Some(Script::Arabic));
        assert_eq!(of('क'), Some(Script::Indic));
        assert_eq!(of('한'), Some(Script::Hangul));
        assert_eq!(of('カ'), Some(Script::Kana));
        assert_eq!(of('中'), Some(Script::Han));
        assert_eq!(of('ა'), Some(Script::Other));
    }

    #[test]
    fn foreign_letters_are_listed_against_the_allowed_set() {
        let en = scripts_in("What is the number?");
        assert_eq!(foreign_letters("It is 42.łę", &en), vec!['ł', 'ę']);
        assert!(foreign_letters("It is 42, café.", &en).is_empty());
        let pl = scripts_in("Która jest godzina? Łódź");
        assert!(foreign_letters("Jest ósma, łę", &pl).is_empty());
    }
}
