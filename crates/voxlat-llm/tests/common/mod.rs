//! Shared by the client's integration tests.

use voxlat_llm::{ChatRequest, Message};

/// The small streaming request every scripted-server test sends.
pub fn request() -> ChatRequest {
    ChatRequest {
        model: "scripted-model".into(),
        messages: vec![Message::new("user", "hi")],
        max_tokens: Some(32),
        include_usage: true,
        ..ChatRequest::default()
    }
}
