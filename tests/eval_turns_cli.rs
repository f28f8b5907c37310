//! `voxlat eval-turns` on the bundled pause scenarios, whose pause truth was annotated by a
//! rule that shares no code with the endpointer (scenarios/README.md).

mod common;

use std::path::PathBuf;

fn pauses() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/pauses.toml")
}

fn run(args: &[&str]) -> (bool, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out/eval.json");
    std::fs::create_dir_all(json.parent().unwrap()).unwrap();
    let o = common::voxlat()
        .arg("eval-turns")
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let all = common::output_text(&o);
    let doc = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (o.status.success(), all, doc)
}

/// A 300 ms hangover commits inside the 465 and 565 ms pauses (both turns cut off, each
/// commit inside a labelled pause); an 800 ms one waits them out, and its commits come the
/// hangover (plus the VAD's own lag) after the true end.
#[test]
fn a_short_hangover_cuts_off_inside_the_labelled_pauses_and_a_long_one_does_not() {
    let p = pauses();
    let (ok, out, doc) = run(&[
        p.to_str().unwrap(),
        "--policy",
        "webrtc",
        "--hangovers",
        "800,300",
    ]);
    assert!(ok, "{out}");
    assert_eq!(doc["turns"], 2, "{out}");
    assert_eq!(doc["pauses"], 3, "{out}");
    let policy = &doc["policies"][0];
    assert_eq!(policy["name"], "webrtc", "{out}");
    assert_eq!(policy["knob"], "hangover_ms", "{out}");
    let points = policy["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{out}");
    assert_eq!(points[0]["setting"], 300.0, "sorted by setting: {out}");
    assert_eq!(points[0]["cutoff"], 1.0, "{out}");
    assert_eq!(points[1]["cutoff"], 0.0, "{out}");
    for c in policy["turns"][0]["commits"].as_array().unwrap() {
        assert_eq!(c["verdict"]["kind"], "in_pause", "{c}");
        assert_eq!(c["cut_off"], true, "{c}");
    }
    for c in policy["turns"][1]["commits"].as_array().unwrap() {
        let latency = c["verdict"]["latency_ms"].as_f64().unwrap();
        // The hangover and the VAD's own lag (one or two 20 ms frames), in audio time.
        assert!((800.0..=850.0).contains(&latency), "{c}");
    }
    let mean = points[1]["latency_mean_ms"].as_f64().unwrap();
    assert_eq!(policy["latency_at_5pct_ms"].as_f64(), Some(mean), "{out}");
    assert!(policy["cutoff_at_300ms"].is_null(), "{out}");
    assert!(doc["header"]["cpu"]["int8_family"].is_string(), "{out}");
    assert!(
        out.contains("within 300 ms") && out.contains("not reached"),
        "{out}"
    );
}

/// Smart Turn as Pipecat runs it, at threshold 0, commits at its first VAD stop, before the
/// end of either turn; what every CPU family agrees on, whatever the model's scores.
#[test]
fn smart_turn_at_threshold_zero_commits_at_its_first_score() {
    let p = pauses();
    let (ok, out, doc) = run(&[
        p.to_str().unwrap(),
        "--policy",
        "smart-turn",
        "--thresholds",
        "0",
        "--delays",
        "200,1000",
    ]);
    assert!(ok, "{out}");
    let policy = &doc["policies"][0];
    assert_eq!(policy["name"], "smart-turn", "{out}");
    // Scored after 200 ms of silence (Pipecat's delay), it commits inside both pauses; after
    // 1000 ms, longer than either pause, it cuts no turn off and commits that long after the
    // true end (plus the VAD's own lag).
    let points = policy["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{out}");
    assert_eq!(points[0]["delay_ms"], 200, "{out}");
    assert_eq!(points[0]["cutoff"], 1.0, "{out}");
    assert_eq!(points[1]["delay_ms"], 1000, "{out}");
    assert_eq!(points[1]["cutoff"], 0.0, "{out}");
    let late = points[1]["latency_mean_ms"].as_f64().unwrap();
    assert!((1000.0..=1050.0).contains(&late), "{out}");
    assert!(doc["turn_score_ms"]["n"].as_u64().unwrap() >= 2, "{out}");
    assert!(out.contains("VNNI"), "the CPU-family note: {out}");
}

