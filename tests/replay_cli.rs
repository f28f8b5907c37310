//! `voxlat replay` end to end through the real models: Whisper, the embedded llama.cpp
//! server with the bundled Gemma, Piper. Needs `voxlat models fetch --all` (CI does it).

use std::path::{Path, PathBuf};
use std::process::Command;

const ORDER: &[&str] = &[
    "speech_start",
    "speech_end",
    "endpoint",
    "asr_done",
    "llm_sent",
    "llm_headers",
    "llm_first_event",
    "llm_first_token",
    "llm_first_answer_token",
    "first_chunk",
    "tts_first_audio",
    "playout_start",
    "playout_done",
];

fn write_scenario(dir: &Path) -> PathBuf {
    let audio = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/audio");
    let p = dir.join("two.toml");
    std::fs::write(
        &p,
        format!(
            "name = \"two\"\n\
             [[turn]]\nid = \"moon\"\nwav = \"{0}/synthetic-moon.wav\"\ntranscript = \"How far is the moon from the earth?\"\nspeech_end_ms = 1670\n\
             [[turn]]\nid = \"getpin\"\nwav = \"{0}/real-conf-getpin.wav\"\ntranscript = \"Please enter the conference pin number.\"\nspeech_end_ms = 2260\n",
            audio.display()
        ),
    )
    .unwrap();
    p
}

#[test]
fn two_utterances_through_the_real_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(dir.path());
    let replies = dir.path().join("replies");
    let out = dir.path().join("results");
    let o = Command::new(env!("CARGO_BIN_EXE_voxlat"))
        .args(["replay", "--repeat", "1", "--warmup", "0", "--output-dir"])
        .arg(&out)
        .arg("--save-replies")
        .arg(&replies)
        .arg(&scenario)
        .env_remove("VOXLAT_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
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
    let json = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("replay-")
        })
        .expect("results file");
    assert!(json.with_extension("html").exists() && json.with_extension("csv").exists());
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let turns = r["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    for t in turns {
        let id = t["turn"].as_str().unwrap();
        assert_eq!(t["outcome"], "ok", "{id}: {t}");
        assert!(
            t["wer"].as_f64().unwrap() <= 0.34,
            "{id}: transcript {}",
            t["transcript"]
        );
        // Every event present and in order.
        let ev = &t["events"];
        let times: Vec<u64> = ORDER
            .iter()
            .map(|k| {
                ev[*k]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{id}: {k} missing: {ev}"))
            })
            .collect();
        for (w, names) in times.windows(2).zip(ORDER.windows(2)) {
            assert!(w[0] <= w[1], "{id}: {} after {}", names[0], names[1]);
        }
        assert!(ev["llm_done"].as_u64().unwrap() >= ev["llm_first_token"].as_u64().unwrap());
        // The breakdown telescopes exactly.
        let b = &t["breakdown"];
        let sum: i64 = b["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["ns"].as_i64().unwrap())
            .sum();
        assert_eq!(sum, b["total_ns"].as_i64().unwrap(), "{id}");
        assert_eq!(
            b["total_ns"].as_u64().unwrap(),
            times[11] - times[1],
            "{id}: total is speech_end → playout_start"
        );
        // The VAD's own speech-end estimate lands within one 20 ms frame of the annotation.
        let err = t["vad_speech_end_error_ms"].as_f64().unwrap();
        assert!(err.abs() <= 20.0, "{id}: VAD speech end off by {err} ms");
        // The reply is non-silent speech of plausible length.
        let wav = replies.join(format!("two-{id}-0.wav"));
        let audio = voxlat_audio::wav::read(&wav).unwrap().audio;
        let rms =
            (audio.samples.iter().map(|v| v * v).sum::<f32>() / audio.samples.len() as f32).sqrt();
        assert!(
            audio.duration_s() > 0.3 && rms > 0.01,
            "{id}: reply {:.2} s, RMS {rms}",
            audio.duration_s()
        );
        assert!(t["reply_audio_s"].as_f64().unwrap() > 0.3);
    }
    assert_eq!(r["aggregate"]["sums_exact"], true);
    assert!(r["aggregate"]["dominant_p50"].is_string());
}

#[test]
fn a_bad_scenario_is_named_and_the_others_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "name = \"bad\"\n[[turn]]\nid = \"x\"\nwav = \"missing.wav\"\ntranscript = \"t\"\n",
    )
    .unwrap();
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "this is not toml [").unwrap();
    let good = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/assistant.toml");
    let o = Command::new(env!("CARGO_BIN_EXE_voxlat"))
        .args(["replay", "--sweep-hangover", "200,600", "--output-dir"])
        .arg(dir.path().join("out"))
        .arg(&bad)
        .arg(&broken)
        .arg(&good)
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains("bad.toml") && all.contains("missing.wav"),
        "{all}"
    );
    assert!(all.contains("broken.toml"), "{all}");
    assert!(all.contains("hangover ms") && all.contains("600"), "{all}");
}

#[test]
fn sigint_keeps_every_finished_turn() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let good = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/assistant.toml");
    let child = Command::new(env!("CARGO_BIN_EXE_voxlat"))
        .args([
            "replay",
            "--fast",
            "--repeat",
            "20",
            "--warmup",
            "0",
            "--output-dir",
        ])
        .arg(&out)
        .arg(&good)
        .env_remove("VOXLAT_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let find = || {
        std::fs::read_dir(&out)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.extension().is_some_and(|e| e == "json")
                    && p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with("replay-")
            })
    };
    let mut seen = 0;
    for _ in 0..600 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if let Some(v) = find()
            .and_then(|p| serde_json::from_slice::<serde_json::Value>(&std::fs::read(p).ok()?).ok())
        {
            seen = v["turns"].as_array().map_or(0, |t| t.len());
            if seen >= 2 {
                break;
            }
        }
    }
    assert!(seen >= 2, "no turns were flushed");
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(130), "{all}");
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(find().unwrap()).unwrap()).unwrap();
    assert_eq!(r["header"]["interrupted"], true);
    let turns = r["turns"].as_array().unwrap();
    assert!(turns.len() >= seen && turns.len() < 100, "{}", turns.len());
    assert!(
        turns.iter().all(|t| t["outcome"] == "ok"),
        "only finished turns are kept"
    );
    assert!(find().unwrap().with_extension("html").exists());
}
