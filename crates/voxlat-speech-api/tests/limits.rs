//! Bounds on what one peer can make the speech side hold: a TTS server that never stops is
//! cut at the audio cap, and `serve-audio` refuses a full queue before reading the upload,
//! caps the speech body, and serves a bounded number of connections.

use axum::body::Body;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use voxlat_net::Endpoint;
use voxlat_speech_api::pcm::wav_bytes;
use voxlat_speech_api::server::{
    EngineError, Heard, ServerOptions, SpeechServer, SpeechToText, TextToSpeech,
};
use voxlat_speech_api::tts_client::{speech_cap_s, MAX_SPEECH_S};
use voxlat_speech_api::{AudioFormat, TtsClient, TtsClientOptions};

/// Serves `router` (or anything serve-able) from a thread of its own.
fn serve_router(router: Router) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(l, router).await.unwrap();
        });
    });
    addr
}

#[test]
fn a_tts_server_that_never_stops_is_cut_at_the_audio_cap() {
    // 8 kHz PCM in 0.5 s pieces, up to far past the cap; `sent` counts the seconds written.
    let sent = Arc::new(AtomicUsize::new(0));
    let limit_s = 4 * MAX_SPEECH_S as usize;
    let router = {
        let sent = sent.clone();
        Router::new().route(
            "/v1/audio/speech",
            post(move || {
                let sent = sent.clone();
                async move {
                    let piece = vec![0x10u8; 8_000];
                    let stream = futures_util::stream::unfold(0usize, move |half_s| {
                        let (piece, sent) = (piece.clone(), sent.clone());
                        async move {
                            (half_s < 2 * limit_s).then(|| {
                                sent.store(half_s / 2, Ordering::Relaxed);
                                (Ok::<_, std::io::Error>(piece), half_s + 1)
                            })
                        }
                    });
                    let mut r = Response::new(Body::from_stream(stream));
                    r.headers_mut()
                        .insert("x-sample-rate", "8000".parse().unwrap());
                    r
                }
            }),
        )
    };
    let addr = serve_router(router);
    let client = TtsClient::new(
        Endpoint::new(&format!("http://{addr}/v1"), None),
        TtsClientOptions {
            format: AudioFormat::Pcm,
            ..TtsClientOptions::default()
        },
    )
    .unwrap();
    assert_eq!(speech_cap_s("hello"), MAX_SPEECH_S);
    let e = client.speak("hello", "r-1").unwrap_err().to_string();
    assert!(
        e.contains("more than 120 s of audio") && e.contains("does not stop"),
        "{e}"
    );
    assert!(sent.load(Ordering::Relaxed) < limit_s, "the client hung up");
    // Long inputs get more room.
    assert_eq!(speech_cap_s(&"a".repeat(1000)), 500.0);
}

#[test]
fn an_asr_server_that_never_stops_is_cut_at_the_body_cap() {
    // JSON-looking bytes in 64 KB pieces, up to 64 MB; `sent` counts the pieces written.
    let sent = Arc::new(AtomicUsize::new(0));
    let router = {
        let sent = sent.clone();
        Router::new().route(
            "/v1/audio/transcriptions",
            post(move || {
                let sent = sent.clone();
                async move {
                    let piece = vec![b' '; 64 * 1024];
                    let stream = futures_util::stream::unfold(0usize, move |n| {
                        let (piece, sent) = (piece.clone(), sent.clone());
                        async move {
                            (n < 1024).then(|| {
                                sent.store(n, Ordering::Relaxed);
                                (Ok::<_, std::io::Error>(piece), n + 1)
                            })
                        }
                    });
                    Response::new(Body::from_stream(stream))
                }
            }),
        )
    };
    let addr = serve_router(router);
    let client = voxlat_speech_api::AsrClient::new(
        Endpoint::new(&format!("http://{addr}/v1"), None),
        voxlat_speech_api::AsrClientOptions::default(),
    )
    .unwrap();
    let e = client
        .transcribe(&[0.1; 1600], "r-1")
        .unwrap_err()
        .to_string();
    let cap = voxlat_speech_api::asr_client::MAX_TRANSCRIPTION_BYTES;
    assert!(
        e.contains(&format!("more than {cap} bytes")) && e.contains("--asr-url"),
        "{e}"
    );
    assert!(
        sent.load(Ordering::Relaxed) < 1023,
        "the client hung up at the cap"
    );
}

/// Tells the test it has started, then waits to be released.
struct GatedStt {
    started: mpsc::Sender<()>,
    release: Arc<Mutex<mpsc::Receiver<()>>>,
}

impl SpeechToText for GatedStt {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Heard, EngineError> {
        let _ = self.started.send(());
        let _ = self.release.lock().unwrap().recv();
        Ok(format!("heard {} samples", audio.len()).into())
    }
}

struct SilentTts;

impl TextToSpeech for SilentTts {
    fn sample_rate(&self) -> u32 {
        16_000
    }
    fn speak(&mut self, text: &str) -> Result<Vec<f32>, EngineError> {
        Ok(vec![0.0; text.len()])
    }
}

/// The server over a gated STT; returns its address, the "started" receiver and the release.
fn start(opts: ServerOptions) -> (std::net::SocketAddr, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let stt = GatedStt {
        started: started_tx,
        release: Arc::new(Mutex::new(release_rx)),
    };
    let server = SpeechServer::start(
        opts,
        move || Ok::<_, String>(Box::new(stt) as Box<dyn SpeechToText>),
        || Ok::<_, String>(Box::new(SilentTts) as Box<dyn TextToSpeech>),
    )
    .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            server.serve(l, std::future::pending()).await.unwrap();
        });
    });
    (addr, started_rx, release_tx)
}

