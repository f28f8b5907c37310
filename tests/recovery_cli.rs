//! Recoverable commits, live, on the private PulseAudio loopback (tests/live): the user makes
//! a sound soon after the commit, while the reply plays. The reply goes silent, measured from
//! the devices' own timestamps; words join the question, and a sound with no words lets the
//! reply play on from where it stopped.

mod common;
mod live;

use live::{ask_about_the_moon, my_offset, scenario, slow_then_short, ONSET_LEVEL, SERIAL};
use std::time::Duration;

/// The pause a turn's reply had: (onset, silent, resumed) in voxlat's process clock.
fn one_pause(t: &serde_json::Value) -> (u64, u64, Option<u64>) {
    let pauses = t["reply_pauses"].as_array().expect("reply_pauses");
    assert_eq!(pauses.len(), 1, "{t}");
    let p = &pauses[0];
    (
        p["onset"].as_u64().unwrap(),
        p["silent"].as_u64().unwrap(),
        p["resumed"].as_u64(),
    )
}

/// The reply is asked about the moon; 200 ms after it is heard the user says "please enter
/// the conference pin number" over it (words of their own: "thank you" would be an
/// acknowledgement, and the reply would play on). The reply goes silent while the user is
/// still speaking (the speaker's flush stamp against the microphone's capture time; the
/// figure is printed, as a bound tighter than the clip would make the test as noisy as the
/// machine), it is dropped, and the LLM is asked the new words after the moon question and
/// the reply as far as it was heard.
#[test]
fn words_over_the_reply_silence_it_and_follow_the_exchange_as_heard() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let llm = voxlat_testkit::Builder::per_request(slow_then_short).start_on_own_runtime(1);
    let a = ask_about_the_moon(&llm.base_url());
    std::thread::sleep(Duration::from_millis(200));
    let words = voxlat_audio::wav::read(&scenario("real-conf-getpin.wav")).unwrap();
    a.say(&words.audio.samples, words.audio.rate, 4.0);
    let (r, all, _) = a.finish();
    let turns = r["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{all}");
    let t = &turns[0];
    assert_eq!(t["outcome"], "interrupted", "{t}");
    let (onset, silent, resumed) = one_pause(t);
    assert_eq!(resumed, None, "the reply never played on");
    let ms = (silent as f64 - onset as f64) / 1e6;
    eprintln!("speech onset → reply silent: {ms:.1} ms");
    let clip_ms = words.audio.samples.len() as f64 * 1e3 / f64::from(words.audio.rate);
    assert!(ms > 0.0 && ms < clip_ms, "silent {ms} ms after the onset");
    assert_eq!(t["interrupted"]["during"], "playout", "{t}");
    assert_eq!(t["interrupted"]["playback_stopped"].as_u64(), Some(silent));

    let t2 = &turns[1];
    assert_eq!(t2["outcome"], "ok", "{t2}");
    assert!(t2["merged_words"].is_null(), "{t2}");
    assert!(
        t2["transcript"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("pin"),
        "{t2}"
    );
    let served = llm.requests();
    assert_eq!(served.len(), 2);
    let said = common::said(&served[1].body);
    let n = said.len();
    assert!(n >= 4, "{said:?}");
    assert!(
        said[n - 3].0 == "user" && said[n - 3].1.contains("moon"),
        "{said:?}"
    );
    assert_eq!(said[n - 2].0, "assistant", "the reply as heard: {said:?}");
    assert!(!said[n - 2].1.is_empty(), "{said:?}");
    assert!(
        said[n - 1].0 == "user" && said[n - 1].1.contains("pin") && !said[n - 1].1.contains("moon"),
        "{said:?}"
    );
}

/// 300 ms of loud noise 200 ms after the reply is heard, and nothing said: the reply goes
/// silent, then plays on from where it stopped. One turn, one LLM request.
#[test]
fn a_noise_soon_after_the_commit_pauses_the_reply_and_it_plays_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let llm = voxlat_testkit::Builder::per_request(slow_then_short).start_on_own_runtime(1);
    let a = ask_about_the_moon(&llm.base_url());
    std::thread::sleep(Duration::from_millis(200));
    // A fixed pseudo-random burst: white noise, not speech.
    let mut state = 0x9e37_79b9_u32;
    let noise: Vec<f32> = (0..16_000 * 3 / 10)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect();
    let noise_end = a.say(&noise, 16_000, 1.0);
    let (r, all, recorded) = a.finish();
    let turns = r["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{all}");
    let t = &turns[0];
    assert_eq!(t["outcome"], "ok", "{t}");
    let (onset, silent, resumed) = one_pause(t);
    let resumed = resumed.expect("the reply played on");
    let ms = (silent as f64 - onset as f64) / 1e6;
    eprintln!(
        "noise onset → reply silent: {ms:.1} ms; played on {:.0} ms later",
        (resumed - silent) as f64 / 1e6
    );
    assert!(
        ms > 0.0 && ms < 300.0,
        "silent {ms} ms after the onset of 300 ms of noise"
    );
    assert_eq!(llm.requests().len(), 1, "asked once");

    // On this process's clock: quiet from the noise's end until the reply played on, and
    // the reply's sound again after.
    let offset: i128 = r["stages"]["clock"]["monotonic_minus_process_ns"]
        .as_i64()
        .unwrap()
        .into();
    let mine = |ns: u64| (i128::from(ns) + offset - my_offset()) as u64;
    let peak = |from: u64, to: u64| {
        recorded
            .iter()
            .filter(|s| s.1 > from && s.1 < to)
            .fold(0f32, |m, s| m.max(s.0.abs()))
    };
    let back = mine(resumed);
    assert!(
        back > noise_end + 300_000_000,
        "played on too soon to check"
    );
    assert!(
        peak(noise_end + 100_000_000, back - 50_000_000) < 0.01,
        "the reply kept playing while paused"
    );
    assert!(
        peak(back + 50_000_000, back + 1_000_000_000) > ONSET_LEVEL,
        "the reply never played on"
    );
}
