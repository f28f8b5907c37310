//! The audio clients against scripted servers: what goes on the wire (read back by axum's
//! multipart parser and hound, not by the code that wrote it), streamed audio and its stamps,
//! and every way a server can fail.

use axum::body::Body;
use axum::extract::Multipart;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use voxlat_net::{Endpoint, ErrorClass, NetError};
use voxlat_speech_api::pcm::{pcm16_le, wav_bytes};
use voxlat_speech_api::{AsrClient, AsrClientOptions, AudioFormat, TtsClient, TtsClientOptions};

/// Serves `router` on a loopback port from a thread of its own; returns the base URL.
fn serve(router: Router) -> String {
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
    format!("http://{addr}/v1")
}

fn asr(base: &str) -> AsrClient {
    let opts = AsrClientOptions {
        language: Some("en".into()),
        ..AsrClientOptions::default()
    };
    AsrClient::new(Endpoint::new(base, Some("k-123")), opts).unwrap()
}

fn tts(base: &str, format: AudioFormat) -> TtsClient {
    let opts = TtsClientOptions {
        format,
        ..TtsClientOptions::default()
    };
    TtsClient::new(Endpoint::new(base, None), opts).unwrap()
}

fn tone(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.031).sin() * 0.6).collect()
}

#[derive(Default, Debug)]
struct Seen {
    fields: Vec<(String, Vec<u8>)>,
    headers: Vec<(String, String)>,
}

#[test]
fn the_upload_is_a_multipart_wav_the_server_can_read() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s2 = seen.clone();
    let router = Router::new().route(
        "/v1/audio/transcriptions",
        post(move |headers: HeaderMap, mut m: Multipart| {
            let seen = s2.clone();
            async move {
                let mut got = Seen::default();
                for (k, v) in &headers {
                    got.headers
                        .push((k.to_string(), v.to_str().unwrap_or("").to_string()));
                }
                while let Some(f) = m.next_field().await.unwrap() {
                    let name = f.name().unwrap().to_string();
                    got.fields.push((name, f.bytes().await.unwrap().to_vec()));
                }
                *seen.lock().unwrap() = got;
                let id = headers["x-request-id"].to_str().unwrap().to_string();
                (
                    [
                        ("server-timing", "queue;dur=2, asr;dur=40".to_string()),
                        ("x-request-id", id),
                    ],
                    axum::Json(serde_json::json!({"text": "  Hello there. ", "language": "en"})),
                )
            }
        }),
    );
    let base = serve(router);
    let audio = tone(16_000);
    let got = asr(&base).transcribe(&audio, "req-7").unwrap();
    assert_eq!(got.text, "Hello there.");
    assert_eq!(got.call.server_queue_ms, Some(2.0));
    assert_eq!(got.call.server_compute_ms, Some(40.0));
    assert_eq!(got.call.request_id, "req-7");
    assert_eq!(got.call.server_request_id.as_deref(), Some("req-7"));
    assert_eq!(got.call.status, Some(200));
    let h = got.call.headers.unwrap();
    assert!(got.call.sent < h && h <= got.call.done);

    let seen = seen.lock().unwrap();
    let field = |n: &str| {
        seen.fields
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no field {n}: {seen:?}"))
    };
    assert_eq!(field("model"), b"whisper-1");
    // For Whisper's scores; this server answers `json`'s fields, and there are none.
    assert_eq!(field("response_format"), b"verbose_json");
    assert_eq!(got.scores, None);
    assert_eq!(field("language"), b"en");
    let header = |n: &str| seen.headers.iter().find(|(k, _)| k == n).unwrap().1.clone();
    assert_eq!(header("authorization"), "Bearer k-123");
    assert!(header("content-type").starts_with("multipart/form-data; boundary="));
    let wav = field("file");
    assert_eq!(got.call.upload_bytes, wav.len() as u64);
    let mut r = hound::WavReader::new(std::io::Cursor::new(wav)).unwrap();
    let spec = r.spec();
    assert_eq!(
        (spec.sample_rate, spec.channels, spec.bits_per_sample),
        (16_000, 1, 16)
    );
    let back: Vec<f32> = r
        .samples::<i16>()
        .map(|s| f32::from(s.unwrap()) / 32767.0)
        .collect();
    assert_eq!(back.len(), audio.len());
    let worst = back
        .iter()
        .zip(&audio)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst <= 1.0 / 32767.0, "worst sample error {worst}");
}

