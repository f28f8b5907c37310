//! The measured path's transport for plain HTTP/1.1: hyper's connection-level client, each
//! request driving its own connection in its own task, over an [`ArrivalStream`].
//!
//! Not reqwest's pooled client, for two measured reasons:
//! - **Arrival stamps.** reqwest owns its sockets, so a read can only be stamped when the
//!   request's task wakes, after the connection task read it and passed it over a channel.
//!   At c=64 the 64 first tokens of a wave arrive together and one worker thread takes them in
//!   turn; the last was stamped about a millisecond late. Here each read keeps the kernel's
//!   receive stamp ([`voxlat_core::arrival`]).
//! - **Cost.** No connection task, no channel hop and no wake-up per token: one task reads, parses
//!   and stamps. The benchmark `ttft_accuracy` gives both figures.
//!
//! hyper still does all of HTTP/1.1 (framing, chunked bodies, keep-alive). https, HTTP/2 and
//! proxies stay with reqwest (`transport.rs` picks).

use crate::connection::{ConnProbe, DnsError, StampedBody};
use bytes::Bytes;
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use std::future::{poll_fn, Future};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use voxlat_core::arrival::{ArrivalStream, LastArrival};
use voxlat_core::{clock, Nanos};

type Io = TokioIo<ArrivalStream>;

/// Idle connections kept at most; more than any concurrency a cell runs at would need.
const MAX_IDLE: usize = 4096;

/// Why a connection could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Dns(#[from] DnsError),
    #[error("{host} resolved to no address")]
    NoAddress { host: String },
    #[error("connecting timed out")]
    Timeout,
    #[error("connect to {addr}: {source}")]
    Io {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot set up the connected socket: {0}")]
    Socket(#[source] std::io::Error),
    #[error("HTTP/1.1 handshake: {0}")]
    Handshake(#[source] hyper::Error),
}

/// Why an exchange on a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// The connection ended (the server closed it, or it broke) with the exchange unfinished.
    #[error("the connection closed")]
    Closed,
    #[error(transparent)]
    Http(#[from] hyper::Error),
}

impl ExchangeError {
    /// The connection closed or broke before the response: what a retry is for.
    pub fn closed(&self) -> bool {
        match self {
            ExchangeError::Closed => true,
            ExchangeError::Http(e) => crate::http_error::closed_in_chain(e),
        }
    }
}

/// The plain-HTTP connections to one host.
pub struct DirectPool {
    host: String,
    port: u16,
    idle: Mutex<Vec<DirectConn>>,
    connect_timeout: Duration,
    /// Keep finished connections for the next request (false: `--fresh-connections`, where
    /// every request opens its own and none may pile up open).
    keep: bool,
}

/// One connection: hyper's request handle and the connection state it drives.
pub struct DirectConn {
    sender: SendRequest<StampedBody>,
    conn: Connection<Io, StampedBody>,
    arrivals: Arc<LastArrival>,
    /// The connection's future finished: the server closed it, or it failed.
    ended: bool,
}

impl DirectPool {
    pub fn new(host: String, port: u16, connect_timeout: Duration, keep: bool) -> DirectPool {
        DirectPool {
            host,
            port,
            idle: Mutex::new(Vec::new()),
            connect_timeout,
            keep,
        }
    }

    /// A live pooled connection (unless `fresh`), else a new one with its phases on `probe`.
    /// A pooled connection the server has closed meanwhile is seen here, not after a request
    /// was sent on it: one poll of an idle connection reads the close.
    pub async fn checkout(
        &self,
        probe: &ConnProbe,
        fresh: bool,
    ) -> Result<DirectConn, ConnectError> {
        if !fresh {
            while let Some(mut c) = self.idle.lock().ok().and_then(|mut v| v.pop()) {
                c.poll_idle();
                if !c.ended && !c.sender.is_closed() {
                    return Ok(c);
                }
            }
        }
        self.connect(probe).await
    }

    /// Puts a connection whose response was read to its end back for the next request.
    pub fn checkin(&self, mut c: DirectConn) {
        if !self.keep {
            return;
        }
        c.poll_idle();
        if c.ended || c.sender.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE {
                idle.push(c);
            }
        }
    }

    async fn connect(&self, probe: &ConnProbe) -> Result<DirectConn, ConnectError> {
        let start = Instant::now();
        let addrs: Vec<SocketAddr> = match self.host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, self.port)],
            Err(_) => {
                let found = tokio::net::lookup_host((self.host.as_str(), self.port)).await;
                probe.record_dns(start.elapsed());
                found
                    .map_err(|source| DnsError {
                        host: self.host.clone(),
                        source,
                    })?
                    .collect()
            }
        };
        let dns_done = Instant::now();
        let connect = async {
            let mut last = None;
            for addr in &addrs {
                match tokio::net::TcpStream::connect(addr).await {
                    Ok(s) => return Ok(s),
                    Err(source) => {
                        last = Some(ConnectError::Io {
                            addr: *addr,
                            source,
                        })
                    }
                }
            }
            Err(last.unwrap_or_else(|| ConnectError::NoAddress {
                host: self.host.clone(),
            }))
        };
        let budget = self.connect_timeout.saturating_sub(start.elapsed());
        let tcp = tokio::time::timeout(budget, connect)
            .await
            .map_err(|_| ConnectError::Timeout)??;
        // Tokens are small writes; Nagle would hold the request's last segment.
        let _ = tcp.set_nodelay(true);
        let stream = ArrivalStream::new(tcp).map_err(ConnectError::Socket)?;
        let arrivals = stream.arrivals();
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(ConnectError::Handshake)?;
        probe.record_connect(dns_done.elapsed(), clock::now(), false);
        Ok(DirectConn {
            sender,
            conn,
            arrivals,
            ended: false,
        })
    }
}

