//! Splits `<think>…</think>` reasoning out of streamed content, for models that inline their
//! reasoning in `content` instead of a separate field. Tags may be split across deltas, so a
//! possible partial tag at the end of a delta is held back until the next one decides it.
//!
//! Held-back bytes keep the arrival time of the read that delivered them: a first delta of
//! `<` (HTML, XML, code and math answers often begin so) must be stamped when it arrived, not
//! when the next delta released it one token gap later.

use std::collections::VecDeque;
use voxlat_core::Nanos;

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

#[derive(Debug, Default)]
pub struct ThinkSplitter {
    in_think: bool,
    pending: String,
    /// The pending text's runs as (byte length, arrival time), front first; the lengths add
    /// up to `pending.len()`.
    runs: VecDeque<(usize, Nanos)>,
}

/// A piece of text, whether it is reasoning, and when its bytes arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub reasoning: bool,
    pub text: String,
    pub t: Nanos,
}

impl ThinkSplitter {
    pub fn new() -> ThinkSplitter {
        ThinkSplitter::default()
    }

    /// Whether `s` would come out of [`ThinkSplitter::feed`] whole, as one answer piece at its
    /// own arrival: outside a think block, nothing held back, and no `<` that could start a
    /// tag. The caller then uses `s` as it is, without the splitter's copies (the common case,
    /// once per token).
    pub fn passes_through(&self, s: &str) -> bool {
        !self.in_think && self.pending.is_empty() && !s.contains('<')
    }

    /// Feeds text that arrived at `t`. Returned pieces are in stream order; each carries the
    /// arrival time of its own bytes, so text held back from an earlier delta comes out as a
    /// piece of its own with that delta's time.
    pub fn feed(&mut self, s: &str, t: Nanos) -> Vec<Piece> {
        if !s.is_empty() {
            self.pending.push_str(s);
            self.runs.push_back((s.len(), t));
        }
        let mut out = Vec::new();
        loop {
            let tag = if self.in_think { CLOSE } else { OPEN };
            if let Some(pos) = self.pending.find(tag) {
                self.take(&mut out, pos);
                self.discard(tag.len());
                self.in_think = !self.in_think;
                continue;
            }
            let keep = partial_suffix_len(&self.pending, tag);
            let emit_to = self.pending.len() - keep;
            self.take(&mut out, emit_to);
            return out;
        }
    }

    /// End of stream: whatever was held back is text after all.
    pub fn finish(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        self.take(&mut out, self.pending.len());
        out
    }

    /// Moves the first `n` pending bytes into `out`, one piece per arrival run.
    fn take(&mut self, out: &mut Vec<Piece>, mut n: usize) {
        while n > 0 {
            let Some(front) = self.runs.front_mut() else {
                break;
            };
            let len = front.0.min(n);
            let t = front.1;
            front.0 -= len;
            if front.0 == 0 {
                self.runs.pop_front();
            }
            let text: String = self.pending.drain(..len).collect();
            n -= len;
            out.push(Piece {
                reasoning: self.in_think,
                text,
                t,
            });
        }
    }

