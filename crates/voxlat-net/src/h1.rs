//! HTTP/1.1 responses as the direct transport reads them, without I/O: the head (parsed by
//! `httparse`, the parser hyper itself uses) and the body's framing (RFC 9112 §6-7).
//!
//! Why not hyper's client here: hyper runs a connection dispatcher and hands each body piece
//! to the response through a channel. Per token of every stream that machinery was a quarter
//! of the measuring client's user-space instructions at 256 streams (`ttft_accuracy -- cpu`),
//! where reading a chunk's framing takes a few dozen. What hyper did that this does too: 1xx
//! heads skipped, `Transfer-Encoding` over `Content-Length`, conflicting lengths refused,
//! chunk extensions and trailers stepped over, keep-alive by version and `Connection`.

use bytes::{Buf, Bytes, BytesMut};

/// Headers a response head may have; more is refused.
const MAX_HEADERS: usize = 96;

/// Why a response could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum H1Error {
    #[error("malformed response head: {0}")]
    Head(String),
    #[error("the response head holds more than {MAX_HEADERS} headers")]
    TooManyHeaders,
    #[error("the response switches protocols (101), which a chat request never asks for")]
    SwitchingProtocols,
    #[error("conflicting Content-Length values")]
    ConflictingLength,
    #[error("malformed chunked body: {0}")]
    Chunked(&'static str),
    #[error("the connection closed in the middle of the response body")]
    Truncated,
}

/// A response head, as far as the client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// HTTP/1.0 (else 1.1).
    pub http10: bool,
    pub request_id: Option<String>,
    pub content_type: Option<String>,
    pub retry_after: Option<String>,
    pub body: BodyReader,
    /// The connection may carry another request once this body is read to its end.
    pub keep_alive: bool,
}

/// A head read from the front of `buf` (1xx interim heads before it skipped): the head, and
/// the bytes it took. `None`: the head is not complete yet.
pub fn parse_head(buf: &[u8]) -> Result<Option<(ResponseHead, usize)>, H1Error> {
    let mut at = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let len = match resp.parse(&buf[at..]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(H1Error::TooManyHeaders),
            Err(e) => return Err(H1Error::Head(e.to_string())),
        };
        let status = resp.code.unwrap_or(0);
        if status == 101 {
            return Err(H1Error::SwitchingProtocols);
        }
        if (100..200).contains(&status) {
            at += len;
            continue;
        }
        let head = head_from(status, resp.version == Some(0), resp.headers)?;
        return Ok(Some((head, at + len)));
    }
}

fn head_from(
    status: u16,
    http10: bool,
    headers: &[httparse::Header<'_>],
) -> Result<ResponseHead, H1Error> {
    let text = |h: &httparse::Header<'_>| String::from_utf8_lossy(h.value).trim().to_string();
    let tokens = |h: &httparse::Header<'_>| {
        String::from_utf8_lossy(h.value)
            .split(',')
            .map(|t| t.trim().to_ascii_lowercase())
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
    };
    let (mut request_id, mut content_type, mut retry_after) = (None, None, None);
    let (mut length, mut last_coding, mut close, mut keep) = (None, None, false, false);
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            for v in String::from_utf8_lossy(h.value).split(',') {
                let v: u64 = v
                    .trim()
                    .parse()
                    .map_err(|_| H1Error::Head(format!("Content-Length {v:?}")))?;
                if length.is_some_and(|l| l != v) {
                    return Err(H1Error::ConflictingLength);
                }
                length = Some(v);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if let Some(t) = tokens(h).pop() {
                last_coding = Some(t);
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for t in tokens(h) {
                close |= t == "close";
                keep |= t == "keep-alive";
            }
        } else if name.eq_ignore_ascii_case("x-request-id") {
            request_id = Some(text(h));
        } else if name.eq_ignore_ascii_case("content-type") {
            content_type = Some(text(h));
        } else if name.eq_ignore_ascii_case("retry-after") {
            retry_after = Some(text(h));
        }
    }
    let body = if status == 204 || status == 304 {
        BodyReader::Done
    } else if let Some(coding) = &last_coding {
        if coding == "chunked" {
            BodyReader::Chunked(Chunk::Size { n: 0, digits: 0 })
        } else {
            BodyReader::Close
        }
    } else if let Some(n) = length {
        BodyReader::Length(n)
    } else {
        BodyReader::Close
    };
    // A body framed by both headers, or by neither, leaves the connection unusable after it.
    let ambiguous =
        matches!(body, BodyReader::Close) || (last_coding.is_some() && length.is_some());
    let keep_alive = !ambiguous && !close && (!http10 || keep);
    Ok(ResponseHead {
        status,
        http10,
        request_id,
        content_type,
        retry_after,
        body,
        keep_alive,
    })
}

