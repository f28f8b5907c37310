//! espeak-ng phonemization through a handful of FFI calls into Debian's libespeak-ng.
//!
//! `espeak_TextToPhonemes` translates one clause per call and advances a pointer past the text
//! it consumed. Piper's fork of espeak-ng also returns the clause's terminator; the stock
//! library does not, so the punctuation is recovered from the consumed text. Keeping it
//! matters: Piper voices were trained on phonemes *with* punctuation, and without it clauses
//! run together with flat prosody (see `docs/models.md`).
//!
//! espeak-ng keeps global state (the selected voice, translator buffers), so every call goes
//! through one process-wide mutex.

use crate::chunker::abbreviation_before_dot;
use crate::error::TtsError;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Mutex;

// From <espeak-ng/speak_lib.h> (API revision 12, espeak-ng 1.51).
const AUDIO_OUTPUT_SYNCHRONOUS: c_int = 2;
/// Without this flag espeak-ng calls `exit()` when its data directory is unusable.
const INITIALIZE_DONT_EXIT: c_int = 0x8000;
const CHARS_UTF8: c_int = 1;
/// phonememode bit 1: phonemes as IPA (UTF-8) rather than espeak's ASCII names.
const PHONEMES_IPA: c_int = 0x02;
const EE_OK: c_int = 0;

// Linked by build.rs (pkg-config espeak-ng).
extern "C" {
    fn espeak_Initialize(
        output: c_int,
        buflength: c_int,
        path: *const c_char,
        options: c_int,
    ) -> c_int;
    fn espeak_SetVoiceByName(name: *const c_char) -> c_int;
    fn espeak_TextToPhonemes(
        textptr: *mut *const c_void,
        textmode: c_int,
        phonememode: c_int,
    ) -> *const c_char;
}

/// The library's state as far as this process knows it.
struct Engine {
    initialized: bool,
    voice: Option<String>,
}

static ENGINE: Mutex<Engine> = Mutex::new(Engine {
    initialized: false,
    voice: None,
});

/// One clause as espeak-ng split it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// IPA phonemes, words separated by spaces.
    pub phonemes: String,
    /// The punctuation that ended the clause (normalized to ASCII: `。` becomes `.`), if any.
    pub punctuation: Option<char>,
}

impl Clause {
    /// Whether the clause ends a sentence (`.`, `!`, `?`).
    pub fn ends_sentence(&self) -> bool {
        matches!(self.punctuation, Some('.' | '!' | '?'))
    }
}

/// Phonemizes `text` with the espeak-ng voice `voice` (e.g. `en-us`), clause by clause.
pub fn phonemize(text: &str, voice: &str) -> Result<Vec<Clause>, TtsError> {
    // An interior NUL would end the C string early and silently drop the rest.
    let c_text = CString::new(text.replace('\0', " ")).map_err(|_| TtsError::Espeak {
        detail: "text still contains NUL after replacement".into(),
    })?;
    let mut engine = ENGINE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    engine.ensure_voice(voice)?;

    let bytes = c_text.as_bytes();
    let base = c_text.as_ptr();
    let mut ptr: *const c_void = base.cast();
    let mut clauses = Vec::new();
    let mut start = 0usize;
    while !ptr.is_null() && start < bytes.len() {
        // SAFETY: `ptr` points into `c_text`, a NUL-terminated buffer that outlives this loop;
        // espeak-ng only reads up to the NUL and moves `ptr` forward within it or to NULL. The
        // returned string is owned by espeak-ng and valid until its next call, which cannot
        // happen before we copy it because ENGINE is held.
        let (out, next) = unsafe {
            let out = espeak_TextToPhonemes(&mut ptr, CHARS_UTF8, PHONEMES_IPA);
            let out = if out.is_null() {
                String::new()
            } else {
                CStr::from_ptr(out).to_string_lossy().into_owned()
            };
            (out, ptr)
        };
        let end = if next.is_null() {
            bytes.len()
        } else {
            // SAFETY: both pointers are into the same allocation (`c_text`), as above.
            let offset = unsafe { next.cast::<c_char>().offset_from(base) };
            usize::try_from(offset)
                .unwrap_or(bytes.len())
                .min(bytes.len())
        };
        let mut consumed = String::from_utf8_lossy(&bytes[start.min(end)..end]).into_owned();
        // espeak-ng reads one character past the clause (the first of the next one) to decide
        // where the clause ends, keeps it internally for the next call, and leaves the pointer
        // after it. That character is not this clause's.
        let lookahead = if end < bytes.len() {
            consumed.pop()
        } else {
            None
        };
        let clause = Clause {
            phonemes: clean_phonemes(&out),
            punctuation: clause_punctuation(&consumed, lookahead),
        };
        if !clause.phonemes.is_empty() || clause.punctuation.is_some() {
            clauses.push(clause);
        }
        if end <= start {
            // No progress: stop rather than loop forever on input espeak-ng cannot advance.
            break;
        }
        start = end;
    }
    Ok(clauses)
}

