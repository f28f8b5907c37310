//! `voxlat serve-audio`'s server: OpenAI's two speech endpoints over any engines.
//!
//! - `POST /v1/audio/transcriptions`: a multipart upload (`file`: a WAV, `model`,
//!   `response_format` = json, verbose_json or text, `language`).
//! - `POST /v1/audio/speech`: JSON (`model`, `voice`, `input`, `response_format` = pcm or
//!   wav); raw PCM is 16-bit little-endian at 24 kHz, as OpenAI defines it.
//! - `GET /health`, `GET /v1/models`.
//!
//! Every response echoes `X-Request-Id` (or makes one) and says in `Server-Timing` how long
//! the request queued and computed. Each engine runs on its own thread behind a bounded
//! queue; a full queue answers 503 with `Retry-After`. Uploads are size-capped (413), and a
//! request the engines cannot take gets a 400 that names the field and the fix.

mod queue;
mod speech;
mod transcribe;

pub use queue::StartError;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use queue::{Done, EngineQueue, Refused};
use std::sync::Arc;
use std::time::Duration;

/// Speech to text: 16 kHz mono in, text out.
pub trait SpeechToText {
    fn transcribe(&mut self, audio: &[f32]) -> Result<String, EngineError>;
}

/// Text to speech: mono samples at [`TextToSpeech::sample_rate`].
pub trait TextToSpeech {
    fn sample_rate(&self) -> u32;
    fn speak(&mut self, text: &str) -> Result<Vec<f32>, EngineError>;
}

/// An engine's failure: the input's fault (400) or the engine's (500).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("{0}")]
    BadInput(String),
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Requests that may wait per engine while one runs.
    pub queue_depth: usize,
    /// Largest upload accepted, bytes.
    pub max_upload_bytes: usize,
    /// Longest audio accepted, seconds.
    pub max_audio_s: u32,
    /// Longest `input` accepted, characters (OpenAI's limit is 4096).
    pub max_input_chars: usize,
    /// Names for `/v1/models` and the responses.
    pub asr_model: String,
    pub tts_model: String,
    /// Whether the ASR model transcribes English only (then another `language` is a 400).
    pub english_only: bool,
    /// What a 503 tells the client to wait.
    pub retry_after: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            queue_depth: 4,
            max_upload_bytes: 25 * 1024 * 1024,
            max_audio_s: 600,
            max_input_chars: 4096,
            asr_model: "whisper".into(),
            tts_model: "piper".into(),
            english_only: false,
            retry_after: Duration::from_secs(1),
        }
    }
}

type AsrQueue = EngineQueue<Box<dyn SpeechToText>, Result<String, EngineError>>;
type TtsQueue = EngineQueue<Box<dyn TextToSpeech>, Result<Vec<f32>, EngineError>>;

struct State {
    asr: AsrQueue,
    tts: TtsQueue,
    tts_rate: u32,
    opts: ServerOptions,
}

/// The engines, loaded on their threads, and the routes over them.
pub struct SpeechServer {
    state: Arc<State>,
}

impl SpeechServer {
    /// Loads both engines (each `load` runs on the engine's own thread) and returns once
    /// both are ready.
    pub fn start<A, T, EA, ET>(
        opts: ServerOptions,
        load_asr: A,
        load_tts: T,
    ) -> Result<SpeechServer, StartError>
    where
        A: FnOnce() -> Result<Box<dyn SpeechToText>, EA> + Send + 'static,
        T: FnOnce() -> Result<Box<dyn TextToSpeech>, ET> + Send + 'static,
        EA: std::fmt::Display,
        ET: std::fmt::Display,
    {
        let asr = EngineQueue::start("asr", opts.queue_depth, load_asr)?;
        let (rate_tx, rate_rx) = std::sync::mpsc::channel();
        let tts = EngineQueue::start("tts", opts.queue_depth, move || {
            load_tts().inspect(|e| {
                let _ = rate_tx.send(e.sample_rate());
            })
        })?;
        let tts_rate = rate_rx.recv().unwrap_or(22_050);
        Ok(SpeechServer {
            state: Arc::new(State {
                asr,
                tts,
                tts_rate,
                opts,
            }),
        })
    }

