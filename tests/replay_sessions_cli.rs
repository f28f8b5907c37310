//! `voxlat replay --sessions`: the same scenario by 1 and then 2 callers at once, through the
//! real models. Needs `voxlat models fetch --all` (CI does it).

mod common;

use std::collections::BTreeSet;

#[test]
fn each_level_gets_its_table_and_the_saturating_stage_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = common::one_turn_scenario(dir.path(), "real-word-hello.wav", "Hello.", None);
    let out = dir.path().join("results");
    let o = common::voxlat()
        .args([
            "replay",
            "--fast",
            "--repeat",
            "2",
            "--warmup",
            "0",
            "--sessions",
            "1,2",
        ])
        .arg("--output-dir")
        .arg(&out)
        .arg(&scenario)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let all = format!("{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{all}");
    assert!(text.contains("1 session(s) at once: 2 turns"), "{text}");
    assert!(text.contains("2 session(s) at once: 4 turns"), "{text}");
    assert!(
        text.contains("Saturates first: ") || text.contains("nothing saturated"),
        "{text}"
    );
    assert!(
        text.contains("Segments sum exactly to the total: yes"),
        "{text}"
    );

    let r = common::results_json(&out);
    let levels = r["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    assert_eq!(levels[1]["sessions"], 2);
    assert_eq!(levels[1]["aggregate"]["turns"], 4);
    let turns = r["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 6);
    let ids: BTreeSet<&str> = turns
        .iter()
        .map(|t| t["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 6, "request IDs are never shared");
    // Level 2 had callers 1 and 2, each replaying both repeats.
    let callers: BTreeSet<(u64, u64, u64)> = turns
        .iter()
        .map(|t| {
            (
                t["sessions"].as_u64().unwrap(),
                t["session"].as_u64().unwrap(),
                t["repeat"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: BTreeSet<(u64, u64, u64)> = [
        (1, 1, 0),
        (1, 1, 1),
        (2, 1, 0),
        (2, 1, 1),
        (2, 2, 0),
        (2, 2, 1),
    ]
    .into();
    assert_eq!(callers, expected);
    for t in turns {
        assert_eq!(t["outcome"], "ok", "{t}");
    }
}
