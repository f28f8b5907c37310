//! Splits `<think>…</think>` reasoning out of streamed content, for models that inline their
//! reasoning in `content` instead of a separate field. Tags may be split across deltas, so a
//! possible partial tag at the end of a delta is held back until the next one decides it.

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

#[derive(Debug, Default)]
pub struct ThinkSplitter {
    in_think: bool,
    pending: String,
}

/// A piece of text and whether it is reasoning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub reasoning: bool,
    pub text: String,
}

impl ThinkSplitter {
    pub fn new() -> ThinkSplitter {
        ThinkSplitter::default()
    }

    pub fn feed(&mut self, s: &str) -> Vec<Piece> {
        self.pending.push_str(s);
        let mut out = Vec::new();
        loop {
            let tag = if self.in_think { CLOSE } else { OPEN };
            if let Some(pos) = self.pending.find(tag) {
                let before: String = self.pending[..pos].to_string();
                self.push(&mut out, before);
                self.pending.drain(..pos + tag.len());
                self.in_think = !self.in_think;
                continue;
            }
            let keep = partial_suffix_len(&self.pending, tag);
            let emit_to = self.pending.len() - keep;
            let emit: String = self.pending.drain(..emit_to).collect();
            self.push(&mut out, emit);
            return out;
        }
    }

    /// End of stream: whatever was held back is text after all.
    pub fn finish(&mut self) -> Vec<Piece> {
        let rest = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        self.push(&mut out, rest);
        out
    }

    fn push(&self, out: &mut Vec<Piece>, text: String) {
        if !text.is_empty() {
            out.push(Piece {
                reasoning: self.in_think,
                text,
            });
        }
    }
}

/// The length of the longest suffix of `s` that is a proper prefix of `tag`.
fn partial_suffix_len(s: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| {
            s.len() >= n && s.is_char_boundary(s.len() - n) && tag.starts_with(&s[s.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(deltas: &[&str]) -> Vec<Piece> {
        let mut s = ThinkSplitter::new();
        let mut out: Vec<Piece> = deltas.iter().flat_map(|d| s.feed(d)).collect();
        out.extend(s.finish());
        merge(out)
    }

    fn merge(pieces: Vec<Piece>) -> Vec<Piece> {
        let mut out: Vec<Piece> = Vec::new();
        for p in pieces {
            match out.last_mut() {
                Some(last) if last.reasoning == p.reasoning => last.text.push_str(&p.text),
                _ => out.push(p),
            }
        }
        out
    }

    fn piece(reasoning: bool, text: &str) -> Piece {
        Piece {
            reasoning,
            text: text.into(),
        }
    }

    #[test]
    fn plain_content_is_answer() {
        assert_eq!(run(&["Hello", " world"]), vec![piece(false, "Hello world")]);
    }

    #[test]
    fn tags_split_across_deltas() {
        let got = run(&["<thi", "nk>let me", " see</th", "ink>", "The answer"]);
        assert_eq!(
            got,
            vec![piece(true, "let me see"), piece(false, "The answer")]
        );
    }

    #[test]
    fn a_lone_angle_bracket_is_released_at_the_end() {
        assert_eq!(run(&["a <", "b"]), vec![piece(false, "a <b")]);
        assert_eq!(run(&["x <thi"]), vec![piece(false, "x <thi")]);
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_pieces(cuts in proptest::collection::vec(0usize..60, 0..8)) {
            let text = "<think>step one, step two</think>Answer: 42 <b>ok</b>";
            let whole = run(&[text]);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (text.len() + 1)).collect();
            cuts.sort_unstable();
            let mut parts = Vec::new();
            let mut prev = 0;
            for c in cuts { parts.push(&text[prev..c]); prev = c; }
            parts.push(&text[prev..]);
            prop_assert_eq!(run(&parts), whole);
        }
    }
}
