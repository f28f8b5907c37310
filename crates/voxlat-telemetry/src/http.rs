//! `GET /metrics` on an address of its own, on its own thread and single-threaded runtime, so
//! any caller (async or not, whatever its runtime) can serve metrics with one call and the
//! scrapes never compete with the caller's tasks.

use crate::TelemetryError;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// The OpenMetrics text format `prometheus-client` writes (Prometheus asks for it first).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A running `/metrics` endpoint; it stops when dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` (`HOST:PORT`; port 0 picks a free one) now, so a bad or busy address is an
    /// error here and not a silent log line later, and serves `registry` there. `flag` names
    /// the option the address came from, for the error message.
    pub fn start(
        flag: &'static str,
        addr: &str,
        registry: Arc<Registry>,
    ) -> Result<MetricsServer, TelemetryError> {
        let resolved = addr
            .to_socket_addrs()
            .map_err(|e| TelemetryError::BadAddress {
                flag,
                addr: addr.to_string(),
                why: e.to_string(),
            })?
            .next()
            .ok_or_else(|| TelemetryError::BadAddress {
                flag,
                addr: addr.to_string(),
                why: "resolves to no address".into(),
            })?;
        let listener =
            std::net::TcpListener::bind(resolved).map_err(|source| TelemetryError::Bind {
                addr: addr.to_string(),
                source,
            })?;
        let bind_err = |source| TelemetryError::Bind {
            addr: addr.to_string(),
            source,
        };
        listener.set_nonblocking(true).map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("metrics-http".into())
            .spawn(move || serve(listener, registry, stopped))
            .map_err(TelemetryError::Thread)?;
        Ok(MetricsServer {
            addr: local,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/metrics`.
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    listener: std::net::TcpListener,
    registry: Arc<Registry>,
    stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the metrics server's runtime");
            return;
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot serve metrics");
                return;
            }
        };
        let app = Router::new()
            .route("/metrics", get(metrics))
            .with_state(registry);
        let r = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
        if let Err(e) = r {
            tracing::error!(error = %e, "the metrics server stopped");
        }
    });
}

async fn metrics(State(registry): State<Arc<Registry>>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &registry) {
        Ok(()) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Outcome, TurnMetrics};

    #[test]
    fn serves_the_registry_and_stops_on_drop() {
        let mut r = Registry::default();
        let m = TurnMetrics::register(&mut r);
        let server = MetricsServer::start("--metrics-addr", "127.0.0.1:0", Arc::new(r)).unwrap();
        m.record_turn(
            &voxlat_core::Timeline::new(voxlat_core::RequestId::new()).snapshot(),
            Outcome::NoSpeech,
        );
        let resp = reqwest::blocking::get(server.url()).unwrap();
        assert_eq!(resp.status(), 200);
        assert!(resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text"));
        let text = resp.text().unwrap();
        assert!(
            text.contains("voxlat_turns_total{outcome=\"no_speech\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        let addr = server.local_addr();
        drop(server);
        assert!(std::net::TcpStream::connect(addr).is_err());
    }

    #[test]
    fn a_bad_or_busy_address_is_an_error_naming_it() {
        let e = MetricsServer::start("--metrics-addr", "nonsense", Arc::new(Registry::default()))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("--metrics-addr nonsense") && e.contains("HOST:PORT"),
            "{e}"
        );
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = busy.local_addr().unwrap().to_string();
        let e = MetricsServer::start("--metrics-addr", &addr, Arc::new(Registry::default()))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(&addr) && e.contains("in use"), "{e}");
    }
}
