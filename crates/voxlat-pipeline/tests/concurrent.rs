//! Two callers at once (`voxlat replay --sessions`): each on its own pipeline of scripted
//! stages, replaying the same real recording through the real endpointer at the same time.
//! Nothing may cross between them: request IDs, transcripts, LLM requests, replies, stamps.

use std::convert::Infallible;
use std::path::Path;
use std::time::Duration;
use voxlat_core::EventKind;
use voxlat_pipeline::fake::{FakeAsr, FakeLlm, FakeTts};
use voxlat_pipeline::workers::{AsrWorker, TtsWorker};
use voxlat_pipeline::{LoadedTurn, Pipeline, PipelineConfig, Scenario, TurnOutcome, TurnRecord};

const MS: Duration = Duration::from_millis(1);

struct Caller {
    pipeline: Pipeline,
    llm: FakeLlm,
}

fn caller(name: &str) -> Caller {
    let asr = FakeAsr::new(&[&format!("{name}.")], 20 * MS);
    let tts = FakeTts::new(10 * MS);
    let reply = format!("{name} reply.");
    let llm = FakeLlm::new(&[&reply, " Done."], 30 * MS, 5 * MS);
    let pipeline = Pipeline::new(
        PipelineConfig {
            fast: true,
            ..PipelineConfig::default()
        },
        AsrWorker::spawn(move || Ok::<_, Infallible>(asr)).unwrap(),
        TtsWorker::spawn(move || Ok::<_, Infallible>(tts)).unwrap(),
        Box::new(llm.clone()),
    );
    Caller { pipeline, llm }
}

fn digit_five() -> LoadedTurn {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let scenario = Scenario::load(&dir.join("short-commands.toml")).unwrap();
    let spec = scenario.turns.iter().find(|t| t.id == "digit-5").unwrap();
    LoadedTurn::load(&scenario, spec).unwrap()
}

async fn three_turns(c: &Caller, turn: &LoadedTurn) -> Vec<TurnRecord> {
    let mut out = Vec::new();
    for repeat in 0..3 {
        let mut history = Vec::new();
        out.extend(
            c.pipeline
                .replay_turn(turn, &mut history, repeat, false, None)
                .await,
        );
    }
    out
}

fn at(t: &TurnRecord, k: EventKind) -> u64 {
    t.events.get(&k).unwrap_or_else(|| panic!("{k} missing")).0
}

#[test]
fn two_concurrent_sessions_never_mix_request_ids_or_timelines() {
    let turn = digit_five();
    let (a, b) = (caller("Alpha"), caller("Bravo"));
    // In audio time a turn's stamps reach back before its endpoint decision; the process
    // clock must be past them, as in a real run (tests/session.rs does the same).
    while voxlat_core::clock::now().0 < 2_500_000_000 {
        std::thread::sleep(10 * MS);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (ra, rb) =
        rt.block_on(async { tokio::join!(three_turns(&a, &turn), three_turns(&b, &turn)) });

    let mut ids: Vec<&str> = ra
        .iter()
        .chain(&rb)
        .map(|t| t.request_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 6, "every turn has its own request ID");

    for (name, recs, c) in [("Alpha", &ra, &a), ("Bravo", &rb, &b)] {
        for t in recs.iter() {
            assert_eq!(t.outcome, TurnOutcome::Ok, "{name}: {:?}", t.error);
            assert_eq!(t.transcript, format!("{name}."));
            assert!(
                t.reply_text.starts_with(&format!("{name} reply.")),
                "{name}: {}",
                t.reply_text
            );
            let b = t.breakdown.as_ref().unwrap();
            assert_eq!(b.segments.iter().map(|s| s.ns).sum::<i64>(), b.total_ns);
            // Each turn's own stamps, in order.
            assert!(at(t, EventKind::Endpoint) <= at(t, EventKind::AsrDone));
            assert!(at(t, EventKind::AsrDone) <= at(t, EventKind::LlmSent));
            assert!(at(t, EventKind::LlmFirstToken) <= at(t, EventKind::FirstChunk));
            assert!(at(t, EventKind::FirstChunk) <= at(t, EventKind::TtsFirstAudio));
            assert!(at(t, EventKind::TtsFirstAudio) <= at(t, EventKind::PlayoutStart));
            // The chunks are this turn's: queued after its first chunk, spoken before it ended.
            for ch in &t.chunks {
                assert!(ch.submitted.0 >= at(t, EventKind::FirstChunk));
                assert!(ch.first_audio.unwrap().0 <= at(t, EventKind::TtsDone));
            }
        }
        // A caller's turns follow one another.
        for w in recs.windows(2) {
            assert!(
                at(&w[0], EventKind::LlmDone) <= at(&w[1], EventKind::LlmSent),
                "{name}"
            );
        }
        // Its LLM heard only its own caller.
        let asked = c.llm.requests.lock().unwrap();
        assert_eq!(asked.len(), 3);
        for req in asked.iter() {
            let user = &req.messages.last().unwrap().content;
            assert_eq!(user, &format!("{name}."), "{name}'s LLM was asked {user:?}");
        }
    }
    // And the two callers really ran at once: their first turns overlap in time.
    let span = |t: &TurnRecord| (at(t, EventKind::Endpoint), at(t, EventKind::PlayoutStart));
    let ((a0, a1), (b0, b1)) = (span(&ra[0]), span(&rb[0]));
    assert!(a0 < b1 && b0 < a1, "no overlap: {a0}..{a1} and {b0}..{b1}");
}