impl DirectConn {
    /// One poll of the connection with no one to wake: reads a close the server sent while
    /// the connection sat idle, and lets a finished exchange return it to idle.
    fn poll_idle(&mut self) {
        let mut cx = Context::from_waker(Waker::noop());
        self.poll_conn(&mut cx);
    }

    fn poll_conn(&mut self, cx: &mut Context<'_>) {
        if !self.ended && Pin::new(&mut self.conn).poll(cx).is_ready() {
            self.ended = true;
        }
    }

    /// When the newest bytes read on this connection arrived.
    pub fn last_arrival(&self) -> Option<Nanos> {
        self.arrivals.get()
    }

    /// Sends `req` and waits for the response head, driving the connection meanwhile. A
    /// connection that ends first fails it as [`ExchangeError::Closed`]: hyper's handle would
    /// wait on an ended connection until the headers timeout.
    pub async fn send(
        &mut self,
        req: hyper::Request<StampedBody>,
    ) -> Result<hyper::Response<Incoming>, ExchangeError> {
        let ready = poll_fn(|cx| {
            self.poll_conn(cx);
            match self.sender.poll_ready(cx) {
                Poll::Ready(r) => Poll::Ready(r.map_err(ExchangeError::from)),
                Poll::Pending if self.ended => Poll::Ready(Err(ExchangeError::Closed)),
                Poll::Pending => Poll::Pending,
            }
        });
        ready.await?;
        let mut response = std::pin::pin!(self.sender.send_request(req));
        poll_fn(|cx| {
            if let Poll::Ready(r) = response.as_mut().poll(cx) {
                return Poll::Ready(r.map_err(ExchangeError::from));
            }
            self.poll_conn(cx);
            match response.as_mut().poll(cx) {
                Poll::Ready(r) => Poll::Ready(r.map_err(ExchangeError::from)),
                Poll::Pending if self.ended => Poll::Ready(Err(ExchangeError::Closed)),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    }

    /// The next piece of the body with the arrival time of the read that delivered it;
    /// `None` at its end.
    pub async fn next_data(
        &mut self,
        body: &mut Incoming,
    ) -> Option<Result<(Bytes, Nanos), ExchangeError>> {
        let mut after_end = false;
        poll_fn(|cx| loop {
            match Pin::new(&mut *body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        let t = self.arrivals.get().unwrap_or_else(clock::now);
                        return Poll::Ready(Some(Ok((data, t))));
                    }
                    // Trailers: nothing to measure.
                    Err(_) => continue,
                },
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending if after_end => return Poll::Ready(Some(Err(ExchangeError::Closed))),
                Poll::Pending => {}
            }
            self.poll_conn(cx);
            if self.ended {
                // The body learns of the end on its next poll, or never: then it is cut off.
                after_end = true;
                continue;
            }
            return Poll::Pending;
        })
        .await
    }
}

/// Where a URL that goes direct points: what to connect to, and what the request names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectTarget {
    /// Host to resolve or IP literal (IPv6 without brackets), and port.
    pub host: String,
    pub port: u16,
    /// The `Host` header: the URL's host, with the port when the URL gives one.
    pub authority: String,
    /// Path and query, as the request line names them.
    pub path: String,
}

/// Whether `url` goes over the direct transport: plain http, HTTP/1.1, no credentials in
/// the URL, no proxy in the environment for it. Parsed once, at the client's construction.
pub fn direct_target(url: &str, http2: bool) -> Option<DirectTarget> {
    let u = reqwest::Url::parse(url).ok()?;
    if http2 || u.scheme() != "http" || !u.username().is_empty() || u.password().is_some() {
        return None;
    }
    let host = match u.host()? {
        url::Host::Domain(d) => d.to_string(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    };
    if crate::http_error::env_proxy_for(url, &host).is_some() {
        return None;
    }
    let authority = match u.port() {
        Some(p) => format!("{}:{p}", u.host_str()?),
        None => u.host_str()?.to_string(),
    };
    let path = match u.query() {
        Some(q) => format!("{}?{q}", u.path()),
        None => u.path().to_string(),
    };
    Some(DirectTarget {
        host,
        port: u.port_or_known_default()?,
        authority,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(t: DirectTarget) -> (String, u16) {
        (t.host, t.port)
    }

    #[test]
    fn plain_http_urls_go_direct_with_their_host_and_port() {
        assert_eq!(
            direct_target("http://127.0.0.1:8080/v1/chat/completions", false).map(hp),
            Some(("127.0.0.1".into(), 8080))
        );
        assert_eq!(
            direct_target("http://localhost/v1/models", false).map(hp),
            Some(("localhost".into(), 80))
        );
        assert_eq!(
            direct_target("http://[::1]:9000/v1", false).map(hp),
            Some(("::1".into(), 9000))
        );
        assert_eq!(
            direct_target("http://[::1]/v1", false).map(hp),
            Some(("::1".into(), 80))
        );
    }

    #[test]
    fn https_http2_and_odd_urls_stay_with_the_full_client() {
        assert_eq!(direct_target("https://api.openai.com/v1", false), None);
        assert_eq!(direct_target("http://127.0.0.1:8080/v1", true), None);
        assert_eq!(direct_target("http://user:pw@host:1/v1", false), None);
        assert_eq!(direct_target("http://host:notaport/v1", false), None);
    }
}
