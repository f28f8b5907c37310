//! What a failed HTTP exchange with an OpenAI-compatible server means, in words: shared by
//! the chat client and the audio clients (`voxlat-speech-api`), so every remote stage reports
//! the same error classes with the same fixes.

use crate::config::{Endpoint, Service};
use crate::connection::DnsError;
use crate::error::{not_found_hint, truncate_body, NetError, TimeoutKind};
use futures_util::StreamExt;
use std::time::Duration;

/// The error for a non-success status: the credentials, the path, or the status and its
/// `Retry-After`.
pub async fn status_error(
    endpoint: &Endpoint,
    resp: reqwest::Response,
    url: &str,
    idle_timeout: Duration,
) -> NetError {
    let status = resp.status().as_u16();
    let retry_after = header_str(&resp, "retry-after");
    let body = read_body(endpoint, resp, idle_timeout).await;
    status_error_from(endpoint, status, retry_after, body, url)
}

/// [`status_error`] for a response already read: its status, `Retry-After` and the start of
/// its body (scrubbed and truncated).
pub fn status_error_from(
    endpoint: &Endpoint,
    status: u16,
    retry_after: Option<String>,
    body: String,
    url: &str,
) -> NetError {
    match status {
        401 | 403 => NetError::Unauthorized {
            status,
            url: url.to_string(),
            hint: auth_hint(endpoint),
            body,
        },
        404 => NetError::NotFound {
            url: url.to_string(),
            hint: not_found_hint(&endpoint.base_url.value),
            body,
        },
        _ => NetError::Status {
            status,
            url: url.to_string(),
            body,
            retry_after,
        },
    }
}

/// The start of an error body, scrubbed of the key and truncated for display.
pub async fn read_body(
    endpoint: &Endpoint,
    resp: reqwest::Response,
    idle_timeout: Duration,
) -> String {
    display_body(endpoint, resp.bytes_stream(), idle_timeout).await
}

/// [`read_body`] over any body's pieces; a read that fails is shown in its causes' words.
pub async fn display_body<E: std::error::Error>(
    endpoint: &Endpoint,
    pieces: impl futures_util::Stream<Item = Result<bytes::Bytes, E>>,
    idle_timeout: Duration,
) -> String {
    // Only the start of a body is ever shown, so only that much is read: a gateway's
    // endless or huge error page must not be buffered whole.
    const READ_LIMIT: usize = 64 * 1024;
    let read = async {
        let mut pieces = std::pin::pin!(pieces);
        let mut buf = Vec::new();
        while buf.len() < READ_LIMIT {
            match pieces.next().await {
                Some(Ok(b)) => buf.extend_from_slice(&b),
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        buf.truncate(READ_LIMIT);
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    let text = match tokio::time::timeout(idle_timeout, read).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => format!("<body unreadable: {}>", chain(&e)),
        Err(_) => "<body timed out>".into(),
    };
    truncate_body(&scrub(endpoint, &text))
}

/// `text` without the endpoint's API key.
pub fn scrub(endpoint: &Endpoint, text: &str) -> String {
    match endpoint.key() {
        Some(k) => k.scrub(text),
        None => text.to_string(),
    }
}

/// The error class of a failed send: DNS, TLS, a timeout while connecting, a proxy, a refused
/// or failed connection.
pub fn classify(
    endpoint: &Endpoint,
    e: &reqwest::Error,
    url: &str,
    connect_timeout: Duration,
) -> NetError {
    let detail = scrub(endpoint, &chain(e));
    let host = e.url().and_then(|u| u.host_str()).unwrap_or("").to_string();
    let addr = e
        .url()
        .map(|u| format!("{}:{}", host, u.port_or_known_default().unwrap_or(0)))
        .unwrap_or_else(|| url.to_string());
    let mut refused = false;
    let mut dns: Option<(String, String)> = None;
    let mut tls = false;
    visit_sources(e, &mut |err| {
        if let Some(d) = err.downcast_ref::<DnsError>() {
            dns.get_or_insert((d.host.clone(), d.source.to_string()));
        }
        tls |= err.downcast_ref::<rustls::Error>().is_some();
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            refused |= io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
    });
    if let Some((host, detail)) = dns {
        return NetError::Dns { host, detail };
    }
    if tls {
        return NetError::Tls {
            url: url.into(),
            detail,
        };
    }
    if e.is_timeout() {
        return NetError::Timeout {
            service: endpoint.service,
            kind: TimeoutKind::Connect,
            phase: "connecting",
            after: connect_timeout,
        };
    }
    let proxy = env_proxy_for(url, &host);
    if e.is_connect() {
        if let Some(proxy) = proxy {
            return NetError::Proxy {
                url: url.into(),
                proxy,
                host,
                detail,
            };
        }
        if refused {
            return NetError::ConnectionRefused { addr, proxy: None };
        }
        return NetError::Connect {
            url: url.into(),
            detail,
            proxy: None,
        };
    }
    NetError::Other(format!("request to {url} failed: {detail}"))
}

/// The connection was closed, reset or broken before any byte of the response arrived: what
/// a server's keep-alive limit, idle timeout or a proxy does to a pooled connection the
/// client then reuses. hyper's "connection closed before message completed" is
/// `is_incomplete_message`.
pub fn closed_before_response(e: &reqwest::Error) -> bool {
    if e.is_timeout() || e.is_connect() || e.is_status() {
        return false;
    }
    closed_in_chain(e)
}

/// Whether `e` or an error below it says the connection closed, was reset or broke: hyper's
/// incomplete message or cancelled dispatch, or such an I/O error.
fn closed_in_chain(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut closed = false;
    visit_sources(e, &mut |err| {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            closed |= h.is_incomplete_message() || h.is_canceled();
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            closed |= io_closed(io);
        }
    });
    closed
}

/// An I/O error that means the connection closed, was reset or broke (both transports).
pub fn io_closed(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
    )
}

