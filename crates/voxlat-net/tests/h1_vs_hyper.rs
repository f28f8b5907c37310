//! The direct transport's HTTP/1.1 reader (`h1`) against hyper's client on the same bytes.
//! `h1` exists for its stamps and its cost (ARCHITECTURE.md, "Decisions"), not to read HTTP
//! differently: whatever response a server sends, both must see the same status and body,
//! and refuse the same broken framing.

use bytes::BytesMut;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use proptest::prelude::*;
use voxlat_net::h1::{parse_head, Piece};

/// What a reader made of a response: its status and body, or that it refused it.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    Whole { status: u16, body: Vec<u8> },
    Refused,
}

/// `h1` on the whole response, then the end of the connection.
fn by_h1(wire: &[u8]) -> Read {
    let (head, used) = match parse_head(wire) {
        Ok(Some(h)) => h,
        _ => return Read::Refused,
    };
    let mut reader = head.body;
    let mut buf = BytesMut::from(&wire[used..]);
    let mut body = Vec::new();
    loop {
        match reader.next(&mut buf) {
            Ok(Some(Piece::Data(d))) => body.extend_from_slice(&d),
            Ok(Some(Piece::End)) => break,
            Ok(None) => match reader.at_eof() {
                Ok(()) => break,
                Err(_) => return Read::Refused,
            },
            Err(_) => return Read::Refused,
        }
    }
    Read::Whole {
        status: head.status,
        body,
    }
}

/// hyper's HTTP/1.1 client connection, sending a GET and reading the same bytes back.
async fn by_hyper(wire: Vec<u8>) -> Read {
    let (client, mut server) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // hyper refuses bytes that come before its request: read the request head first.
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") {
            match server.read(&mut byte).await {
                Ok(1) => request.push(byte[0]),
                _ => return,
            }
        }
        let _ = server.write_all(&wire).await;
        let _ = server.shutdown().await;
        let mut sink = Vec::new();
        let _ = server.read_to_end(&mut sink).await;
    });
    let Ok((mut send, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(client)).await
    else {
        return Read::Refused;
    };
    tokio::spawn(conn);
    let req = hyper::Request::get("/v1/chat/completions")
        .header("host", "test")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("a valid request");
    let Ok(resp) = send.send_request(req).await else {
        return Read::Refused;
    };
    let status = resp.status().as_u16();
    match resp.into_body().collect().await {
        Ok(b) => Read::Whole {
            status,
            body: b.to_bytes().to_vec(),
        },
        Err(_) => Read::Refused,
    }
}

fn both(wire: &[u8]) -> (Read, Read) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    (by_h1(wire), rt.block_on(by_hyper(wire.to_vec())))
}

/// How a generated response frames its body.
#[derive(Clone, Debug)]
enum Framing {
    Length,
    Chunked {
        sizes: Vec<usize>,
        ext: bool,
        trailers: bool,
    },
    /// No length, no chunks: the body runs to the end of the connection.
    UntilClose,
}

fn response(status: u16, interim: bool, body: &[u8], framing: &Framing) -> Vec<u8> {
    let mut w = Vec::new();
    if interim {
        w.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    w.extend_from_slice(format!("HTTP/1.1 {status} Whatever\r\n").as_bytes());
    w.extend_from_slice(b"Content-Type: text/event-stream\r\nX-Request-Id: r-1\r\n");
    match framing {
        Framing::Length => {
            w.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
            w.extend_from_slice(body);
        }
        Framing::UntilClose => {
            w.extend_from_slice(b"Connection: close\r\n\r\n");
            w.extend_from_slice(body);
        }
        Framing::Chunked {
            sizes,
            ext,
            trailers,
        } => {
            w.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            let mut rest = body;
            let mut sizes = sizes.iter().cycle();
            while !rest.is_empty() {
                let n = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
                w.extend_from_slice(format!("{n:x}").as_bytes());
                if *ext {
                    w.extend_from_slice(b";name=\"v\"");
                }
                w.extend_from_slice(b"\r\n");
                w.extend_from_slice(&rest[..n]);
                w.extend_from_slice(b"\r\n");
                rest = &rest[n..];
            }
            w.extend_from_slice(b"0\r\n");
            if *trailers {
                w.extend_from_slice(b"X-Checksum: 1\r\n");
            }
            w.extend_from_slice(b"\r\n");
        }
    }
    w
}

fn framing() -> impl Strategy<Value = Framing> {
    prop_oneof![
        Just(Framing::Length),
        Just(Framing::UntilClose),
        (
            prop::collection::vec(1usize..300, 1..5),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(sizes, ext, trailers)| Framing::Chunked {
                sizes,
                ext,
                trailers
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whole responses: the same status and the same body bytes.
    #[test]
    fn whole_responses_read_the_same(
        status in prop::sample::select(vec![200u16, 201, 400, 401, 404, 429, 500, 503]),
        interim: bool,
        body in prop::collection::vec(any::<u8>(), 0..700),
        framing in framing(),
    ) {
        let wire = response(status, interim, &body, &framing);
        let (h1, hyper) = both(&wire);
        prop_assert_eq!(&h1, &Read::Whole { status, body });
        prop_assert_eq!(h1, hyper);
    }

    /// A framed response cut anywhere inside its body: both refuse it (a body that runs to
    /// the close has no inside to be cut in).
    #[test]
    fn cut_responses_are_refused_by_both(
        body in prop::collection::vec(any::<u8>(), 1..400),
        framing in framing().prop_filter("framed", |f| !matches!(f, Framing::UntilClose)),
        cut in any::<prop::sample::Index>(),
    ) {
        let wire = response(200, false, &body, &framing);
        let head_len = parse_head(&wire).unwrap().unwrap().1;
        let at = head_len + cut.index(wire.len() - head_len);
        let (h1, hyper) = both(&wire[..at]);
        prop_assert_eq!(&h1, &Read::Refused);
        prop_assert_eq!(h1, hyper);
    }
}

/// Framing both refuse, written out: a server's mistakes, not generated noise.
#[test]
fn broken_framing_is_refused_by_both() {
    let cases: [&[u8]; 4] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\nhello",
    ];
    for wire in cases {
        let (h1, hyper) = both(wire);
        assert_eq!(h1, Read::Refused, "{}", String::from_utf8_lossy(wire));
        assert_eq!(hyper, Read::Refused, "{}", String::from_utf8_lossy(wire));
    }
}