fn status_router(
    path: &'static str,
    status: StatusCode,
    headers: Vec<(&'static str, &'static str)>,
    body: &'static str,
) -> Router {
    Router::new().route(
        path,
        post(move || {
            let headers = headers.clone();
            async move {
                let mut r = (status, body).into_response();
                for (k, v) in headers {
                    r.headers_mut().insert(k, v.parse().unwrap());
                }
                r
            }
        }),
    )
}

/// A transcription server that answers each upload by its `response_format` with `answer`,
/// and records the formats it was asked for.
fn format_router(
    answer: fn(&str) -> (StatusCode, serde_json::Value),
) -> (String, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let a2 = asked.clone();
    let router = Router::new().route(
        "/v1/audio/transcriptions",
        post(move |mut m: Multipart| {
            let asked = a2.clone();
            async move {
                let mut format = String::new();
                while let Some(f) = m.next_field().await.unwrap() {
                    let name = f.name().unwrap().to_string();
                    let bytes = f.bytes().await.unwrap();
                    if name == "response_format" {
                        format = String::from_utf8(bytes.to_vec()).unwrap();
                    }
                }
                asked.lock().unwrap().push(format.clone());
                let (status, body) = answer(&format);
                (status, axum::Json(body))
            }
        }),
    );
    (serve(router), asked)
}

#[test]
fn verbose_json_segments_give_whispers_scores() {
    let (base, _) = format_router(|_| {
        (
            StatusCode::OK,
            serde_json::json!({
                "task": "transcribe",
                "text": " Word.",
                "segments": [{"id": 0, "text": " Word.", "tokens": [9, 8],
                              "avg_logprob": -0.43, "no_speech_prob": 0.31}],
            }),
        )
    });
    let got = asr(&base).transcribe(&tone(8_000), "r").unwrap();
    assert_eq!(got.text, "Word.");
    let s = got.scores.expect("scores from the segments");
    assert_eq!((s.no_speech_prob, s.avg_logprob), (0.31, -0.43));
}

/// OpenAI's gpt-4o transcription models, as they answer `verbose_json`.
fn gpt_4o(format: &str) -> (StatusCode, serde_json::Value) {
    if format == "verbose_json" {
        return (
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {
                "message": "response_format 'verbose_json' is not compatible with model 'gpt-4o-transcribe'. Use 'json' or 'text' instead.",
                "type": "invalid_request_error",
                "param": "response_format",
                "code": "unsupported_value",
            }}),
        );
    }
    (StatusCode::OK, serde_json::json!({"text": "Hello there."}))
}

#[test]
fn a_server_that_refuses_verbose_json_is_asked_for_json_from_then_on() {
    let (base, asked) = format_router(gpt_4o);
    let client = asr(&base);
    for _ in 0..2 {
        let got = client.transcribe(&tone(8_000), "r").unwrap();
        assert_eq!((got.text.as_str(), got.scores), ("Hello there.", None));
        assert_eq!(got.call.status, Some(200));
    }
    assert_eq!(*asked.lock().unwrap(), ["verbose_json", "json", "json"]);
}

#[test]
fn a_server_that_fails_on_verbose_json_alone_is_asked_for_json_from_then_on() {
    let (base, asked) = format_router(|format| match format {
        "verbose_json" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": {"message": "unknown response format"}}),
        ),
        _ => (StatusCode::OK, serde_json::json!({"text": "Hello there."})),
    });
    let client = asr(&base);
    for _ in 0..3 {
        let got = client.transcribe(&tone(8_000), "r").unwrap();
        assert_eq!((got.text.as_str(), got.scores), ("Hello there.", None));
    }
    // Once could be the server's bad moment; twice in a row is the format.
    assert_eq!(
        *asked.lock().unwrap(),
        ["verbose_json", "json", "verbose_json", "json", "json"]
    );
}

#[test]
fn a_server_that_does_not_implement_verbose_json_is_asked_for_json_at_its_first_501() {
    let (base, asked) = format_router(|format| match format {
        "verbose_json" => (StatusCode::NOT_IMPLEMENTED, serde_json::json!({})),
        _ => (StatusCode::OK, serde_json::json!({"text": "Hello there."})),
    });
    let client = asr(&base);
    for _ in 0..2 {
        client.transcribe(&tone(8_000), "r").unwrap();
    }
    assert_eq!(*asked.lock().unwrap(), ["verbose_json", "json", "json"]);
}

