//! Which HTTP stack carries a chat stream, behind one shape: the response head, then the
//! body's pieces, each with the arrival time of the read that delivered it.
//!
//! Plain HTTP/1.1 without a proxy goes [direct](crate::direct) (kernel arrival stamps, one task
//! per request); https, HTTP/2 and proxied URLs go through reqwest, whose pieces are stamped
//! when the request's task receives them.

use crate::arrival::LastArrival;
use crate::classify::{self, chain, closed_before_response, header_str};
use crate::config::Endpoint;
use crate::connection::{self, ConnProbe, StampKind, StampedBody, TransportKind};
use crate::direct::{direct_target, ConnectError, DirectConn, DirectPool};
use crate::error::{BodyError, NetError, TimeoutKind};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use voxlat_core::{clock, Nanos};

/// What a chat request carries, whichever stack sends it.
pub struct Outgoing<'a> {
    pub url: &'a str,
    pub body: Bytes,
    pub request_id: &'a str,
    pub traceparent: String,
}

pub enum Transport {
    Direct {
        pool: Arc<DirectPool>,
        /// The chat URL's `Host` header and path, worked out once.
        authority: String,
        path: String,
    },
    Full {
        http: reqwest::Client,
        /// Keeps no idle connections, so a request sent on it always opens a new one.
        fresh_http: reqwest::Client,
    },
}

/// The response head, as far as the client reads it.
pub struct Head {
    /// When the read that completed the head arrived, where the transport knows it. The
    /// first event often comes in the same packet as the head and is stamped with its
    /// arrival, so a head stamped when the task got round to it would come after that event.
    pub arrived: Option<Nanos>,
    pub status: u16,
    pub version: String,
    pub request_id: Option<String>,
    pub content_type: Option<String>,
    pub retry_after: Option<String>,
}

/// Why no response head came.
pub enum SendFailure {
    /// The headers did not come within the timeout.
    Timeout,
    /// The connection closed, or was reset, before any response byte (the cause's words).
    Closed(String),
    /// Anything else, already explained.
    Failed(NetError),
}

