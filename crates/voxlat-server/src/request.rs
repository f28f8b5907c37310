//! The chat-completion request, read field by field from JSON so that every rejection names
//! the field and what was expected (serde's own messages name a line and column instead).

use crate::error::ApiError;
use serde_json::{Map, Value};

/// Replies are capped here when the request sets no `max_tokens`: the bundled model is a base
/// model that rarely stops by itself, and an uncapped reply would hold the slot for minutes.
pub const DEFAULT_MAX_TOKENS: u32 = 512;
/// More stop strings than this is almost certainly a client bug, and each costs a scan per token.
const MAX_STOPS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<Message>,
    pub stream: bool,
    pub include_usage: bool,
    pub timings_per_token: bool,
    pub max_tokens: u32,
    /// 0 means greedy.
    pub temperature: f32,
    pub top_p: f32,
    pub seed: Option<u32>,
    pub stop: Vec<String>,
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::BadRequest(msg.into())
}

impl ChatRequest {
    pub fn parse(body: &[u8]) -> Result<ChatRequest, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(bad(
                "request body is empty: send a JSON object with a `messages` array",
            ));
        }
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| bad(format!("request body is not valid JSON: {e}")))?;
        let Value::Object(o) = v else {
            return Err(bad(
                "request body must be a JSON object with a `messages` array",
            ));
        };
        Self::from_object(&o)
    }

    fn from_object(o: &Map<String, Value>) -> Result<ChatRequest, ApiError> {
        let model = opt_str(o, "model")?.filter(|m| !m.is_empty());
        let messages = messages(o)?;
        let stream = opt_bool(o, "stream")?.unwrap_or(false);
        let include_usage = match o.get("stream_options") {
            None | Some(Value::Null) => false,
            Some(Value::Object(so)) => opt_bool(so, "include_usage")
                .map_err(|_| bad("field `stream_options.include_usage` must be a boolean"))?
                .unwrap_or(false),
            Some(_) => return Err(bad("field `stream_options` must be an object")),
        };
        let timings_per_token = opt_bool(o, "timings_per_token")?.unwrap_or(false);
        if let Some(n) = opt_u64(o, "n")? {
            if n != 1 {
                return Err(bad(format!(
                    "field `n` is {n}, but this server produces exactly one choice; omit it or send 1"
                )));
            }
        }
        let max_tokens = match opt_u64(o, "max_tokens")?.or(opt_u64(o, "max_completion_tokens")?) {
            None => DEFAULT_MAX_TOKENS,
            Some(0) => return Err(bad("field `max_tokens` must be at least 1")),
            Some(n) => u32::try_from(n).unwrap_or(u32::MAX),
        };
        let temperature = match opt_f64(o, "temperature")? {
            None => 1.0,
            Some(t) if (0.0..=2.0).contains(&t) => t as f32,
            Some(t) => {
                return Err(bad(format!(
                    "field `temperature` is {t}; it must be between 0 and 2"
                )))
            }
        };
        let top_p = match opt_f64(o, "top_p")? {
            None => 1.0,
            Some(p) if p > 0.0 && p <= 1.0 => p as f32,
            Some(p) => {
                return Err(bad(format!(
                    "field `top_p` is {p}; it must be greater than 0 and at most 1"
                )))
            }
        };
        // llama.cpp's samplers take a 32-bit seed; fold the high half in rather than reject
        // the 64-bit seeds other servers accept.
        let seed = match o.get("seed") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_i64() {
                Some(s) => Some(((s as u64) ^ ((s as u64) >> 32)) as u32),
                None => return Err(bad("field `seed` must be an integer")),
            },
        };
        let stop = stops(o)?;
        Ok(ChatRequest {
            model,
            messages,
            stream,
            include_usage,
            timings_per_token,
            max_tokens,
            temperature,
            top_p,
            seed,
            stop,
        })
    }
}

fn messages(o: &Map<String, Value>) -> Result<Vec<Message>, ApiError> {
    let arr = match o.get("messages") {
        None | Some(Value::Null) => {
            return Err(bad(
                "missing field `messages`: send [{\"role\": \"user\", \"content\": \"...\"}]",
            ))
        }
        Some(Value::Array(a)) => a,
        Some(_) => return Err(bad("field `messages` must be an array")),
    };
    if arr.is_empty() {
        return Err(bad("field `messages` is empty: send at least one message"));
    }
    arr.iter()
        .enumerate()
        .map(|(i, m)| {
            let Value::Object(m) = m else {
                return Err(bad(format!("`messages[{i}]` must be an object")));
            };
            let role = match m.get("role").and_then(Value::as_str) {
                Some("system") | Some("developer") => Role::System,
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some(other) => {
                    return Err(bad(format!(
                        "`messages[{i}].role` is {other:?}; this server accepts system, developer, user and assistant"
                    )))
                }
                None => {
                    return Err(bad(format!(
                        "missing field `messages[{i}].role` (a string)"
                    )))
                }
            };
            let content = content(m.get("content"), i)?;
            if content.contains('\0') {
                return Err(bad(format!(
                    "`messages[{i}].content` contains a NUL character"
                )));
            }
            Ok(Message { role, content })
        })
        .collect()
}

