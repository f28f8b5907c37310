//! `voxlat replay` end to end through the real models: Whisper, the embedded llama.cpp
//! server with the bundled Gemma, Piper. Needs `voxlat models fetch --all` (CI does it).

mod common;

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
    "first_voice",
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
            times[12] - times[1],
            "{id}: total is speech_end → first_voice"
        );
        // The voice's leading silence was trimmed to a few ms before its first voiced sample.
        let lead = times[12] - times[11];
        assert!(
            lead <= 6_000_000,
            "{id}: {lead} ns from the first sample to the voice"
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

/// Silence put after "Set a". The bundled clip's own gap there is 70 ms, and paced replay
/// retracted a provisional end in it in only some runs (1 of 3 in one bundled replay; this
/// test failed its premise in all 5 runs of one build and 1 of 2 of another). 250 ms is a
/// pause in every run, and still far from the 600 ms endpoint.
const PAUSE_AFTER_SET_A_MS: u32 = 250;
/// Where the clip's gap after "Set a" is: the speech ends at 370 ms and goes on at 440 ms
/// (`voxlat vad scenarios/audio/synthetic-timer.wav`).
const SET_A_GAP_MS: u32 = 400;

/// "Set a" comes before a pause, and Whisper finds no words in it alone. The decode after the
/// pause must then start from the turn's first sample: alone, "timer for ten minutes" came
/// out as "Timer 410 minutes.", and the words before the pause were lost.
#[test]
fn words_too_short_to_transcribe_alone_before_a_pause_are_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let clip = voxlat_audio::wav::read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/audio/synthetic-timer.wav"),
    )
    .unwrap();
    let rate = clip.audio.rate;
    let at = (SET_A_GAP_MS * rate / 1000) as usize;
    let samples = clip.audio.samples;
    let mut paused = samples[..at].to_vec();
    paused.extend(std::iter::repeat_n(
        0.0,
        (PAUSE_AFTER_SET_A_MS * rate / 1000) as usize,
    ));
    paused.extend_from_slice(&samples[at..]);
    let wav = dir.path().join("timer-with-a-pause.wav");
    voxlat_audio::wav::write(&wav, &paused, rate).unwrap();
    let scenario = common::one_turn_scenario(
        dir.path(),
        wav.to_str().unwrap(),
        "Set a timer for ten minutes.",
        Some(1695 + PAUSE_AFTER_SET_A_MS),
    );
    let out = dir.path().join("results");
    let o = common::voxlat()
        .args(["replay", "--repeat", "1", "--warmup", "0", "--output-dir"])
        .arg(&out)
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let r = read_results(&out);
    let t = &r["turns"][0];
    assert!(
        t["retractions"].as_u64().unwrap() >= 1,
        "the pause after \"Set a\" must retract a provisional end for this test to mean anything: {t}"
    );
    let text = t["transcript"].as_str().unwrap().to_lowercase();
    assert!(
        text.contains("set") && t["wer"].as_f64().unwrap() <= 0.34,
        "transcript {text:?}"
    );
}

