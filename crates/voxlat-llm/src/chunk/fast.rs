//! A reader for the shape nearly every streamed chunk has: an object whose `choices[0].delta`
//! holds a few strings, among fields that are skipped.
//!
//! Why not serde_json alone: a chunk is parsed per token of every stream, and serde_json's
//! derived reader took about 5,000 instructions for a 150-byte chunk, a quarter of the
//! measuring client's CPU at 256 streams (`ttft_accuracy -- cpu`). This reader walks only
//! the fields the client uses and finds string ends with `memchr`.
//!
//! It answers only when it is sure: any input it does not fully understand (an escaped key,
//! a duplicate field, a value of an unexpected type, anything malformed) gives `None`, and
//! the caller hands the payload to serde_json, whose answer or error stands. The values it
//! does not read itself (numbers, nested values, the rare `usage`, `timings` and `error`,
//! strings with escapes) are read by serde_json too, so JSON's grammar is serde_json's
//! everywhere. A property test holds it to serde_json's result.

use super::{ChatChunk, Choice, Delta, Usage};
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::borrow::Cow;

/// The chunk, where the payload has the common shape and is valid; else `None`.
pub(super) fn parse(s: &str) -> Option<ChatChunk<'_>> {
    let mut r = Reader { s, i: 0 };
    let mut c = ChatChunk::default();
    let mut seen = Seen::default();
    r.open(b'{')?;
    let mut first = true;
    while let Some(key) = r.next_key(&mut first)? {
        match key {
            "choices" => {
                seen.once(0)?;
                c.choice = r.choices()?;
            }
            "usage" => {
                seen.once(1)?;
                c.usage = r.serde::<Option<Usage>>()?;
            }
            "timings" => {
                seen.once(2)?;
                c.timings = r.serde::<Option<serde_json::Value>>()?;
            }
            "error" => {
                seen.once(3)?;
                c.error = r.serde::<Option<serde_json::Value>>()?;
            }
            "load_duration" => c.load_duration = r.count(&mut seen, 4)?,
            "prompt_eval_duration" => c.prompt_eval_duration = r.count(&mut seen, 5)?,
            "prompt_eval_count" => c.prompt_eval_count = r.count(&mut seen, 6)?,
            "eval_duration" => c.eval_duration = r.count(&mut seen, 7)?,
            "eval_count" => c.eval_count = r.count(&mut seen, 8)?,
            "total_duration" => c.total_duration = r.count(&mut seen, 9)?,
            _ => r.skip()?,
        }
    }
    r.ws();
    (r.i == r.s.len()).then_some(c)
}

/// Which fields of one object were read: serde's derive fails on a repeated field, so a
/// repeat goes to serde_json for that error.
#[derive(Default)]
struct Seen(u16);

impl Seen {
    fn once(&mut self, field: u8) -> Option<()> {
        let bit = 1 << field;
        (self.0 & bit == 0).then(|| self.0 |= bit)
    }
}