/// A string, or an array of `{"type": "text", "text": …}` parts (joined), as OpenAI allows.
fn content(v: Option<&Value>, i: usize) -> Result<String, ApiError> {
    match v {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for (j, p) in parts.iter().enumerate() {
                match (
                    p.get("type").and_then(Value::as_str),
                    p.get("text").and_then(Value::as_str),
                ) {
                    (Some("text"), Some(t)) => out.push_str(t),
                    _ => {
                        return Err(bad(format!(
                            "`messages[{i}].content[{j}]` must be {{\"type\": \"text\", \"text\": \"...\"}}; this server takes text only"
                        )))
                    }
                }
            }
            Ok(out)
        }
        None | Some(Value::Null) => Err(bad(format!(
            "missing field `messages[{i}].content` (a string)"
        ))),
        Some(_) => Err(bad(format!(
            "`messages[{i}].content` must be a string or an array of text parts"
        ))),
    }
}

fn stops(o: &Map<String, Value>) -> Result<Vec<String>, ApiError> {
    let list = match o.get("stop") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| {
                s.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad("field `stop` must be a string or an array of strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("field `stop` must be a string or an array of strings")),
    };
    if list.len() > MAX_STOPS {
        return Err(bad(format!(
            "field `stop` has {} strings; at most {MAX_STOPS} are accepted",
            list.len()
        )));
    }
    if list.iter().any(String::is_empty) {
        return Err(bad("field `stop` contains an empty string"));
    }
    Ok(list)
}

fn opt_str(o: &Map<String, Value>, k: &str) -> Result<Option<String>, ApiError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(format!("field `{k}` must be a string"))),
    }
}

fn opt_bool(o: &Map<String, Value>, k: &str) -> Result<Option<bool>, ApiError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(format!("field `{k}` must be a boolean"))),
    }
}

fn opt_u64(o: &Map<String, Value>, k: &str) -> Result<Option<u64>, ApiError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(format!("field `{k}` must be a non-negative integer"))),
    }
}

fn opt_f64(o: &Map<String, Value>, k: &str) -> Result<Option<f64>, ApiError> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| bad(format!("field `{k}` must be a number"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        ChatRequest::parse(body.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn minimal_request_gets_defaults() {
        let r = ChatRequest::parse(br#"{"messages":[{"role":"user","content":"hi"}]}"#).unwrap();
        assert_eq!(r.messages.len(), 1);
        assert_eq!(r.max_tokens, DEFAULT_MAX_TOKENS);
        assert!(!r.stream && !r.include_usage && r.stop.is_empty() && r.seed.is_none());
    }

    #[test]
    fn full_request() {
        let r = ChatRequest::parse(
            br#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":7,
                "temperature":0,"top_p":0.5,"seed":42,"stop":["\n","END"],"timings_per_token":true,
                "messages":[{"role":"system","content":"be brief"},
                            {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}"#,
        )
        .unwrap();
        assert_eq!(r.model.as_deref(), Some("m"));
        assert!(r.stream && r.include_usage && r.timings_per_token);
        assert_eq!((r.max_tokens, r.temperature, r.top_p), (7, 0.0, 0.5));
        assert_eq!(r.seed, Some(42));
        assert_eq!(r.stop, vec!["\n".to_string(), "END".to_string()]);
        assert_eq!(r.messages[1].content, "ab");
        assert_eq!(r.messages[0].role, Role::System);
    }

    #[test]
    fn every_rejection_names_the_field() {
        assert!(err("{not json").contains("not valid JSON"));
        assert!(err("").contains("empty"));
        assert!(err("[1]").contains("JSON object"));
        assert!(err("{}").contains("`messages`"));
        assert!(err(r#"{"messages":"hi"}"#).contains("`messages` must be an array"));
        assert!(err(r#"{"messages":[]}"#).contains("`messages` is empty"));
        assert!(err(r#"{"messages":[{"content":"x"}]}"#).contains("messages[0].role"));
        assert!(err(r#"{"messages":[{"role":"tool","content":"x"}]}"#).contains("\"tool\""));
        assert!(err(r#"{"messages":[{"role":"user"}]}"#).contains("messages[0].content"));
        let m = r#""messages":[{"role":"user","content":"x"}]"#;
        assert!(err(&format!("{{{m},\"max_tokens\":-1}}")).contains("`max_tokens`"));
        assert!(err(&format!("{{{m},\"max_tokens\":0}}")).contains("`max_tokens`"));
        assert!(err(&format!("{{{m},\"temperature\":\"hot\"}}")).contains("`temperature`"));
        assert!(err(&format!("{{{m},\"temperature\":3}}")).contains("`temperature`"));
        assert!(err(&format!("{{{m},\"top_p\":0}}")).contains("`top_p`"));
        assert!(err(&format!("{{{m},\"stop\":[1]}}")).contains("`stop`"));
        assert!(err(&format!("{{{m},\"stop\":\"\"}}")).contains("`stop`"));
        assert!(err(&format!("{{{m},\"stream\":\"yes\"}}")).contains("`stream`"));
        assert!(err(&format!(
            "{{{m},\"stream_options\":{{\"include_usage\":1}}}}"
        ))
        .contains("stream_options.include_usage"));
        assert!(err(&format!("{{{m},\"n\":2}}")).contains("`n`"));
        assert!(err(&format!("{{{m},\"seed\":1.5}}")).contains("`seed`"));
        assert!(err(r#"{"messages":[{"role":"user","content":"a\u0000b"}]}"#).contains("NUL"));
    }

    #[test]
    fn huge_and_negative_seeds_fold_into_32_bits() {
        let m = r#""messages":[{"role":"user","content":"x"}]"#;
        let a = ChatRequest::parse(format!("{{{m},\"seed\":-1}}").as_bytes()).unwrap();
        let b = ChatRequest::parse(format!("{{{m},\"seed\":{}}}", i64::MAX).as_bytes()).unwrap();
        assert!(a.seed.is_some() && b.seed.is_some());
    }
}
