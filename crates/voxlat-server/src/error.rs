//! Errors a client can cause, each with the HTTP status and OpenAI-style error body it gets.
//! Nothing a client sends may panic the server: every input path ends in one of these.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("prompt is {prompt_tokens} tokens but the context holds {n_ctx} (at least 1 more is needed to reply); shorten the messages or restart the server with a larger --ctx")]
    PromptTooLong { prompt_tokens: usize, n_ctx: usize },
    #[error("model {requested:?} is not loaded; this server has: {loaded}")]
    UnknownModel { requested: String, loaded: String },
    #[error("server busy: all {slots} slot(s) are generating and {queued} request(s) are queued (limit --queue {queue}); retry later")]
    Busy {
        slots: usize,
        queued: usize,
        queue: usize,
    },
    #[error("generation failed: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) | ApiError::PromptTooLong { .. } => StatusCode::BAD_REQUEST,
            ApiError::UnknownModel { .. } => StatusCode::NOT_FOUND,
            ApiError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) | ApiError::PromptTooLong { .. } => "invalid_request_error",
            ApiError::UnknownModel { .. } => "not_found_error",
            ApiError::Busy { .. } => "server_busy",
            ApiError::Internal(_) => "server_error",
        }
    }

    /// The OpenAI-style body; token counts ride along so clients need not parse the message.
    pub fn body(&self) -> serde_json::Value {
        let mut err = serde_json::json!({
            "message": self.to_string(),
            "type": self.kind(),
            "code": self.status().as_u16(),
        });
        if let ApiError::PromptTooLong {
            prompt_tokens,
            n_ctx,
        } = self
        {
            err["n_prompt_tokens"] = (*prompt_tokens).into();
            err["n_ctx"] = (*n_ctx).into();
        }
        serde_json::json!({ "error": err })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status(), axum::Json(self.body())).into_response();
        if matches!(self, ApiError::Busy { .. }) {
            resp.headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
        }
        resp
    }
}