/// Where a body's framing stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyReader {
    Chunked(Chunk),
    /// Bytes of a `Content-Length` body still to come.
    Length(u64),
    /// The body runs until the server closes the connection.
    Close,
    Done,
}

/// The chunked decoder's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Reading the hex size.
    Size { n: u64, digits: u8 },
    /// After the size: extensions, to the line's end.
    SizeLine { n: u64, cr: bool },
    /// Data bytes still to come in this chunk.
    Data(u64),
    /// The line end after a chunk's data.
    DataEnd { cr: bool },
    /// Trailer lines after the last chunk; `line_start` before any byte of the line.
    Trailers { line_start: bool, cr: bool },
}

impl Chunk {
    /// After a size line: the data of `n` bytes, or the trailers after the last chunk.
    fn after_size(n: u64) -> Chunk {
        match n {
            0 => Chunk::Trailers {
                line_start: true,
                cr: false,
            },
            n => Chunk::Data(n),
        }
    }
}

/// What the front of the buffer gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    Data(Bytes),
    End,
}

impl BodyReader {
    /// The next piece of the body out of `buf`, with the framing bytes before it consumed;
    /// `Ok(None)` when `buf` holds no more of it yet. Bytes after the body's end stay in `buf`.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<Piece>, H1Error> {
        loop {
            match self {
                BodyReader::Done => return Ok(Some(Piece::End)),
                BodyReader::Close => {
                    return Ok((!buf.is_empty()).then(|| Piece::Data(buf.split().freeze())))
                }
                BodyReader::Length(0) => *self = BodyReader::Done,
                BodyReader::Length(left) => {
                    let Some(data) = take(buf, left) else {
                        return Ok(None);
                    };
                    return Ok(Some(Piece::Data(data)));
                }
                BodyReader::Chunked(Chunk::Data(left)) => {
                    let Some(data) = take(buf, left) else {
                        return Ok(None);
                    };
                    if *left == 0 {
                        *self = BodyReader::Chunked(Chunk::DataEnd { cr: false });
                    }
                    return Ok(Some(Piece::Data(data)));
                }
                BodyReader::Chunked(state) => {
                    // The usual framing, whole in the buffer, in one step: `\r\n` after the
                    // data, then a bare size line. Anything else goes byte by byte.
                    if let Some(next) = whole_framing(*state, buf) {
                        *state = next;
                        continue;
                    }
                    let Some(&c) = buf.first() else {
                        return Ok(None);
                    };
                    buf.advance(1);
                    match framing_byte(*state, c)? {
                        Some(next) => *state = next,
                        None => *self = BodyReader::Done,
                    }
                }
            }
        }
    }

    /// The connection reached its end: fine for a body that runs until then, else the body
    /// was cut off.
    pub fn at_eof(&mut self) -> Result<(), H1Error> {
        match self {
            BodyReader::Close | BodyReader::Done => {
                *self = BodyReader::Done;
                Ok(())
            }
            _ => Err(H1Error::Truncated),
        }
    }
}

/// Up to `left` bytes off the front of `buf`, counted off `left`; `None` when `buf` is empty.
fn take(buf: &mut BytesMut, left: &mut u64) -> Option<Bytes> {
    if buf.is_empty() {
        return None;
    }
    let n = usize::try_from(*left).map_or(buf.len(), |l| l.min(buf.len()));
    *left -= n as u64;
    Some(buf.split_to(n).freeze())
}

/// The state after the framing at the front of `buf` when it is the common case, whole: the
/// line end after a chunk's data, or a size line of hex digits alone. Consumes it. `None`:
/// not that case, or not all there yet (the byte-wise path then decides, the same way).
fn whole_framing(state: Chunk, buf: &mut BytesMut) -> Option<Chunk> {
    match state {
        Chunk::DataEnd { cr: false } if buf.starts_with(b"\r\n") => {
            buf.advance(2);
            Some(Chunk::Size { n: 0, digits: 0 })
        }
        Chunk::Size { n: 0, digits: 0 } => {
            let digits = buf
                .iter()
                .take(17)
                .take_while(|c| c.is_ascii_hexdigit())
                .count();
            if digits == 0 || digits > 16 || !buf[digits..].starts_with(b"\r\n") {
                return None;
            }
            let n = buf[..digits].iter().fold(0u64, |n, &c| {
                n << 4 | u64::from((c as char).to_digit(16).unwrap_or(0))
            });
            buf.advance(digits + 2);
            Some(Chunk::after_size(n))
        }
        _ => None,
    }
}