/// A user's own recording has no `pauses_ms`: "Please enter the conference", 1.5 s of
/// silence, then "pin number", paced, with a 300 ms hangover. The turn is committed in the
/// pause, its reply plays in real time, and the rest comes over it: the LLM (scripted, so that
/// it records what it is asked) is asked the rest after the first words and the reply as far
/// as it was heard. No word is lost, and the utterance's WER is scored on both parts.
#[test]
fn a_pause_no_scenario_labels_is_answered_as_heard_and_no_word_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let clip = voxlat_audio::wav::read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/audio/real-conf-getpin.wav"),
    )
    .unwrap();
    let rate = clip.audio.rate;
    // The gap after "conference" (the endpointer's own provisional end there, `voxlat vad`).
    let at = (1320 * rate / 1000) as usize;
    let samples = clip.audio.samples;
    let mut paused = samples[..at].to_vec();
    paused.extend(std::iter::repeat_n(0.0, (1500 * rate / 1000) as usize));
    paused.extend_from_slice(&samples[at..]);
    let wav = dir.path().join("getpin-with-a-long-pause.wav");
    voxlat_audio::wav::write(&wav, &paused, rate).unwrap();
    let scenario = common::one_turn_scenario(
        dir.path(),
        wav.to_str().unwrap(),
        "Please enter the conference pin number.",
        Some(2265 + 1500),
    );
    // A long reply, so that it is still playing when the rest of the words come.
    let llm = voxlat_testkit::Builder::fixed(voxlat_testkit::Script {
        ttft: std::time::Duration::from_millis(20),
        itl: std::time::Duration::from_millis(20),
        tokens: "Sure, I can help you with that, and with anything else you need today. "
            .split_inclusive(' ')
            .map(String::from)
            .collect(),
        ..voxlat_testkit::Script::default()
    })
    .start_on_own_runtime(1);
    let out = dir.path().join("results");
    let o = common::voxlat()
        .args([
            "replay",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--hangover",
            "300",
        ])
        .args(["--llm-url", &llm.base_url(), "--model", "scripted"])
        .arg("--output-dir")
        .arg(&out)
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let served = llm.requests();
    assert_eq!(served.len(), 2, "{}", output_text(&o));
    let said = common::said(&served[1].body);
    let n = said.len();
    let last = &said[n - 1];
    assert_eq!(last.0, "user", "{said:?}");
    if last.1.contains("conference") {
        // A machine too busy to make the reply audible before the rest came: the words then
        // merge into one message, which loses nothing either.
        assert!(last.1.contains("pin"), "{said:?}");
    } else {
        assert!(n >= 3, "the exchange as heard before the rest: {said:?}");
        assert!(
            said[n - 3].0 == "user" && said[n - 3].1.contains("conference"),
            "{said:?}"
        );
        assert!(
            said[n - 2].0 == "assistant" && said[n - 2].1.starts_with("sure"),
            "the reply as heard: {said:?}"
        );
        assert!(last.1.contains("pin"), "{said:?}");
    }
    let r = read_results(&out);
    let last = r["turns"].as_array().unwrap().last().unwrap().clone();
    assert!(
        last["wer"].as_f64().unwrap() <= 0.34,
        "scored on both parts: {last}"
    );
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
    assert!(all.contains("webrtc, hangover 600"), "{all}");
}

/// The policy sweep on the pause scenarios: the plain 600 ms rule is the baseline row, and
/// each high threshold gets a row. On this project's VNNI machines Smart Turn hears the
/// sentence-final pause inside both utterances as the end of the turn at 0.9 (P ≈ 0.92–0.99)
/// and splits them, and at 0.99 it does not. Its int8 scores differ between CPU families
/// (0.942 against 0.597 on one clip), so the test asserts what holds on every family: a
/// stricter threshold never splits more, and no row splits more turns than there are.
#[test]
fn the_turn_policy_sweep_has_a_baseline_row_and_shows_the_pause_cut_offs() {
    let dir = tempfile::tempdir().unwrap();
    let pauses = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/pauses.toml");
    let o = common::voxlat()
        .args(["replay", "--sweep-turn-high", "0.9,0.99", "--output-dir"])
        .arg(dir.path())
        .arg(&pauses)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("sweep-"))
        .expect("the sweep's JSON");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{out}");
    assert!(rows[0]["policy"]["turn"].is_null(), "baseline first: {out}");
    assert_eq!(rows[0]["cut_off_rate"], 0.0, "{out}");
    let split = |row: &serde_json::Value| row["split"].as_u64().expect("split");
    assert!(split(&rows[1]) <= 2, "two utterances: {out}");
    assert!(
        split(&rows[1]) >= split(&rows[2]),
        "0.99 split more than 0.9: {out}"
    );
    assert!(doc["turn_score_ms"]["n"].as_u64().unwrap() > 0, "{out}");
}

/// eot-bench's figures from the sweep, on the pause scenarios' labelled pauses: a 300 ms
/// hangover commits inside the 465 and 565 ms pauses of both turns (cut off, in pause), an
/// 800 ms one waits them out.
#[test]
fn the_sweep_labels_commits_inside_the_labelled_pauses_as_cut_offs() {
    let dir = tempfile::tempdir().unwrap();
    let pauses = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/pauses.toml");
    let o = common::voxlat()
        .args(["replay", "--sweep-hangover", "300,800", "--output-dir"])
        .arg(dir.path())
        .arg(&pauses)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("sweep-"))
        .expect("the sweep's JSON");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let rows = doc["rows"].as_array().unwrap();
    assert_eq!(rows[0]["eot"]["cutoff"], 1.0, "{out}");
    assert!(rows[0]["eot"]["latency_mean_ms"].is_null(), "{out}");
    assert_eq!(rows[1]["eot"]["cutoff"], 0.0, "{out}");
    let latency = rows[1]["eot"]["latency_mean_ms"].as_f64().unwrap();
    assert!((800.0..900.0).contains(&latency), "{latency}: {out}");
    let curve = &doc["curves"][0];
    assert_eq!(curve["name"], "webrtc", "{out}");
    assert_eq!(curve["latency_at_5pct_ms"].as_f64(), Some(latency), "{out}");
    assert!(curve["cutoff_at_300ms"].is_null(), "{out}");
    assert!(out.contains("eot-bench figures, webrtc"), "{out}");
}

