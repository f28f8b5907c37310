//! Connection-phase timing: DNS through a custom resolver, connect (TCP, plus TLS for
//! https) through a connector layer. The measurements land in a per-request probe carried in
//! a task-local, because reqwest's connection pool is shared and gives no other way to tie
//! a new connection to the request that opened it. A request that reused a pooled connection
//! records nothing, and that is how "warm" is told from "cold".

use futures_util::future::BoxFuture;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;
use voxlat_core::Nanos;

tokio::task_local! {
    static PROBE: Arc<ConnProbe>;
}

/// What the connection stack did for one request.
#[derive(Debug, Default)]
pub struct ConnProbe {
    inner: Mutex<ConnPhases>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnPhases {
    /// A new connection was opened for this request (false: a pooled one was reused).
    pub new_connection: bool,
    /// DNS lookup time; absent for IP-literal hosts and reused connections.
    pub dns_ns: Option<u64>,
    /// From the start of the connection attempt to a usable connection, DNS excluded: TCP
    /// connect, and for https also the TLS handshake (`tls` says which).
    pub connect_ns: Option<u64>,
    pub tls: bool,
    /// When the new connection became usable (process clock): the moment from which the
    /// request could be written to it. TTFT is counted from here on a new connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<Nanos>,
    /// When the HTTP stack took the request's body to write it onto the connection it had
    /// picked, ready (process clock). Under load this is later than `llm_sent`: requests
    /// queue in the client for a connection and for CPU before anything is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_at: Option<Nanos>,
    /// Which stack carried the request; absent in records from before it was noted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportKind>,
    /// How the response's reads were stamped, so TTFTs stamped differently are not read as
    /// alike; absent when no response head came, or in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamps: Option<StampKind>,
}

/// The stack a chat stream went over (`transport.rs` picks).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// Plain HTTP/1.1, read by the request's own task.
    Direct,
    /// https, HTTP/2 or a proxy.
    Reqwest,
}

/// Where a response's arrival stamps came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StampKind {
    /// Every read carried the kernel's receive stamp.
    Kernel,
    /// The direct transport, but at least one read was stamped when it returned: the kernel
    /// gave no stamp (the option is off, or not yet on for the host's first packets) or one
    /// the real-time clock made implausible.
    FallbackReadTime,
    /// Stamped when the request's task received each piece from reqwest's connection task.
    Task,
}

impl TransportKind {
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Direct => "direct",
            TransportKind::Reqwest => "reqwest",
        }
    }
}

impl StampKind {
    pub fn name(self) -> &'static str {
        match self {
            StampKind::Kernel => "kernel",
            StampKind::FallbackReadTime => "fallback-read-time",
            StampKind::Task => "task",
        }
    }
}

