//! What both audio clients share: one HTTP client on a runtime of its own (a stage's worker
//! is a plain thread, so a call blocks it, as a Whisper or Piper call does), the stamps of a
//! call, and `voxlat-net`'s error classes.

use crate::server_timing;
use futures_util::StreamExt;
use std::time::Duration;
use voxlat_core::clock;
use voxlat_core::remote::RemoteCall;
use voxlat_net::classify::{chain, classify, scrub, status_error};
use voxlat_net::{ClientOptions, Endpoint, NetError, TimeoutKind};

/// How long a remote stage may take, per phase.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub connect: Duration,
    /// Request sent → response headers: upload, queueing and (for ASR) the whole transcription.
    pub response: Duration,
    /// Longest silence between two reads of the body.
    pub idle: Duration,
}

pub(crate) struct Http {
    pub endpoint: Endpoint,
    client: reqwest::Client,
    rt: tokio::runtime::Runtime,
    pub timeouts: Timeouts,
}

impl Http {
    pub fn new(endpoint: Endpoint, timeouts: Timeouts) -> Result<Http, NetError> {
        // voxlat-net's client, as the LLM's full transport uses: the same connect timeout,
        // resolver and connection stamps for every service.
        let opts = ClientOptions {
            connect_timeout: timeouts.connect,
            ..ClientOptions::default()
        };
        let tls = endpoint.base_url.value.starts_with("https://");
        let client = voxlat_net::transport::http_client(&opts, tls, false)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| NetError::Other(format!("cannot start the HTTP runtime: {e}")))?;
        Ok(Http {
            endpoint,
            client,
            rt,
            timeouts,
        })
    }

    pub fn url(&self, path: &str) -> String {
        self.endpoint.url(path)
    }

    pub fn post(&self, url: &str, request_id: &str) -> reqwest::RequestBuilder {
        let mut rb = self.client.post(url).header("x-request-id", request_id);
        if let Some(k) = self.endpoint.key() {
            rb = rb.bearer_auth(k.expose());
        }
        rb
    }

    /// Runs one call to completion on this client's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Sends and waits for the headers, stamping `sent`, `headers`, the status and the
    /// server's timing into `call`. A non-success status becomes its error, body included.
    pub async fn send(
        &self,
        rb: reqwest::RequestBuilder,
        call: &mut RemoteCall,
    ) -> Result<reqwest::Response, NetError> {
        let url = call.url.clone();
        call.sent = clock::now();
        let sent = tokio::time::timeout(self.timeouts.response, rb.send()).await;
        let now = clock::now();
        call.done = now;
        let resp = match sent {
            Err(_) => {
                return Err(NetError::Timeout {
                    service: self.endpoint.service,
                    kind: TimeoutKind::Headers,
                    phase: "waiting for the response",
                    after: self.timeouts.response,
                })
            }
            Ok(Err(e)) => return Err(classify(&self.endpoint, &e, &url, self.timeouts.connect)),
            Ok(Ok(r)) => r,
        };
        call.headers = Some(now);
        call.status = Some(resp.status().as_u16());
        call.server_request_id = resp
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let timing = server_timing::parse(
            resp.headers()
                .get_all("server-timing")
                .iter()
                .filter_map(|v| v.to_str().ok()),
        );
        call.server_queue_ms = timing.queue_ms;
        call.server_compute_ms = timing.compute_ms;
        if !resp.status().is_success() {
            return Err(status_error(&self.endpoint, resp, &url, self.timeouts.idle).await);
        }
        Ok(resp)
    }

    /// Reads the body, handing each piece to `each` as it arrives and stamping the first
    /// byte, the byte count and the end into `call`. A body cut off is `Disconnected`.
    pub async fn read_body(
        &self,
        resp: reqwest::Response,
        call: &mut RemoteCall,
        mut each: impl FnMut(&[u8]) -> Result<(), NetError>,
    ) -> Result<(), NetError> {
        let mut stream = resp.bytes_stream();
        loop {
            let next = tokio::time::timeout(self.timeouts.idle, stream.next()).await;
            let now = clock::now();
            call.done = now;
            match next {
                Err(_) => {
                    return Err(NetError::Timeout {
                        service: self.endpoint.service,
                        kind: TimeoutKind::Idle,
                        phase: "reading the response body",
                        after: self.timeouts.idle,
                    })
                }
                Ok(None) => return Ok(()),
                Ok(Some(Err(e))) => {
                    return Err(NetError::Disconnected {
                        detail: format!(
                            "{} cut the response off after {} bytes: {}",
                            call.url,
                            call.download_bytes,
                            scrub(&self.endpoint, &chain(&e))
                        ),
                    })
                }
                Ok(Some(Ok(bytes))) if bytes.is_empty() => {}
                Ok(Some(Ok(bytes))) => {
                    call.first_byte.get_or_insert(now);
                    call.download_bytes += bytes.len() as u64;
                    each(&bytes)?;
                }
            }
        }
    }
}