    /// Drops the first `n` pending bytes (a tag), keeping the runs in step.
    fn discard(&mut self, mut n: usize) {
        self.pending.drain(..n);
        while n > 0 {
            let Some(front) = self.runs.front_mut() else {
                break;
            };
            let len = front.0.min(n);
            front.0 -= len;
            n -= len;
            if front.0 == 0 {
                self.runs.pop_front();
            }
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

    /// Feeds delta `i` at time `i`, and merges neighbouring pieces of the same kind.
    fn run(deltas: &[&str]) -> Vec<(bool, String)> {
        let mut s = ThinkSplitter::new();
        let mut out: Vec<Piece> = deltas
            .iter()
            .enumerate()
            .flat_map(|(i, d)| s.feed(d, Nanos(i as u64)))
            .collect();
        out.extend(s.finish());
        let mut merged: Vec<(bool, String)> = Vec::new();
        for p in out {
            match merged.last_mut() {
                Some(last) if last.0 == p.reasoning => last.1.push_str(&p.text),
                _ => merged.push((p.reasoning, p.text)),
            }
        }
        merged
    }

    fn piece(reasoning: bool, text: &str) -> (bool, String) {
        (reasoning, text.into())
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

    #[test]
    fn held_back_bytes_keep_their_arrival_time() {
        for first in ["<", "<th", "<think"] {
            let mut s = ThinkSplitter::new();
            assert!(s.feed(first, Nanos(100)).is_empty(), "{first} is held back");
            let out = s.feed("b>", Nanos(200));
            let got: Vec<(&str, Nanos)> = out.iter().map(|p| (p.text.as_str(), p.t)).collect();
            assert_eq!(got, vec![(first, Nanos(100)), ("b>", Nanos(200))]);
        }
        // Held over several deltas, then released by the end of the stream.
        let mut s = ThinkSplitter::new();
        assert!(s.feed("<", Nanos(1)).is_empty());
        assert!(s.feed("th", Nanos(2)).is_empty());
        let got: Vec<(String, Nanos)> = s.finish().into_iter().map(|p| (p.text, p.t)).collect();
        assert_eq!(got, vec![("<".into(), Nanos(1)), ("th".into(), Nanos(2))]);
        // A tag completed across deltas: the reasoning after it has the later time.
        let mut s = ThinkSplitter::new();
        assert!(s.feed("<thi", Nanos(1)).is_empty());
        let out = s.feed("nk>x", Nanos(2));
        assert_eq!(out.len(), 1);
        assert!(out[0].reasoning && out[0].text == "x" && out[0].t == Nanos(2));
    }

    proptest! {
        /// Whenever the splitter says a delta passes through, feeding it gives that delta,
        /// whole, as one answer piece at its own time: the shortcut changes nothing.
        #[test]
        fn a_delta_that_passes_through_is_what_feed_gives(
            deltas in proptest::collection::vec("[<>/a-z ]{0,6}", 0..12)
        ) {
            let mut s = ThinkSplitter::new();
            for (i, d) in deltas.iter().enumerate() {
                let t = Nanos(i as u64);
                let passes = s.passes_through(d);
                let out = s.feed(d, t);
                if passes && !d.is_empty() {
                    prop_assert_eq!(out, vec![Piece { reasoning: false, text: d.clone(), t }]);
                }
            }
        }

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

        /// Every emitted byte carries the time of the delta that delivered it.
        #[test]
        fn every_byte_keeps_its_delta_time(cuts in proptest::collection::vec(0usize..60, 0..8)) {
            let text = "<b>x</b> <think>y</think><i>z";
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (text.len() + 1)).collect();
            cuts.sort_unstable();
            let mut s = ThinkSplitter::new();
            let mut prev = 0;
            let mut pieces = Vec::new();
            let mut bounds = Vec::new();
            for (i, c) in cuts.into_iter().chain([text.len()]).enumerate() {
                bounds.push((prev, c, Nanos(i as u64)));
                pieces.extend(s.feed(&text[prev..c], Nanos(i as u64)));
                prev = c;
            }
            pieces.extend(s.finish());
            // Walk the text: a change of kind means a tag was skipped there (this text has no
            // empty think block), and every piece must start where the last one ended.
            let (mut pos, mut reasoning) = (0, false);
            for p in &pieces {
                if p.reasoning != reasoning {
                    let tag = if reasoning { CLOSE } else { OPEN };
                    prop_assert!(text[pos..].starts_with(tag));
                    pos += tag.len();
                    reasoning = p.reasoning;
                }
                prop_assert!(text[pos..].starts_with(&p.text), "piece {:?} at {}", p.text, pos);
                let (_, _, t) = bounds.iter().find(|(a, b, _)| *a <= pos && pos < *b).expect("bound");
                prop_assert_eq!(p.t, *t, "piece {:?}", p.text);
                pos += p.text.len();
            }
        }
    }
}
