//! The speech server over scripted engines: bad requests get a 400 that names the problem, a
//! full queue a 503 with Retry-After, and the two clients round-trip through it.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use voxlat_core::whisper_scores::Scores;
use voxlat_net::Endpoint;
use voxlat_speech_api::pcm::wav_bytes;
use voxlat_speech_api::server::{
    EngineError, Heard, ServerOptions, SpeechServer, SpeechToText, TextToSpeech,
};
use voxlat_speech_api::{AsrClient, AsrClientOptions, AudioFormat, TtsClient, TtsClientOptions};

/// Tells the test it has started, then waits to be released.
type Gate = (mpsc::Sender<()>, Arc<Mutex<mpsc::Receiver<()>>>);

/// Says how many samples it heard, with [`SCORES`]; waits for a release first when `gate` is set.
struct CountingStt {
    gate: Option<Gate>,
}

impl SpeechToText for CountingStt {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Heard, EngineError> {
        if let Some((started, release)) = &self.gate {
            let _ = started.send(());
            let _ = release.lock().unwrap().recv();
        }
        Ok(Heard {
            text: format!("heard {} samples", audio.len()),
            scores: Some(SCORES),
        })
    }
}

const SCORES: Scores = Scores {
    no_speech_prob: 0.25,
    avg_logprob: -0.5,
};

/// 100 samples per character at 16 kHz; "fail" fails.
struct ToneTts;

impl TextToSpeech for ToneTts {
    fn sample_rate(&self) -> u32 {
        16_000
    }
    fn speak(&mut self, text: &str) -> Result<Vec<f32>, EngineError> {
        if text == "fail" {
            return Err(EngineError::Failed("the voice broke".into()));
        }
        Ok(vec![0.25; text.chars().count() * 100])
    }
}

