//! The chunks of one stream are nearly always the same bytes but for the text of their delta:
//! the same `id`, `model` and `object`, the same `index`, `finish_reason: null`. A chunk that
//! is the previous plain chunk's bytes with only that text changed is read by comparing the
//! bytes around the text, at a few percent of a parse.
//!
//! Why this is exact: the template is a payload the fast reader parsed whole, whose only
//! value the client uses is one delta text, a string without escapes. A payload made of the
//! template's bytes before that string's contents, any run of bytes free of `"`, `\` and
//! control bytes, and the template's bytes after it, tokenizes as the template does, string
//! for string, with that run as the text: the string still ends at the same quote, and every
//! other value is the same bytes. A property test holds it to serde_json's reading.
//!
//! Why not always parse: at 256 streams the parse was about 40 % of the client's user-space
//! instructions (`ttft_accuracy -- cpu`). A server whose chunks vary elsewhere (a timestamp
//! that ticks, a per-chunk padding field) misses the template and is parsed as before; a miss
//! costs two byte comparisons.

use super::fast::{self, TextField, TextSpan};
use super::{ChatChunk, Choice, Delta};
use std::borrow::Cow;

/// The chunk reader of one stream: [`super::parse_payload`], with the stream's last plain
/// chunk as a template.
#[derive(Debug, Default)]
pub struct StreamChunks {
    template: Option<Template>,
}

#[derive(Debug)]
struct Template {
    /// The plain chunk's payload; its bytes around the text are what a chunk must match.
    payload: String,
    /// The text's start and end in `payload`: the prefix ends in its opening quote, the
    /// suffix begins with its closing one.
    start: usize,
    end: usize,
    field: TextField,
}

impl StreamChunks {
    pub fn new() -> StreamChunks {
        StreamChunks::default()
    }

    /// One `data:` payload: a chunk, or `None` for the `[DONE]` marker. The same answers as
    /// [`super::parse_payload`].
    pub fn parse<'a>(&mut self, data: &'a str) -> Result<Option<ChatChunk<'a>>, serde_json::Error> {
        if let Some(c) = self.template.as_ref().and_then(|t| t.read(data)) {
            return Ok(Some(c));
        }
        Ok(super::parse_spanned(data)?.map(|(c, span)| {
            self.learn(data, &c, span);
            c
        }))
    }

    /// Keeps `data` as the template when its chunk is plain: one delta text and nothing else
    /// the client reads.
    fn learn(&mut self, data: &str, c: &ChatChunk<'_>, span: Option<TextSpan>) {
        let Some(span) = span.filter(|s| plain(c, s.field)) else {
            return;
        };
        let t = self.template.get_or_insert_with(|| Template {
            payload: String::new(),
            start: 0,
            end: 0,
            field: span.field,
        });
        // The buffer is reused: a server that misses every time pays a copy, not an
        // allocation.
        t.payload.clear();
        t.payload.push_str(data);
        t.start = span.start;
        t.end = span.end;
        t.field = span.field;
    }
}

/// Whether the chunk holds nothing the client reads but the delta's `field` text.
fn plain(c: &ChatChunk<'_>, field: TextField) -> bool {
    let Some(choice) = &c.choice else {
        return false;
    };
    let d = &choice.delta;
    let texts = [
        (TextField::Content, &d.content),
        (TextField::ReasoningContent, &d.reasoning_content),
        (TextField::Reasoning, &d.reasoning),
    ];
    let only_field = texts
        .iter()
        .all(|(f, v)| matches!(v, Some(Cow::Borrowed(_))) == (*f == field));
    only_field
        && d.role.is_none()
        && choice.finish_reason.is_none()
        && c.usage.is_none()
        && c.timings.is_none()
        && c.error.is_none()
        && c.ollama_timings().is_none()
}