/// One framing byte of a chunked body: the next state, or `None` when the body ended.
fn framing_byte(state: Chunk, c: u8) -> Result<Option<Chunk>, H1Error> {
    Ok(Some(match state {
        Chunk::Size { n, digits } => match (c as char).to_digit(16) {
            Some(d) if digits < 16 => Chunk::Size {
                n: n << 4 | u64::from(d),
                digits: digits + 1,
            },
            Some(_) => return Err(H1Error::Chunked("chunk size too large")),
            None if digits == 0 => return Err(H1Error::Chunked("chunk size is not hex")),
            None => match c {
                b'\n' => Chunk::after_size(n),
                b'\r' => Chunk::SizeLine { n, cr: true },
                b';' | b' ' | b'\t' => Chunk::SizeLine { n, cr: false },
                _ => return Err(H1Error::Chunked("chunk size is not hex")),
            },
        },
        Chunk::SizeLine { n, cr } => match c {
            b'\n' => Chunk::after_size(n),
            _ if cr => return Err(H1Error::Chunked("CR without LF after the chunk size")),
            b'\r' => Chunk::SizeLine { n, cr: true },
            // Extension bytes: nothing here reads them.
            _ => Chunk::SizeLine { n, cr: false },
        },
        Chunk::DataEnd { cr } => match c {
            b'\n' => Chunk::Size { n: 0, digits: 0 },
            b'\r' if !cr => Chunk::DataEnd { cr: true },
            _ => return Err(H1Error::Chunked("no line end after chunk data")),
        },
        Chunk::Trailers { line_start, cr } => match c {
            b'\n' if line_start => return Ok(None),
            b'\n' => Chunk::Trailers {
                line_start: true,
                cr: false,
            },
            _ if cr => return Err(H1Error::Chunked("CR without LF in the trailers")),
            b'\r' => Chunk::Trailers {
                line_start,
                cr: true,
            },
            _ => Chunk::Trailers {
                line_start: false,
                cr: false,
            },
        },
        Chunk::Data(_) => unreachable!("data is taken whole, not byte by byte"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn head(s: &str) -> ResponseHead {
        let (h, n) = parse_head(s.as_bytes()).unwrap().expect("a complete head");
        assert_eq!(n, s.find("\r\n\r\n").map(|i| i + 4).unwrap_or(s.len()));
        h
    }

    #[test]
    fn framing_and_keep_alive_follow_the_headers() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nX-Request-Id: r1\r\n\r\n");
        assert_eq!(h.body, BodyReader::Chunked(Chunk::Size { n: 0, digits: 0 }));
        assert!(h.keep_alive);
        assert_eq!(h.request_id.as_deref(), Some("r1"));
        assert_eq!(h.content_type.as_deref(), Some("text/event-stream"));

        let h = head("HTTP/1.1 429 Too Many\r\nContent-Length: 12\r\nRetry-After: 3\r\nConnection: close\r\n\r\n");
        assert_eq!((h.status, h.body.clone()), (429, BodyReader::Length(12)));
        assert_eq!(h.retry_after.as_deref(), Some("3"));
        assert!(!h.keep_alive, "Connection: close");

        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(h.body, BodyReader::Close);
        assert!(!h.keep_alive, "a body that runs to the close");

        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n");
        assert!(h.http10 && !h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(h.keep_alive);

        let h = head(
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        );
        assert!(matches!(h.body, BodyReader::Chunked(_)));
        assert!(!h.keep_alive, "both framings: not reused");

        let h = head("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n");
        assert_eq!(h.body, BodyReader::Done);
        assert_eq!(
            head("HTTP/1.1 200 OK\r\nContent-Length: 4, 4\r\n\r\n").body,
            BodyReader::Length(4)
        );
    }

    #[test]
    fn interim_heads_are_skipped_and_bad_heads_refused() {
        let s = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nrest";
        let (h, n) = parse_head(s.as_bytes()).unwrap().unwrap();
        assert_eq!((h.status, &s[n..]), (200, "rest"));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap(), None);
        assert_eq!(
            parse_head(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2").unwrap(),
            None
        );
        assert!(matches!(
            parse_head(b"SSH-2.0-OpenSSH\r\n\r\n"),
            Err(H1Error::Head(_))
        ));
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n"),
            Err(H1Error::ConflictingLength)
        );
        assert!(matches!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
            Err(H1Error::Head(_))
        ));
        assert_eq!(
            parse_head(b"HTTP/1.1 101 Switching Protocols\r\n\r\n"),
            Err(H1Error::SwitchingProtocols)
        );
        let many = format!(
            "HTTP/1.1 200 OK\r\n{}\r\n",
            "A: b\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(parse_head(many.as_bytes()), Err(H1Error::TooManyHeaders));
    }

    /// Feeds `wire` to a reader in pieces cut at `cuts`, then the end of the connection;
    /// returns the body, what stayed in the buffer, and the error if any.
    fn decode(
        mut body: BodyReader,
        wire: &[u8],
        cuts: &[usize],
    ) -> (Vec<u8>, Vec<u8>, Option<H1Error>) {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut points: Vec<usize> = cuts.iter().map(|&c| c.min(wire.len())).collect();
        points.push(wire.len());
        points.sort_unstable();
        let mut fed = 0;
        for p in points {
            buf.extend_from_slice(&wire[fed..p]);
            fed = p;
            loop {
                match body.next(&mut buf) {
                    Ok(Some(Piece::Data(d))) => out.extend_from_slice(&d),
                    Ok(Some(Piece::End)) => {
                        buf.extend_from_slice(&wire[fed..]);
                        return (out, buf.to_vec(), None);
                    }
                    Ok(None) => break,
                    Err(e) => return (out, buf.to_vec(), Some(e)),
                }
            }
        }
        let err = body.at_eof().err();
        (out, buf.to_vec(), err)
    }

    fn chunked() -> BodyReader {
        BodyReader::Chunked(Chunk::Size { n: 0, digits: 0 })
    }

    /// Encodes `body` in chunks of the given sizes, each size line with an optional
    /// extension, then trailers, as a server may.
    fn encode(body: &[u8], sizes: &[usize], ext: bool, trailers: bool, bare_lf: bool) -> Vec<u8> {
        let nl: &[u8] = if bare_lf { b"\n" } else { b"\r\n" };
        let mut w = Vec::new();
        let mut rest = body;
        let mut sizes = sizes.iter().cycle();
        while !rest.is_empty() {
            let n = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
            w.extend_from_slice(format!("{n:X}").as_bytes());
            if ext {
                w.extend_from_slice(b";name=\"v\"");
            }
            w.extend_from_slice(nl);
            w.extend_from_slice(&rest[..n]);
            w.extend_from_slice(nl);
            rest = &rest[n..];
        }
        w.extend_from_slice(b"0");
        w.extend_from_slice(nl);
        if trailers {
            w.extend_from_slice(b"X-Checksum: 1");
            w.extend_from_slice(nl);
        }
        w.extend_from_slice(nl);
        w
    }

    proptest! {
        /// Whatever the chunk sizes, extensions, trailers and read boundaries, the decoded
        /// body is the body that was encoded, and bytes after the message stay unread.
        #[test]
        fn chunked_bodies_come_back_whole(
            body in prop::collection::vec(any::<u8>(), 0..600),
            sizes in prop::collection::vec(1usize..300, 1..6),
            ext: bool, trailers: bool, bare_lf: bool,
            cuts in prop::collection::vec(0usize..1200, 0..8),
        ) {
            let mut wire = encode(&body, &sizes, ext, trailers, bare_lf);
            wire.extend_from_slice(b"NEXT");
            let (out, rest, err) = decode(chunked(), &wire, &cuts);
            prop_assert_eq!(err, None);
            prop_assert_eq!(out, body);
            prop_assert_eq!(rest, b"NEXT".to_vec());
        }

        /// A body cut off anywhere before its end is reported as cut off, never as whole.
        #[test]
        fn a_cut_chunked_body_is_truncated(
            body in prop::collection::vec(any::<u8>(), 1..300),
            sizes in prop::collection::vec(1usize..100, 1..4),
            at in any::<prop::sample::Index>(),
        ) {
            let wire = encode(&body, &sizes, false, false, false);
            let cut = at.index(wire.len());
            let (_, _, err) = decode(chunked(), &wire[..cut], &[]);
            prop_assert_eq!(err, Some(H1Error::Truncated));
        }

        #[test]
        fn length_bodies_stop_at_their_length(
            body in prop::collection::vec(any::<u8>(), 0..300),
            cuts in prop::collection::vec(0usize..400, 0..5),
        ) {
            let mut wire = body.clone();
            wire.extend_from_slice(b"NEXT");
            let (out, rest, err) = decode(BodyReader::Length(body.len() as u64), &wire, &cuts);
            prop_assert_eq!((out, rest, err), (body, b"NEXT".to_vec(), None));
        }
    }

    #[test]
    fn bad_chunk_framing_is_refused() {
        for (wire, why) in [
            (&b"zz\r\nab\r\n0\r\n\r\n"[..], "chunk size is not hex"),
            (b"\r\n", "chunk size is not hex"),
            (b"2\r\nabX0\r\n\r\n", "no line end after chunk data"),
            (b"2\rx", "CR without LF after the chunk size"),
            (b"11111111111111111\r\n", "chunk size too large"),
        ] {
            let (_, _, err) = decode(chunked(), wire, &[]);
            assert_eq!(
                err,
                Some(H1Error::Chunked(why)),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
        let (out, _, err) = decode(BodyReader::Length(10), b"short", &[]);
        assert_eq!(
            (out.as_slice(), err),
            (&b"short"[..], Some(H1Error::Truncated))
        );
        let (out, _, err) = decode(BodyReader::Close, b"until the end", &[3]);
        assert_eq!((out.as_slice(), err), (&b"until the end"[..], None));
    }
}
