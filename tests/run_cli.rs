//! `voxlat run` end to end on a real (virtual) sound card: a private PulseAudio daemon whose
//! null sink's monitor is the default input (scripts/pulse-null-sink.sh), reached through
//! ALSA's pulse plugin, so whatever is played comes back as microphone input. The test plays
//! a scenario WAV into that path, voxlat hears it, answers, and the test records the virtual
//! speaker itself.
//!
//! Putting the recording on voxlat's clock: the test records with voxlat-audio's capture
//! (cpal's own capture timestamps of the monitor source, mapped onto this process's clock),
//! and both processes publish how their clocks relate to CLOCK_MONOTONIC (voxlat in its
//! results, `monotonic_minus_process_ns`). So the comparison is between voxlat's *playback*
//! timestamp (what the output device predicted when it scheduled the first sample) and the
//! *capture* timestamp a separate client's stream gives the same sample on the monitor: two
//! directions of PulseAudio's latency accounting, not a physical clock. It catches a wrong
//! mapping, a missing device segment or a mis-timed playout; it cannot catch an error common
//! to both of PulseAudio's latency reports. Needs pulseaudio, pulseaudio-utils (paplay),
//! libasound2-plugins (scripts/lib.sh installs them) and the fetched models.

mod common;
mod live;

use live::{
    ask_about_the_moon, one_turn, onset, results, scenario, slow_then_short, start_voxlat, to_mine,
    wait, Pulse, ONSET_LEVEL, SERIAL,
};
use std::time::Duration;