/// The first `"`, `\\` or control byte at or after `from`: eight bytes at a time, as chunk
/// strings are short and a `memchr` call costs more than it saves on them.
pub(super) fn find_special(b: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte that is zero (of `x`) or below 0x20 (of `w`). A borrow can
    // flag bytes above a true match, never below one, so the lowest flag is exact.
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let mut i = from;
    while let Some(word) = b.get(i..i + 8) {
        let mut w = [0; 8];
        w.copy_from_slice(word);
        let w = u64::from_le_bytes(w);
        let hits = (zero(w ^ (ONES * u64::from(b'"')))
            | zero(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w))
            & HIGH;
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    let tail = b.get(i..)?;
    tail.iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map(|p| i + p)
}

struct Reader<'a> {
    s: &'a str,
    /// Byte offset of the next unread byte; always on a char boundary, since the reader only
    /// steps over ASCII and over whole values.
    i: usize,
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        let b = self.s.as_bytes();
        while matches!(b.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.as_bytes().get(self.i).copied()
    }

    fn open(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Inside an object: the next key, or `Some(None)` at the object's end. `first`: no
    /// member read yet.
    fn next_key(&mut self, first: &mut bool) -> Option<Option<&'a str>> {
        match self.peek()? {
            b'}' => {
                self.i += 1;
                return Some(None);
            }
            b',' if !*first => self.i += 1,
            b'"' if *first => {}
            _ => return None,
        }
        *first = false;
        // An escaped key would need unescaping to be matched: serde_json's case.
        let Cow::Borrowed(key) = self.string()? else {
            return None;
        };
        self.open(b':')?;
        Some(Some(key))
    }

    /// A string value; borrowed when it has no escapes. Escapes, and the check of them, are
    /// serde_json's.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        if self.peek()? != b'"' {
            return None;
        }
        let b = self.s.as_bytes();
        let start = self.i + 1;
        let mut end = find_special(b, start)?;
        match b[end] {
            b'"' => {
                self.i = end + 1;
                return Some(Cow::Borrowed(&self.s[start..end]));
            }
            b'\\' => {}
            // JSON forbids raw control characters in strings.
            _ => return None,
        }
        while b[end] == b'\\' {
            let from = end + 2;
            end = from + memchr::memchr2(b'"', b'\\', b.get(from..)?)?;
        }
        let quoted = self.s.get(start - 1..end + 1)?;
        let text: String = serde_json::from_str(quoted).ok()?;
        self.i = end + 1;
        Some(Cow::Owned(text))
    }

    /// A string or `null`.
    fn nullable_string(&mut self) -> Option<Option<Cow<'a, str>>> {
        match self.peek()? {
            b'n' => self.null().map(|()| None),
            _ => self.string().map(Some),
        }
    }

    /// The literal `null`; what follows it is checked by the caller's `,`, `}` or `]`.
    fn null(&mut self) -> Option<()> {
        self.s[self.i..].starts_with("null").then(|| self.i += 4)
    }

    /// One value of any kind, read by serde_json from the cursor on.
    fn serde<T: Deserialize<'a>>(&mut self) -> Option<T> {
        self.ws();
        let mut values = serde_json::Deserializer::from_str(&self.s[self.i..]).into_iter::<T>();
        let v = values.next()?.ok()?;
        self.i += values.byte_offset();
        Some(v)
    }

    fn count(&mut self, seen: &mut Seen, field: u8) -> Option<Option<u64>> {
        seen.once(field)?;
        self.serde::<Option<u64>>()
    }

    /// Steps over a value the client does not use.
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'n' => self.null(),
            b'-' | b'0'..=b'9' if self.integer() => Some(()),
            _ => self.serde::<IgnoredAny>().map(drop),
        }
    }

    /// Steps over a plain integer (`index`, `created`): `-?(0|[1-9][0-9]*)` ending where a
    /// value may end. False for anything else (a fraction, an exponent, a malformed number),
    /// with nothing consumed: serde_json reads those.
    fn integer(&mut self) -> bool {
        let b = self.s.as_bytes();
        let mut j = self.i + usize::from(b.get(self.i) == Some(&b'-'));
        match b.get(j) {
            Some(b'0') => j += 1,
            Some(b'1'..=b'9') => {
                j += 1;
                while b.get(j).is_some_and(u8::is_ascii_digit) {
                    j += 1;
                }
            }
            _ => return false,
        }
        let ends = matches!(
            b.get(j),
            Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
        );
        if ends {
            self.i = j;
        }
        ends
    }

    /// `choices`: `null`, or an array whose first element, if any, is read.
    fn choices(&mut self) -> Option<Option<Choice<'a>>> {
        if self.peek()? == b'n' {
            return self.null().map(|()| None);
        }
        self.open(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(None);
        }
        let first = self.choice()?;
        loop {
            match self.peek()? {
                b']' => {
                    self.i += 1;
                    return Some(Some(first));
                }
                b',' => {
                    self.i += 1;
                    self.skip()?;
                }
                _ => return None,
            }
        }
    }

    fn choice(&mut self) -> Option<Choice<'a>> {
        let mut c = Choice::default();
        let mut seen = Seen::default();
        self.open(b'{')?;
        let mut first = true;
        while let Some(key) = self.next_key(&mut first)? {
            match key {
                "delta" => {
                    seen.once(0)?;
                    c.delta = self.delta()?;
                }
                "finish_reason" => {
                    seen.once(1)?;
                    c.finish_reason = self.nullable_string()?;
                }
                _ => self.skip()?,
            }
        }
        Some(c)
    }

    fn delta(&mut self) -> Option<Delta<'a>> {
        let mut d = Delta::default();
        let mut seen = Seen::default();
        self.open(b'{')?;
        let mut first = true;
        while let Some(key) = self.next_key(&mut first)? {
            let (field, slot) = match key {
                "role" => (0, &mut d.role),
                "content" => (1, &mut d.content),
                "reasoning_content" => (2, &mut d.reasoning_content),
                "reasoning" => (3, &mut d.reasoning),
                _ => {
                    self.skip()?;
                    continue;
                }
            };
            seen.once(field)?;
            *slot = self.nullable_string()?;
        }
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;

    /// serde_json's reading of the same payload: the ground truth.
    fn oracle(s: &str) -> Result<ChatChunk<'_>, serde_json::Error> {
        serde_json::from_str(s)
    }

    fn agrees(s: &str) {
        if let Some(fast) = parse(s) {
            match oracle(s) {
                Ok(slow) => assert_eq!(fast, slow, "payload: {s}"),
                Err(e) => panic!("the fast reader took what serde_json refuses ({e}): {s}"),
            }
        }
    }

    #[test]
    fn the_common_shapes_are_read_here_and_agree() {
        for s in [
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733,"model":"m","choices":[{"index":0,"delta":{"content":" w3"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"prompt_tokens_details":{"cached_tokens":8}},"timings":{"prompt_n":4,"predicted_ms":1.5}}"#,
            r#" { "choices" : [ { "delta" : { "content" : "a\"b\u00e9\n" } } , {"delta":{}} ] } "#,
            r#"{"choices":[{"delta":{"reasoning_content":"hmm","content":null}}],"eval_count":7}"#,
            r#"{"choices":null,"system_fingerprint":null,"x":[1,{"y":[true,false]}],"z":-1.5e3}"#,
        ] {
            assert!(parse(s).is_some(), "not read by the fast reader: {s}");
            agrees(s);
        }
    }

    #[test]
    fn what_it_does_not_understand_goes_to_serde_json() {
        for s in [
            r#"{"choices":[{"delta":{"content":"a"}}],"choices":[]}"#,
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"\u0063hoices":[{"delta":{"content":"a"}}]}"#,
            r#"{"choices":[{"delta":{"content":5}}]}"#,
            r#"{"choices":[[{"content":"a"}]]}"#,
            r#"{"choices":[{"delta":null}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}},]}"#,
            r#"{"choices":[{"delta":{"content":"a"}}],}"#,
            r#"{,"choices":[]}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":nul}"#,
            r#"{"a":nullx}"#,
            r#"{"a":"x\qy"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":01}"#,
            r#"{"a":-}"#,
            r#"{"a":1.}"#,
            r#"{"a":-01}"#,
            r#"{"choices":[]} x"#,
            r#"{"choices":["#,
            r#"{"a":"unterminated"#,
            r#"{"a":"esc\"#,
            r#"[]"#,
            "",
        ] {
            assert!(parse(s).is_none(), "the fast reader took: {s}");
        }
    }

    /// A JSON text for a value: a string, number, literal or small nested value.
    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
            "[a-z \\\\\"\u{e9}\u{1F600}]{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| serde_json::to_string(&f).unwrap()),
            Just("null".to_string()),
            Just("true".to_string()),
            Just("{}".to_string()),
            Just(r#"{"prompt_tokens":3,"total_tokens":4}"#.to_string()),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(("[a-z_]{1,6}", inner), 0..3).prop_map(|v| {
                    let m: Vec<String> =
                        v.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", m.join(","))
                }),
            ]
        })
    }

    /// An object with members drawn from `keys`, each with a value from `vals`; keys may
    /// repeat.
    fn object(keys: Vec<&'static str>, vals: BoxedStrategy<String>) -> BoxedStrategy<String> {
        prop::collection::vec((prop::sample::select(keys), vals, " ?"), 0..5)
            .prop_map(|m| {
                let m: Vec<String> = m
                    .into_iter()
                    .map(|(k, v, ws)| format!("{ws}\"{k}\"{ws}:{ws}{v}"))
                    .collect();
                format!("{{{}}}", m.join(","))
            })
            .boxed()
    }

    fn chunk_text() -> impl Strategy<Value = String> {
        let delta = object(
            vec![
                "role",
                "content",
                "reasoning_content",
                "reasoning",
                "tool_calls",
            ],
            value().boxed(),
        );
        let choice = object(
            vec!["delta", "finish_reason", "index", "logprobs"],
            prop_oneof![delta, value()].boxed(),
        );
        let choices = prop::collection::vec(prop_oneof![choice, value()], 0..3)
            .prop_map(|v| format!("[{}]", v.join(",")));
        object(
            vec![
                "choices",
                "id",
                "usage",
                "timings",
                "error",
                "eval_count",
                "model",
                "created",
            ],
            prop_oneof![3 => choices, 2 => value()].boxed(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn find_special_finds_the_first_quote_backslash_or_control_byte(
            b in prop::collection::vec(prop_oneof![any::<u8>(), Just(b'"'), Just(b'\\'), 0x20u8..0x7f], 0..40),
            from in 0usize..41,
        ) {
            let naive = b.get(from..).and_then(|t| {
                t.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).map(|p| from + p)
            });
            prop_assert_eq!(find_special(&b, from), naive);
        }

        /// Whatever the fast reader accepts, serde_json reads the same.
        #[test]
        fn it_agrees_with_serde_json(s in chunk_text()) {
            agrees(&s);
        }

        /// Cut or corrupted payloads: still never an answer serde_json would not give.
        #[test]
        fn damaged_payloads_never_disagree(s in chunk_text(), at in any::<prop::sample::Index>(), b in prop::sample::select(vec!["", "\"", "\\", ",", "}", "]", "n", "\u{1}", " "])) {
            let cut = at.index(s.len() + 1);
            let cut = (0..=cut).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
            agrees(&s[..cut]);
            agrees(&format!("{}{b}{}", &s[..cut], &s[cut..]));
        }
    }

    /// The property is not vacuous: most generated chunks are read by the fast reader.
    #[test]
    fn most_generated_chunks_take_the_fast_path() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = chunk_text();
        let (mut fast, mut valid) = (0, 0);
        for _ in 0..2000 {
            let s = strategy.new_tree(&mut runner).unwrap().current();
            if oracle(&s).is_ok() {
                valid += 1;
                fast += usize::from(parse(&s).is_some());
            }
        }
        assert!(valid > 200, "only {valid} valid chunks generated");
        assert!(fast * 2 > valid, "{fast} of {valid} valid chunks read fast");
    }
}
