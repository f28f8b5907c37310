//! `voxlat serve-audio` with the real Whisper and Piper, and `voxlat replay` using it as its
//! remote ASR and TTS stages. Needs `voxlat models fetch --all` (CI does it).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use voxlat_net::Endpoint;
use voxlat_speech_api::{AsrClient, AsrClientOptions};

/// The server, killed when dropped.
struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_audio() -> Served {
    let mut child = common::voxlat()
        .args(["serve-audio", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    Served { child, base }
}

#[test]
fn replay_runs_its_asr_and_tts_on_serve_audio() {
    let served = serve_audio();
    // A clear 400 from the real server, before the replay: a text file as the upload.
    let body = "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\n\r\nhello\r\n--b--\r\n";
    let addr = served
        .base
        .trim_start_matches("http://")
        .trim_end_matches("/v1");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer.contains("\\\"notes.txt\\\" is not a WAV file"),
        "{answer}"
    );

    let dir = tempfile::tempdir().unwrap();
    let audio = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/audio");

    // Whisper's own scores come back in `verbose_json`, and a clear question passes its
    // no-speech rule with a margin (a band: the floats differ between CPUs).
    let moon = voxlat_audio::wav::read_at(&audio.join("synthetic-moon.wav"), 16_000).unwrap();
    let client = AsrClient::new(
        Endpoint::new(&served.base, None),
        AsrClientOptions::default(),
    )
    .unwrap();
    let heard = client.transcribe(&moon.audio.samples, "moon").unwrap();
    let s = heard.scores.expect("verbose_json's segment");
    assert!(
        s.no_speech_prob < 0.5 && (-0.9..0.0).contains(&s.avg_logprob),
        "{s:?} for {:?}",
        heard.text
    );
    let scenario = dir.path().join("moon.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"moon\"\n[[turn]]\nid = \"moon\"\nwav = \"{}/synthetic-moon.wav\"\ntranscript = \"How far is the moon from the earth?\"\nspeech_end_ms = 1670\n",
            audio.display()
        ),
    )
    .unwrap();
    let out = dir.path().join("results");
    let o = common::voxlat()
        .args(["replay", "--fast", "--repeat", "1", "--warmup", "0"])
        .args(["--asr-url", &served.base, "--tts-url", &served.base])
        .arg("--output-dir")
        .arg(&out)
        .arg(&scenario)
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains("Segments sum exactly to the total: yes"),
        "{all}"
    );
    assert!(all.contains("Remote ASR (1 calls)"), "{all}");
    assert!(all.contains("Remote TTS ("), "{all}");
    let r = common::results_json(&out);
    assert_eq!(r["stages"]["asr"], served.base.as_str());
    assert_eq!(r["stages"]["tts"], served.base.as_str());
    let t = &r["turns"][0];
    assert_eq!(t["outcome"], "ok", "{t}");
    assert!(t["wer"].as_f64().unwrap() <= 0.2, "{}", t["transcript"]);
    // The server's own timing came back, and the stamps lie on the turn's clock.
    let asr = &t["asr_remote"];
    assert!(asr["server_compute_ms"].as_f64().unwrap() > 0.0, "{asr}");
    assert!(asr["upload_bytes"].as_u64().unwrap() > 44, "{asr}");
    let asr_done = t["events"]["asr_done"].as_u64().unwrap();
    assert!(
        asr["headers"].as_u64().unwrap() <= asr_done,
        "{asr} vs asr_done {asr_done}"
    );
    let chunk = &t["chunks"][0];
    let tts = &chunk["remote"];
    assert_eq!(tts["first_byte"], chunk["first_audio"], "{chunk}");
    // The first audio's arrival, or the commit if the speculative reply had it before then
    // (a stage's event never precedes the turn's end; --fast gives the reply its pause).
    let first_byte = tts["first_byte"].as_u64().unwrap();
    let endpoint = t["events"]["endpoint"].as_u64().unwrap();
    assert_eq!(
        t["events"]["tts_first_audio"].as_u64(),
        Some(first_byte.max(endpoint)),
        "tts_first_audio is the first audio's arrival, or the commit: {}",
        t["events"]
    );
    assert!(tts["download_bytes"].as_u64().unwrap() > 1000, "{tts}");
    assert!(t["reply_audio_s"].as_f64().unwrap() > 0.3);
}