    /// Serves on `listener` until `shutdown` completes; requests in flight are finished.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await
    }

    pub fn router(&self) -> Router {
        Router::new()
            .route("/health", get(|| async { "ok" }))
            .route("/v1/models", get(models))
            // The upload cap is the handler's, which drains an over-size body before its 413.
            .route(
                "/v1/audio/transcriptions",
                post(transcribe::handle).layer(axum::extract::DefaultBodyLimit::disable()),
            )
            .route("/v1/audio/speech", post(speech::handle))
            .with_state(self.state.clone())
    }
}

async fn models(axum::extract::State(s): axum::extract::State<Arc<State>>) -> Response {
    axum::Json(serde_json::json!({
        "object": "list",
        "data": [
            {"id": s.opts.asr_model, "object": "model", "owned_by": "voxlat"},
            {"id": s.opts.tts_model, "object": "model", "owned_by": "voxlat"},
        ]
    }))
    .into_response()
}

/// The request's ID: the client's `X-Request-Id` if it sent a usable one, else a new one.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.len() <= 200)
        .map(str::to_string)
        .unwrap_or_else(|| voxlat_core::RequestId::new().as_str().to_string())
}

/// An OpenAI-shaped error body.
fn error(status: StatusCode, id: &str, message: impl Into<String>) -> Response {
    let message = message.into();
    let kind = if status.is_client_error() {
        "invalid_request_error"
    } else {
        "server_error"
    };
    let mut r = (
        status,
        axum::Json(serde_json::json!({"error": {"message": message, "type": kind}})),
    )
        .into_response();
    set_id(&mut r, id);
    r
}

fn set_id(r: &mut Response, id: &str) {
    if let Ok(v) = HeaderValue::from_str(id) {
        r.headers_mut().insert("x-request-id", v);
    }
}

/// Runs `work` on an engine's queue: a full queue is a 503 with `Retry-After`, and the
/// engine's own error a 400 or 500.
async fn run_engine<E: 'static, T: Send + 'static>(
    state: &State,
    queue: &EngineQueue<E, Result<T, EngineError>>,
    id: &str,
    stage: &str,
    work: impl FnOnce(&mut E) -> Result<T, EngineError> + Send + 'static,
) -> Result<(T, String), Response> {
    let rx = match queue.try_submit(work) {
        Ok(rx) => rx,
        Err(Refused::Full) => {
            let mut r = error(
                StatusCode::SERVICE_UNAVAILABLE,
                id,
                format!(
                    "the {stage} queue is full ({} waiting); retry after {} s",
                    state.opts.queue_depth,
                    state.opts.retry_after.as_secs().max(1)
                ),
            );
            r.headers_mut().insert(
                "retry-after",
                HeaderValue::from(state.opts.retry_after.as_secs().max(1)),
            );
            return Err(r);
        }
        Err(Refused::Gone) => {
            return Err(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                id,
                format!("the {stage} engine has stopped; restart the server"),
            ))
        }
    };
    let Ok(Done {
        result,
        queued,
        compute,
    }) = rx.await
    else {
        return Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            id,
            format!("the {stage} engine stopped while working on this request"),
        ));
    };
    let timing = crate::server_timing::format(&[
        ("queue", queued.as_secs_f64() * 1e3),
        (stage, compute.as_secs_f64() * 1e3),
    ]);
    match result {
        Ok(v) => Ok((v, timing)),
        Err(EngineError::BadInput(m)) => Err(error(StatusCode::BAD_REQUEST, id, m)),
        Err(EngineError::Failed(e)) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            id,
            format!("{stage} failed: {e}"),
        )),
    }
}
