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
//! queue; a full queue answers 503 with `Retry-After`. Uploads are size-capped (413) and
//! time-capped (408), and a request the engines cannot take gets a 400 that names the field
//! and the fix. A connection that sends no whole request head for `header_timeout` is closed
//! ([`conn`]), so idle and slow clients hold no place for long.

mod conn;
mod queue;
mod speech;
mod transcribe;

pub use queue::StartError;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use queue::{Done, EngineQueue, Refused, Slot};
use std::sync::Arc;
use std::time::Duration;

/// Speech to text: 16 kHz mono in, text out.
pub trait SpeechToText {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Heard, EngineError>;
}

/// What a speech-to-text engine heard: the text, and Whisper's scores when the engine has
/// them (they go out in `verbose_json`).
#[derive(Clone, Debug, PartialEq)]
pub struct Heard {
    pub text: String,
    pub scores: Option<voxlat_core::whisper_scores::Scores>,
}

impl From<String> for Heard {
    fn from(text: String) -> Heard {
        Heard { text, scores: None }
    }
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
    /// Connections served at once; more wait in the kernel's accept backlog until one closes.
    pub max_connections: usize,
    /// A connection whose next request head has not arrived whole this long after it opened,
    /// or after its last answer, is closed: idle keep-alive, a client that connects and says
    /// nothing, headers sent a byte at a time.
    pub header_timeout: Duration,
    /// An upload not read whole this long after its head is refused (408), and holds no place
    /// in the ASR queue meanwhile.
    pub upload_timeout: Duration,
}

/// Connections served at once by default. Each costs a task and its buffers, not a request's
/// body, and an idle one is closed after `header_timeout`: enough that a few dozen forgotten
/// keep-alive connections leave room for real requests, and far below the default file
/// descriptor limit (1024).
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// [`ServerOptions::header_timeout`] by default: a request head is a few hundred bytes, sent
/// at once by every client.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// [`ServerOptions::upload_timeout`] by default: the 25 MB upload cap at under 1 MB/s, or a
/// 30 s utterance at telephone speeds.
pub const DEFAULT_UPLOAD_TIMEOUT: Duration = Duration::from_secs(30);

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
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            upload_timeout: DEFAULT_UPLOAD_TIMEOUT,
        }
    }
}

type AsrQueue = EngineQueue<Box<dyn SpeechToText>, Result<Heard, EngineError>>;
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
        conn::serve(listener, self.router(), &self.state.opts, shutdown).await
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
            // JSON of at most `max_input_chars`, each escaped at worst to 6 bytes, and the rest:
            // the handler reads it under that limit and the upload deadline.
            .route("/v1/audio/speech", post(speech::handle))
            .with_state(self.state.clone())
    }
}

/// The largest `/v1/audio/speech` body read: room for `max_input_chars` escaped as `\uXXXX`
/// and the other fields. A larger one is a 413 before it is buffered.
pub fn speech_body_limit(opts: &ServerOptions) -> usize {
    opts.max_input_chars.saturating_mul(6).saturating_add(4096)
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

/// A place in an engine's queue, or the 503 (full, with `Retry-After`) or 500 (engine gone)
/// that refuses the request. Taken before the body is read, so a full server buffers nothing.
// The Err is the response itself, returned at once on the refused path: boxing it buys nothing.
#[allow(clippy::result_large_err)]
fn reserve<E: 'static, T: Send + 'static>(
    state: &State,
    queue: &EngineQueue<E, Result<T, EngineError>>,
    id: &str,
    stage: &str,
) -> Result<Slot, Response> {
    queue
        .reserve()
        .map_err(|why| refused(state, why, id, stage))
}

fn refused(state: &State, why: Refused, id: &str, stage: &str) -> Response {
    match why {
        Refused::Full => {
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
            r
        }
        Refused::Gone => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            id,
            format!("the {stage} engine has stopped; restart the server"),
        ),
    }
}

/// Runs `work` on an engine's queue in its reserved `slot`: the engine's own error is a 400
/// or 500.
async fn run_engine<E: 'static, T: Send + 'static>(
    state: &State,
    queue: &EngineQueue<E, Result<T, EngineError>>,
    slot: Slot,
    id: &str,
    stage: &str,
    work: impl FnOnce(&mut E) -> Result<T, EngineError> + Send + 'static,
) -> Result<(T, String), Response> {
    let rx = match queue.submit(slot, work) {
        Ok(rx) => rx,
        Err(why) => return Err(refused(state, why, id, stage)),
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
