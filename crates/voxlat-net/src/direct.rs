//! The measured path's transport for plain HTTP/1.1: each request reads and writes its own
//! connection in its own task, over an [`ArrivalStream`], with the HTTP/1.1 framing of
//! [`crate::h1`].
//!
//! Not reqwest's pooled client, for two measured reasons:
//! - **Arrival stamps.** reqwest owns its sockets, so a read can only be stamped when the
//!   request's task wakes, after the connection task read it and passed it over a channel.
//!   At c=64 the 64 first tokens of a wave arrive together and one worker thread takes them in
//!   turn; the last was stamped about a millisecond late. Here each read keeps the kernel's
//!   receive stamp ([`crate::arrival`]).
//! - **Cost.** No connection task, no channel hop and no wake-up per token: one task reads,
//!   parses and stamps. The benchmark `ttft_accuracy` gives both figures.
//!
//! https, HTTP/2 and proxies stay with reqwest (`transport.rs` picks).

use crate::arrival::{ArrivalStream, LastArrival};
use crate::connection::{ConnProbe, DnsError};
use crate::h1::{self, BodyReader, H1Error, Piece, ResponseHead};
use bytes::{Buf, Bytes, BytesMut};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use voxlat_core::{clock, Nanos};

/// Idle connections kept at most; more than any concurrency a cell runs at would need.
const MAX_IDLE: usize = 4096;
/// Room asked of the buffer before each read: a token's event is a few hundred bytes.
const READ_SIZE: usize = 8 * 1024;
/// A response head larger than this is refused rather than buffered on.
const MAX_HEAD: usize = 64 * 1024;

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
}

/// Why an exchange on a connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// The connection ended (the server closed it, or it broke) before any response byte.
    #[error("the connection closed before any response byte")]
    Closed,
    #[error("connection error: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Http(#[from] H1Error),
    #[error("the response head grew past {} KiB without ending", MAX_HEAD >> 10)]
    HeadTooLarge,
}

impl ExchangeError {
    /// The connection closed or broke before the response: what a retry is for.
    pub fn closed(&self) -> bool {
        match self {
            ExchangeError::Closed => true,
            ExchangeError::Io(e) => crate::classify::io_closed(e),
            ExchangeError::Http(_) | ExchangeError::HeadTooLarge => false,
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

/// One connection, and where the response on it stands.
pub struct DirectConn {
    stream: ArrivalStream,
    arrivals: Arc<LastArrival>,
    /// Bytes read and not yet consumed.
    buf: BytesMut,
    body: BodyReader,
    /// The response allows another request on this connection once its body is read.
    keep_alive: bool,
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
    /// was sent on it.
    pub async fn checkout(
        &self,
        probe: &ConnProbe,
        fresh: bool,
    ) -> Result<DirectConn, ConnectError> {
        if !fresh {
            while let Some(c) = self.idle.lock().ok().and_then(|mut v| v.pop()) {
                if c.stream.idle_and_open() {
                    return Ok(c);
                }
            }
        }
        self.connect(probe).await
    }

    /// Puts a connection whose response was read to its end back for the next request.
    pub fn checkin(&self, c: DirectConn) {
        let reusable = c.keep_alive && c.body == BodyReader::Done && c.buf.is_empty();
        if !self.keep || !reusable {
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
        probe.record_connect(dns_done.elapsed(), clock::now(), false);
        Ok(DirectConn {
            arrivals: stream.arrivals(),
            stream,
            buf: BytesMut::new(),
            body: BodyReader::Done,
            keep_alive: false,
        })
    }
}

impl DirectConn {
    /// This connection's arrival stamps, shared.
    pub fn arrivals(&self) -> Arc<LastArrival> {
        self.arrivals.clone()
    }

    /// When the newest bytes read on this connection arrived.
    pub fn last_arrival(&self) -> Option<Nanos> {
        self.arrivals.get()
    }

    /// Writes `request` (head and body, whole) and reads the response head. A connection
    /// that ends before any response byte fails it as [`ExchangeError::Closed`].
    pub async fn send(
        &mut self,
        request: &[u8],
        probe: &ConnProbe,
    ) -> Result<ResponseHead, ExchangeError> {
        probe.record_written(clock::now());
        self.stream.write_all(request).await?;
        loop {
            if let Some((head, len)) = h1::parse_head(&self.buf)? {
                self.buf.advance(len);
                self.body = head.body.clone();
                self.keep_alive = head.keep_alive;
                return Ok(head);
            }
            if self.buf.len() > MAX_HEAD {
                return Err(ExchangeError::HeadTooLarge);
            }
            if self.read().await? == 0 {
                return Err(match self.buf.is_empty() {
                    true => ExchangeError::Closed,
                    false => H1Error::Head("the connection closed inside it".into()).into(),
                });
            }
        }
    }

    /// The next piece of the body with the arrival time of the read that delivered it;
    /// `None` at its end.
    pub async fn next_data(&mut self) -> Option<Result<(Bytes, Nanos), ExchangeError>> {
        loop {
            match self.body.next(&mut self.buf) {
                Ok(Some(Piece::Data(data))) => {
                    let t = self.arrivals.get().unwrap_or_else(clock::now);
                    return Some(Ok((data, t)));
                }
                Ok(Some(Piece::End)) => return None,
                Ok(None) => {}
                Err(e) => return Some(Err(e.into())),
            }
            match self.read().await {
                Ok(0) => return self.body.at_eof().err().map(|e| Err(e.into())),
                Ok(_) => {}
                Err(e) => return Some(Err(e.into())),
            }
        }
    }

    /// One read into the buffer; 0 at the end of the stream.
    async fn read(&mut self) -> std::io::Result<usize> {
        self.buf.reserve(READ_SIZE);
        self.stream.read_buf(&mut self.buf).await
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
    if crate::classify::env_proxy_for(url, &host).is_some() {
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
