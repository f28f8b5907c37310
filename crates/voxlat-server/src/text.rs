//! Turning sampled token bytes into streamed text: whole UTF-8 characters only, and nothing
//! sent that might turn out to be the start of a stop string.

/// Collects token bytes and hands out only complete UTF-8 characters: one character can be
/// split across tokens (byte-fallback tokens), and a delta must be valid text on its own.
#[derive(Default, Debug)]
pub struct Utf8Joiner {
    pending: Vec<u8>,
}

impl Utf8Joiner {
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..good]));
                    match e.error_len() {
                        // An incomplete character at the end: wait for the next token.
                        None => {
                            self.pending.drain(..good);
                            return out;
                        }
                        // Bytes that can never become a character: replace, go on.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..good + bad);
                        }
                    }
                }
            }
        }
    }

    /// What is left at the end of a stream (an unfinished character) as replacement text.
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

/// Finds stop strings in streamed text. Text that could still grow into a stop string is held
/// back, so a client never receives the first half of `<end_of_turn>`.
#[derive(Debug)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// Text safe to send now (may be empty while a possible stop is held back).
    Text(String),
    /// A stop string was found: send this text (what preceded the stop) and end the reply.
    Stopped(String),
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> StopMatcher {
        StopMatcher {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
        }
    }

    pub fn push(&mut self, text: &str) -> Scan {
        self.held.push_str(text);
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = first {
            let before = self.held[..at].to_string();
            self.held.clear();
            return Scan::Stopped(before);
        }
        let keep = self.partial_suffix_len();
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        Scan::Text(out)
    }

    /// The held-back text, once the reply ended for another reason: it was not a stop after all.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// Length of the longest suffix of `held` that is a proper prefix of some stop string.
    fn partial_suffix_len(&self) -> usize {
        let mut best = 0;
        for s in &self.stops {
            for (i, _) in self.held.char_indices() {
                let tail = &self.held[i..];
                if tail.len() <= best {
                    break;
                }
                if tail.len() < s.len() && s.starts_with(tail) {
                    best = tail.len();
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_split_across_tokens_are_joined() {
        let mut j = Utf8Joiner::default();
        let e = "é".as_bytes();
        assert_eq!(j.push(b"caf"), "caf");
        assert_eq!(j.push(&e[..1]), "");
        assert_eq!(j.push(&e[1..]), "é");
        let crab = "🦀".as_bytes();
        assert_eq!(j.push(&crab[..3]), "");
        assert_eq!(j.push(&crab[3..]), "🦀");
        assert_eq!(j.push(&[0xff, b'a']), "\u{fffd}a");
        assert_eq!(j.push(&e[..1]), "");
        assert_eq!(j.finish(), "\u{fffd}");
    }

    #[test]
    fn stop_string_split_across_tokens_is_never_sent() {
        let mut m = StopMatcher::new(vec!["<end_of_turn>".into()]);
        assert_eq!(m.push("Hello"), Scan::Text("Hello".into()));
        assert_eq!(m.push(" world<end"), Scan::Text(" world".into()));
        assert_eq!(m.push("_of"), Scan::Text(String::new()));
        assert_eq!(m.push("_turn>\nmore"), Scan::Stopped(String::new()));
    }

    #[test]
    fn held_text_that_was_not_a_stop_is_released() {
        let mut m = StopMatcher::new(vec!["<end_of_turn>".into(), "\n\n".into()]);
        assert_eq!(m.push("a <"), Scan::Text("a ".into()));
        assert_eq!(m.push("b"), Scan::Text("<b".into()));
        assert_eq!(m.push("x\n"), Scan::Text("x".into()));
        assert_eq!(m.finish(), "\n");
    }

    #[test]
    fn earliest_stop_wins_and_text_before_it_is_kept() {
        let mut m = StopMatcher::new(vec!["END".into(), "STOP".into()]);
        assert_eq!(m.push("ab STOP cd END"), Scan::Stopped("ab ".into()));
        let mut none = StopMatcher::new(vec![]);
        assert_eq!(none.push("anything<"), Scan::Text("anything<".into()));
    }

    #[test]
    fn multibyte_text_never_splits_inside_a_character() {
        let mut m = StopMatcher::new(vec!["éx".into()]);
        assert_eq!(m.push("aé"), Scan::Text("a".into()));
        assert_eq!(m.push("éy"), Scan::Text("ééy".into()));
        assert_eq!(m.push("zéx"), Scan::Stopped("z".into()));
    }
}