impl Template {
    /// The chunk, when `data` is the template with another text.
    fn read<'a>(&self, data: &'a str) -> Option<ChatChunk<'a>> {
        let (prefix, suffix) = (&self.payload[..self.start], &self.payload[self.end..]);
        let b = data.as_bytes();
        let end = b.len().checked_sub(suffix.len())?;
        if end < prefix.len()
            || !b.starts_with(prefix.as_bytes())
            || !b.ends_with(suffix.as_bytes())
        {
            return None;
        }
        // Both cuts sit next to an ASCII quote, so they are char boundaries.
        let text = data.get(prefix.len()..end)?;
        if fast::find_special(text.as_bytes(), 0).is_some() {
            return None;
        }
        let text = Some(Cow::Borrowed(text));
        let mut delta = Delta::default();
        match self.field {
            TextField::Content => delta.content = text,
            TextField::ReasoningContent => delta.reasoning_content = text,
            TextField::Reasoning => delta.reasoning = text,
        }
        Some(ChatChunk {
            choice: Some(Choice {
                delta,
                finish_reason: None,
            }),
            ..ChatChunk::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// serde_json's reading: the ground truth.
    fn oracle(s: &str) -> Option<ChatChunk<'_>> {
        if s.trim() == "[DONE]" {
            return None;
        }
        serde_json::from_str(s).ok()
    }

    const PLAIN: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733,"model":"m","choices":[{"index":0,"delta":{"content":" w3"},"logprobs":null,"finish_reason":null}]}"#;

    fn with_text(text: &str) -> String {
        PLAIN.replace(" w3", text)
    }

    #[test]
    fn a_chunk_that_differs_only_in_its_text_is_read_from_the_template() {
        let mut r = StreamChunks::new();
        assert!(r.parse(PLAIN).unwrap().is_some());
        let t = r
            .template
            .as_ref()
            .expect("a plain chunk becomes the template");
        for text in [
            "",
            "x",
            " hello world",
            "é😀",
            "a b c d e f g h i j k l m n o p",
        ] {
            let s = with_text(text);
            let c = t.read(&s).expect("read from the template");
            assert_eq!(Some(c), oracle(&s), "text {text:?}");
        }
        // Not these: the text has a quote, escape or control byte, or other bytes changed.
        for s in [
            with_text(r#"a\"b"#),
            with_text(r"a\nb"),
            with_text("a\u{1}b"),
            with_text(r#"a","content":"b"#),
            PLAIN.replace("null}]}", r#""stop"}]}"#),
            PLAIN.replace("1733", "1734"),
            PLAIN.replace("content", "reasoning"),
            "[DONE]".to_string(),
            String::new(),
        ] {
            assert!(t.read(&s).is_none(), "read from the template: {s}");
        }
    }

    #[test]
    fn only_plain_chunks_become_templates() {
        for s in [
            r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}}],"usage":{"completion_tokens":1}}"#,
            r#"{"choices":[{"delta":{"content":"a","reasoning_content":"b"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a\nb"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}}],"eval_count":3}"#,
            r#"{"choices":[]}"#,
        ] {
            let mut r = StreamChunks::new();
            r.parse(s).unwrap();
            assert!(r.template.is_none(), "became a template: {s}");
        }
        let mut r = StreamChunks::new();
        r.parse(r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#)
            .unwrap();
        assert!(r.template.is_some());
    }

    /// The next payload of a stream: a new delta text, and perhaps a change elsewhere.
    fn variant() -> impl Strategy<Value = (String, Option<(prop::sample::Index, String)>)> {
        (
            prop_oneof![
                "[a-z é😀]{0,12}",
                any::<String>(),
                prop::sample::select(vec!["\"", "\\", "\\n", "\u{1}", "\",\"x\":\"", "}"])
                    .prop_map(str::to_string),
            ],
            proptest::option::weighted(
                0.3,
                (
                    any::<prop::sample::Index>(),
                    prop::sample::select(vec!["", "\"", "1", ",", "}", " ", "n", "\\"])
                        .prop_map(str::to_string),
                ),
            ),
        )
    }

    /// Plain chunks of real servers' shapes, with `TEXT` where the delta's text goes.
    const BASES: &[&str] = &[
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733,"model":"m","choices":[{"index":0,"delta":{"content":"TEXT"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"TEXT"}}],"created":1733,"id":"chatcmpl-x","model":"gemma","system_fingerprint":"b1-abc","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"delta":{"content":"TEXT"},"finish_reason":null,"index":0}],"id":"chatcmpl-scripted","model":"scripted-model","object":"chat.completion.chunk"}"#,
        r#"{"id":"r","choices":[{"index":0,"delta":{"reasoning_content":"TEXT","content":null}}]}"#,
        r#" { "choices" : [ { "delta" : { "reasoning" : "TEXT" } } , {"delta":{"content":"other"}} ] } "#,
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// A stream of payloads, each a variant of a plain chunk: every answer is serde_json's.
        #[test]
        fn a_stream_of_variants_reads_as_serde_json_does(
            base in 0..BASES.len(),
            stream in prop::collection::vec(variant(), 1..8),
        ) {
            let mut r = StreamChunks::new();
            for (text, damage) in stream {
                let mut s = BASES[base].replace("TEXT", "w");
                // The new text where the base's was; a damage may land before, in or after it.
                s = s.replacen("\"w\"", &format!("\"{text}\""), 1);
                if let Some((at, b)) = damage {
                    let mut cut = at.index(s.len() + 1);
                    while !s.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    s.insert_str(cut, &b);
                }
                match (r.parse(&s), oracle(&s)) {
                    (Ok(got), want) if s.trim() != "[DONE]" => {
                        prop_assert_eq!(got.as_ref(), want.as_ref(), "payload: {}", s)
                    }
                    (Err(_), want) => prop_assert!(want.is_none(), "refused what serde_json reads: {}", s),
                    _ => {}
                }
            }
        }
    }

    /// The property is not vacuous: in generated streams most chunks after the first are read
    /// from the template.
    #[test]
    fn generated_streams_are_mostly_read_from_the_template() {
        let mut r = StreamChunks::new();
        let mut hits = 0;
        let texts = ["a", " b", "ccc", "", "é", "d e"];
        for base in BASES {
            for text in texts {
                let s = base.replace("TEXT", text);
                if r.template.as_ref().and_then(|t| t.read(&s)).is_some() {
                    hits += 1;
                }
                assert_eq!(r.parse(&s).unwrap(), oracle(&s));
            }
        }
        assert_eq!(hits, BASES.len() * (texts.len() - 1));
    }
}