impl Engine {
    fn ensure_voice(&mut self, voice: &str) -> Result<(), TtsError> {
        if !self.initialized {
            // SAFETY: a NULL path selects the compiled-in data directory; the other arguments
            // are plain integers. Called once, under ENGINE's lock.
            let rate = unsafe {
                espeak_Initialize(
                    AUDIO_OUTPUT_SYNCHRONOUS,
                    0,
                    std::ptr::null(),
                    INITIALIZE_DONT_EXIT,
                )
            };
            if rate <= 0 {
                return Err(TtsError::Espeak {
                    detail: "espeak_Initialize failed: its data directory is missing or \
                             unreadable. Install the Debian package espeak-ng-data"
                        .into(),
                });
            }
            self.initialized = true;
        }
        if self.voice.as_deref() == Some(voice) {
            return Ok(());
        }
        let name = CString::new(voice).map_err(|_| TtsError::Espeak {
            detail: format!("espeak voice name {voice:?} contains NUL"),
        })?;
        // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
        let rc = unsafe { espeak_SetVoiceByName(name.as_ptr()) };
        if rc != EE_OK {
            self.voice = None;
            return Err(TtsError::EspeakVoice {
                voice: voice.to_string(),
            });
        }
        self.voice = Some(voice.to_string());
        Ok(())
    }
}

/// The punctuation ending a clause, except the period of an abbreviation: espeak-ng 1.51 ends
/// a clause at "Dr." (reading it "doctor"), and a period there would make Piper pause as at a
/// sentence end.
fn clause_punctuation(consumed: &str, lookahead: Option<char>) -> Option<char> {
    let punctuation = trailing_punctuation(consumed)?;
    let text = consumed.trim_end();
    if punctuation == '.' && text.ends_with('.') && !text.ends_with("..") {
        let body = &text[..text.len() - 1];
        let word = body.rsplit(char::is_whitespace).next().unwrap_or(body);
        if abbreviation_before_dot(word, lookahead) {
            return None;
        }
    }
    Some(punctuation)
}

/// The clause terminator at the end of `consumed`, past any closing quotes and brackets.
fn trailing_punctuation(consumed: &str) -> Option<char> {
    let trimmed = consumed.trim_end_matches(|c: char| {
        c.is_whitespace() || matches!(c, '"' | '\'' | ')' | ']' | '}' | '”' | '’' | '»' | '）')
    });
    let c = trimmed.chars().next_back()?;
    Some(match c {
        '.' | '。' | '…' => '.',
        '!' | '！' => '!',
        '?' | '？' => '?',
        ',' | '，' | '、' => ',',
        ':' | '：' => ':',
        ';' | '；' => ';',
        _ => return None,
    })
}