/// A server that failed `verbose_json` once, by chance, and then answered it.
fn verbose_json_fails_once(format: &str) -> (StatusCode, serde_json::Value) {
    static VERBOSE_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let first = format == "verbose_json"
        && VERBOSE_CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
    if first {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": {"message": "CUDA out of memory"}}),
        );
    }
    if format == "json" {
        return (StatusCode::OK, serde_json::json!({"text": " Word."}));
    }
    let segments =
        serde_json::json!([{"text": " Word.", "avg_logprob": -0.4, "no_speech_prob": 0.2}]);
    (
        StatusCode::OK,
        serde_json::json!({"text": " Word.", "segments": segments}),
    )
}

#[test]
fn one_failed_verbose_json_call_does_not_cost_the_scores_for_the_rest_of_the_run() {
    let (base, asked) = format_router(verbose_json_fails_once);
    let client = asr(&base);
    let got: Vec<_> = (0..3)
        .map(|_| client.transcribe(&tone(8_000), "r").unwrap().scores)
        .collect();
    assert_eq!(got[0], None, "the first answer was json's");
    assert!(got[1..].iter().all(Option::is_some), "{got:?}");
    assert_eq!(
        *asked.lock().unwrap(),
        ["verbose_json", "json", "verbose_json", "verbose_json"]
    );
}

#[test]
fn a_server_that_fails_on_every_format_keeps_being_asked_for_verbose_json() {
    let (base, asked) = format_router(|_| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            serde_json::json!({"error": {"message": "the model is not loaded"}}),
        )
    });
    let client = asr(&base);
    for _ in 0..2 {
        let e = client.transcribe(&tone(8_000), "r").unwrap_err();
        assert!(e.to_string().contains("not loaded"), "{e}");
    }
    assert_eq!(
        *asked.lock().unwrap(),
        ["verbose_json", "json", "verbose_json", "json"]
    );
}

#[test]
fn a_gpt_transcription_model_is_asked_for_json_at_once() {
    let (base, asked) = format_router(gpt_4o);
    let opts = AsrClientOptions {
        model: "gpt-4o-mini-transcribe".into(),
        ..AsrClientOptions::default()
    };
    let client = AsrClient::new(Endpoint::new(&base, None), opts).unwrap();
    assert_eq!(
        client.transcribe(&tone(8_000), "r").unwrap().text,
        "Hello there."
    );
    assert_eq!(*asked.lock().unwrap(), ["json"]);
}

#[test]
fn a_400_for_anything_else_is_not_sent_again() {
    let (base, asked) = format_router(|_| {
        (
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {"message": "Audio file is too short."}}),
        )
    });
    let e = asr(&base).transcribe(&tone(100), "r").unwrap_err();
    assert!(e.to_string().contains("too short"), "{e}");
    assert_eq!(*asked.lock().unwrap(), ["verbose_json"]);
}

#[test]
fn error_bodies_name_the_status_and_what_the_server_said() {
    let base = serve(status_router(
        "/v1/audio/transcriptions",
        StatusCode::BAD_REQUEST,
        vec![("content-type", "application/json")],
        r#"{"error":{"message":"the uploaded file is not a WAV file"}}"#,
    ));
    let e = asr(&base).transcribe(&tone(100), "r").unwrap_err();
    assert_eq!(e.class(), ErrorClass::HttpStatus);
    let m = e.to_string();
    assert!(
        m.contains("HTTP 400") && m.contains("not a WAV file"),
        "{m}"
    );

    let base = serve(status_router(
        "/v1/audio/speech",
        StatusCode::UNAUTHORIZED,
        vec![],
        "invalid key",
    ));
    let e = tts(&base, AudioFormat::Pcm).speak("hi", "r").unwrap_err();
    assert_eq!(e.class(), ErrorClass::Unauthorized);
    assert!(e.to_string().contains("VOXLAT_API_KEY"), "{e}");

    let base = serve(Router::new());
    let e = tts(&base, AudioFormat::Pcm).speak("hi", "r").unwrap_err();
    assert_eq!(e.class(), ErrorClass::NotFound, "{e}");
}

#[test]
fn a_full_server_503_carries_its_retry_after() {
    let base = serve(status_router(
        "/v1/audio/speech",
        StatusCode::SERVICE_UNAVAILABLE,
        vec![("retry-after", "7")],
        r#"{"error":{"message":"the tts queue is full"}}"#,
    ));
    match tts(&base, AudioFormat::Pcm)
        .speak("hello", "r")
        .unwrap_err()
    {
        e @ NetError::Status { status: 503, .. } => {
            let m = e.to_string();
            assert!(m.contains('7') && m.contains("queue is full"), "{m}");
            assert!(
                matches!(&e, NetError::Status { retry_after: Some(r), .. } if r == "7"),
                "{e:?}"
            );
        }
        other => panic!("expected a 503, got {other:?}"),
    }
}