#[test]
fn a_spoken_question_is_answered_through_the_speaker_on_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (r, all, recorded, _) = one_turn(&out, &[], &scenario("synthetic-moon.wav"));
    let t = &r["turns"][0];
    assert!(
        t["transcript"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("moon"),
        "transcript {}",
        t["transcript"]
    );
    // One line per turn: transcript, reply, breakdown with the dominant stage starred.
    let line = all
        .lines()
        .find(|l| l.starts_with("[1] "))
        .expect("turn line");
    assert!(
        line.contains(" → ") && line.contains("*") && line.contains(" ms"),
        "{line}"
    );

    // The breakdown telescopes exactly, and includes the device's own latency.
    let b = &t["breakdown"];
    let segs = b["segments"].as_array().unwrap();
    let sum: i64 = segs.iter().map(|s| s["ns"].as_i64().unwrap()).sum();
    assert_eq!(sum, b["total_ns"].as_i64().unwrap());
    let ev = &t["events"];
    let at = |k: &str| {
        ev[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} missing: {ev}"))
    };
    assert_eq!(
        b["total_ns"].as_u64().unwrap(),
        at("first_voice") - at("speech_end")
    );
    // The voice's leading silence was trimmed to a few ms before its first voiced sample.
    assert!(at("first_voice") - at("playout_start") <= 6_000_000);
    let device_ns = segs.iter().find(|s| s["name"] == "device").unwrap()["ns"]
        .as_i64()
        .unwrap();
    assert!(
        device_ns > 0,
        "a real device plays after the sample is queued: {device_ns} ns"
    );
    assert!(at("playout_done") > at("playout_start"));

    // The speaker played what TTS produced, and its first sound came when voxlat said.
    let reply = voxlat_audio::wav::read_at(&out.join("replies/live-turn-1-0.wav"), 16_000)
        .unwrap()
        .audio
        .samples;
    let reply_onset = onset(&reply, ONSET_LEVEL).expect("the reply has sound");
    let to_mine = to_mine(&r);
    let expected = to_mine(at("playout_start")) + (reply_onset as i64 * 1_000_000_000 / 16_000);
    // The reply is the first sound after the question ended (1.5 s of silence at least).
    let after_question = to_mine(at("endpoint"));
    let samples: Vec<f32> = recorded.iter().map(|s| s.0).collect();
    let start = recorded
        .iter()
        .position(|s| s.1 as i64 >= after_question)
        .expect("recording covers the reply");
    let heard = start + onset(&samples[start..], ONSET_LEVEL).expect("the speaker was silent");
    let diff_ms = (recorded[heard].1 as i64 - expected) as f64 / 1e6;
    eprintln!(
        "recording {} samples over {:.3} s; endpoint at {:.3} s, expected onset {:.3} s, heard {:.3} s (recording time)",
        recorded.len(),
        (recorded.last().unwrap().1 - recorded[0].1) as f64 / 1e9,
        (after_question - recorded[0].1 as i64) as f64 / 1e9,
        (expected - recorded[0].1 as i64) as f64 / 1e9,
        (recorded[heard].1 - recorded[0].1) as f64 / 1e9,
    );
    eprintln!("captured onset − voxlat's playout_start (+ reply onset): {diff_ms:+.2} ms; device segment {:.1} ms", device_ns as f64 / 1e6);
    assert!(
        diff_ms.abs() <= 20.0,
        "playout_start off by {diff_ms:.1} ms (device xruns during the reply: {}, callback threads raised: {})",
        t["device_xruns"],
        r["stages"]["output"]["raised"]
    );

    // Non-silent speech: loud enough, and Whisper hears the reply's words in the recording
    // (a sample-exact comparison would fail on the gaps a loaded machine's scheduler causes,
    // which the results count as device xruns).
    let first_reply_sample = heard - reply_onset.min(heard);
    let end = (first_reply_sample + reply.len() + 3_200).min(samples.len());
    let played = &samples[first_reply_sample..end];
    let rms = (played.iter().map(|v| v * v).sum::<f32>() / played.len() as f32).sqrt();
    assert!(rms > 0.01, "reply RMS {rms}");
    let wav = dir.path().join("heard.wav");
    voxlat_audio::wav::write(&wav, played, 16_000).unwrap();
    let o = common::voxlat()
        .arg("transcribe")
        .arg(&wav)
        .output()
        .unwrap();
    let heard_text = String::from_utf8_lossy(&o.stdout).to_lowercase();
    let words: Vec<String> = t["reply_text"]
        .as_str()
        .unwrap()
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| w.chars().count() >= 4)
        .map(str::to_lowercase)
        .collect();
    let found = words
        .iter()
        .filter(|w| heard_text.contains(w.as_str()))
        .count();
    eprintln!(
        "underruns {}, device xruns {}; the speaker said {heard_text:?} for {:?}",
        t["underruns"], t["device_xruns"], t["reply_text"]
    );
    // Whisper tiny on twice-resampled speech misses words ("moon" → "minus"): a third of the
    // reply's longer words is plenty to tell the reply from silence, noise or the question.
    let spoken = heard_text
        .split_once(".wav:")
        .map(|(_, t)| t.split('\n').next().unwrap_or(""))
        .unwrap_or("");
    assert!(
        if words.is_empty() {
            spoken.chars().any(char::is_alphabetic)
        } else {
            found >= 1 && found * 3 >= words.len()
        },
        "Whisper heard {heard_text:?} from the speaker, the reply was {}",
        t["reply_text"]
    );
}

