//! The OpenAI-compatible HTTP surface: `/v1/chat/completions` (SSE or one JSON body),
//! `/v1/models`, `/health`. Requests are validated, templated and tokenized here, before they
//! queue, so a bad request never costs a slot.

use crate::engine::{Event, FinishReason, JobSpec, Sampling, Usage};
use crate::error::ApiError;
use crate::request::ChatRequest;
use crate::sched::Scheduler;
use crate::timings::{Stamps, Timings};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::UnboundedReceiver;

/// What the HTTP side needs from a loaded model.
pub trait Model: Send + Sync + 'static {
    /// The id listed by `/v1/models`.
    fn id(&self) -> &str;
    /// Other names a request's `model` may use (the file name, its stem).
    fn aliases(&self) -> &[String];
    /// Template and tokenize; the prompt's tokens and the stop strings to apply.
    fn prepare(&self, req: &ChatRequest) -> Result<(Vec<i32>, Vec<String>), ApiError>;
}

impl Model for crate::llama::LlamaModelHandle {
    fn id(&self) -> &str {
        &self.id
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn prepare(&self, req: &ChatRequest) -> Result<(Vec<i32>, Vec<String>), ApiError> {
        crate::llama::LlamaModelHandle::prepare(self, req)
    }
}

#[derive(Clone)]
pub struct AppState {
    pub model: Arc<dyn Model>,
    pub sched: Arc<Scheduler>,
    /// Unix seconds at start-up, for `created` fields.
    pub created: u64,
}

impl AppState {
    pub fn new(model: Arc<dyn Model>, sched: Arc<Scheduler>) -> AppState {
        AppState {
            model,
            sched,
            created: unix_now(),
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/health", get(health))
        .fallback(not_found)
        .with_state(state)
}

async fn not_found(uri: axum::http::Uri) -> Response {
    let body = json!({"error": {
        "message": format!("no route {}; this server has POST /v1/chat/completions, GET /v1/models, GET /health", uri.path()),
        "type": "not_found_error", "code": 404}});
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}

async fn health(State(st): State<AppState>) -> Json<Value> {
    let mut v = serde_json::to_value(st.sched.stats()).unwrap_or_else(|_| json!({}));
    v["status"] = "ok".into();
    v["model"] = st.model.id().into();
    Json(v)
}

async fn models(State(st): State<AppState>) -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{"id": st.model.id(), "object": "model", "created": st.created, "owned_by": "voxlat"}],
    }))
}

/// The request ID: the client's `X-Request-Id` if it sent a usable one, else a new one.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() <= 200)
        .map(str::to_string)
        .unwrap_or_else(|| {
            voxlat_core::RequestId::new()
                .as_str()
                .replacen("vx-", "srv-", 1)
        })
}

fn with_id(mut resp: Response, id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

async fn chat(State(st): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let received = Instant::now();
    let id = request_id(&headers);
    match start(&st, &id, &body, received) {
        Ok((req, rx)) => {
            let resp = if req.stream {
                stream_response(&st, &id, &req, rx)
            } else {
                collect_response(&st, &id, rx).await
            };
            with_id(resp, &id)
        }
        Err(e) => {
            tracing::info!(request_id = %id, status = e.status().as_u16(), error = %e, "refused");
            with_id(e.into_response(), &id)
        }
    }
}

fn start(
    st: &AppState,
    id: &str,
    body: &[u8],
    received: Instant,
) -> Result<(ChatRequest, UnboundedReceiver<Event>), ApiError> {
    let req = ChatRequest::parse(body)?;
    if let Some(m) = &req.model {
        let model = &st.model;
        if m != model.id() && !model.aliases().iter().any(|a| a == m) {
            return Err(ApiError::UnknownModel {
                requested: m.clone(),
                loaded: model.id().to_string(),
            });
        }
    }
    let (tokens, stops) = st.model.prepare(&req)?;
    let spec = JobSpec {
        tokens,
        stops,
        max_tokens: req.max_tokens,
        sampling: Sampling {
            temperature: req.temperature,
            top_p: req.top_p,
            seed: req.seed,
        },
        timings_per_token: req.timings_per_token,
    };
    let rx = st
        .sched
        .submit(id.to_string(), spec, Stamps::new(received))?;
    Ok((req, rx))
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    })
}

#[derive(Clone)]
struct ChunkMaker {
    id: String,
    model: String,
    created: u64,
}

impl ChunkMaker {
    fn chunk(&self, delta: Value, finish: Option<FinishReason>) -> Value {
        json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    }
}

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn stream_response(
    st: &AppState,
    id: &str,
    req: &ChatRequest,
    rx: UnboundedReceiver<Event>,
) -> Response {
    let maker = ChunkMaker {
        id: format!("chatcmpl-{id}"),
        model: st.model.id().to_string(),
        created: unix_now(),
    };
    let include_usage = req.include_usage;
    // The body owns the receiver: when the client goes away hyper drops the body, the
    // receiver closes, and the slot sees it at its next token (or prefill batch) and stops.
    let role = sse(&maker.chunk(json!({"role": "assistant", "content": ""}), None));
    let events = futures_util::stream::unfold(Some(rx), move |rx| {
        let maker = maker.clone();
        async move {
            let mut rx = rx?;
            let frame = match rx.recv().await {
                Some(Event::Delta { text, timings }) => {
                    let mut c = maker.chunk(json!({"content": text}), None);
                    if let Some(t) = timings {
                        c["timings"] = timings_json(&t);
                    }
                    return Some((sse(&c), Some(rx)));
                }
                Some(Event::Done {
                    finish,
                    usage,
                    timings,
                }) => {
                    let mut c = maker.chunk(json!({}), Some(finish));
                    c["timings"] = timings_json(&timings);
                    let mut out = format!("data: {c}\n\n");
                    if include_usage {
                        let mut u = maker.chunk(json!({}), None);
                        u["choices"] = json!([]);
                        u["usage"] = usage_json(&usage);
                        u["timings"] = timings_json(&timings);
                        out.push_str(&format!("data: {u}\n\n"));
                    }
                    out
                }
                Some(Event::Failed(why)) => {
                    format!("data: {}\n\n", ApiError::Internal(why.to_string()).body())
                }
                None => format!(
                    "data: {}\n\n",
                    ApiError::Internal("the slot ended the request without a result".into()).body()
                ),
            };
            Some((Bytes::from(frame + "data: [DONE]\n\n"), None))
        }
    });
    let stream = futures_util::stream::once(async move { role })
        .chain(events)
        .map(Ok::<Bytes, Infallible>);
    let body = Body::from_stream(stream);
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    resp
}

fn timings_json(t: &Timings) -> Value {
    serde_json::to_value(t).unwrap_or_else(|_| json!({}))
}

async fn collect_response(st: &AppState, id: &str, mut rx: UnboundedReceiver<Event>) -> Response {
    let mut text = String::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Delta { text: t, .. } => text.push_str(&t),
            Event::Done {
                finish,
                usage,
                timings,
            } => {
                let body = json!({
                    "id": format!("chatcmpl-{id}"), "object": "chat.completion", "created": unix_now(),
                    "model": st.model.id(),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                    "usage": usage_json(&usage),
                    "timings": timings_json(&timings),
                });
                return (StatusCode::OK, Json(body)).into_response();
            }
            Event::Failed(why) => return ApiError::Internal(why.to_string()).into_response(),
        }
    }
    ApiError::Internal("the slot ended the request without a result".into()).into_response()
}
