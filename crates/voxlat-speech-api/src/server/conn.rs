//! The server's connections: a bounded number at once, each closed when its client is slow
//! or idle, so that no client can pin the server by doing nothing.
//!
//! axum's `serve` sets no timer, so a connection that sends nothing (a fresh one, or one kept
//! alive after its answer) is held for ever, and with it one of the `max_connections` places.
//! Here each connection is served by hyper's HTTP/1 server with a timer: a request head must
//! arrive whole within [`ServerOptions::header_timeout`] of the connection's start or of the
//! last answer, or the connection is closed. That covers a client that connects and sends
//! nothing, one kept alive and forgotten, and one that sends its headers a byte at a time. A
//! slow body is the handlers' to bound ([`ServerOptions::upload_timeout`]).
//!
//! Past `max_connections` the loop stops accepting, so the kernel's backlog (and then the
//! client's connect) holds the rest instead of the server's memory.

use super::ServerOptions;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

/// How long the loop waits after a failed accept (out of file descriptors, say) before it
/// tries again, so that it does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` until `shutdown` completes, then lets every connection finish
/// the request it is on and returns.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    opts: &ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let max = opts.max_connections.clamp(1, 1 << 20);
    let places = Arc::new(Semaphore::new(max));
    let (closing, closed) = watch::channel(false);
    let header_timeout = opts.header_timeout;
    tokio::pin!(shutdown);
    loop {
        let place = tokio::select! {
            p = places.clone().acquire_owned() => p,
            () = &mut shutdown => break,
        };
        // The semaphore is never closed, so this never fails.
        let Ok(place) = place else { break };
        let stream = tokio::select! {
            r = listener.accept() => r,
            () = &mut shutdown => break,
        };
        let stream = match stream {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!("serve-audio could not accept a connection: {e}");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(router.clone());
        let mut closed = closed.clone();
        tokio::spawn(async move {
            let _place = place;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!("a serve-audio connection ended: {e}");
                    }
                }
                _ = closed.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let _ = closing.send(true);
    // Every connection holds a place until it ends: all of them back means all have ended.
    let _ = places.acquire_many(max as u32).await;
    Ok(())
}
