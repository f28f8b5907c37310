//! voxlat's embedded LLM server: an OpenAI-compatible `/v1/chat/completions` on llama.cpp,
//! with a bounded queue, per-slot prefix reuse of the KV cache, and server-side timings in
//! the stream. It runs as its own process (`voxlat-server`, started by `voxlat serve` or
//! spawned by the CLI) so llama.cpp's ggml never shares an address space with whisper.cpp's.
//!
//! Layers, each testable alone: [`request`] (parsing, validation), [`text`] (UTF-8 joining and
//! stop strings), [`timings`], [`prefix`] (what a slot's cache can keep), [`engine`] (the
//! [`engine::Engine`] trait a model runner implements), [`sched`] (slots, queue, cancellation), [`llama`] (the llama.cpp engine),
//! [`http`] (axum routes), and [`fake`] (a scripted engine for fast, deterministic tests).

pub mod engine;
pub mod error;
pub mod fake;
pub mod http;
pub mod llama;
pub mod prefix;
pub mod request;
pub mod sched;
pub mod text;
pub mod timings;

pub use error::ApiError;

/// Serves `state` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: http::AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Without TCP_NODELAY, Nagle's algorithm holds each small SSE write until the previous
    // one is acknowledged; with the client's delayed ACK that adds up to ~40 ms per token.
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, http::router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