/// A response whose body is being read.
pub enum Exchange {
    Direct {
        // Boxed: a connection's state is far larger than reqwest's stream handle.
        conn: Box<DirectConn>,
        pool: Arc<DirectPool>,
        ended: bool,
        stamps: StampNote,
    },
    Full(BoxStream<'static, reqwest::Result<Bytes>>),
}

/// Notes on the request's probe, when the exchange ends however it ends, whether every read
/// of the response carried the kernel's stamp. Counted over the whole response, head
/// included, rather than the first token's read alone: a fallback anywhere means the
/// request's figures mix two kinds of stamp.
pub struct StampNote {
    probe: Arc<ConnProbe>,
    arrivals: Arc<LastArrival>,
    /// The connection's read-time stamps before this request's response.
    before: u64,
}

impl Drop for StampNote {
    fn drop(&mut self) {
        self.probe
            .record_stamps(match self.arrivals.fallbacks() > self.before {
                true => StampKind::FallbackReadTime,
                false => StampKind::Kernel,
            });
    }
}

impl Transport {
    /// Sends the request and waits for the response head. `fresh` asks for a new connection
    /// (the retry of a request whose pooled connection was dead).
    pub async fn send(
        &self,
        endpoint: &Endpoint,
        out: &Outgoing<'_>,
        probe: &Arc<ConnProbe>,
        fresh: bool,
        opts: &ClientOptions,
    ) -> Result<(Head, Exchange), SendFailure> {
        match self {
            Transport::Direct {
                pool,
                authority,
                path,
            } => {
                probe.record_transport(TransportKind::Direct);
                let fresh = fresh || opts.fresh_connections;
                let request = direct_request(endpoint, out, authority, path)?;
                let sending = async {
                    let mut conn = pool.checkout(probe, fresh).await.map_err(|e| {
                        SendFailure::Failed(connect_error(e, endpoint, out.url, opts))
                    })?;
                    let before = conn.arrivals().fallbacks();
                    match conn.send(&request, probe).await {
                        Ok(head) => Ok(((conn, before), head)),
                        Err(e) if e.closed() => Err(SendFailure::Closed(chain(&e))),
                        Err(e) => Err(SendFailure::Failed(NetError::Other(format!(
                            "request to {} failed: {}",
                            out.url,
                            classify::scrub(endpoint, &chain(&e))
                        )))),
                    }
                };
                let ((conn, before), resp) = tokio::time::timeout(opts.headers_timeout, sending)
                    .await
                    .map_err(|_| SendFailure::Timeout)??;
                let stamps = StampNote {
                    probe: probe.clone(),
                    arrivals: conn.arrivals(),
                    before,
                };
                let head = Head {
                    arrived: conn.last_arrival(),
                    status: resp.status,
                    version: if resp.http10 { "HTTP/1.0" } else { "HTTP/1.1" }.to_string(),
                    request_id: resp.request_id,
                    content_type: resp.content_type,
                    retry_after: resp.retry_after,
                };
                Ok((
                    head,
                    Exchange::Direct {
                        conn: Box::new(conn),
                        pool: pool.clone(),
                        ended: false,
                        stamps,
                    },
                ))
            }
            Transport::Full { http, fresh_http } => {
                probe.record_transport(TransportKind::Reqwest);
                let http = if fresh { fresh_http } else { http };
                let mut rb = http
                    .post(out.url)
                    .header("X-Request-Id", out.request_id)
                    .header("traceparent", out.traceparent.as_str())
                    .header(reqwest::header::ACCEPT, "text/event-stream")
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(reqwest::Body::wrap(StampedBody::new(
                        out.body.clone(),
                        probe.clone(),
                    )));
                if let Some(k) = endpoint.key() {
                    rb = rb.bearer_auth(k.expose());
                }
                let send = tokio::time::timeout(opts.headers_timeout, rb.send());
                let resp = match connection::with_probe(probe.clone(), send).await {
                    Err(_) => return Err(SendFailure::Timeout),
                    Ok(Err(e)) if closed_before_response(&e) => {
                        return Err(SendFailure::Closed(chain(&e)))
                    }
                    Ok(Err(e)) => {
                        return Err(SendFailure::Failed(classify::classify(
                            endpoint,
                            &e,
                            out.url,
                            opts.connect_timeout,
                        )))
                    }
                    Ok(Ok(r)) => r,
                };
                let head = Head {
                    arrived: None,
                    status: resp.status().as_u16(),
                    version: format!("{:?}", resp.version()),
                    request_id: header_str(&resp, "x-request-id"),
                    content_type: header_str(&resp, "content-type"),
                    retry_after: header_str(&resp, "retry-after"),
                };
                probe.record_stamps(StampKind::Task);
                Ok((head, Exchange::Full(resp.bytes_stream().boxed())))
            }
        }
    }
}

impl Exchange {
    /// The next piece of the body and when it arrived; `None` at the body's end.
    pub async fn next(&mut self) -> Option<Result<(Bytes, Nanos), BodyError>> {
        match self {
            Exchange::Direct { conn, ended, .. } => match conn.next_data().await {
                None => {
                    *ended = true;
                    None
                }
                Some(r) => Some(r.map_err(BodyError::from)),
            },
            Exchange::Full(stream) => {
                let r = stream.next().await?;
                let t = clock::now();
                Some(r.map(|b| (b, t)).map_err(BodyError::from))
            }
        }
    }

    /// Ends the exchange: a direct connection whose body was read to its end goes back to
    /// the pool, any other is closed.
    pub fn finish(self) {
        if let Exchange::Direct {
            conn,
            pool,
            ended: true,
            ..
        } = self
        {
            pool.checkin(*conn);
        }
    }