pub fn header_str(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn auth_hint(endpoint: &Endpoint) -> String {
    if let Some(k) = &endpoint.api_key {
        return format!(
            "Check the API key (from {}). voxlat sends it as \"Authorization: Bearer <key>\", so give the bare key; a pasted \"Bearer \" prefix is removed",
            k.source
        );
    }
    // A key was configured and held back: the 401 is most likely that, not a wrong key.
    if let Some(w) = &endpoint.withheld_key {
        return format!(
            "No API key was sent: {} was withheld because {}",
            w.source,
            w.reason.explain(endpoint.service)
        );
    }
    match endpoint.service {
        Service::Llm => "No API key was set (VOXLAT_API_KEY or OPENAI_API_KEY)".into(),
        s => format!(
            "No API key was set: set {} (the LLM's key goes only to a server on the LLM's origin)",
            s.key_vars()[0]
        ),
    }
}

/// Calls `f` on `e` and every error below it. `io::Error` needs special care: its `source()`
/// skips the error it wraps (it returns the *inner* error's source), and TLS stacks wrap
/// `rustls::Error` in one or two layers of `io::Error`.
fn visit_sources(
    e: &(dyn std::error::Error + 'static),
    f: &mut dyn FnMut(&(dyn std::error::Error + 'static)),
) {
    f(e);
    if let Some(inner) = e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
    {
        visit_sources(inner, f);
    }
    if let Some(src) = e.source() {
        visit_sources(src, f);
    }
}

/// The error and its sources, joined: reqwest's top-level message alone ("error sending
/// request") says nothing useful.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let m = inner.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = inner.source();
    }
    s
}

/// The proxy the environment sets for this URL, credentials removed, unless NO_PROXY
/// exempts the host. Mirrors the variables reqwest reads, for the error hint only.
pub fn env_proxy_for(url: &str, host: &str) -> Option<String> {
    let get = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()))
    };
    let vars: &[&str] = if url.starts_with("https://") {
        &["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
    } else {
        &["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
    };
    let proxy = get(vars)?;
    if let Some(no) = get(&["NO_PROXY", "no_proxy"]) {
        let exempt = no.split(',').map(str::trim).any(|p| {
            p == "*"
                || p == host
                || (!p.is_empty() && host.ends_with(&format!(".{}", p.trim_start_matches('.'))))
        });
        if exempt {
            return None;
        }
    }
    Some(strip_userinfo(&proxy))
}

fn strip_userinfo(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}{}", &url[..s + 3], &url[at + 1..]),
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(e: &Endpoint) -> String {
        match status_error_from(e, 401, None, String::new(), "http://x/v1/y") {
            NetError::Unauthorized { hint, .. } => hint,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_401_says_when_the_key_was_withheld_and_how_to_send_it() {
        let s = crate::config::Settings::load(
            [("VOXLAT_API_KEY".to_string(), "sk-x".to_string())].into(),
            std::path::Path::new("/nonexistent/.env"),
        )
        .unwrap();
        let insecure = s
            .endpoint(Some(("--base-url", "http://10.1.2.3:8080/v1")), None)
            .unwrap();
        let h = hint(&insecure);
        assert!(
            h.contains("withheld") && h.contains("env VOXLAT_API_KEY"),
            "{h}"
        );
        assert!(h.contains("plain http"), "{h}");
        let llm = s
            .endpoint(Some(("--base-url", "https://llm.example/v1")), None)
            .unwrap();
        let asr = s
            .service_endpoint(
                Service::Asr,
                crate::config::Sourced {
                    value: "https://asr.example/v1".into(),
                    source: "--asr-url".into(),
                    layer: crate::config::Layer::Flag,
                },
                None,
                Some(&llm),
            )
            .unwrap();
        let h = hint(&asr);
        assert!(
            h.contains("VOXLAT_ASR_API_KEY") && h.contains("withheld"),
            "{h}"
        );
        let mut bare = Endpoint::new("http://127.0.0.1:1/v1", None);
        bare.service = Service::Tts;
        assert!(
            hint(&bare).contains("VOXLAT_TTS_API_KEY"),
            "{}",
            hint(&bare)
        );
        assert!(hint(&Endpoint::new("http://127.0.0.1:1/v1", None)).contains("VOXLAT_API_KEY"));
    }

    #[test]
    fn proxy_credentials_are_not_shown() {
        assert_eq!(
            strip_userinfo("http://user:pw@proxy:3128"),
            "http://proxy:3128"
        );
        assert_eq!(strip_userinfo("http://proxy:3128"), "http://proxy:3128");
    }
}