fn start(opts: ServerOptions, stt: CountingStt) -> String {
    let server = SpeechServer::start(
        opts,
        move || Ok::<_, String>(Box::new(stt) as Box<dyn SpeechToText>),
        || Ok::<_, String>(Box::new(ToneTts) as Box<dyn TextToSpeech>),
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
    format!("http://{addr}/v1")
}

fn options() -> ServerOptions {
    ServerOptions {
        max_upload_bytes: 200_000,
        max_input_chars: 50,
        english_only: true,
        asr_model: "whisper-tiny.en".into(),
        ..ServerOptions::default()
    }
}

fn upload(base: &str, file: Option<(&str, Vec<u8>)>, extra: &[(&str, &str)]) -> (u16, String) {
    let mut form = reqwest::blocking::multipart::Form::new();
    if let Some((name, bytes)) = file {
        form = form.part(
            "file",
            reqwest::blocking::multipart::Part::bytes(bytes).file_name(name.to_string()),
        );
    }
    for (k, v) in extra {
        form = form.text(k.to_string(), v.to_string());
    }
    let r = reqwest::blocking::Client::new()
        .post(format!("{base}/audio/transcriptions"))
        .multipart(form)
        .send()
        .unwrap();
    (r.status().as_u16(), r.text().unwrap())
}

fn speech(base: &str, body: &str) -> (u16, String) {
    let r = reqwest::blocking::Client::new()
        .post(format!("{base}/audio/speech"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (
        status,
        String::from_utf8_lossy(&r.bytes().unwrap()).into_owned(),
    )
}

#[test]
fn bad_uploads_get_a_400_that_names_the_problem() {
    let base = start(options(), CountingStt { gate: None });
    let wav = wav_bytes(&[0.1; 1600], 16_000);
    type Case<'a> = (
        Option<(&'a str, Vec<u8>)>,
        Vec<(&'a str, &'a str)>,
        u16,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (None, vec![("model", "x")], 400, "field `file` is missing"),
        (
            Some(("a.mp3", b"ID3\x03junk".to_vec())),
            vec![],
            400,
            "\"a.mp3\" is not a WAV file",
        ),
        (
            Some(("e.wav", Vec::new())),
            vec![],
            400,
            "\"e.wav\" is empty",
        ),
        (
            Some(("bad.wav", b"RIFF\x00\x00\x00\x00WAVEjunkjunk".to_vec())),
            vec![],
            400,
            "bad.wav",
        ),
        (
            Some(("a.wav", wav.clone())),
            vec![("response_format", "srt")],
            400,
            "use one of json, verbose_json, text",
        ),
        (
            Some(("a.wav", wav.clone())),
            vec![("language", "de")],
            400,
            "English only",
        ),
        (
            Some(("big.wav", vec![0u8; 3_000_000])),
            vec![],
            413,
            "limit of 200000 bytes",
        ),
    ];
    for (file, extra, status, says) in cases {
        let what = format!("{:?} {extra:?}", file.as_ref().map(|f| f.0));
        let (got, body) = upload(&base, file, &extra);
        assert_eq!(got, status, "{what}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        let message = json["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{what}: {body}");
    }
    let r = reqwest::blocking::Client::new()
        .post(format!("{base}/audio/transcriptions"))
        .body("not multipart")
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().unwrap().contains("not a multipart upload"));
    // And a good one, with the formats it offers.
    let (status, body) = upload(&base, Some(("a.wav", wav)), &[("response_format", "text")]);
    assert_eq!((status, body.as_str()), (200, "heard 1600 samples"));
}

#[test]
fn bad_speech_requests_get_a_400_that_names_the_problem() {
    let base = start(options(), CountingStt { gate: None });
    let cases = [
        (r#"{"model":"tts-1"}"#, 400, "`input` is missing or empty"),
        (r#"{"input":"  "}"#, 400, "`input` is missing or empty"),
        (r#"{"input":"hi","response_format":"mp3"}"#, 400, "use pcm"),
        (
            r#"{"input":"hi","speed":2.0}"#,
            400,
            "speed 2 is not supported",
        ),
        (
            &format!(r#"{{"input":"{}"}}"#, "a".repeat(60)),
            400,
            "60 characters; the limit is 50",
        ),
        ("{not json", 400, "not the JSON this endpoint takes"),
        (r#"{"input":"fail"}"#, 500, "the voice broke"),
    ];
    for (body, status, says) in cases {
        let (got, text) = speech(&base, body);
        assert_eq!(got, status, "{body}: {text}");
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let message = json["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{body}: {text}");
    }
}

#[test]
fn the_clients_round_trip_through_the_server() {
    let base = start(options(), CountingStt { gate: None });
    let asr = AsrClient::new(Endpoint::new(&base, None), AsrClientOptions::default()).unwrap();
    let got = asr.transcribe(&vec![0.1; 8_000], "turn-1").unwrap();
    assert_eq!(got.text, "heard 8000 samples");
    // Through `verbose_json`'s one segment.
    assert_eq!(got.scores, Some(SCORES));
    assert_eq!(got.call.server_request_id.as_deref(), Some("turn-1"));
    assert!(got.call.server_compute_ms.is_some() && got.call.server_queue_ms.is_some());
    assert!(got.call.network_ms().is_some());

    let pcm = TtsClient::new(Endpoint::new(&base, None), TtsClientOptions::default()).unwrap();
    let got = pcm.speak("four", "turn-2").unwrap();
    // 400 samples at 16 kHz, served as OpenAI's 24 kHz pcm.
    assert_eq!(got.sample_rate, 24_000);
    assert!(
        (598..=602).contains(&got.samples.len()),
        "{}",
        got.samples.len()
    );
    let wav = TtsClient::new(
        Endpoint::new(&base, None),
        TtsClientOptions {
            format: AudioFormat::Wav,
            ..TtsClientOptions::default()
        },
    )
    .unwrap();
    let got = wav.speak("four", "turn-3").unwrap();
    assert_eq!((got.sample_rate, got.samples.len()), (16_000, 400));
    assert!(got.samples.iter().all(|s| (s - 0.25).abs() < 1e-4));
}

#[test]
fn a_full_queue_answers_503_with_retry_after() {
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let stt = CountingStt {
        gate: Some((started_tx, Arc::new(Mutex::new(release_rx)))),
    };
    let base = start(
        ServerOptions {
            queue_depth: 1,
            retry_after: Duration::from_secs(3),
            ..options()
        },
        stt,
    );
    let wav = wav_bytes(&[0.1; 160], 16_000);
    let send = |base: String, wav: Vec<u8>| {
        std::thread::spawn(move || upload(&base, Some(("a.wav", wav)), &[]))
    };
    let first = send(base.clone(), wav.clone());
    started_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // The engine is busy; the next request takes the one queue slot, and then the queue is
    // full. Which later request first finds it full depends on when that slot fills.
    let waiting = vec![send(base.clone(), wav.clone())];
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let mut refused = None;
    for _ in 0..20 {
        let form = reqwest::blocking::multipart::Form::new().part(
            "file",
            reqwest::blocking::multipart::Part::bytes(wav.clone()).file_name("a.wav"),
        );
        match client
            .post(format!("{base}/audio/transcriptions"))
            .multipart(form)
            .send()
        {
            Ok(r) if r.status().as_u16() == 503 => {
                refused = Some((
                    r.headers()["retry-after"].to_str().unwrap().to_string(),
                    r.text().unwrap(),
                ));
                break;
            }
            // Timed out: it took the slot, so the next one finds the queue full.
            _ => {}
        }
    }
    let (retry_after, body) = refused.expect("a request found the queue full");
    assert_eq!(retry_after, "3");
    assert!(body.contains("queue is full"), "{body}");
    for _ in 0..50 {
        let _ = release_tx.send(());
    }
    assert_eq!(
        first.join().unwrap(),
        (200, r#"{"text":"heard 160 samples"}"#.into())
    );
    drop(waiting);
}