/// The body in pieces: the first splits a sample, the rest comes `gap` later.
fn streamed(bytes: Vec<u8>, first: usize, gap: Duration, rate: Option<&'static str>) -> Router {
    Router::new().route(
        "/v1/audio/speech",
        post(move || {
            let bytes = bytes.clone();
            async move {
                let (a, b) = bytes.split_at(first);
                let (a, b) = (a.to_vec(), b.to_vec());
                let stream = futures_util::stream::unfold(0, move |step| {
                    let (a, b) = (a.clone(), b.clone());
                    async move {
                        match step {
                            0 => Some((Ok::<_, std::io::Error>(a), 1)),
                            1 => {
                                tokio::time::sleep(gap).await;
                                Some((Ok(b), 2))
                            }
                            _ => None,
                        }
                    }
                });
                let mut r = Response::new(Body::from_stream(stream));
                if let Some(rate) = rate {
                    r.headers_mut()
                        .insert("x-sample-rate", rate.parse().unwrap());
                }
                r
            }
        }),
    )
}

#[test]
fn streamed_pcm_is_stamped_at_its_first_bytes() {
    let audio = tone(4_800);
    let wire = pcm16_le(&audio);
    let gap = Duration::from_millis(150);
    let base = serve(streamed(wire.clone(), 101, gap, None));
    let got = tts(&base, AudioFormat::Pcm).speak("hello", "r-1").unwrap();
    assert_eq!(
        got.sample_rate, 24_000,
        "OpenAI's pcm rate when the server says none"
    );
    // Decoded independently: little-endian i16 pairs.
    let expected: Vec<f32> = wire
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect();
    assert_eq!(got.samples, expected);
    let c = &got.call;
    assert_eq!(c.download_bytes, wire.len() as u64);
    let first = c.first_byte.unwrap();
    assert!(
        c.done.0 - first.0 >= gap.as_nanos() as u64 * 9 / 10,
        "first audio must be stamped when it arrived, not at the end: {c:?}"
    );

    let base = serve(streamed(pcm16_le(&audio), 3, Duration::ZERO, Some("16000")));
    let got = tts(&base, AudioFormat::Pcm).speak("hello", "r-2").unwrap();
    assert_eq!(got.sample_rate, 16_000, "the server's X-Sample-Rate wins");

    let wav = wav_bytes(&audio, 22_050);
    let base = serve(streamed(wav, 30, Duration::ZERO, None));
    let got = tts(&base, AudioFormat::Wav).speak("hello", "r-3").unwrap();
    assert_eq!((got.sample_rate, got.samples.len()), (22_050, audio.len()));
}

/// A raw server that promises `promised` bytes of audio and sends `sent` before closing.
fn cut_server(promised: usize, sent: usize) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let mut s = s.unwrap();
            let mut buf = [0u8; 8192];
            let mut req = Vec::new();
            // Headers and the small JSON body arrive together or nearly so.
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
            }
            std::thread::sleep(Duration::from_millis(20));
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: audio/pcm\r\ncontent-length: {promised}\r\n\r\n"
            );
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&vec![1u8; sent]);
            let _ = s.flush();
        }
    });
    format!("http://{addr}/v1")
}

#[test]
fn a_stream_cut_mid_audio_is_an_error_not_a_short_chunk() {
    let base = cut_server(4_000, 1_000);
    let e = tts(&base, AudioFormat::Pcm)
        .speak("hello", "r")
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Disconnected, "{e}");
    assert!(e.to_string().contains("after 1000 bytes"), "{e}");
}

#[test]
fn a_server_that_is_not_there_is_refused_by_name() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", l.local_addr().unwrap());
    drop(l);
    let e = asr(&base).transcribe(&tone(10), "r").unwrap_err();
    assert_eq!(e.class(), ErrorClass::ConnectionRefused, "{e}");
}

#[test]
fn a_body_that_is_not_a_transcription_says_so() {
    let base = serve(status_router(
        "/v1/audio/transcriptions",
        StatusCode::OK,
        vec![("content-type", "text/html")],
        "<html>login</html>",
    ));
    let e = asr(&base).transcribe(&tone(10), "r").unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("did not answer with a transcription") && m.contains("<html>"),
        "{m}"
    );
}