#[test]
fn speaking_over_the_reply_stops_playback_and_aborts_the_llm_request() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let llm = voxlat_testkit::Builder::per_request(slow_then_short).start_on_own_runtime(1);
    // The speaker must still be playing when the user speaks over it. This reply's first
    // sentence is 300+ characters long at 8 tokens/s, so after the first chunk nothing more
    // is ready for seconds; the 40-character first chunk (about 2.3 s of audio) covers the
    // barge-in, the default 20 characters (about 1 s) may not. The interrupted turn is not
    // counted by --max-turns: this stops after the one it starts.
    let asked = ask_about_the_moon(&llm.base_url());
    let reply_heard = asked.reply_heard;
    std::thread::sleep(Duration::from_millis(700));
    // Words of the user's own: "thank you" is an acknowledgement, over which the reply plays on.
    let words = voxlat_audio::wav::read(&scenario("real-conf-getpin.wav")).unwrap();
    let clip_end = asked.say(&words.audio.samples, words.audio.rate, 4.0);
    let (r, all, recorded) = asked.finish();
    let turns = r["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{all}");
    let t = &turns[0];
    assert_eq!(t["outcome"], "interrupted", "{t}");
    let i = &t["interrupted"];
    assert_eq!(i["during"], "playout", "{i}");
    assert_eq!(i["llm_aborted"], true, "{i}");
    let reaction = i["reaction_ms"].as_f64().expect("reaction time");
    let stopped = i["playback_stopped"].as_u64().expect("stop time");
    let onset = i["onset"].as_u64().unwrap();
    assert!(reaction > 0.0 && stopped > onset, "{i}");
    // Partial timings are kept: the reply had started playing.
    assert!(t["events"]["playout_start"].as_u64().unwrap() < stopped);
    eprintln!("barge-in reaction (speech onset → playback stopped): {reaction:.1} ms");

    // The HTTP request was dropped mid-stream: the server saw the client go away before it
    // sent every token.
    let served = llm.requests();
    assert_eq!(served.len(), 2);
    assert!(
        !served[0].completed,
        "the first LLM request ran to completion"
    );
    assert!(
        served[0].content_sent.len() < slow_then_short(&serde_json::Value::Null, 0).tokens.len()
    );

    // The interruption is the next turn, which is answered; the interrupted turn is counted
    // but left out of the latency figures.
    let t2 = &turns[1];
    assert_eq!(t2["outcome"], "ok", "{t2}");
    assert!(
        t2["transcript"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("pin"),
        "{}",
        t2["transcript"]
    );
    let a = &r["aggregate"];
    assert_eq!(a["interrupted"], 1);
    assert_eq!(a["total"]["n"], 1, "{a}");

    // The speaker really went quiet: nothing but silence between the end of the user's clip
    // and the next reply.
    let to_mine = |voxlat_ns: u64| to_mine(&r)(voxlat_ns) as u64;
    let next_reply = to_mine(t2["events"]["playout_start"].as_u64().unwrap());
    let quiet: Vec<f32> = recorded
        .iter()
        .filter(|s| s.1 > clip_end + 100_000_000 && s.1 + 20_000_000 < next_reply)
        .map(|s| s.0)
        .collect();
    assert!(
        quiet.len() > 16_000 / 4,
        "only {} samples between the clip and the next reply",
        quiet.len()
    );
    let peak = quiet.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(
        peak < 0.01,
        "the interrupted reply kept playing (peak {peak})"
    );
    assert!(reply_heard < to_mine(stopped));
}