/// Removes espeak-ng's language-switch markers such as `(fr)` … `(en)`, which it inserts around
/// words it reads with another language's rules; they are not phonemes. Also trims newlines.
fn clean_phonemes(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(open) = rest.find('(') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(')') {
            Some(close)
                if close > 0
                    && after[..close]
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '-') =>
            {
                rest = &after[close + 1..];
            }
            _ => {
                out.push('(');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn punctuation_is_recovered_past_closers() {
        assert_eq!(trailing_punctuation("Hello, "), Some(','));
        assert_eq!(trailing_punctuation("he said \"stop.\" "), Some('.'));
        assert_eq!(trailing_punctuation("你好。"), Some('.'));
        assert_eq!(trailing_punctuation("why？"), Some('?'));
        assert_eq!(trailing_punctuation("no stop here "), None);
        assert_eq!(trailing_punctuation(""), None);
    }

    #[test]
    fn abbreviation_periods_are_not_clause_punctuation() {
        assert_eq!(clause_punctuation("Dr.", Some('S')), None);
        assert_eq!(clause_punctuation("see e.g. ", Some('t')), None);
        assert_eq!(clause_punctuation("item No. ", Some('5')), None);
        assert_eq!(clause_punctuation("I said no. ", Some('T')), Some('.'));
        assert_eq!(clause_punctuation("Wait.. ", Some('T')), Some('.'));
        assert_eq!(clause_punctuation("the end.", None), Some('.'));
    }

    #[test]
    fn language_switch_markers_are_removed() {
        assert_eq!(clean_phonemes("ðə (fr)ʃɛf(en) ɪz"), "ðə ʃɛf ɪz");
        assert_eq!(clean_phonemes("a (b c"), "a (b c");
        assert_eq!(clean_phonemes(" həloʊ \n"), "həloʊ");
    }

    #[test]
    fn hello_world_keeps_its_comma_and_period() {
        let clauses = phonemize("Hello, world.", "en-us").expect("phonemize");
        assert_eq!(clauses.len(), 2, "{clauses:?}");
        assert_eq!(clauses[0].punctuation, Some(','));
        assert_eq!(clauses[1].punctuation, Some('.'));
        assert!(clauses[0].phonemes.contains("həl"), "{clauses:?}");
        assert!(clauses[1].phonemes.contains("wˈɜːld"), "{clauses:?}");
        assert!(clauses[1].ends_sentence() && !clauses[0].ends_sentence());
    }

    #[test]
    fn decimals_and_abbreviations_do_not_end_clauses() {
        let clauses = phonemize("Dr. Smith paid 3.14 dollars.", "en-us").expect("phonemize");
        let marks: Vec<_> = clauses.iter().map(|c| c.punctuation).collect();
        // espeak-ng itself ends a clause after "Dr."; its period is dropped so that only the
        // real sentence end remains.
        assert_eq!(marks.last(), Some(&Some('.')), "{clauses:?}");
        assert!(
            marks[..marks.len() - 1].iter().all(Option::is_none),
            "{clauses:?}"
        );
        let all: String = clauses.iter().map(|c| c.phonemes.as_str()).collect();
        assert!(all.contains("pɔɪnt"), "3.14 read as a decimal: {all}");
    }

    #[test]
    fn questions_and_exclamations_are_kept() {
        let clauses = phonemize("Really? Yes! Fine; ok: done", "en-us").expect("phonemize");
        let marks: Vec<_> = clauses.iter().map(|c| c.punctuation).collect();
        assert_eq!(marks, [Some('?'), Some('!'), Some(';'), Some(':'), None]);
    }

    #[test]
    fn empty_and_nul_text_do_not_crash() {
        assert!(phonemize("", "en-us").expect("empty").is_empty());
        let clauses = phonemize("a\0b", "en-us").expect("nul");
        assert!(!clauses.is_empty());
    }

    #[test]
    fn an_unknown_voice_is_an_error_naming_it() {
        let err = phonemize("hi", "xx-nonexistent").expect_err("unknown voice");
        assert!(err.to_string().contains("xx-nonexistent"), "{err}");
        // The engine recovers for the next caller.
        assert!(!phonemize("hi", "en-us").expect("recovers").is_empty());
    }

    #[test]
    fn concurrent_callers_are_serialized() {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                std::thread::spawn(move || {
                    let text = format!("Thread number {i}, speaking now.");
                    phonemize(&text, "en-us").expect("phonemize")
                })
            })
            .collect();
        for h in handles {
            let clauses = h.join().expect("thread");
            assert_eq!(clauses.len(), 2);
        }
    }
}
