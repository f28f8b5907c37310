//! A scripted OpenAI-compatible streaming server for tests and for measuring the measurer.
//!
//! Every response follows a [`Script`]: delays, tokens, and each protocol quirk real servers
//! and gateways exhibit. The server stamps, on the same process clock as the client, when it
//! handed each content event to the HTTP stack, so tests can compare what the client measured
//! against the truth.

pub mod keepalive;
pub mod raw;

use axum::body::Body;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::IncomingStream;
use axum::Router;
use bytes::Bytes;
use futures_util::StreamExt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use voxlat_core::{clock, Nanos};
use voxlat_net::arrival::{ArrivalStream, LastArrival};

/// How reasoning is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningStyle {
    /// `delta.reasoning_content` (DeepSeek, vLLM).
    ReasoningContent,
    /// `delta.reasoning` (OpenRouter, Ollama).
    Reasoning,
    /// `<think>…</think>` inside `delta.content`.
    ThinkTags,
}

/// What the server does for one request.
#[derive(Clone, Debug)]
pub struct Script {
    pub status: u16,
    pub content_type: String,
    /// Sent instead of a stream (error bodies, non-SSE responses).
    pub body: Option<String>,
    pub retry_after: Option<String>,
    /// Before the response headers (queueing, prefill on servers that flush headers late).
    pub headers_delay: Duration,
    /// After the headers (and the role chunk), before the first content token.
    pub ttft: Duration,
    /// Between content tokens.
    pub itl: Duration,
    pub tokens: Vec<String>,
    pub reasoning: Vec<String>,
    pub reasoning_style: ReasoningStyle,
    /// A first chunk with `delta.role` and no content, as most servers send.
    pub role_chunk: bool,
    /// A final chunk with `choices: []` and `usage`.
    pub usage: bool,
    /// llama.cpp-style `timings` in the last content chunk.
    pub timings: bool,
    pub done: bool,
    pub crlf: bool,
    /// A `: keep-alive` comment before every event.
    pub keepalive: bool,
    /// Send every event in pieces of this many bytes, each flushed separately.
    pub split_every: Option<usize>,
    /// Spread each event's JSON over several `data:` lines.
    pub multiline_data: bool,
    /// Send `event: error` after this many tokens.
    pub error_event_after: Option<usize>,
    /// Send a payload that is not JSON after this many tokens.
    pub invalid_json_after: Option<usize>,
    /// Break the connection after this many tokens.
    pub disconnect_after: Option<usize>,
    /// Echo `X-Request-Id` in the response headers.
    pub echo_request_id: bool,
    /// `usage.prompt_tokens` to report (default 10), so tests can model prompt length.
    pub usage_prompt_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`, sent only when set.
    pub usage_cached_tokens: Option<u64>,
    /// Sent as `timings` in the last content chunk instead of the fixed llama.cpp-style
    /// object (implies `timings`).
    pub timings_value: Option<serde_json::Value>,
    /// Top-level fields merged into the last content chunk, e.g. Ollama's
    /// `prompt_eval_duration`.
    pub final_chunk_extra: serde_json::Map<String, serde_json::Value>,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            status: 200,
            content_type: "text/event-stream".into(),
            body: None,
            retry_after: None,
            headers_delay: Duration::ZERO,
            ttft: Duration::from_millis(20),
            itl: Duration::from_millis(5),
            tokens: ["Hello", ",", " world", "."].map(String::from).to_vec(),
            reasoning: Vec::new(),
            reasoning_style: ReasoningStyle::ReasoningContent,
            role_chunk: true,
            usage: true,
            timings: false,
            done: true,
            crlf: false,
            keepalive: false,
            split_every: None,
            multiline_data: false,
            error_event_after: None,
            invalid_json_after: None,
            disconnect_after: None,
            echo_request_id: true,
            usage_prompt_tokens: None,
            usage_cached_tokens: None,
            timings_value: None,
            final_chunk_extra: serde_json::Map::new(),
        }
    }
}

impl Script {
    /// `n` tokens of one word each.
    pub fn with_tokens(n: usize) -> Script {
        Script {
            tokens: (0..n).map(|i| format!(" w{i}")).collect(),
            ..Script::default()
        }
    }

    /// Every message's content of a request body, joined by newlines.
    pub fn prompt_text(body: &serde_json::Value) -> String {
        body["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter_map(|m| m["content"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }

    /// Whitespace-separated words in a request's messages: the synthetic prompts of
    /// bench-llm are one token per word, so this stands in for the prompt's token count.
    pub fn prompt_words(body: &serde_json::Value) -> usize {
        Script::prompt_text(body).split_whitespace().count()
    }

    pub fn error(status: u16, body: &str) -> Script {
        Script {
            status,
            content_type: "application/json".into(),
            body: Some(body.into()),
            ..Script::default()
        }
    }
}

/// What the server saw and did for one request, on the shared process clock.
#[derive(Clone, Debug, Default)]
pub struct ServedRequest {
    pub path: String,
    pub request_id: Option<String>,
    /// The W3C `traceparent` header, when the client sent one.
    pub traceparent: Option<String>,
    pub authorization: Option<String>,
    pub body: serde_json::Value,
    pub received: Nanos,
    /// When the request's last bytes reached the server's socket: the kernel's receive stamp
    /// of the read that completed it. `received` is later by however long the server took to
    /// get round to the request (its own queueing, which its TTFT does not see).
    pub arrived: Option<Nanos>,
    /// When each content event (reasoning or answer) was handed to the HTTP stack.
    pub content_sent: Vec<Nanos>,
    /// Whether the body stream was dropped before it finished (client went away).
    pub completed: bool,
}

impl ServedRequest {
    pub fn first_content_sent(&self) -> Option<Nanos> {
        self.content_sent.first().copied()
    }
}

type ScriptFn = dyn Fn(&serde_json::Value, usize) -> Script + Send + Sync;

struct Shared {
    script: Box<ScriptFn>,
    required_key: Option<String>,
    log: Mutex<Vec<ServedRequest>>,
}

pub struct ScriptedServer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    _runtime: Option<OwnedRuntime>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

struct OwnedRuntime {
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub struct Builder {
    script: Box<ScriptFn>,
    required_key: Option<String>,
}

impl Builder {
    /// Every request gets this script.
    pub fn fixed(script: Script) -> Builder {
        Builder::per_request(move |_, _| script.clone())
    }

    /// The script is chosen per request, from its JSON body and its index (0-based).
    pub fn per_request(
        f: impl Fn(&serde_json::Value, usize) -> Script + Send + Sync + 'static,
    ) -> Builder {
        Builder {
            script: Box::new(f),
            required_key: None,
        }
    }

    /// Requests without `Authorization: Bearer <key>` get a 401 that echoes what they sent,
    /// as some real gateways do.
    pub fn require_key(mut self, key: &str) -> Builder {
        self.required_key = Some(key.into());
        self
    }

    fn into_shared(self) -> Arc<Shared> {
        Arc::new(Shared {
            script: self.script,
            required_key: self.required_key,
            log: Mutex::new(Vec::new()),
        })
    }

    /// Starts on the current tokio runtime, on an ephemeral loopback port.
    pub async fn start(self) -> ScriptedServer {
        let shared = self.into_shared();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(serve(listener, shared.clone(), rx));
        ScriptedServer {
            addr,
            shared,
            _runtime: None,
            shutdown: Some(tx),
        }
    }

    /// Starts on a runtime of its own with `threads` workers, so the client under test can be
    /// measured on its own threads.
    pub fn start_on_own_runtime(self, threads: usize) -> ScriptedServer {
        let shared = self.into_shared();
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("local addr");
        let (tx, rx) = tokio::sync::oneshot::channel();
        let s = shared.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads.max(1))
                .enable_all()
                .build()
                .expect("server runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
                serve(listener, s, rx).await;
            });
        });
        ScriptedServer {
            addr,
            shared,
            _runtime: Some(OwnedRuntime {
                thread: Some(thread),
            }),
            shutdown: Some(tx),
        }
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .with_state(shared);
    let _ = axum::serve(
        ArrivalListener(listener),
        app.into_make_service_with_connect_info::<RequestArrival>(),
    )
    .with_graceful_shutdown(async {
        let _ = stop.await;
    })
    .await;
}

/// Accepts connections whose reads keep the kernel's receive stamp.
struct ArrivalListener(tokio::net::TcpListener);

impl axum::serve::Listener for ArrivalListener {
    type Io = ArrivalStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (ArrivalStream, SocketAddr) {
        loop {
            match self.0.accept().await {
                Ok((tcp, addr)) => {
                    // Without TCP_NODELAY, Nagle's algorithm holds each small SSE write until
                    // the previous one is acknowledged, and the client's delayed ACK makes
                    // that ~40 ms: the "server send time" would then be a lie by that much.
                    let _ = tcp.set_nodelay(true);
                    match ArrivalStream::new(tcp) {
                        Ok(stream) => return (stream, addr),
                        Err(_) => continue,
                    }
                }
                // Out of descriptors and the like: wait a moment, as axum's own listener does.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// A connection's arrival stamps, handed to its requests' handler.
#[derive(Clone)]
struct RequestArrival(Arc<LastArrival>);

impl Connected<IncomingStream<'_, ArrivalListener>> for RequestArrival {
    fn connect_info(stream: IncomingStream<'_, ArrivalListener>) -> RequestArrival {
        RequestArrival(stream.io().arrivals())
    }
}

impl ScriptedServer {
    /// The base URL to give the client, with `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<ServedRequest> {
        self.shared
            .log
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

async fn models() -> impl IntoResponse {
    axum::Json(
        serde_json::json!({"object": "list", "data": [{"id": "scripted-model", "object": "model"}]}),
    )
}

async fn chat(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(arrival): ConnectInfo<RequestArrival>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let received = clock::now();
    let arrived = arrival.0.get().filter(|&t| t <= received);
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let authorization = header("authorization");
    let request_id = header("x-request-id");
    let index = {
        let mut log = shared.log.lock().expect("log lock");
        log.push(ServedRequest {
            path: "/v1/chat/completions".into(),
            request_id: request_id.clone(),
            traceparent: header("traceparent"),
            authorization: authorization.clone(),
            body: json.clone(),
            received,
            arrived,
            ..ServedRequest::default()
        });
        log.len() - 1
    };
    if let Some(key) = &shared.required_key {
        if authorization.as_deref() != Some(&format!("Bearer {key}")) {
            let sent = authorization.unwrap_or_default();
            let body = serde_json::json!({"error": {"message": format!("Incorrect API key provided: {sent}"), "type": "invalid_request_error"}});
            return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
        }
    }
    let script = (shared.script)(&json, index);
    tokio::time::sleep(script.headers_delay).await;
    let mut builder = Response::builder()
        .status(script.status)
        .header("content-type", script.content_type.clone());
    if let (true, Some(id)) = (script.echo_request_id, &request_id) {
        builder = builder.header("x-request-id", id.clone());
    }
    if let Some(r) = &script.retry_after {
        builder = builder.header("retry-after", r.clone());
    }
    if let Some(b) = &script.body {
        return builder.body(Body::from(b.clone())).expect("response");
    }
    let (tx, rx) = mpsc::channel::<Frame>(64);
    tokio::spawn(generate(script, tx));
    let log = shared.clone();
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx).map(move |frame| {
        // Stamped when hyper polls the frame, immediately before it is written.
        if frame.content {
            let t = clock::now();
            if let Ok(mut l) = log.log.lock() {
                l[index].content_sent.push(t);
            }
        }
        if frame.end {
            if let Ok(mut l) = log.log.lock() {
                l[index].completed = true;
            }
        }
        frame.bytes
    });
    builder.body(Body::from_stream(stream)).expect("response")
}

struct Frame {
    bytes: Result<Bytes, std::io::Error>,
    /// This frame completes a content event.
    content: bool,
    end: bool,
}

fn chunk_json(delta: serde_json::Value, finish: Option<&str>) -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "model": "scripted-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
}