/// One clip with a 900 ms pause inside it: the endpointer commits the first half at the
/// pause, and the rest interrupts that turn's reply (a 1.5 s wait for the first token keeps
/// it in flight). `--max-turns 1` counts turns that ran to their end, so the run goes on to
/// answer the rest; and every turn it printed is in its results.
#[test]
fn every_turn_run_prints_is_in_its_results() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let llm = voxlat_testkit::Builder::fixed(voxlat_testkit::Script {
        ttft: Duration::from_millis(1500),
        itl: Duration::from_millis(10),
        tokens: ["Okay, ", "noted."].map(String::from).to_vec(),
        ..voxlat_testkit::Script::default()
    })
    .start_on_own_runtime(1);
    let pulse = Pulse::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let first = voxlat_audio::wav::read(&scenario("real-tt-weasels.wav")).unwrap();
    let rest = voxlat_audio::wav::read(&scenario("real-conf-getpin.wav")).unwrap();
    assert_eq!(first.audio.rate, rest.audio.rate);
    let rate = first.audio.rate;
    let mut clip = first.audio.samples.clone();
    clip.extend(std::iter::repeat_n(0.0, rate as usize * 9 / 10));
    clip.extend_from_slice(&rest.audio.samples);
    let wav = dir.path().join("pause-900ms.wav");
    voxlat_audio::wav::write(&wav, &clip, rate).unwrap();
    let (child, log) = start_voxlat(
        &pulse,
        &out,
        &["--max-turns", "1", "--llm-url", &llm.base_url()],
    );
    std::thread::sleep(Duration::from_millis(500));
    let _ = pulse.play(&wav).wait();
    let (ok, all) = wait(child, log);
    assert!(ok, "voxlat run failed:\n{all}");

    let r = results(&out);
    let turns = r["turns"].as_array().unwrap();
    let written: Vec<&str> = turns.iter().map(|t| t["turn"].as_str().unwrap()).collect();
    let printed: Vec<String> = all
        .lines()
        .filter_map(|l| l.strip_prefix('[')?.split_once("] "))
        .filter_map(|(n, _)| n.parse::<u32>().ok())
        .map(|n| format!("turn-{n}"))
        .collect();
    assert!(!printed.is_empty(), "{all}");
    for p in &printed {
        assert!(
            written.contains(&p.as_str()),
            "{p} printed, not in {written:?}:\n{all}"
        );
    }
    let outcomes: Vec<&str> = turns
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    eprintln!("printed {printed:?}; written {written:?}, {outcomes:?}");
    assert_eq!(
        outcomes.last(),
        Some(&"ok"),
        "the run stops at its first answered turn: {outcomes:?}\n{all}"
    );
    assert!(
        outcomes[..outcomes.len() - 1]
            .iter()
            .all(|o| *o == "interrupted"),
        "{outcomes:?}"
    );
}

/// Live watches the embedded server as replay does: killed while the session listens, it
/// ends the session with the reason, and the results file is written, marked interrupted.
#[test]
fn a_crash_of_the_embedded_server_ends_the_live_session_with_the_reason() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let pulse = Pulse::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let (child, log) = start_voxlat(&pulse, &out, &[]);
    common::kill_embedded_server(child.id());
    let (ok, all) = wait(child, log);
    assert!(!ok, "the session went on without its LLM:\n{all}");
    assert!(
        all.contains("exited mid-run") && all.contains("killed by signal 9"),
        "{all}"
    );
    assert!(!all.contains("panicked"), "{all}");
    let r = results(&out);
    assert_eq!(r["header"]["interrupted"], true, "{}", r["header"]);
}

/// A recording's room tone goes on after its last word (LibriSpeech 61-70968: hiss at
/// −42 dBFS for 2.5 s, louder than the gate's fixed −45 dBFS floor). The gate must hear it as
/// the room, not as the user over the reply: the reply plays at once, while the hiss still
/// does, unpaused. Before the gate knew the room's level, the reply paused at its first buffer
/// and was heard only when the hiss stopped.
#[test]
fn the_rooms_hiss_after_the_question_does_not_hold_the_reply() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let llm = voxlat_testkit::Builder::fixed(voxlat_testkit::Script {
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(10),
        tokens: ["Okay, ", "that ", "is ", "noted."]
            .map(String::from)
            .to_vec(),
        ..voxlat_testkit::Script::default()
    })
    .start_on_own_runtime(1);
    let dir = tempfile::tempdir().unwrap();
    let clip = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/turns/audio/librispeech-61-61-70968-0000.wav");
    let (r, all, recorded, clip_end) = one_turn(
        &dir.path().join("results"),
        &["--llm-url", &llm.base_url()],
        &clip,
    );
    let t = &r["turns"][0];
    assert!(
        t["reply_pauses"].as_array().is_none_or(Vec::is_empty),
        "{}\n{all}",
        t["reply_pauses"]
    );
    let endpoint = to_mine(&r)(t["events"]["endpoint"].as_u64().unwrap());
    let heard = recorded
        .iter()
        .find(|s| s.1 as i64 >= endpoint && s.0.abs() > ONSET_LEVEL)
        .expect("the reply was never heard")
        .1;
    assert!(
        heard < clip_end,
        "the reply was heard {:.0} ms after the hiss stopped",
        (heard - clip_end) as f64 / 1e6
    );
}
