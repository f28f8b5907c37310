//! Reply quality graded on both sides of the tail filter, through a replayed turn: the
//! filter withholds what would fail the checks, so the spoken verdict alone would call a
//! model clean that wrote a stray token.

use std::convert::Infallible;
use std::path::Path;
use std::time::Duration;
use voxlat_pipeline::fake::{FakeAsr, FakeLlm, FakeTts};
use voxlat_pipeline::workers::{AsrWorker, TtsWorker};
use voxlat_pipeline::Aggregate;
use voxlat_pipeline::{LoadedTurn, Pipeline, PipelineConfig, Scenario, TurnOutcome};

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_stray_tail_fails_before_the_filter_and_is_clean_after_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let scenario = Scenario::load(&dir.join("short-commands.toml")).expect("scenario");
    let spec = scenario.turns.iter().find(|t| t.id == "digit-5").unwrap();
    let turn = LoadedTurn::load(&scenario, spec).expect("clip");
    let asr = FakeAsr::new(&["Five."], 20 * MS);
    let tts = FakeTts::new(10 * MS);
    // One stray word after the last sentence: the tail filter withholds it.
    let llm = FakeLlm::new(&["It is ", "noon. ", "prochains"], 30 * MS, 5 * MS);
    let p = Pipeline::new(
        PipelineConfig {
            fast: true,
            ..PipelineConfig::default()
        },
        AsrWorker::spawn(move || Ok::<_, Infallible>(asr)).expect("asr worker"),
        TtsWorker::spawn(move || Ok::<_, Infallible>(tts)).expect("tts worker"),
        Box::new(llm),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let [rec] = &rt.block_on(p.replay_turn(&turn, &mut Vec::new(), 0, false, None))[..] else {
        panic!("one record");
    };
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(rec.dropped_tail.as_deref(), Some("prochains"));
    let after = rec.quality.as_ref().expect("graded as spoken");
    assert!(after.core_pass(), "{after:?}");
    let before = rec
        .quality_before_filter
        .as_ref()
        .expect("graded as written");
    assert!(!before.clean_end && !before.core_pass(), "{before:?}");
    let q = Aggregate::from_turns(std::slice::from_ref(rec)).quality;
    assert_eq!((q.replies, q.core_pass), (1, 1));
    let b = q.before_filter.expect("the unfiltered counts");
    assert_eq!((b.replies, b.core_pass, b.clean_end), (1, 0, 0));
}
