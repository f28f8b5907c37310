//! What is sent as the prompt: literal text, a file, a JSON chat, or synthetic text of a
//! chosen size.
//!
//! Synthetic prompts are built from common English words that are one token each (with their
//! leading space) in the GPT-2, Llama 3 and Gemma BPE vocabularies, so N words ≈ N tokens; the
//! instruction around them adds about 15. The server's `usage.prompt_tokens`, recorded per
//! request, is the true count. Each request gets a different word sequence, and each run a
//! different seed, so a server's prefix cache (llama-server keeps earlier prompts in host
//! memory across runs) cannot turn a prefill measurement into a cache-hit measurement by
//! accident.

use super::record::CacheStep;
use std::path::Path;
use voxlat_llm::client::Message;

#[derive(Clone, Debug, PartialEq)]
pub enum PromptSource {
    Text(String),
    Messages(Vec<Message>),
    /// `seed` is the run's: the same seed sends the same prompts.
    Synthetic {
        tokens: u32,
        seed: u64,
    },
}

const WORDS: &[&str] = &[
    "the",
    "time",
    "people",
    "way",
    "water",
    "day",
    "world",
    "life",
    "work",
    "house",
    "city",
    "night",
    "family",
    "group",
    "place",
    "home",
    "school",
    "book",
    "story",
    "friend",
    "river",
    "music",
    "game",
    "road",
    "light",
    "sound",
    "color",
    "table",
    "window",
    "door",
    "paper",
    "tree",
    "garden",
    "market",
    "train",
    "street",
    "money",
    "song",
    "voice",
    "idea",
    "plan",
    "letter",
    "morning",
    "summer",
    "winter",
    "field",
    "stone",
    "bridge",
    "island",
    "mountain",
    "ocean",
    "forest",
    "village",
    "kitchen",
    "window",
    "picture",
    "teacher",
    "student",
    "doctor",
    "animal",
    "bird",
    "horse",
    "dog",
    "cat",
    "fish",
    "apple",
    "bread",
    "coffee",
    "milk",
    "sugar",
    "salt",
    "green",
    "blue",
    "red",
    "black",
    "white",
    "small",
    "large",
    "old",
    "new",
    "good",
    "long",
    "little",
    "great",
    "early",
    "young",
    "important",
    "public",
    "open",
    "simple",
    "strong",
    "walked",
    "found",
    "made",
    "took",
    "gave",
    "told",
    "thought",
    "looked",
    "came",
    "went",
    "and",
    "but",
    "with",
    "from",
    "under",
    "over",
    "after",
    "before",
    "near",
    "into",
];

impl PromptSource {
    pub fn from_file(path: &Path) -> Result<PromptSource, PromptError> {
        let text = std::fs::read_to_string(path).map_err(|e| PromptError::Read {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        if text.trim().is_empty() {
            return Err(PromptError::Empty(path.display().to_string()));
        }
        Ok(PromptSource::Text(text))
    }

    /// A JSON array of `{"role", "content"}` objects, or an object with a `messages` array.
    pub fn from_messages_file(path: &Path) -> Result<PromptSource, PromptError> {
        let text = std::fs::read_to_string(path).map_err(|e| PromptError::Read {
            path: path.display().to_string(),
            detail: e.to_string(),
        })?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| PromptError::Messages {
                path: path.display().to_string(),
                detail: e.to_string(),
            })?;
        let arr = v.get("messages").cloned().unwrap_or(v);
        let messages: Vec<Message> =
            serde_json::from_value(arr).map_err(|e| PromptError::Messages {
                path: path.display().to_string(),
                detail: format!("{e}; expected [{{\"role\": \"user\", \"content\": \"…\"}}, …]"),
            })?;
        if messages.is_empty() {
            return Err(PromptError::Empty(path.display().to_string()));
        }
        Ok(PromptSource::Messages(messages))
    }

    /// The messages of request number `seq`.
    pub fn messages(&self, seq: u64, system: Option<&str>) -> Vec<Message> {
        let mut out = Vec::new();
        if let Some(s) = system {
            out.push(Message::new("system", s));
        }
        match self {
            PromptSource::Text(t) => out.push(Message::new("user", t.clone())),
            PromptSource::Messages(m) => {
                if system.is_some() {
                    out.extend(m.iter().filter(|m| m.role != "system").cloned());
                } else {
                    out.extend(m.iter().cloned());
                }
            }
            PromptSource::Synthetic { tokens, seed } => {
                out.push(Message::new("user", synthetic_text(*tokens, *seed, seq)))
            }
        }
        out
    }

    pub fn describe(&self) -> String {
        match self {
            PromptSource::Text(t) => format!("text, {} chars", t.chars().count()),
            PromptSource::Messages(m) => format!("{} messages", m.len()),
            PromptSource::Synthetic { tokens, seed } => {
                format!("synthetic, ~{tokens} tokens, different per request, seed {seed}")
            }
        }
    }
}

/// A seed for a run that was given none: fastrand's global generator is seeded from the OS
/// per process, so two runs differ.
pub fn new_run_seed() -> u64 {
    fastrand::u64(..)
}

/// About `tokens` words (one token each), seeded by the run's `seed` and the request's `seq`.
pub fn synthetic_text(tokens: u32, seed: u64, seq: u64) -> String {
    let mix = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ seed.rotate_left(29).wrapping_mul(0xBF58_476D_1CE4_E5B9)
        ^ u64::from(tokens);
    let mut rng = fastrand::Rng::with_seed(mix);
    let mut s = String::with_capacity(tokens as usize * 7 + 64);
    for i in 0..tokens {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.usize(..WORDS.len())]);
    }
    s.push_str("\n\nSummarize the text above in one short sentence.");
    s
}