    /// The start of the body, for an error message: at most 64 KiB, scrubbed and truncated
    /// for display.
    pub async fn display_text(self, endpoint: &Endpoint, idle: Duration) -> String {
        let pieces = futures_util::stream::unfold(self, |mut x| async move {
            let piece = x.next().await?;
            Some((piece.map(|(b, _)| b), x))
        });
        classify::display_body(endpoint, pieces, idle).await
    }
}

impl Transport {
    /// The one place the stack is chosen: direct for plain HTTP/1.1 without a proxy or
    /// credentials in the URL, reqwest for the rest. Each request's probe records which one
    /// carried it ([`TransportKind`]).
    pub fn for_url(url: &str, opts: &ClientOptions) -> Result<Transport, NetError> {
        if let Some(target) = direct_target(url, opts.http2) {
            return Ok(Transport::Direct {
                authority: target.authority,
                path: target.path,
                pool: Arc::new(DirectPool::new(
                    target.host,
                    target.port,
                    opts.connect_timeout,
                    !opts.fresh_connections,
                )),
            });
        }
        let tls = url.starts_with("https://");
        Ok(Transport::Full {
            http: http_client(opts, tls, opts.fresh_connections)?,
            fresh_http: http_client(opts, tls, true)?,
        })
    }
}

/// How a client talks to one server. Shared by every request it sends.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClientOptions {
    /// Open a new connection for every request (measures cold requests). Default: pooled.
    pub fresh_connections: bool,
    /// HTTP/2 with prior knowledge (h2c for http://). Default: HTTP/1.1.
    pub http2: bool,
    pub connect_timeout: Duration,
    /// From sending the request to receiving response headers.
    pub headers_timeout: Duration,
    /// Longest silence allowed between two reads of the stream.
    pub idle_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            fresh_connections: false,
            http2: false,
            connect_timeout: Duration::from_secs(10),
            headers_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// A reqwest client whose DNS lookups and connects are timed on the request's probe: for
/// requests nobody measures (a model list) and for what the direct transport cannot carry.
pub fn http_client(
    opts: &ClientOptions,
    tls: bool,
    fresh: bool,
) -> Result<reqwest::Client, NetError> {
    let mut b = reqwest::Client::builder()
        .connect_timeout(opts.connect_timeout)
        .dns_resolver(Arc::new(connection::TimedResolver))
        .connector_layer(connection::TimedConnectLayer { tls })
        .tcp_nodelay(true)
        .user_agent(concat!("voxlat/", env!("CARGO_PKG_VERSION")));
    if fresh {
        b = b.pool_max_idle_per_host(0);
    }
    b = if opts.http2 {
        b.http2_prior_knowledge()
    } else {
        b.http1_only()
    };
    b.build()
        .map_err(|e| NetError::Other(format!("cannot build the HTTP client: {}", chain(&e))))
}

/// The request's bytes, head and body, as the direct transport writes them in one go.
fn direct_request(
    endpoint: &Endpoint,
    out: &Outgoing<'_>,
    authority: &str,
    path: &str,
) -> Result<Vec<u8>, SendFailure> {
    use std::fmt::Write;
    let mut head = String::with_capacity(256);
    // Writing into a String cannot fail.
    let _ = write!(
        head,
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: voxlat/{}\r\nX-Request-Id: {}\r\ntraceparent: {}\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        env!("CARGO_PKG_VERSION"),
        out.request_id,
        out.traceparent,
        out.body.len()
    );
    if let Some(k) = endpoint.key() {
        let value = format!("Bearer {}", k.expose());
        // The key is the user's: a line break in it would end the header early.
        if let Err(e) = hyper::header::HeaderValue::from_str(&value) {
            return Err(SendFailure::Failed(NetError::Other(format!(
                "cannot build the request to {}: the API key holds a character a header cannot carry ({e})",
                out.url
            ))));
        }
        let _ = write!(head, "Authorization: {value}\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&out.body);
    Ok(bytes)
}

/// A connection that could not be had, in the same classes reqwest's failures get.
fn connect_error(
    e: ConnectError,
    endpoint: &Endpoint,
    url: &str,
    opts: &ClientOptions,
) -> NetError {
    match e {
        ConnectError::Dns(d) => NetError::Dns {
            host: d.host,
            detail: d.source.to_string(),
        },
        ConnectError::Timeout => NetError::Timeout {
            service: endpoint.service,
            kind: TimeoutKind::Connect,
            phase: "connecting",
            after: opts.connect_timeout,
        },
        ConnectError::Io { addr, source }
            if source.kind() == std::io::ErrorKind::ConnectionRefused =>
        {
            NetError::ConnectionRefused {
                addr: addr.to_string(),
                proxy: None,
            }
        }
        other => NetError::Connect {
            url: url.into(),
            detail: chain(&other),
            proxy: None,
        },
    }
}