/// Smart Turn holding an unsure turn for 2.5 s of silence, past the hangover and the second
/// of room that replay used to feed after it, on a clip that ends 1 s after its speech: the
/// turn is still committed (at the hold, or when the audio ends) and judged, not recorded as
/// "no speech".
#[test]
fn a_turn_held_past_the_hangover_by_smart_turn_is_committed_and_judged() {
    let dir = tempfile::tempdir().unwrap();
    let clip = voxlat_audio::wav::read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/audio/real-digit-5.wav"),
    )
    .unwrap();
    let rate = clip.audio.rate as usize;
    let mut samples = clip.audio.samples;
    samples.resize(rate * (775 + 1000) / 1000, 0.0);
    let wav = dir.path().join("five-then-a-second.wav");
    voxlat_audio::wav::write(&wav, &samples, clip.audio.rate).unwrap();
    let scenario = common::one_turn_scenario(dir.path(), wav.to_str().unwrap(), "Five.", Some(775));
    let out = dir.path().join("results");
    // A threshold no score reaches: every turn is unsure, and waits for --turn-max.
    let o = common::voxlat()
        .args([
            "replay",
            "--fast",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--turn-model",
            "smart-turn",
            "--turn-max",
            "2500",
            "--turn-high",
            "1",
            "--turn-low",
            "1",
            "--output-dir",
        ])
        .arg(&out)
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let t = &read_results(&out)["turns"][0];
    assert_eq!(t["outcome"], "ok", "{t}");
    assert_eq!(t["cutoff"]["kind"], "after_end", "{t}");
    let latency = t["cutoff"]["latency_ms"].as_f64().unwrap();
    assert!(
        latency > 1600.0,
        "held past the hangover and its second: {latency} ms"
    );
}

#[test]
fn inconsistent_turn_thresholds_name_the_flags() {
    let o = common::voxlat()
        .args([
            "replay",
            "--turn-model",
            "smart-turn",
            "--turn-high",
            "0.6",
            "--turn-low",
            "0.8",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("--turn-low") && err.contains("--turn-model off"),
        "{err}"
    );
}

/// The cues rule reads the speculative transcript, which needs a provisional end: without
/// one the command says which flag to change before any model loads.
#[test]
fn the_cues_rule_without_a_provisional_end_names_the_flag() {
    let o = common::voxlat()
        .args(["replay", "--turn-model", "cues", "--provisional", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("--provisional") && err.contains("--turn-model"),
        "{err}"
    );
}

#[test]
fn sigint_keeps_every_finished_turn() {
    signal_keeps_every_finished_turn(libc::SIGINT, 130, "SIGINT");
}

#[test]
fn sigterm_keeps_every_finished_turn() {
    signal_keeps_every_finished_turn(libc::SIGTERM, 143, "SIGTERM");
}

/// A long replay of the bundled assistant scenario (20 passes) into `out`.
fn spawn_long_replay(out: &Path) -> std::process::Child {
    let good = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/assistant.toml");
    common::voxlat()
        .args([
            "replay",
            "--fast",
            "--repeat",
            "20",
            "--warmup",
            "0",
            "--output-dir",
        ])
        .arg(out)
        .arg(&good)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The replay results file in `out`, once it exists.
fn results_json(out: &Path) -> Option<PathBuf> {
    std::fs::read_dir(out)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("replay-"))
        })
}

fn read_results(out: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(results_json(out).unwrap()).unwrap()).unwrap()
}

/// Waits (up to two minutes) until `n` turns are appended to the JSONL beside the results
/// JSON (the summary itself is rendered only at the end) or the child exits; returns the count.
fn wait_for_turns(child: &mut std::process::Child, out: &Path, n: usize) -> usize {
    let mut seen = 0;
    for _ in 0..1200 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        seen = results_json(out)
            .and_then(|p| std::fs::read_to_string(p.with_extension("jsonl")).ok())
            .map(|text| text.lines().count())
            .unwrap_or(0);
        if seen >= n || child.try_wait().unwrap().is_some() {
            break;
        }
    }
    seen
}

