//! Plain downloads: `https://`, `http://` and `file://` URLs, streamed to a file with
//! progress. Unreachable hosts must fail within seconds so the next source gets its turn.

use crate::error::SourceError;
use crate::report::{Event, Reporter};
use std::error::Error as _;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::Duration;
use voxlat_core::fsio::IoAt;

#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// How long to wait for a TCP/TLS connection before giving up on a source.
    pub connect_timeout: Duration,
    /// How long a transfer may stall (no bytes) before it is abandoned.
    pub stall_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            stall_timeout: Duration::from_secs(60),
        }
    }
}

/// reqwest's top-level message ("error sending request") hides the cause; the chain has it.
fn chain(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    if e.is_timeout() || e.is_connect() {
        s.push_str(" (offline, or the host is blocked?)");
    }
    s
}

fn copy_with_progress(
    mut from: impl Read,
    to: &mut File,
    total: Option<u64>,
    model: &str,
    what: &str,
    reporter: &dyn Reporter,
) -> io::Result<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut done = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        done += n as u64;
        reporter.event(Event::Bytes {
            model,
            what,
            done,
            total,
        });
    }
    reporter.event(Event::BytesDone { model, what });
    to.sync_all()?;
    Ok(done)
}

/// Downloads `url` into `dest` (created or truncated). `dest` is a temporary path; the caller
/// verifies and renames it.
pub fn download(
    url: &str,
    dest: &Path,
    opts: &HttpOptions,
    model: &str,
    reporter: &dyn Reporter,
) -> Result<u64, SourceError> {
    let what = format!("downloading {url}");
    let mut out = File::create(dest).map_err(IoAt::on("create", dest))?;
    if let Some(path) = url.strip_prefix("file://") {
        let src = File::open(path).map_err(IoAt::on("open", path))?;
        let total = src.metadata().ok().map(|m| m.len());
        return Ok(
            copy_with_progress(src, &mut out, total, model, &what, reporter)
                .map_err(IoAt::on("copy to", dest))?,
        );
    }
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(SourceError::Http(format!(
            "unsupported URL scheme in {url} (use https://, http:// or file://)"
        )));
    }
    let client = reqwest::blocking::Client::builder()
        .connect_timeout(opts.connect_timeout)
        // In the blocking client this bounds each read, i.e. a stall, not the whole transfer.
        .timeout(opts.stall_timeout)
        .user_agent(concat!("voxlat-models/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| SourceError::Http(chain(&e)))?;
    let resp = client
        .get(url)
        .send()
        .map_err(|e| SourceError::Http(chain(&e)))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(SourceError::Http(format!("HTTP {status} from {url}")));
    }
    let total = resp.content_length();
    let n = copy_with_progress(resp, &mut out, total, model, &what, reporter)
        .map_err(|e| SourceError::Http(format!("transfer from {url} broke off: {e}")))?;
    if let Some(t) = total {
        if n != t {
            return Err(SourceError::Http(format!(
                "transfer from {url} ended after {n} of {t} bytes"
            )));
        }
    }
    Ok(n)
}