async fn generate(s: Script, tx: mpsc::Sender<Frame>) {
    let nl = if s.crlf { "\r\n" } else { "\n" };
    let send_event = |data: String, content: bool| {
        let tx = tx.clone();
        let s = &s;
        async move {
            let mut text = String::new();
            if s.keepalive {
                text.push_str(&format!(": keep-alive{nl}{nl}"));
            }
            if s.multiline_data {
                // Pretty JSON breaks lines only between tokens, so the `\n` the SSE parser
                // puts between data lines keeps it valid JSON.
                let pretty = serde_json::from_str::<serde_json::Value>(&data)
                    .ok()
                    .and_then(|v| serde_json::to_string_pretty(&v).ok())
                    .unwrap_or_else(|| data.clone());
                for line in pretty.lines() {
                    text.push_str(&format!("data: {line}{nl}"));
                }
            } else {
                text.push_str(&format!("data: {data}{nl}"));
            }
            text.push_str(nl);
            let bytes = text.into_bytes();
            let pieces: Vec<Vec<u8>> = match s.split_every {
                Some(n) if n > 0 => bytes.chunks(n).map(<[u8]>::to_vec).collect(),
                _ => vec![bytes],
            };
            let last = pieces.len() - 1;
            for (i, p) in pieces.into_iter().enumerate() {
                let f = Frame {
                    bytes: Ok(Bytes::from(p)),
                    content: content && i == last,
                    end: false,
                };
                if tx.send(f).await.is_err() {
                    return false;
                }
                if i != last {
                    // Separate writes, so the client really sees the event in pieces.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            true
        }
    };
    if s.role_chunk
        && !send_event(
            chunk_json(
                serde_json::json!({"role": "assistant", "content": ""}),
                None,
            )
            .to_string(),
            false,
        )
        .await
    {
        return;
    }
    tokio::time::sleep(s.ttft).await;
    let mut sent = 0usize;
    let reasoning_field = match s.reasoning_style {
        ReasoningStyle::Reasoning => "reasoning",
        _ => "reasoning_content",
    };
    let mut items: Vec<serde_json::Value> = Vec::new();
    for (i, r) in s.reasoning.iter().enumerate() {
        items.push(match s.reasoning_style {
            ReasoningStyle::ThinkTags => {
                let mut t = r.clone();
                if i == 0 {
                    t = format!("<think>{t}");
                }
                if i + 1 == s.reasoning.len() {
                    t.push_str("</think>");
                }
                serde_json::json!({ "content": t })
            }
            _ => serde_json::json!({ reasoning_field: r }),
        });
    }
    items.extend(s.tokens.iter().map(|t| serde_json::json!({ "content": t })));
    let total = items.len();
    for (i, delta) in items.into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(s.itl).await;
        }
        if s.disconnect_after == Some(sent) {
            let _ = tx
                .send(Frame {
                    bytes: Err(std::io::Error::other("scripted disconnect")),
                    content: false,
                    end: false,
                })
                .await;
            return;
        }
        if s.error_event_after == Some(sent) {
            let mut text = format!(
                "event: error{nl}data: {}{nl}{nl}",
                serde_json::json!({"error": {"message": "scripted overload"}})
            );
            if s.keepalive {
                text.insert_str(0, &format!(": keep-alive{nl}{nl}"));
            }
            let _ = tx
                .send(Frame {
                    bytes: Ok(Bytes::from(text)),
                    content: false,
                    end: false,
                })
                .await;
            return;
        }
        if s.invalid_json_after == Some(sent)
            && !send_event("{\"choices\": [ this is not json".into(), false).await
        {
            return;
        }
        let mut chunk = chunk_json(delta, (i + 1 == total).then_some("stop"));
        if i + 1 == total {
            if let Some(t) = &s.timings_value {
                chunk["timings"] = t.clone();
            } else if s.timings {
                chunk["timings"] = serde_json::json!({"prompt_n": 10, "prompt_ms": 5.0, "predicted_n": total, "predicted_ms": 20.0, "cache_n": 0});
            }
            for (k, v) in &s.final_chunk_extra {
                chunk[k] = v.clone();
            }
        }
        if !send_event(chunk.to_string(), true).await {
            return;
        }
        sent += 1;
    }
    if s.usage {
        let prompt = s.usage_prompt_tokens.unwrap_or(10);
        let mut usage = serde_json::json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": total, "total_tokens": prompt + total as u64}});
        if let Some(c) = s.usage_cached_tokens {
            usage["usage"]["prompt_tokens_details"] = serde_json::json!({ "cached_tokens": c });
        }
        if !send_event(usage.to_string(), false).await {
            return;
        }
    }
    if s.done && !send_event("[DONE]".into(), false).await {
        return;
    }
    let _ = tx
        .send(Frame {
            bytes: Ok(Bytes::new()),
            content: false,
            end: true,
        })
        .await;
}
