//! The JSON payload of one streamed chat-completion event, read tolerantly: gateways differ
//! in which fields they send, and an unknown field must never fail a stream.
//!
//! Every chunk of every stream is parsed here, so the common shape has a reader of its own
//! (`fast`); anything else, and every error, is serde_json's.

mod fast;

use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::borrow::Cow;

/// Text fields borrow from the event's data where they can (no escapes): this is parsed once
/// per token of every stream, and the owned copies were a visible share of the client's CPU.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct ChatChunk<'a> {
    /// The first of `choices`: n = 1 is all voxlat asks for, and further choices would be
    /// other completions. Kept alone, so a chunk costs no allocation for the list.
    #[serde(default, borrow, rename = "choices", deserialize_with = "first_choice")]
    pub choice: Option<Choice<'a>>,
    #[serde(default)]
    pub usage: Option<Usage>,
    /// llama.cpp's server-side timings (and the embedded server's, which follow its names).
    #[serde(default)]
    pub timings: Option<serde_json::Value>,
    /// Some gateways send errors as a `data:` payload with an `error` object mid-stream.
    #[serde(default)]
    pub error: Option<serde_json::Value>,
    /// Ollama's durations (nanoseconds) and counts, sent by its native API and by proxies
    /// that pass them through; its OpenAI endpoint usually omits them.
    #[serde(default)]
    pub load_duration: Option<u64>,
    #[serde(default)]
    pub prompt_eval_duration: Option<u64>,
    #[serde(default)]
    pub prompt_eval_count: Option<u64>,
    #[serde(default)]
    pub eval_duration: Option<u64>,
    #[serde(default)]
    pub eval_count: Option<u64>,
    #[serde(default)]
    pub total_duration: Option<u64>,
}

impl ChatChunk<'_> {
    /// Ollama's timing fields, by their own names, when any is present.
    pub fn ollama_timings(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        let fields = [
            ("load_duration", self.load_duration),
            ("prompt_eval_duration", self.prompt_eval_duration),
            ("prompt_eval_count", self.prompt_eval_count),
            ("eval_duration", self.eval_duration),
            ("eval_count", self.eval_count),
            ("total_duration", self.total_duration),
        ];
        // Asked of every chunk, and almost no chunk has any.
        if fields.iter().all(|(_, v)| v.is_none()) {
            return None;
        }
        let mut m = serde_json::Map::new();
        for (k, v) in fields {
            if let Some(v) = v {
                m.insert(k.into(), v.into());
            }
        }
        Some(m)
    }
}

/// The first element of a `choices` array (`null` counts as none); the rest are skipped.
fn first_choice<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Choice<'a>>, D::Error> {
    struct First<'a>(Option<Choice<'a>>);
    impl<'de: 'a, 'a> Deserialize<'de> for First<'a> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V<'a>(std::marker::PhantomData<Choice<'a>>);
            impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
                type Value = First<'a>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an array of choices")
                }
                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<First<'a>, A::Error> {
                    let first = seq.next_element::<Choice<'a>>()?;
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    Ok(First(first))
                }
            }
            d.deserialize_seq(V(std::marker::PhantomData))
        }
    }
    Ok(Option::<First<'a>>::deserialize(d)?.and_then(|f| f.0))
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Choice<'a> {
    #[serde(default, borrow)]
    pub delta: Delta<'a>,
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Delta<'a> {
    #[serde(default, borrow)]
    pub role: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub content: Option<Cow<'a, str>>,
    /// DeepSeek / vLLM / SGLang convention.
    #[serde(default, borrow)]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// OpenRouter / Ollama / newer vLLM convention.
    #[serde(default, borrow)]
    pub reasoning: Option<Cow<'a, str>>,
}

impl Delta<'_> {
    /// Reasoning text under either field name.
    pub fn reasoning_text(&self) -> Option<&str> {
        self.reasoning_content
            .as_deref()
            .or(self.reasoning.as_deref())
            .filter(|s| !s.is_empty())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct PromptTokensDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct CompletionTokensDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

/// One `data:` payload: a chunk, or `None` for the `[DONE]` marker.
pub fn parse_payload(data: &str) -> Result<Option<ChatChunk<'_>>, serde_json::Error> {
    if data.trim() == "[DONE]" {
        return Ok(None);
    }
    match fast::parse(data) {
        Some(c) => Ok(Some(c)),
        None => serde_json::from_str(data).map(Some),
    }
}

/// A readable message out of an OpenAI-style error object (`{"message": …}`) or anything else.
pub fn error_message(v: &serde_json::Value) -> String {
    v.get("message")
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .or_else(|| v.as_str().map(str::to_string))
        .unwrap_or_else(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(s: &str) -> ChatChunk<'_> {
        parse_payload(s).unwrap().expect("a chunk, not [DONE]")
    }

    #[test]
    fn role_only_chunk_has_no_content() {
        let c = chunk(
            r#"{"id":"x","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}"#,
        );
        assert_eq!(
            c.choice.as_ref().unwrap().delta.role.as_deref(),
            Some("assistant")
        );
        assert!(c.choice.as_ref().unwrap().delta.content.is_none());
    }

    #[test]
    fn usage_chunk_with_empty_choices() {
        let c = chunk(
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":8}}}"#,
        );
        assert!(c.choice.is_none());
        let u = c.usage.unwrap();
        assert_eq!(u.completion_tokens, Some(5));
        assert_eq!(u.prompt_tokens_details.unwrap().cached_tokens, Some(8));
    }

    #[test]
    fn both_reasoning_field_names() {
        let a = chunk(r#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#);
        let b = chunk(r#"{"choices":[{"delta":{"reasoning":"hmm","content":""}}]}"#);
        assert_eq!(
            a.choice.as_ref().unwrap().delta.reasoning_text(),
            Some("hmm")
        );
        assert_eq!(
            b.choice.as_ref().unwrap().delta.reasoning_text(),
            Some("hmm")
        );
        let c = chunk(r#"{"choices":[{"delta":{"reasoning_content":""}}]}"#);
        assert_eq!(c.choice.as_ref().unwrap().delta.reasoning_text(), None);
    }

    #[test]
    fn done_marker_and_garbage() {
        assert!(matches!(parse_payload(" [DONE] "), Ok(None)));
        assert!(parse_payload("{not json").is_err());
        let e = chunk(r#"{"error":{"message":"overloaded","type":"server_error"}}"#);
        assert_eq!(error_message(e.error.as_ref().unwrap()), "overloaded");
    }

    #[test]
    fn unknown_fields_and_nulls_are_tolerated() {
        let c = chunk(
            r#"{"object":"chat.completion.chunk","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Hi","tool_calls":null},"logprobs":null}],"usage":null}"#,
        );
        assert_eq!(
            c.choice.as_ref().unwrap().delta.content.as_deref(),
            Some("Hi")
        );
        assert!(c.usage.is_none());
    }
}