/// `--choose-on`: the setting is chosen on the bundled pause turns (300 ms cuts both off, so
/// 5 % takes 800 ms) and reported, fixed, on a turn the choice never saw; the two sets may
/// not share a file.
#[test]
fn a_setting_chosen_on_one_set_is_reported_on_the_other() {
    let p = pauses();
    let jfk = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/turns/test/jfk.toml");
    let (ok, out, doc) = run(&[
        jfk.to_str().unwrap(),
        "--choose-on",
        p.to_str().unwrap(),
        "--policy",
        "webrtc",
        "--hangovers",
        "300,800",
    ]);
    assert!(ok, "{out}");
    let chosen = &doc["chosen"];
    // No 600 ms point in this sweep, so only the fixed targets.
    assert_eq!(chosen["targets"].as_array().unwrap().len(), 2, "{out}");
    let at_5 = &chosen["policies"][0]["chosen"][0];
    assert_eq!(at_5["chosen"]["setting"], 800.0, "{out}");
    assert_eq!(at_5["chosen"]["cutoff"], 0.0, "{out}");
    assert_eq!(at_5["reported"]["setting"], 800.0, "{out}");
    assert_eq!(doc["turns"], 1, "reported on JFK's one turn: {out}");
    assert!(out.contains("Settings chosen on 2 turns (pauses)"), "{out}");
    let (ok, out, _) = run(&[
        p.to_str().unwrap(),
        "--choose-on",
        p.to_str().unwrap(),
        "--policy",
        "webrtc",
    ]);
    assert!(!ok && out.contains("disjoint"), "{out}");
}

#[test]
fn bad_settings_and_turns_without_truth_name_the_problem() {
    let p = pauses();
    let (ok, out, _) = run(&[p.to_str().unwrap(), "--hangovers", "0"]);
    assert!(!ok && out.contains("--hangovers"), "{out}");
    let (ok, out, _) = run(&[p.to_str().unwrap(), "--thresholds", "1.5"]);
    assert!(!ok && out.contains("--thresholds"), "{out}");
    let (ok, out, _) = run(&[p.to_str().unwrap(), "--delays", "3000"]);
    assert!(!ok && out.contains("--delays"), "{out}");
    // The assistant scenario's turns have a true end but no pauses; a file without any true
    // end is refused with the reason.
    let dir = tempfile::tempdir().unwrap();
    let wav = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/audio/real-digit-5.wav");
    let toml = dir.path().join("noend.toml");
    std::fs::write(
        &toml,
        format!(
            "name = \"noend\"\n[[turn]]\nid = \"five\"\nwav = {:?}\ntranscript = \"Five.\"\n",
            wav.to_str().unwrap()
        ),
    )
    .unwrap();
    let (ok, out, _) = run(&[toml.to_str().unwrap(), "--policy", "webrtc"]);
    assert!(!ok && out.contains("speech_end_ms"), "{out}");
    let (ok, out, _) = run(&[dir.path().join("missing").to_str().unwrap()]);
    assert!(!ok, "{out}");
}

/// The bundled corpus loads whole with the Rust loader (its truth was written by a Python
/// rule), and its truth agrees with the endpointer where it must on every CPU (webrtc-vad is
/// integer code): a hangover longer than any labelled pause cuts no turn off, so no true end
/// lies before speech the endpointer hears, and a 200 ms one cuts most of them.
#[test]
fn the_bundled_corpus_loads_whole_and_a_long_hangover_cuts_no_turn_off() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/turns");
    let (ok, out, doc) = run(&[
        corpus.to_str().unwrap(),
        "--policy",
        "webrtc",
        "--hangovers",
        "200,2500",
    ]);
    assert!(ok, "{out}");
    assert_eq!(doc["turns"], 80, "{out}");
    assert_eq!(doc["pauses"], 157, "{out}");
    assert!(doc["left_out"].as_array().unwrap().is_empty(), "{out}");
    let points = doc["policies"][0]["points"].as_array().unwrap();
    assert_eq!(points[1]["cutoff"], 0.0, "{out}");
    assert!(points[0]["cutoff"].as_f64().unwrap() > 0.5, "{out}");
}

/// `scripts/turn-cue-bound.py` bounds what any wait rule on `cues`' inputs can do, from the
/// stops eval-turns records. Its replay of those stops is a second implementation of the
/// commit rule, in Python: it must give `cues`' own cut-off rates and latencies at every
/// setting, or the script stops with an error.
#[test]
fn the_bound_script_replays_the_cues_rows_as_eval_turns_scores_them() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("eval.json");
    let o = common::voxlat()
        .arg("eval-turns")
        .arg(pauses())
        .args(["--policy", "cues", "--waits", "200,400,600,1000", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let out = common::output_text(&o);
    assert!(o.status.success(), "{out}");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/turn-cue-bound.py");
    let o = std::process::Command::new("python3")
        .arg(&script)
        .arg(&json)
        .args(["--seeds", "2"])
        .output()
        .unwrap();
    let printed = common::output_text(&o);
    assert!(o.status.success(), "{printed}");
    assert!(
        printed.contains("the same cut-off rate at all 4 settings, mean latency within 0.0 ms"),
        "{printed}"
    );
    assert!(printed.contains("best wait table"), "{printed}");
}