impl ConnProbe {
    pub fn phases(&self) -> ConnPhases {
        self.inner.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// Forgets what was recorded: the retry of a request starts a new connection record.
    pub fn reset(&self) {
        self.update(|c| *c = ConnPhases::default());
    }

    /// The DNS lookup of a new connection took `d`.
    pub fn record_dns(&self, d: std::time::Duration) {
        let ns = d.as_nanos() as u64;
        self.update(|c| c.dns_ns = Some(ns));
    }

    /// A new connection is usable at `ready`, `d` after its attempt began (DNS excluded).
    pub fn record_connect(&self, d: std::time::Duration, ready: Nanos, tls: bool) {
        let ns = d.as_nanos() as u64;
        self.update(|c| {
            c.ready_at = Some(ready);
            c.new_connection = true;
            c.tls = tls;
            c.connect_ns = Some(ns);
        });
    }

    /// The request is being written onto the connection picked for it, at `t` (the direct
    /// transport's twin of [`StampedBody`]'s stamp).
    pub fn record_written(&self, t: Nanos) {
        self.update(|c| {
            c.written_at.get_or_insert(t);
        });
    }

    /// The request goes over `transport`.
    pub fn record_transport(&self, transport: TransportKind) {
        self.update(|c| c.transport = Some(transport));
    }

    /// The response's reads were stamped as `stamps` says.
    pub fn record_stamps(&self, stamps: StampKind) {
        self.update(|c| c.stamps = Some(stamps));
    }

    fn update(&self, f: impl FnOnce(&mut ConnPhases)) {
        if let Ok(mut g) = self.inner.lock() {
            f(&mut g);
        }
    }
}

/// Runs `fut` with `probe` receiving the connection phases of whatever it connects.
pub async fn with_probe<F: std::future::Future>(probe: Arc<ConnProbe>, fut: F) -> F::Output {
    PROBE.scope(probe, fut).await
}

fn current_probe() -> Option<Arc<ConnProbe>> {
    PROBE.try_with(|p| p.clone()).ok()
}

/// DNS failures carry the host, so error classification can find them in the source chain.
#[derive(Debug, thiserror::Error)]
#[error("cannot resolve {host}: {source}")]
pub struct DnsError {
    pub host: String,
    #[source]
    pub source: std::io::Error,
}

/// The system resolver (getaddrinfo through tokio), timed.
#[derive(Debug, Default, Clone)]
pub struct TimedResolver;

impl Resolve for TimedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let probe = current_probe();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let start = Instant::now();
            let result = tokio::net::lookup_host((host.clone(), 0)).await;
            if let Some(p) = probe {
                p.record_dns(start.elapsed());
            }
            match result {
                Ok(addrs) => {
                    let v: Vec<SocketAddr> = addrs.collect();
                    Ok(Box::new(v.into_iter()) as Addrs)
                }
                Err(source) => Err(Box::new(DnsError { host, source }) as _),
            }
        })
    }
}

/// A tower layer around reqwest's connector that times each connection attempt.
#[derive(Clone, Debug)]
pub struct TimedConnectLayer {
    pub tls: bool,
}

impl<S> tower::Layer<S> for TimedConnectLayer {
    type Service = TimedConnect<S>;
    fn layer(&self, inner: S) -> TimedConnect<S> {
        TimedConnect {
            inner,
            tls: self.tls,
        }
    }
}

#[derive(Clone, Debug)]
pub struct TimedConnect<S> {
    inner: S,
    tls: bool,
}

impl<S, R> tower_service::Service<R> for TimedConnect<S>
where
    S: tower_service::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let probe = current_probe();
        let tls = self.tls;
        let fut = self.inner.call(req);
        Box::pin(async move {
            let start = Instant::now();
            let out = fut.await;
            let total = start.elapsed();
            let ready = voxlat_core::clock::now();
            if let Some(p) = probe {
                let dns = std::time::Duration::from_nanos(p.phases().dns_ns.unwrap_or(0));
                p.record_connect(total.saturating_sub(dns), ready, tls);
            }
            out
        })
    }
}

/// A request body that stamps, on its probe, the moment the HTTP stack first asks for it: the
/// connection is chosen and ready, and the request head is being written onto it. hyper asks
/// for the body in the same pass that writes the head, so this is within microseconds of the
/// write, on HTTP/1.1 and HTTP/2 alike, whichever connection the pool picked.
pub struct StampedBody {
    data: Option<bytes::Bytes>,
    probe: Arc<ConnProbe>,
}

impl StampedBody {
    pub fn new(data: bytes::Bytes, probe: Arc<ConnProbe>) -> StampedBody {
        StampedBody {
            data: Some(data),
            probe,
        }
    }
}

impl hyper::body::Body for StampedBody {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let Some(data) = this.data.take() else {
            return Poll::Ready(None);
        };
        let now = voxlat_core::clock::now();
        this.probe.update(|c| {
            c.written_at.get_or_insert(now);
        });
        Poll::Ready(Some(Ok(hyper::body::Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        // Exact, so the request carries Content-Length rather than chunked encoding.
        hyper::body::SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}