/// A whole multipart upload of a short WAV, as raw HTTP/1.1.
fn upload_request(wav: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(b"--XB\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\ncontent-type: audio/wav\r\n\r\n");
    body.extend_from_slice(wav);
    body.extend_from_slice(b"\r\n--XB--\r\n");
    let mut req = format!(
        "POST /v1/audio/transcriptions HTTP/1.1\r\nhost: x\r\ncontent-type: multipart/form-data; boundary=XB\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    req
}

/// Reads until the status line and headers are in; the status code.
fn read_status(s: &mut TcpStream) -> Option<u16> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got)
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    // A hang guard only: every read below expects an answer (or none) long before it.
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

#[test]
fn a_full_queue_is_refused_before_the_upload_is_read() {
    let (addr, started, release) = start(ServerOptions {
        queue_depth: 1,
        ..ServerOptions::default()
    });
    let wav = wav_bytes(&[0.1; 160], 16_000);
    // One running (held by the gate), one waiting: the queue is full.
    let mut running = connect(addr);
    running.write_all(&upload_request(&wav)).unwrap();
    started.recv_timeout(Duration::from_secs(20)).unwrap();
    let mut waiting = connect(addr);
    waiting.write_all(&upload_request(&wav)).unwrap();
    // The waiting request holds its slot once the server has read it; until then a probe
    // may take the slot itself, so probe until one is refused.
    let mut refused = false;
    for _ in 0..50 {
        // Headers announcing a 20 MB upload, and not one byte of it: the old server waited
        // for the body before it looked at the queue.
        let mut s = connect(addr);
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        s.write_all(b"POST /v1/audio/transcriptions HTTP/1.1\r\nhost: x\r\ncontent-type: multipart/form-data; boundary=XB\r\ncontent-length: 20000000\r\n\r\n")
            .unwrap();
        if read_status(&mut s) == Some(503) {
            refused = true;
            break;
        }
    }
    assert!(refused, "a full queue must answer 503 without the body");
    for _ in 0..10 {
        let _ = release.send(());
    }
    assert_eq!(read_status(&mut running), Some(200));
    assert_eq!(read_status(&mut waiting), Some(200));
}

#[test]
fn a_speech_body_over_the_limit_is_a_413() {
    let (addr, _started, _release) = start(ServerOptions {
        max_input_chars: 100,
        ..ServerOptions::default()
    });
    let limit = voxlat_speech_api::server::speech_body_limit(&ServerOptions {
        max_input_chars: 100,
        ..ServerOptions::default()
    });
    let big = format!("{{\"input\": \"{}\"}}", "a".repeat(limit + 1));
    let r = reqwest::blocking::Client::new()
        .post(format!("http://{addr}/v1/audio/speech"))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    assert!(r.text().unwrap().contains("limit"));
}

#[test]
fn connections_past_the_limit_wait_until_one_closes() {
    let (addr, _started, _release) = start(ServerOptions {
        max_connections: 2,
        ..ServerOptions::default()
    });
    let health = b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n";
    // Two connections, answered once, then held open (keep-alive).
    let mut held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = connect(addr);
            s.write_all(health).unwrap();
            assert_eq!(read_status(&mut s), Some(200));
            s
        })
        .collect();
    let mut third = connect(addr);
    third
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    third.write_all(health).unwrap();
    assert_eq!(read_status(&mut third), None, "served past the limit");
    held.pop();
    third
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(read_status(&mut third), Some(200));
    drop(held);
}

/// Connections that send nothing, one that sends its head a byte at a time and one whose
/// upload stops half way: none of them keeps a real request from its answer. The idle and
/// slow ones are closed, or refused with a 408, once their deadlines pass.
#[test]
fn idle_and_slow_clients_do_not_keep_a_real_request_waiting() {
    let opts = ServerOptions {
        header_timeout: Duration::from_millis(800),
        upload_timeout: Duration::from_millis(800),
        ..ServerOptions::default()
    };
    let (addr, _started, release) = start(opts);
    for _ in 0..4 {
        let _ = release.send(());
    }
    let idle: Vec<TcpStream> = (0..64).map(|_| connect(addr)).collect();
    let head = b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n";
    let slowloris = std::thread::spawn(move || {
        let mut s = connect(addr);
        for b in head {
            if s.write_all(&[*b]).is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        read_status(&mut s).is_none()
    });
    let wav = wav_bytes(&[0.1; 160], 16_000);
    let whole = upload_request(&wav);
    let mut stalled = connect(addr);
    stalled.write_all(&whole[..whole.len() / 2]).unwrap();
    // A real request, answered within 2 s while all of that is going on.
    let mut real = connect(addr);
    real.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    real.write_all(&whole).unwrap();
    assert_eq!(read_status(&mut real), Some(200), "the real request waited");
    // The stalled upload is refused at its deadline, the idle connections are closed at
    // theirs, and the slowloris never gets its head read.
    assert_eq!(read_status(&mut stalled), Some(408));
    for mut s in idle {
        let mut buf = [0u8; 16];
        assert!(
            matches!(s.read(&mut buf), Ok(0) | Err(_)),
            "an idle connection was kept open"
        );
    }
    assert!(slowloris.join().unwrap(), "the slowloris was answered");
}