fn output_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn signal_keeps_every_finished_turn(sig: i32, code: i32, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let mut child = spawn_long_replay(&out);
    let seen = wait_for_turns(&mut child, &out, 2);
    assert!(seen >= 2, "no turns were flushed");
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, sig) };
    let o = child.wait_with_output().unwrap();
    let all = output_text(&o);
    assert_eq!(o.status.code(), Some(code), "{all}");
    let r = read_results(&out);
    assert_eq!(r["header"]["interrupted"], true);
    assert_eq!(r["header"]["stop_reason"], name);
    let turns = r["turns"].as_array().unwrap();
    assert!(turns.len() >= seen && turns.len() < 100, "{}", turns.len());
    assert!(
        turns.iter().all(|t| t["outcome"] == "ok"),
        "only finished turns are kept"
    );
    assert!(results_json(&out).unwrap().with_extension("html").exists());
}

fn one_turn_scenario(dir: &Path) -> PathBuf {
    common::one_turn_scenario(
        dir,
        "synthetic-moon.wav",
        "How far is the moon from the earth?",
        None,
    )
}

#[test]
fn an_unwritable_output_directory_stops_replay_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let o = common::voxlat()
        .args(["replay", "--fast", "--output-dir"])
        .arg(file.join("results"))
        .arg(one_turn_scenario(dir.path()))
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!o.status.success(), "{all}");
    assert!(all.contains("plain-file"), "the path is named: {all}");
    assert!(
        !all.contains("starting the embedded LLM server") && !all.contains("loading Whisper"),
        "it failed only after starting things: {all}"
    );
    assert!(!all.contains("panicked"), "{all}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_key_never_appears_in_replay_output_logs_or_results() {
    const KEY: &str = "sk-replay-secret-4242";
    let server = voxlat_testkit::Builder::fixed(voxlat_testkit::Script::default())
        .require_key("sk-the-right-one")
        .start()
        .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let scenario = one_turn_scenario(dir.path());
    let mut cmd = common::voxlat();
    cmd.args(["replay", "--fast", "--warmup", "0", "--llm-url"])
        .arg(server.base_url())
        .arg("--output-dir")
        .arg(&out)
        .arg(&scenario)
        .env("OPENAI_API_KEY", KEY)
        .env("RUST_LOG", "trace");
    let o = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // The turn failed on the server's 401 (whose body echoes the key it was sent)...
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("401"), "{all}");
    assert_eq!(
        server.requests()[0].authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str()),
        "the key was really sent"
    );
    // ...and the key is nowhere: not on the terminal, in logs, JSON, CSV or HTML.
    assert!(!all.contains(KEY), "key on the terminal");
    let files = common::all_files_text(&out);
    assert!(files.len() >= 3, "{files:?}");
    for (p, text) in files {
        assert!(!text.contains(KEY), "key in {}", p.display());
    }
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            std::fs::read_dir(&out)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|e| e == "json"))
                .unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    let t = &r["turns"][0];
    assert_eq!(t["outcome"], "error", "{t}");
    // The failed turn keeps the timings it had: ASR ran, the request went out.
    assert!(t["events"]["asr_done"].is_u64(), "{t}");
    assert!(t["events"]["llm_sent"].is_u64(), "{t}");
}

#[test]
fn a_crash_of_the_embedded_server_ends_replay_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let mut child = spawn_long_replay(&out);
    let seen = wait_for_turns(&mut child, &out, 1);
    assert!(seen >= 1, "no turn was flushed");
    common::kill_embedded_server(child.id());
    let o = child.wait_with_output().unwrap();
    let all = output_text(&o);
    // Exit status 2: the run ended in an error (1 is "finished, with failed requests").
    assert_eq!(o.status.code(), Some(2), "{all}");
    assert!(
        all.contains("exited mid-run") && all.contains("killed by signal 9"),
        "{all}"
    );
    assert!(!all.contains("panicked"), "{all}");
    let r = read_results(&out);
    assert_eq!(r["header"]["interrupted"], true);
    assert!(r["header"]["stop_reason"]
        .as_str()
        .unwrap_or_default()
        .contains("killed by signal 9"));
    let kept = r["turns"].as_array().unwrap();
    let ok = kept.iter().filter(|t| t["outcome"] == "ok").count();
    assert!(ok >= seen, "{ok} < {seen}");
    assert!(kept.len() < 100);
    assert_eq!(common::server_logs(&out), 1, "a second server was started");
}

#[test]
fn a_first_chunk_cap_out_of_range_names_the_flag() {
    let o = common::voxlat()
        .args(["replay", "--first-chunk-max", "4"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("--first-chunk-max") && err.contains("8..=240"),
        "{err}"
    );
}
