//! Streaming removal of the markdown an LLM writes but a voice must not read out.
//!
//! Removed: every `*` and backtick (emphasis, bold, inline code), code-fence lines (the fence and
//! its language tag), and at the start of a line: heading hashes (`#`… followed by a space),
//! list markers (`- `, `+ `, `* `, `1. `, `1) `) and blockquote markers (`>`). Everything else,
//! newlines included, passes through: the chunker needs the newlines.
//!
//! Input arrives in deltas of any size, so a decision that needs the next characters (is this
//! `-` a list marker or a minus sign?) holds the undecided text back until they arrive. The
//! output is therefore the same however the input was split.

/// Longest ordered-list number treated as a marker; `2024. ` at a line start is more likely a
/// year ending a sentence than item 2024.
const MAX_LIST_DIGITS: usize = 3;

#[derive(Debug, Default)]
pub struct MarkupStripper {
    /// Raw text not yet decided.
    pending: String,
    /// The next character of `pending` starts a line (markers are only markers there).
    line_start: bool,
    /// Inside a code fence's opening line: the language tag is dropped up to the newline.
    in_fence_info: bool,
}

/// What the start of a line turned out to be.
enum LineStart {
    /// Not enough text yet to tell.
    Undecided,
    /// Drop this many bytes (the marker), then continue as ordinary text.
    Marker { len: usize },
    /// A code fence: drop the backticks, then the rest of the line.
    Fence { len: usize },
    /// Ordinary text.
    Text,
}

impl MarkupStripper {
    pub fn new() -> Self {
        Self {
            pending: String::new(),
            line_start: true,
            in_fence_info: false,
        }
    }

    /// Adds raw text; appends whatever can be decided to `out`.
    pub fn push(&mut self, raw: &str, out: &mut String) {
        self.pending.push_str(raw);
        self.process(out, false);
    }

    /// End of input: decides everything still held back.
    pub fn finish(&mut self, out: &mut String) {
        self.process(out, true);
        self.pending.clear();
    }

    fn process(&mut self, out: &mut String, at_end: bool) {
        let mut i = 0;
        let text = std::mem::take(&mut self.pending);
        while i < text.len() {
            let rest = &text[i..];
            if self.in_fence_info {
                match rest.find('\n') {
                    Some(nl) => {
                        self.in_fence_info = false;
                        i += nl;
                        continue;
                    }
                    None => {
                        i = text.len();
                        break;
                    }
                }
            }
            if self.line_start {
                let indent = rest.len() - rest.trim_start_matches([' ', '\t']).len();
                out.push_str(&rest[..indent]);
                i += indent;
                match classify_line_start(&text[i..], at_end) {
                    LineStart::Undecided => break,
                    LineStart::Marker { len } => i += len,
                    LineStart::Fence { len } => {
                        i += len;
                        self.in_fence_info = true;
                    }
                    LineStart::Text => {}
                }
                self.line_start = false;
                continue;
            }
            let Some(c) = rest.chars().next() else { break };
            i += c.len_utf8();
            match c {
                '*' | '`' => {}
                '\n' => {
                    out.push('\n');
                    self.line_start = true;
                }
                _ => out.push(c),
            }
        }
        self.pending = text[i.min(text.len())..].to_string();
    }
}

/// Classifies the text at the start of a line (after indentation).
fn classify_line_start(s: &str, at_end: bool) -> LineStart {
    let bytes = s.as_bytes();
    // Undecided text at the very end of input is ordinary text.
    let undecided = if at_end {
        LineStart::Text
    } else {
        LineStart::Undecided
    };
    let Some(&first) = bytes.first() else {
        return undecided;
    };
    let followed_by_space = |at: usize| -> Option<bool> {
        bytes
            .get(at)
            .map(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    };
    match first {
        b'#' => {
            let hashes = bytes.iter().take_while(|&&b| b == b'#').count();
            match followed_by_space(hashes) {
                None => undecided,
                Some(true) => LineStart::Marker { len: hashes },
                Some(false) => LineStart::Text,
            }
        }
        b'-' | b'+' => match followed_by_space(1) {
            None => undecided,
            Some(true) => LineStart::Marker { len: 1 },
            Some(false) => LineStart::Text,
        },
        b'>' => LineStart::Marker { len: 1 },
        b'`' => {
            let ticks = bytes.iter().take_while(|&&b| b == b'`').count();
            if ticks == bytes.len() && !at_end {
                undecided
            } else if ticks >= 3 {
                LineStart::Fence { len: ticks }
            } else {
                // Inline code at a line start: the backticks are dropped as ordinary text.
                LineStart::Text
            }
        }
        b'0'..=b'9' => {
            let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            if digits > MAX_LIST_DIGITS {
                return LineStart::Text;
            }
            match bytes.get(digits) {
                None => undecided,
                Some(b'.' | b')') => match followed_by_space(digits + 1) {
                    None => undecided,
                    Some(true) => LineStart::Marker { len: digits + 1 },
                    Some(false) => LineStart::Text,
                },
                Some(_) => LineStart::Text,
            }
        }
        _ => LineStart::Text,
    }
}

/// Strips a whole text at once (the same rules as streaming).
pub fn strip(text: &str) -> String {
    let mut s = MarkupStripper::new();
    let mut out = String::new();
    s.push(text, &mut out);
    s.finish(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streamed(parts: &[&str]) -> String {
        let mut s = MarkupStripper::new();
        let mut out = String::new();
        for p in parts {
            s.push(p, &mut out);
        }
        s.finish(&mut out);
        out
    }

    #[test]
    fn bold_and_code_are_dropped() {
        assert_eq!(
            strip("This is **bold** and `code`."),
            "This is bold and code."
        );
    }

    #[test]
    fn headings_and_list_markers_go_only_at_line_start() {
        assert_eq!(strip("## Title\nText"), " Title\nText");
        assert_eq!(strip("- one\n* two\n+ three"), " one\n two\n three");
        assert_eq!(strip("1. first\n12) second"), " first\n second");
        assert_eq!(strip("  - nested"), "   nested");
        assert_eq!(strip("a - b #1 2. c"), "a - b #1 2. c");
    }

    #[test]
    fn look_alikes_of_markers_are_kept() {
        assert_eq!(strip("-5 degrees"), "-5 degrees");
        assert_eq!(strip("#hashtag"), "#hashtag");
        assert_eq!(strip("3.14 is pi"), "3.14 is pi");
        assert_eq!(strip("7:30 works"), "7:30 works");
        assert_eq!(strip("2024. A year"), "2024. A year");
    }

    #[test]
    fn code_fences_drop_their_language_tag() {
        assert_eq!(strip("```rust\nlet x;\n```\nDone."), "\nlet x;\n\nDone.");
    }

    #[test]
    fn splits_inside_markers_do_not_matter() {
        let whole = "# Plan\n- buy 3.14 kg\n12. go **now**\n```sh\nls\n```\n-5";
        let expected = strip(whole);
        for cut in 0..=whole.len() {
            if !whole.is_char_boundary(cut) {
                continue;
            }
            assert_eq!(
                streamed(&[&whole[..cut], &whole[cut..]]),
                expected,
                "cut {cut}"
            );
        }
        let singles: Vec<String> = whole.chars().map(String::from).collect();
        let refs: Vec<&str> = singles.iter().map(String::as_str).collect();
        assert_eq!(streamed(&refs), expected);
    }

    #[test]
    fn held_back_text_is_released_at_the_end() {
        assert_eq!(streamed(&["-"]), "-");
        assert_eq!(streamed(&["12"]), "12");
        assert_eq!(streamed(&["##"]), "##");
    }
}