/// A word outside [`WORDS`], so a changed position never matches the original by chance.
const CHANGED_WORD: &str = "zebra";

/// The prompt of one step of the prefix-cache probe: a synthetic prompt of `tokens` words for
/// round `round` (the same for every step of that round), with one word changed at the
/// start or at the end of the body for the `change-*` steps. The end change sits just before
/// the fixed instruction, about ten tokens from the end of the message.
pub fn cache_probe_text(tokens: u32, seed: u64, round: u64, step: CacheStep) -> String {
    // A seq range the per-request synthetic prompts (seq from 0) never reach.
    let base = synthetic_text(tokens, seed, u64::MAX - round);
    let (body, instruction) = base.split_once("\n\n").unwrap_or((&base, ""));
    let mut words: Vec<&str> = body.split(' ').collect();
    match step {
        CacheStep::Cold | CacheStep::Repeat => {}
        CacheStep::ChangeStart => words[0] = CHANGED_WORD,
        CacheStep::ChangeEnd => {
            if let Some(w) = words.last_mut() {
                *w = CHANGED_WORD;
            }
        }
    }
    format!("{}\n\n{instruction}", words.join(" "))
}

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("cannot read prompt file {path}: {detail}")]
    Read { path: String, detail: String },
    #[error("prompt file {0} is empty")]
    Empty(String),
    #[error("messages file {path} is not a JSON chat: {detail}")]
    Messages { path: String, detail: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_prompts_have_the_word_count_and_differ_per_request() {
        let a = synthetic_text(500, 7, 1);
        let b = synthetic_text(500, 7, 2);
        assert_ne!(a, b);
        assert_eq!(
            a,
            synthetic_text(500, 7, 1),
            "deterministic per seed and seq"
        );
        // Another run (seed) sends other prompts at every seq.
        for seq in 0..20 {
            assert_ne!(synthetic_text(500, 7, seq), synthetic_text(500, 8, seq));
        }
        let body = a.split("\n\n").next().unwrap();
        assert_eq!(body.split(' ').count(), 500);
    }

    #[test]
    fn cache_probe_prompts_differ_only_where_they_should() {
        let words = |s: &str| -> Vec<String> { s.split_whitespace().map(String::from).collect() };
        let cold = words(&cache_probe_text(200, 7, 3, CacheStep::Cold));
        assert_eq!(cold, words(&cache_probe_text(200, 7, 3, CacheStep::Repeat)));
        let end = words(&cache_probe_text(200, 7, 3, CacheStep::ChangeEnd));
        let start = words(&cache_probe_text(200, 7, 3, CacheStep::ChangeStart));
        let diff = |a: &[String], b: &[String]| {
            a.iter()
                .zip(b)
                .enumerate()
                .filter(|(_, (x, y))| x != y)
                .map(|(i, _)| i)
                .collect::<Vec<_>>()
        };
        assert_eq!(diff(&cold, &start), vec![0]);
        assert_eq!(diff(&cold, &end), vec![199]);
        assert_ne!(cold, words(&cache_probe_text(200, 7, 4, CacheStep::Cold)));
    }

    #[test]
    fn messages_file_forms_and_errors() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.json");
        std::fs::write(&p, r#"{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}"#).unwrap();
        let src = PromptSource::from_messages_file(&p).unwrap();
        assert_eq!(src.messages(0, None).len(), 2);
        let with_sys = src.messages(0, Some("override"));
        assert_eq!(with_sys.len(), 2);
        assert_eq!(with_sys[0].content, "override");

        std::fs::write(&p, r#"[{"role":"user"}]"#).unwrap();
        let err = PromptSource::from_messages_file(&p)
            .unwrap_err()
            .to_string();
        assert!(err.contains("m.json") && err.contains("content"), "{err}");
        let err = PromptSource::from_file(&d.path().join("missing.txt"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing.txt"), "{err}");
    }
}
