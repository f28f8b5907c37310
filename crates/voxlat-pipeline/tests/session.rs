//! The session state machine on scripted stages: no model file, no server, no sound device.
//! Source events are scripted too, except in the last test, where a real recording goes
//! through the real endpointer.

use std::convert::Infallible;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::mpsc;
use voxlat_core::{clock, EventKind, Nanos};
use voxlat_llm::Message;
use voxlat_pipeline::fake::{FakeAsr, FakeLlm, FakeTts};
use voxlat_pipeline::record::Stage;
use voxlat_pipeline::workers::{AsrWorker, TtsWorker};
use voxlat_pipeline::{
    LoadedTurn, Pipeline, PipelineConfig, RealTimeSink, Scenario, Session, SessionError,
    SessionOptions, SourceClock, SourceError, SourceEvent, TurnMeta, TurnOutcome, TurnRecord,
    VirtualSink,
};
use voxlat_vad::VadEvent;

const MS: Duration = Duration::from_millis(1);

struct Fakes {
    asr: FakeAsr,
    tts: FakeTts,
    llm: FakeLlm,
}

impl Fakes {
    fn new() -> Fakes {
        Fakes {
            asr: FakeAsr::new(&["What time is it?"], 20 * MS),
            tts: FakeTts::new(10 * MS),
            llm: FakeLlm::new(
                &["It is ", "noon.", " Have ", "a nice ", "day."],
                30 * MS,
                5 * MS,
            ),
        }
    }

    fn pipeline(&self, cfg: PipelineConfig) -> Pipeline {
        let asr = self.asr.clone();
        let tts = self.tts.clone();
        Pipeline::new(
            cfg,
            AsrWorker::spawn(move || Ok::<_, Infallible>(asr)).expect("asr worker"),
            TtsWorker::spawn(move || Ok::<_, Infallible>(tts)).expect("tts worker"),
            Box::new(self.llm.clone()),
        )
    }
}

/// The process clock starts at zero with the process; scripted events reach back up to 2 s
/// before "now", which must not clamp at zero.
fn rt() -> tokio::runtime::Runtime {
    while clock::now().0 < 2_500_000_000 {
        std::thread::sleep(10 * MS);
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn at(ms: u64) -> Nanos {
    Nanos(ms * 1_000_000)
}

fn vad(ev: VadEvent) -> SourceEvent {
    SourceEvent::Vad {
        ev,
        received: clock::now(),
    }
}

/// One second of audio: its content does not matter to the fakes.
fn utterance() -> Vec<f32> {
    vec![0.1; 16_000]
}

fn endpoint(confirms_provisional: bool) -> SourceEvent {
    endpoint_with(utterance(), confirms_provisional)
}

/// An endpoint of `audio` that no provisional end had.
fn endpoint_of(audio: Vec<f32>) -> SourceEvent {
    endpoint_with(audio, false)
}

fn endpoint_with(audio: Vec<f32>, confirms_provisional: bool) -> SourceEvent {
    let now = clock::now();
    vad(VadEvent::Endpoint {
        speech_start: Nanos(now.0.saturating_sub(1_600_000_000)),
        speech_end: Nanos(now.0.saturating_sub(600_000_000)),
        at: now,
        audio,
        confirms_provisional,
        turn_probability: None,
        forced: false,
    })
}

/// The user went on, `since_provisional_ms` after the provisional end.
fn retracted(since_provisional_ms: u64) -> SourceEvent {
    let now = clock::now();
    vad(VadEvent::Retracted {
        at: now,
        provisional_at: Nanos(now.0.saturating_sub(since_provisional_ms * 1_000_000)),
    })
}

fn provisional() -> SourceEvent {
    provisional_of(utterance())
}

fn provisional_of(audio: Vec<f32>) -> SourceEvent {
    let now = clock::now();
    vad(VadEvent::Provisional {
        speech_end: Nanos(now.0.saturating_sub(200_000_000)),
        at: now,
        audio,
    })
}

fn live(opts: SessionOptions) -> SessionOptions {
    SessionOptions {
        clock: SourceClock::Process,
        ..opts
    }
}

/// A live session on the fakes' pipeline. `user` plays the source, alongside the session;
/// the first turn's record is returned.
fn first_live_turn<U, Fut>(f: &Fakes, user: U) -> TurnRecord
where
    U: FnOnce(mpsc::Sender<SourceEvent>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    first_turn(&f.pipeline(PipelineConfig::default()), &VirtualSink, user)
}

/// The first turn of a live session of `p` playing into `sink`, with `user` as the source.
fn first_turn<U, Fut>(p: &Pipeline, sink: &dyn voxlat_pipeline::Output, user: U) -> TurnRecord
where
    U: FnOnce(mpsc::Sender<SourceEvent>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(16);
    rt().block_on(async {
        let mut s = Session::new(p, sink, rx, SessionOptions::default(), TurnMeta::live);
        let user = tokio::spawn(user(tx));
        let rec = s
            .next_turn()
            .await
            .expect("no session error")
            .expect("a turn");
        user.await.expect("the scripted user");
        rec
    })
}

/// A voice that starts every clip with 120 ms of silence: the first chunk loses all but 5 ms
/// of it, and the breakdown ends at its first voiced sample, not at its first sample.
#[test]
fn the_breakdown_ends_at_the_first_voiced_sample_of_the_reply() {
    let mut f = Fakes::new();
    f.tts.lead = 120 * MS;
    let rec = first_live_turn(&f, |tx| async move {
        tx.send(vad(VadEvent::SpeechStart { at: clock::now() }))
            .await
            .unwrap();
        tx.send(endpoint(false)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    let first = &rec.chunks[0];
    let trimmed = first.lead_trimmed_ms.expect("the first chunk's trim");
    let voice_at = first.voice_at_ms.expect("the first chunk's voice");
    // The tone starts at sin(0) = 0: its first voiced sample is the next one.
    assert!((114.9..=115.1).contains(&trimmed), "trimmed {trimmed} ms");
    assert!((5.0..=5.1).contains(&voice_at), "voice at {voice_at} ms");
    // Later chunks keep their own silence: the voice's pause between sentences.
    assert!(rec.chunks[1..].iter().all(|c| c.lead_trimmed_ms.is_none()));
    let start = rec.events[&EventKind::PlayoutStart];
    let voice = rec.events[&EventKind::FirstVoice];
    let lead_ms = voice.signed_since(start) as f64 / 1e6;
    assert!((lead_ms - voice_at).abs() < 0.01, "lead in {lead_ms} ms");
    let b = rec.breakdown.as_ref().expect("a breakdown");
    let sum: i64 = b.segments.iter().map(|s| s.ns).sum();
    assert_eq!(sum, b.total_ns, "segments telescope to the total");
    assert_eq!(
        b.total_ns,
        voice.signed_since(rec.events[&EventKind::SpeechEnd]),
        "the total ends at the first voice"
    );
    assert_eq!(
        b.segment_ns(voxlat_core::segments::Segment::LeadIn),
        Some(voice.signed_since(start))
    );
}

#[test]
fn a_turn_on_fakes_streams_through_every_stage_and_its_segments_add_up() {
    let f = Fakes::new();
    let rec = first_live_turn(&f, |tx| async move {
        tx.send(vad(VadEvent::SpeechStart { at: clock::now() }))
            .await
            .unwrap();
        tx.send(endpoint(false)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(rec.turn, "turn-1");
    assert_eq!(rec.transcript, "What time is it?");
    assert_eq!(rec.reply_text, "It is noon. Have a nice day.");
    assert_eq!(
        rec.wer, None,
        "a live turn has no reference to score against"
    );
    // The chunker split the reply at its sentence end, and TTS said both parts.
    let spoken = f.tts.spoken.lock().unwrap().clone();
    assert_eq!(spoken.join(" "), "It is noon. Have a nice day.");
    assert!(spoken.len() >= 2, "{spoken:?}");
    // The LLM was asked the transcript, last, after the system prompt.
    let reqs = f.llm.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1);
    let last = reqs[0].messages.last().unwrap();
    assert_eq!(
        (last.role.as_str(), last.content.as_str()),
        ("user", "What time is it?")
    );
    let b = rec.breakdown.as_ref().expect("a breakdown");
    let sum: i64 = b.segments.iter().map(|s| s.ns).sum();
    assert_eq!(sum, b.total_ns, "segments telescope to the total");
    // The endpoint came 600 ms after the end of speech; the fakes took at least their
    // scripted time on top.
    let ms = |name: &str| b.segments.iter().find(|s| s.name == name).unwrap().ns as f64 / 1e6;
    assert!(
        (ms("endpointing") - 600.0).abs() < 50.0,
        "{}",
        ms("endpointing")
    );
    assert!(ms("llm_ttft") >= 29.0, "{}", ms("llm_ttft"));
    assert!(b.total_ns as f64 / 1e6 >= 600.0 + 20.0 + 30.0 + 10.0);
    for k in [
        EventKind::AsrDone,
        EventKind::FirstChunk,
        EventKind::PlayoutStart,
        EventKind::FirstVoice,
    ] {
        assert!(rec.events.contains_key(&k), "{k:?} missing");
    }
}

#[test]
fn a_confirmed_provisional_end_keeps_the_speculative_transcript() {
    let f = Fakes::new();
    let rec = first_live_turn(&f, |tx| async move {
        tx.send(provisional()).await.unwrap();
        tx.send(endpoint(true)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert!(rec.speculative_asr);
    assert_eq!(
        f.asr.calls.load(Ordering::SeqCst),
        1,
        "no second transcription"
    );
}

#[test]
fn a_retraction_drops_the_speculation_and_the_endpoint_transcribes_again() {
    let f = Fakes::new();
    let rec = first_live_turn(&f, |tx| async move {
        tx.send(provisional()).await.unwrap();
        tx.send(retracted(0)).await.unwrap();
        tx.send(endpoint(false)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert!(!rec.speculative_asr);
    assert_eq!(rec.retractions, 1);
    // The endpoint's transcription ran. The dropped speculation ran too, unless the worker
    // had not reached it when it was dropped: then it was skipped.
    let calls = f.asr.calls.load(Ordering::SeqCst);
    assert!((1..=2).contains(&calls), "{calls} transcriptions");
}

/// Speech later than 2 s after the commit is a barge-in, not the same turn going on.
#[test]
fn speech_during_the_reply_cancels_the_turn_and_abandons_the_llm_request() {
    let mut f = Fakes::new();
    f.llm.ttft = 4_000 * MS;
    let rec = first_live_turn(&f, |tx| async move {
        tx.send(endpoint(false)).await.unwrap();
        tokio::time::sleep(2_300 * MS).await;
        tx.send(vad(VadEvent::SpeechStart { at: clock::now() }))
            .await
            .unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Interrupted);
    let i = rec.interrupted.as_ref().expect("interruption recorded");
    assert_eq!(i.during, Stage::Llm);
    assert!(i.llm_aborted);
    assert_eq!(
        f.llm.abandoned.load(Ordering::SeqCst),
        1,
        "the request was dropped"
    );
    assert!(f.tts.spoken.lock().unwrap().is_empty(), "nothing was said");
    assert_eq!(rec.events.get(&EventKind::PlayoutStart), None);
    assert_eq!(rec.resumed_after_ms, None, "too late to be the same turn");
    assert!(rec.reply_pauses.is_empty(), "cancelled, not paused");
}

/// A barge-in over a playing reply, 2.2 s after the commit, with no words after it (a door,
/// a cough): the reply pauses, and plays on once the false-interruption window has passed.
/// Words would have replaced it (`words_late_in_a_playing_reply_follow_the_exchange_as_heard`).
#[test]
fn a_barge_in_with_no_words_pauses_a_playing_reply_and_it_plays_on() {
    let mut f = Fakes::new();
    // The reply still streams well past the barge-in (its last piece at about 3.6 s), so a
    // loaded machine that delivers the barge-in late still finds it playing.
    f.llm.itl = 900 * MS;
    let rec = first_live_turn(&f, |tx| async move {
        tx.send(endpoint(false)).await.unwrap();
        tokio::time::sleep(2_200 * MS).await;
        tx.send(SourceEvent::BargeIn {
            onset: clock::now(),
        })
        .await
        .unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(f.llm.abandoned.load(Ordering::SeqCst), 0);
    let [pause] = rec.reply_pauses[..] else {
        panic!("one pause: {:?}", rec.reply_pauses);
    };
    assert!(pause.resumed.is_some(), "played on");
    assert!(rec.reply_text.contains("day"), "{}", rec.reply_text);
}

#[test]
fn an_endpoint_during_a_turn_waits_for_it_and_the_conversation_carries_over() {
    let f = Fakes {
        asr: FakeAsr::new(&["What time is it?", "And tomorrow?"], 20 * MS),
        ..Fakes::new()
    };
    let p = f.pipeline(PipelineConfig::default());
    let sink = VirtualSink;
    let (tx, rx) = mpsc::channel(16);
    let recs = rt().block_on(async {
        let mut s = Session::new(&p, &sink, rx, SessionOptions::default(), TurnMeta::live);
        tx.send(endpoint(false)).await.unwrap();
        tx.send(endpoint(false)).await.unwrap();
        vec![
            s.next_turn().await.unwrap().unwrap(),
            s.next_turn().await.unwrap().unwrap(),
        ]
    });
    assert_eq!(recs[0].turn, "turn-1");
    assert_eq!(recs[1].turn, "turn-2");
    assert_eq!(recs[1].transcript, "And tomorrow?");
    assert!(recs.iter().all(|r| r.outcome == TurnOutcome::Ok));
    let reqs = f.llm.requests.lock().unwrap().clone();
    let second: Vec<&Message> = reqs[1].messages.iter().collect();
    let n = second.len();
    assert_eq!(second[n - 3].content, "What time is it?");
    assert_eq!(second[n - 2].content, "It is noon. Have a nice day.");
    assert_eq!(second[n - 1].content, "And tomorrow?");
}

#[test]
fn a_source_that_ends_without_an_endpoint_gives_one_failed_record_when_asked() {
    let f = Fakes::new();
    let p = f.pipeline(PipelineConfig::default());
    let sink = VirtualSink;
    let (tx, rx) = mpsc::channel(16);
    let opts = SessionOptions {
        record_empty_source: true,
        ..SessionOptions::default()
    };
    let meta = TurnMeta {
        scenario: "s".into(),
        turn: "t".into(),
        reference: Some("hello".into()),
        ..TurnMeta::default()
    };
    let (first, second) = rt().block_on(async {
        let mut s = Session::new(&p, &sink, rx, opts, move |_| meta.clone());
        tx.send(SourceEvent::Ended).await.unwrap();
        (s.next_turn().await.unwrap(), s.next_turn().await.unwrap())
    });
    let rec = first.expect("a record");
    assert_eq!(rec.outcome, TurnOutcome::Error);
    assert_eq!(
        rec.error.as_deref(),
        Some("the endpointer found no speech in the utterance")
    );
    assert_eq!((rec.scenario.as_str(), rec.turn.as_str()), ("s", "t"));
    assert!(second.is_none(), "then the session is over");
    assert_eq!(f.llm.requests.lock().unwrap().len(), 0);
}

/// An endpoint decided 10 s into the audio (speech 8–9.4 s), received at `received`.
fn endpoint_in_audio_time(received: Nanos) -> SourceEvent {
    SourceEvent::Vad {
        ev: VadEvent::Endpoint {
            speech_start: at(8_000),
            speech_end: at(9_400),
            at: at(10_000),
            audio: utterance(),
            confirms_provisional: false,
            turn_probability: None,
            forced: false,
        },
        received,
    }
}

#[test]
fn audio_time_is_anchored_at_the_endpoint_decision() {
    let f = Fakes::new();
    let p = f.pipeline(PipelineConfig::default());
    let sink = VirtualSink;
    let (tx, rx) = mpsc::channel(16);
    let opts = SessionOptions {
        clock: SourceClock::Audio,
        ..SessionOptions::default()
    };
    let rt = rt();
    let received = clock::now();
    let rec = rt.block_on(async {
        let mut s = Session::new(&p, &sink, rx, opts, TurnMeta::live);
        tx.send(SourceEvent::Truth(at(9_350))).await.unwrap();
        tx.send(endpoint_in_audio_time(received)).await.unwrap();
        s.next_turn().await.unwrap().unwrap()
    });
    let ev = |k| rec.events.get(&k).expect("stamped").0;
    assert_eq!(ev(EventKind::Endpoint), received.0);
    // The truth (9.35 s) is 650 ms before the decision (10 s) in audio time.
    assert_eq!(received.0 - ev(EventKind::SpeechEnd), 650_000_000);
    assert_eq!(received.0 - ev(EventKind::SpeechStart), 2_000_000_000);
    assert_eq!(rec.vad_speech_end_error_ms, Some(50.0));
}

/// The end of a replayed turn comes as three messages: the truth, the verdict and the
/// endpoint. The source's thread and the session's select may meet them in any order, and
/// each is matched by time, never by arrival, so every order gives the same record.
#[test]
fn the_truth_the_verdict_and_the_endpoint_give_the_same_record_in_every_order() {
    use voxlat_core::cutoff::Verdict;
    use voxlat_core::segments::Segment;
    let f = Fakes::new();
    let p = f.pipeline(PipelineConfig::default());
    let sink = VirtualSink;
    let opts = SessionOptions {
        clock: SourceClock::Audio,
        ..SessionOptions::default()
    };
    let rt = rt();
    let verdict = Verdict::AfterEnd { latency_ms: 650.0 };
    let orders: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    let mut seen = Vec::new();
    for order in orders {
        let received = clock::now();
        let mut parts = [
            Some(SourceEvent::Truth(at(9_350))),
            Some(SourceEvent::Judged {
                at: at(10_000),
                verdict,
            }),
            Some(endpoint_in_audio_time(received)),
        ];
        let (tx, rx) = mpsc::channel(16);
        for i in order {
            tx.try_send(parts[i].take().expect("each part once"))
                .expect("room in the channel");
        }
        let rec = rt.block_on(async {
            let mut s = Session::new(&p, &sink, rx, opts, TurnMeta::live);
            s.next_turn().await.unwrap().unwrap()
        });
        let ev = |k| rec.events.get(&k).expect("stamped").0;
        let endpointing = rec
            .breakdown
            .as_ref()
            .and_then(|b| b.segment_ns(Segment::Endpointing));
        let endpointer_from = rec
            .busy
            .iter()
            .find(|b| b.stage == Stage::Endpointer)
            .map(|b| received.0 - b.from.0);
        seen.push((
            order,
            received.0 - ev(EventKind::SpeechEnd),
            rec.vad_speech_end_error_ms,
            rec.cutoff,
            endpointing,
            endpointer_from,
        ));
    }
    for s in &seen {
        assert_eq!(
            (s.1, s.2, s.3, s.4, s.5),
            (
                650_000_000,
                Some(50.0),
                Some(verdict),
                Some(650_000_000),
                Some(650_000_000)
            ),
            "order {:?}",
            s.0
        );
    }
}

#[test]
fn a_silent_session_gives_up_after_its_idle_timeout() {
    let f = Fakes::new();
    let p = f.pipeline(PipelineConfig::default());
    let sink = VirtualSink;
    let (_tx, rx) = mpsc::channel(16);
    let opts = live(SessionOptions {
        idle_timeout: Some(50 * MS),
        ..SessionOptions::default()
    });
    let r = rt().block_on(async {
        let mut s = Session::new(&p, &sink, rx, opts, TurnMeta::live);
        s.next_turn().await
    });
    assert!(matches!(r, Err(SessionError::Idle { .. })), "{r:?}");
}

#[test]
fn a_stopped_microphone_ends_the_session_naming_the_device() {
    let f = Fakes::new();
    let p = f.pipeline(PipelineConfig::default());
    let sink = VirtualSink;
    let (tx, rx) = mpsc::channel(16);
    tx.try_send(SourceEvent::Failed(SourceError::DeviceStopped {
        device: "USB mic".into(),
    }))
    .expect("room in the channel");
    let opts = live(SessionOptions::default());
    let r = rt().block_on(async {
        let mut s = Session::new(&p, &sink, rx, opts, TurnMeta::live);
        s.next_turn().await
    });
    match r {
        Err(e @ SessionError::Source(SourceError::DeviceStopped { .. })) => {
            assert_eq!(e.to_string(), "the input device USB mic stopped");
        }
        other => panic!("{other:?}"),
    }
}

/// The real "5" clip, and fakes whose ASR hears it right.
fn digit_five() -> (LoadedTurn, Fakes) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let scenario = Scenario::load(&dir.join("short-commands.toml")).expect("scenario");
    let spec = scenario.turns.iter().find(|t| t.id == "digit-5").unwrap();
    let turn = LoadedTurn::load(&scenario, spec).expect("clip");
    let f = Fakes {
        asr: FakeAsr::new(&["Five."], 20 * MS),
        ..Fakes::new()
    };
    (turn, f)
}

/// The one record a replayed utterance gave.
fn one(mut recs: Vec<TurnRecord>) -> TurnRecord {
    assert_eq!(recs.len(), 1, "{recs:#?}");
    recs.remove(0)
}

/// A real recording through the real endpointer (webrtc-vad), with the stages faked: the
/// replay path end to end, in audio time. The speech end is compared with the scenario's
/// annotation, made by a different method (scripts/annotate-reference.py).
#[test]
fn a_recorded_utterance_replays_through_the_real_endpointer() {
    let (turn, f) = digit_five();
    let p = f.pipeline(PipelineConfig {
        fast: true,
        ..PipelineConfig::default()
    });
    let mut history = Vec::new();
    let rt = rt();
    let rec = one(rt.block_on(p.replay_turn(&turn, &mut history, 0, false, None)));
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(
        (rec.scenario.as_str(), rec.turn.as_str()),
        ("short-commands", "digit-5")
    );
    assert_eq!(rec.wer, Some(0.0));
    assert!(rec.speech_end_annotated);
    let err = rec
        .vad_speech_end_error_ms
        .expect("compared with the annotation");
    assert!(err.abs() <= 40.0, "speech end off by {err} ms");
    let b = rec.breakdown.as_ref().unwrap();
    let endpointing = b.segments.iter().find(|s| s.name == "endpointing").unwrap();
    // The 600 ms hangover runs from the refined end of speech.
    let endpointing_ms = endpointing.ns as f64 / 1e6;
    assert!(
        (580.0..=660.0).contains(&endpointing_ms),
        "{endpointing_ms}"
    );
    assert_eq!(history.len(), 2, "the exchange is kept for a conversation");
}

/// `--turn-model cues` through the real endpointer, in audio time: the stop waits the base
/// (the 600 ms hangover) until the speculative transcript is known, then the base scaled by
/// its tail. A scripted transcript that ends open ("and") holds three times as long; a
/// question half as long.
#[test]
fn the_cues_rule_waits_by_how_the_speculative_transcript_ends() {
    let endpointing_ms = |said: &'static str| {
        let (turn, f) = digit_five();
        let f = Fakes {
            asr: FakeAsr::new(&[said], 20 * MS),
            ..f
        };
        let p = f.pipeline(PipelineConfig {
            fast: true,
            turn_cues: true,
            ..PipelineConfig::default()
        });
        let rec = one(rt().block_on(p.replay_turn(&turn, &mut Vec::new(), 0, false, None)));
        assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
        let b = rec.breakdown.as_ref().unwrap();
        let e = b.segments.iter().find(|s| s.name == "endpointing").unwrap();
        e.ns as f64 / 1e6
    };
    let open = endpointing_ms("Five, and");
    assert!((1780.0..=1880.0).contains(&open), "{open}");
    let asked = endpointing_ms("Five?");
    assert!((280.0..=380.0).contains(&asked), "{asked}");
}

/// Unpaced, the speech is fed at once but the pause after it in real time: the speculative
/// reply (ASR 20 ms, TTFT 30 ms, TTS 10 ms here) has the pause it has live and is ready at the
/// commit. Fed unpaced too, the pause passed in microseconds and every reply started at the
/// commit.
#[test]
fn an_unpaced_replay_still_gives_the_speculative_reply_its_pause() {
    let (turn, f) = digit_five();
    let p = f.pipeline(PipelineConfig {
        fast: true,
        speculative_reply: true,
        ..PipelineConfig::default()
    });
    let rec = one(rt().block_on(p.replay_turn(&turn, &mut Vec::new(), 0, false, None)));
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    let spec = rec.speculative_reply.as_ref().expect("a speculative reply");
    assert!(spec.committed, "{spec:?}");
    assert!(
        spec.before_commit_ms
            .contains_key(&EventKind::TtsFirstAudio),
        "first audio ready before the commit: {spec:?}"
    );
}

/// An endpointer that cannot start (webrtc-vad has modes 0–3) fails the turn with the
/// endpointer's own reason, instead of hanging or panicking, and keeps no exchange.
#[test]
fn an_endpointer_that_cannot_start_fails_the_turn_with_its_reason() {
    let (turn, f) = digit_five();
    let mut cfg = PipelineConfig {
        fast: true,
        ..PipelineConfig::default()
    };
    cfg.endpointer.mode = 9;
    let p = f.pipeline(cfg);
    let mut history = Vec::new();
    let rec = one(rt().block_on(p.replay_turn(&turn, &mut history, 0, false, None)));
    assert_eq!(rec.outcome, TurnOutcome::Error);
    let error = rec.error.unwrap_or_default();
    assert!(error.contains("VAD mode 9 is not 0-3"), "{error}");
    assert!(history.is_empty());
}

/// The same clip with a turn model that is sure the turn is over: the pipeline's endpointer
/// consults it, and the turn ends at its first score (200 ms of silence), not the hangover.
#[test]
fn a_confident_turn_model_ends_a_replayed_turn_before_the_hangover() {
    let (turn, f) = digit_five();
    let scores = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = scores.clone();
    let model: voxlat_vad::SharedScorer = std::sync::Arc::new(std::sync::Mutex::new(
        voxlat_vad::turn::ScriptedScorer(move |_: &[f32]| {
            counted.fetch_add(1, Ordering::Relaxed);
            0.97
        }),
    ));
    let p = f
        .pipeline(PipelineConfig {
            fast: true,
            ..PipelineConfig::default()
        })
        .with_turn_model(model);
    let rt = rt();
    let rec = one(rt.block_on(p.replay_turn(&turn, &mut Vec::new(), 0, false, None)));
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    let b = rec.breakdown.as_ref().unwrap();
    let endpointing = b.segments.iter().find(|s| s.name == "endpointing").unwrap();
    let endpointing_ms = endpointing.ns as f64 / 1e6;
    assert!(
        (180.0..=260.0).contains(&endpointing_ms),
        "{endpointing_ms}"
    );
    assert_eq!(
        scores.load(Ordering::Relaxed),
        1,
        "one score decided the turn"
    );
}

/// Counts the replies that reached the listener with audio, and notes when each reply
/// opened the output (live, that is when the speaker gates the microphone).
#[derive(Clone, Default)]
struct CountingSink(
    std::sync::Arc<std::sync::atomic::AtomicU32>,
    std::sync::Arc<std::sync::Mutex<Vec<Nanos>>>,
);

impl voxlat_pipeline::Output for CountingSink {
    fn play(
        &self,
        tl: std::sync::Arc<voxlat_core::Timeline>,
        audio: mpsc::UnboundedReceiver<voxlat_tts::stream::ChunkAudio>,
        rate: u32,
        steer: voxlat_pipeline::output::Steer,
    ) -> voxlat_pipeline::stages::BoxFuture<'static, voxlat_pipeline::output::Played> {
        let inner = VirtualSink.play(tl, audio, rate, steer);
        let heard = self.0.clone();
        let opened = self.1.clone();
        Box::pin(async move {
            opened.lock().unwrap().push(clock::now());
            let p = inner.await;
            if !p.samples.is_empty() {
                heard.fetch_add(1, Ordering::SeqCst);
            }
            p
        })
    }
}

/// A live session that speculates on replies; returns the first turn and the sink.
fn first_speculating_turn<U, Fut>(f: &Fakes, user: U) -> (TurnRecord, CountingSink)
where
    U: FnOnce(mpsc::Sender<SourceEvent>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let p = f.pipeline(PipelineConfig {
        speculative_reply: true,
        ..PipelineConfig::default()
    });
    let sink = CountingSink::default();
    let rec = first_turn(&p, &sink, user);
    (rec, sink)
}

#[test]
fn a_speculative_reply_is_held_until_the_endpoint_and_counted_from_it() {
    let f = Fakes::new();
    let (rec, sink) = first_speculating_turn(&f, |tx| async move {
        tx.send(provisional()).await.unwrap();
        // ASR 20 ms, TTFT 30 ms, TTS 10 ms: the reply is ready long before the endpoint.
        tokio::time::sleep(300 * MS).await;
        tx.send(endpoint(true)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    let spec = rec.speculative_reply.as_ref().expect("a speculative reply");
    assert!(spec.committed);
    assert!(spec.compute_ms > 0.0);
    // The work really happened before the commit, and says how early.
    let early = spec.before_commit_ms[&EventKind::TtsFirstAudio];
    assert!((150.0..=300.0).contains(&early), "{early}");
    let agg = voxlat_pipeline::Aggregate::from_turns(std::slice::from_ref(&rec));
    assert_eq!(agg.ready_at_commit, 1, "counted as ready at the commit");
    let endpoint = rec.events[&EventKind::Endpoint];
    assert!(
        rec.events[&EventKind::PlayoutQueued] >= endpoint,
        "held until the commit"
    );
    let b = rec.breakdown.as_ref().expect("a breakdown");
    use voxlat_core::segments::Segment;
    for s in [
        Segment::Asr,
        Segment::LlmTtft,
        Segment::LlmFirstChunk,
        Segment::TtsFirstAudio,
    ] {
        assert_eq!(b.segment_ns(s), Some(0), "{s} was done before the commit");
    }
    assert_eq!(b.segments.iter().map(|s| s.ns).sum::<i64>(), b.total_ns);
    assert_eq!(f.llm.requests.lock().unwrap().len(), 1);
    assert_eq!(f.asr.calls.load(Ordering::SeqCst), 1, "one transcription");
    assert_eq!(sink.0.load(Ordering::SeqCst), 1);
    assert_eq!(rec.speculation_misses, 0);
    // Live, an output opened at the provisional end would gate the microphone, and the
    // endpointer would never hear the silence that commits the turn.
    let opened = sink.1.lock().unwrap().clone();
    assert_eq!(opened.len(), 1);
    assert!(
        opened[0] >= endpoint,
        "the output opened {} ms before the endpoint",
        (endpoint.0 - opened[0].0) as f64 / 1e6
    );
}

#[test]
fn a_speculative_reply_is_cancelled_when_the_user_resumes() {
    let mut f = Fakes::new();
    f.llm.ttft = 1_000 * MS;
    let (rec, sink) = first_speculating_turn(&f, |tx| async move {
        tx.send(provisional()).await.unwrap();
        // The speculative request is waiting for its first token when the user goes on.
        tokio::time::sleep(200 * MS).await;
        tx.send(retracted(200)).await.unwrap();
        tokio::time::sleep(300 * MS).await;
        // Then the turn ends by a forced endpoint (no provisional stands).
        tx.send(endpoint(false)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(rec.speculation_misses, 1);
    assert!(rec.speculation_wasted_ms > 0.0);
    assert!(
        rec.speculative_reply.is_none(),
        "the reply that played was not speculative"
    );
    assert_eq!(
        f.llm.abandoned.load(Ordering::SeqCst),
        1,
        "the server saw the speculative request's client leave"
    );
    assert_eq!(f.llm.requests.lock().unwrap().len(), 2);
    assert_eq!(
        sink.0.load(Ordering::SeqCst),
        1,
        "only the committed reply was heard"
    );
    assert_eq!(
        sink.1.lock().unwrap().len(),
        1,
        "the cancelled reply never opened the output"
    );
}

/// A reply with no boundary in it (a digit string) starts with a first chunk cut at a word
/// before the pipeline's cap, not after the whole generation.
#[test]
fn the_first_chunk_is_cut_at_the_pipelines_cap() {
    let mut f = Fakes::new();
    f.llm = FakeLlm::new(
        &[
            "one two ",
            "three four ",
            "five six ",
            "seven eight ",
            "nine ten",
        ],
        30 * MS,
        20 * MS,
    );
    let p = f.pipeline(PipelineConfig {
        first_chunk_max_chars: 12,
        ..PipelineConfig::default()
    });
    let sink = VirtualSink;
    let (tx, rx) = mpsc::channel(16);
    let rec = rt().block_on(async {
        let mut s = Session::new(&p, &sink, rx, SessionOptions::default(), TurnMeta::live);
        tx.send(endpoint(false)).await.unwrap();
        s.next_turn().await.unwrap().unwrap()
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    let first = rec.chunks.first().expect("chunks");
    assert!(first.chars <= 12, "first chunk of {} chars", first.chars);
    assert!(rec.chunks.len() >= 2, "the rest follows");
    let spoken = f.tts.spoken.lock().unwrap();
    assert_eq!(spoken[0], "one two");
}

/// The user resumes while a held reply's first chunk is with Piper: the chunk's synthesis
/// runs on after the reply is dropped, and is waste all the same.
#[test]
fn a_cancelled_held_replys_piper_time_is_in_the_waste() {
    let mut f = Fakes::new();
    f.tts.compute = 300 * MS;
    let (rec, sink) = first_speculating_turn(&f, |tx| async move {
        tx.send(provisional()).await.unwrap();
        // ASR 20 ms and the whole reply streamed within 100 ms: the first chunk is being
        // synthesized when the user goes on.
        tokio::time::sleep(150 * MS).await;
        tx.send(retracted(150)).await.unwrap();
        tx.send(endpoint(false)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(rec.speculation_misses, 1);
    assert_eq!(
        sink.0.load(Ordering::SeqCst),
        1,
        "the held reply was never heard"
    );
    // A lower bound: Piper's 300 ms on the chunk it had started (queued ones are skipped).
    assert!(
        rec.speculation_wasted_ms >= 300.0,
        "{} ms wasted",
        rec.speculation_wasted_ms
    );
}

/// Whisper is still decoding the provisional end when the user goes on: the held reply is
/// dropped, but the decode runs to its end, and the turn's transcription decodes only the
/// audio after that pause and goes on from its words. None are lost, the LLM is asked once
/// with all of them, and the first decode's time is the turn's, not waste.
#[test]
fn the_words_before_a_retracted_pause_lead_the_turn() {
    let mut f = Fakes::new();
    f.asr = FakeAsr::new(&["What's the weather", "in Paris?"], 300 * MS);
    let calls = f.asr.calls.clone();
    let (rec, _) = first_speculating_turn(&f, |tx| async move {
        // Phrases long enough to be decoded apart.
        tx.send(provisional_of(vec![0.1; 5 * 16_000]))
            .await
            .unwrap();
        tokio::time::sleep(100 * MS).await;
        tx.send(retracted(100)).await.unwrap();
        tokio::time::sleep(500 * MS).await;
        // The same utterance, five seconds longer.
        tx.send(endpoint_of(vec![0.1; 10 * 16_000])).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(rec.transcript, "What's the weather in Paris?");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "each part decoded once");
    let reqs = f.llm.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1, "only the turn asked");
    let last = reqs[0].messages.last().unwrap();
    assert_eq!(last.content, "What's the weather in Paris?");
    assert_eq!(rec.speculation_misses, 1, "the held reply was dropped");
    assert!(
        rec.asr_compute_ms.unwrap_or_default() >= 600.0,
        "both decodes are the turn's: {:?} ms",
        rec.asr_compute_ms
    );
    assert!(
        rec.speculation_wasted_ms < 300.0,
        "the kept decode is no waste: {} ms wasted",
        rec.speculation_wasted_ms
    );
}

/// Speculative ASR without a speculative reply, under `cfg`: a provisional end whose decode
/// takes 200 ms, then 50 ms later a retraction (if `retract`) and an endpoint that does not
/// confirm it. The dropped decode must stop midway, and the part it ran is waste, though no
/// reply was discarded.
fn a_dropped_decode_stops_as_waste(cfg: PipelineConfig, retract: bool) {
    let mut f = Fakes::new();
    f.asr.compute = 200 * MS;
    let abandoned = f.asr.abandoned.clone();
    let rec = first_turn(&f.pipeline(cfg), &VirtualSink, |tx| async move {
        tx.send(provisional()).await.unwrap();
        tokio::time::sleep(50 * MS).await;
        if retract {
            tx.send(retracted(50)).await.unwrap();
        }
        tx.send(endpoint(false)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert!(!rec.speculative_asr);
    assert_eq!(rec.speculation_misses, 0, "no reply was speculated");
    assert_eq!(abandoned.load(Ordering::SeqCst), 1, "the decode stopped");
    assert!(
        rec.speculation_wasted_ms > 0.0,
        "{} ms wasted",
        rec.speculation_wasted_ms
    );
}

/// An endpoint with other audio than the provisional end's (a forced end) drops its
/// transcription.
#[test]
fn a_dropped_speculative_transcription_is_waste() {
    a_dropped_decode_stops_as_waste(PipelineConfig::default(), false);
}

/// Decoding whole turns (`whole_turn_asr`), a retracted provisional end's transcription is
/// not gone on from.
#[test]
fn decoding_whole_turns_drops_a_retracted_transcription() {
    a_dropped_decode_stops_as_waste(
        PipelineConfig {
            whole_turn_asr: true,
            ..PipelineConfig::default()
        },
        true,
    );
}

/// A session closed (Ctrl-C) after a discarded speculation and before the next endpoint:
/// the miss is on a record of the unfinished utterance rather than lost.
#[test]
fn a_miss_after_the_last_turn_is_reported_when_the_session_closes() {
    let f = Fakes::new();
    let p = f.pipeline(PipelineConfig {
        speculative_reply: true,
        ..PipelineConfig::default()
    });
    let sink = VirtualSink;
    let (tx, rx) = mpsc::channel(16);
    let recs = rt().block_on(async {
        let mut s = Session::new(&p, &sink, rx, SessionOptions::default(), TurnMeta::live);
        tx.send(endpoint(false)).await.unwrap();
        let first = s.next_turn().await.unwrap().unwrap();
        assert_eq!(first.outcome, TurnOutcome::Ok, "{:?}", first.error);
        tx.send(provisional()).await.unwrap();
        // The held reply gets going; then the user resumes and is still talking at Ctrl-C.
        let waited = tokio::time::timeout(200 * MS, s.next_turn()).await;
        assert!(waited.is_err(), "no turn ended: {waited:?}");
        tx.send(retracted(200)).await.unwrap();
        let waited = tokio::time::timeout(100 * MS, s.next_turn()).await;
        assert!(waited.is_err(), "the miss is no turn: {waited:?}");
        s.close().await
    });
    assert_eq!(recs.len(), 1, "{recs:?}");
    let rec = &recs[0];
    assert_eq!(rec.turn, "turn-2");
    assert_eq!(rec.outcome, TurnOutcome::Error);
    assert_eq!(
        rec.error.as_deref(),
        Some("the session ended before the utterance's endpoint")
    );
    assert_eq!(rec.speculation_misses, 1);
    // ASR 20 ms and the LLM's 30 ms to its first token, at least.
    assert!(
        rec.speculation_wasted_ms >= 50.0,
        "{}",
        rec.speculation_wasted_ms
    );
}

/// Closing mid-turn (Ctrl-C while a reply streams): the turn already shown as started is
/// in the results, as an interrupted turn.
#[test]
fn closing_mid_turn_returns_the_turn_in_flight() {
    let mut f = Fakes::new();
    f.llm.ttft = 2_000 * MS;
    let p = f.pipeline(PipelineConfig::default());
    let sink = VirtualSink;
    let (tx, rx) = mpsc::channel(16);
    let recs = rt().block_on(async {
        let mut s = Session::new(&p, &sink, rx, SessionOptions::default(), TurnMeta::live);
        tx.send(endpoint(false)).await.unwrap();
        let waited = tokio::time::timeout(200 * MS, s.next_turn()).await;
        assert!(waited.is_err(), "the reply is still coming: {waited:?}");
        assert_eq!(s.turns_started(), 1);
        s.close().await
    });
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0].turn, "turn-1");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    assert_eq!(f.llm.abandoned.load(Ordering::SeqCst), 1);
}

/// Two real prompts joined by 450 ms of silence, with its pause labelled
/// (scenarios/pauses.toml).
fn pause_450ms() -> LoadedTurn {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let scenario = Scenario::load(&dir.join("pauses.toml")).expect("scenario");
    let spec = scenario
        .turns
        .iter()
        .find(|t| t.id == "pause-450ms")
        .unwrap();
    LoadedTurn::load(&scenario, spec).expect("clip")
}

/// The real 450 ms pause clip through the real endpointer: with a 300 ms hangover the commit
/// falls inside the labelled pause (scenarios/pauses.toml, annotated by a rule that shares no
/// code with the endpointer), and the record says so; with 900 ms it comes after the end.
#[test]
fn a_replayed_commit_is_judged_against_the_labelled_pauses() {
    let turn = pause_450ms();
    let rt = rt();
    let verdict = |hangover_ms: u32| {
        let mut cfg = PipelineConfig {
            fast: true,
            ..PipelineConfig::default()
        };
        cfg.endpointer.hangover_ms = hangover_ms;
        let p = Fakes::new().pipeline(cfg);
        let rec = one(rt.block_on(p.replay_turn(&turn, &mut Vec::new(), 0, false, None)));
        rec.cutoff.expect("an annotated turn is judged")
    };
    assert_eq!(
        verdict(300),
        voxlat_core::cutoff::Verdict::InPause { pause: 0 }
    );
    match verdict(900) {
        voxlat_core::cutoff::Verdict::AfterEnd { latency_ms } => {
            // The hangover and the VAD's lag, in audio time (the verdict is judged on the
            // sample the commit came at, not on the clock).
            assert!((900.0..=960.0).contains(&latency_ms), "{latency_ms}")
        }
        other => panic!("{other:?}"),
    }
}

/// The same clip replayed in real time with the commit inside its pause: the rest of the
/// clip follows, as a live user goes on, so the reply pauses and gives way, and the LLM is
/// asked the rest after the first part and the reply as far as it was heard. The utterance
/// counts as cut off once, is scored on both parts, and its last turn is timed from the end
/// of the whole.
#[test]
fn a_replayed_commit_inside_a_pause_is_recovered_and_answered_as_heard() {
    let turn = pause_450ms();
    let mut f = Fakes::new();
    // A reply long enough to be still playing when the rest comes.
    f.tts.per_char = 100 * MS;
    let requests = f.llm.requests.clone();
    let mut cfg = PipelineConfig::default();
    cfg.endpointer.hangover_ms = 300;
    let p = f.pipeline(cfg);
    let recs = rt().block_on(p.replay_turn(&turn, &mut Vec::new(), 0, false, None));
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    assert_eq!(
        recs[0].cutoff,
        Some(voxlat_core::cutoff::Verdict::InPause { pause: 0 })
    );
    assert_eq!(recs[1].outcome, TurnOutcome::Ok, "{:?}", recs[1].error);
    assert!(matches!(
        recs[1].cutoff,
        Some(voxlat_core::cutoff::Verdict::AfterEnd { .. })
    ));
    assert_eq!(recs[1].merged_words, None, "the first reply was audible");
    let first = recs[0].transcript.clone();
    assert!(!first.is_empty());
    let asked = last_user_messages(&requests);
    assert_eq!(
        asked.last().map(String::as_str),
        Some(recs[1].transcript.as_str())
    );
    assert_heard_between(&requests, &first, &recs[1].transcript);
    // Scored on both parts, not on the words after the pause alone.
    let said = format!("{first} {}", recs[1].transcript);
    assert_eq!(
        recs[1].wer,
        Some(voxlat_core::text::wer(&turn.spec.transcript, &said))
    );
    let count = voxlat_pipeline::aggregate::CutoffCount::of(recs.iter()).expect("judged");
    assert_eq!((count.judged, count.cut_off), (1, 1));
    // Timed from the true end of the whole utterance, not of its first part.
    assert!(recs[1].speech_end_annotated);
    let err = recs[1]
        .vad_speech_end_error_ms
        .expect("the estimate's error");
    assert!(err.abs() <= 60.0, "{err} ms");
}

/// Every record of a live session on `f`'s pipeline while `user` plays the source (it ends
/// the session by returning, which drops the sender).
fn live_turns<U, Fut>(f: &Fakes, user: U) -> Vec<TurnRecord>
where
    U: FnOnce(mpsc::Sender<SourceEvent>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    live_turns_with(f, PipelineConfig::default(), user)
}

fn live_turns_with<U, Fut>(f: &Fakes, cfg: PipelineConfig, user: U) -> Vec<TurnRecord>
where
    U: FnOnce(mpsc::Sender<SourceEvent>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    turns_with(f, cfg, SessionOptions::default(), user)
}

fn turns_with<U, Fut>(
    f: &Fakes,
    cfg: PipelineConfig,
    opts: SessionOptions,
    user: U,
) -> Vec<TurnRecord>
where
    U: FnOnce(mpsc::Sender<SourceEvent>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let p = f.pipeline(cfg);
    let (tx, rx) = mpsc::channel(16);
    rt().block_on(async {
        let mut s = Session::new(&p, &RealTimeSink, rx, opts, TurnMeta::live);
        let user = tokio::spawn(user(tx));
        let mut out = Vec::new();
        while let Some(rec) = s.next_turn().await.expect("no session error") {
            out.push(rec);
        }
        user.await.expect("the scripted user");
        out
    })
}

/// The last message of every request the scripted LLM was sent: what the user said.
fn last_user_messages(requests: &std::sync::Mutex<Vec<voxlat_llm::ChatRequest>>) -> Vec<String> {
    requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.messages.last().unwrap().content.clone())
        .collect()
}

/// A live session where the user is committed, speaks again `resume_ms` later for
/// `speech_ms` (`audio`: empty when the utterance cannot be transcribed), is committed again
/// 100 ms after that, and the session runs `then_ms` more; every record.
fn went_on_after_commit(
    f: &Fakes,
    resume_ms: u32,
    speech_ms: u32,
    audio: Vec<f32>,
    then_ms: u32,
) -> Vec<TurnRecord> {
    let opts = SessionOptions::default();
    went_on_after_commit_with(f, opts, resume_ms, speech_ms, audio, then_ms)
}

fn went_on_after_commit_with(
    f: &Fakes,
    opts: SessionOptions,
    resume_ms: u32,
    speech_ms: u32,
    audio: Vec<f32>,
    then_ms: u32,
) -> Vec<TurnRecord> {
    turns_with(f, PipelineConfig::default(), opts, move |tx| async move {
        tx.send(endpoint(false)).await.unwrap();
        tokio::time::sleep(resume_ms * MS).await;
        let start = clock::now();
        tx.send(vad(VadEvent::SpeechStart { at: start }))
            .await
            .unwrap();
        tokio::time::sleep((speech_ms + 100) * MS).await;
        let end = Nanos(start.0 + u64::from(speech_ms) * 1_000_000);
        let second = vad(VadEvent::Endpoint {
            speech_start: start,
            speech_end: end,
            at: clock::now(),
            audio,
            confirms_provisional: false,
            turn_probability: None,
            forced: false,
        });
        tx.send(second).await.unwrap();
        tokio::time::sleep(then_ms * MS).await;
    })
}

/// The user says "What's the weather", pauses long enough to be committed, and goes on
/// "in Paris?" `resume_ms` after the commit, while the turn is in ASR (`asr_ms` long) or the
/// reply is still being generated: the first turn gives way, and the LLM is asked once more
/// with the whole text, which the history keeps as one user message. The first turn's
/// record counts at least `wasted_ms` of compute thrown away.
fn merged_continuation(asr_ms: u32, resume_ms: u32, wasted_ms: f64) {
    let mut f = Fakes::new();
    f.asr = FakeAsr::new(&["What's the weather", "in Paris?"], asr_ms * MS);
    f.llm.ttft = 800 * MS;
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, resume_ms, 700, utterance(), 3_000);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    assert_eq!(recs[0].transcript, "What's the weather");
    assert!(
        recs[0].speculation_wasted_ms >= wasted_ms,
        "{} ms wasted",
        recs[0].speculation_wasted_ms
    );
    assert_eq!(recs[1].outcome, TurnOutcome::Ok, "{:?}", recs[1].error);
    assert_eq!(recs[1].merged_words.as_deref(), Some("What's the weather"));
    assert_eq!(recs[1].transcript, "in Paris?");
    let asked = last_user_messages(&requests);
    assert_eq!(
        asked.last().map(String::as_str),
        Some("What's the weather in Paris?"),
        "asked once more with the whole text: {asked:?}"
    );
}

#[test]
fn a_continuation_during_the_llm_is_one_merged_user_message() {
    // The first request was open from just after the commit until the words came (200 ms
    // + 800 ms of speech and its endpoint): that request's time is waste.
    merged_continuation(20, 200, 700.0);
}

#[test]
fn a_continuation_during_asr_keeps_the_first_words_too() {
    // Cut short in ASR: no reply was started, and its transcript is used.
    merged_continuation(400, 50, 0.0);
}

/// A cough after an early commit, while the reply is still being generated (the second
/// utterance has no words): the reply, held meanwhile, plays when the cough is known to be
/// one. The words are answered once, not lost and not asked again.
#[test]
fn a_cough_after_an_early_commit_keeps_the_words() {
    let mut f = Fakes::new();
    f.asr = FakeAsr::new(&["Set a timer", ""], 20 * MS);
    f.llm.ttft = 800 * MS;
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 200, 300, utterance(), 3_000);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    let rec = &recs[0];
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(last_user_messages(&requests), ["Set a timer"]);
    let pause = rec.reply_pauses.first().expect("the reply was held");
    assert!(pause.resumed.is_some(), "{pause:?}");
    assert_eq!(pause.overlap_ms, 0.0, "nothing was audible yet");
    // Held from the cough's onset, so the first audio came after the cough was decided.
    assert!(rec.events[&EventKind::PlayoutStart] >= pause.resumed.unwrap());
    let resumed = rec.resumed_after_ms.expect("labelled as resumed");
    assert!((200.0..2000.0).contains(&resumed), "{resumed}");
}

/// Fakes whose reply is long enough to be playing when the user goes on: 100 ms of audio per
/// character, so "It is noon." alone plays for 1.1 s.
fn long_reply(asr: &[&str]) -> Fakes {
    let mut f = Fakes::new();
    f.asr = FakeAsr::new(asr, 20 * MS);
    f.tts.per_char = 100 * MS;
    f
}

/// The user coughs 400 ms after the commit, while the reply plays: it goes silent at once,
/// and, the cough having no words, plays on from where it stopped. One turn, one request.
#[test]
fn a_cough_over_a_playing_reply_pauses_it_and_it_plays_on_from_where_it_stopped() {
    let f = long_reply(&["Set a timer", ""]);
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 400, 300, utterance(), 3_000);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    let rec = &recs[0];
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(last_user_messages(&requests), ["Set a timer"]);
    let [pause] = rec.reply_pauses[..] else {
        panic!("one pause: {:?}", rec.reply_pauses);
    };
    let resumed = pause.resumed.expect("played on");
    assert!((0.0..150.0).contains(&pause.overlap_ms), "{pause:?}");
    // What played, less the pause: all of the reply, once (nothing replayed, nothing skipped).
    let start = rec.events[&EventKind::PlayoutStart];
    let done = rec.events[&EventKind::PlayoutDone];
    assert!(start < pause.onset, "the reply was audible at the cough");
    let paused_ms = clock::ns_to_ms(resumed.signed_since(pause.silent));
    let played_ms = clock::ns_to_ms(done.signed_since(start)) - paused_ms - rec.underrun_ms;
    assert!(
        (played_ms - rec.reply_audio_s * 1e3).abs() < 1.0,
        "{played_ms} ms played of {} s",
        rec.reply_audio_s
    );
}

/// The reply's second chunk comes from the LLM while the reply is paused.
fn second_chunk_while_paused(asr: &[&str]) -> Fakes {
    let mut f = long_reply(asr);
    // Tokens 150 ms apart: "It is noon." is made about 180 ms after the commit and
    // "Have a nice day." about 630 ms after it, 230 ms into the pause. The first chunk's
    // 2.2 s of audio leave 2 s to play on with at the pause.
    f.llm.itl = 150 * MS;
    f.tts.per_char = 200 * MS;
    f
}

fn times_spoken(f: &Fakes, chunk: &str) -> usize {
    f.tts
        .spoken
        .lock()
        .unwrap()
        .iter()
        .filter(|c| *c == chunk)
        .count()
}

/// Words while the reply is paused: its chunk that came during the pause is never
/// synthesized (the deciding transcription gets the cores); the merged reply speaks it.
#[test]
fn a_paused_reply_makes_no_more_audio_and_gives_way_without_it() {
    let f = second_chunk_while_paused(&["What's the weather", "in Paris?"]);
    let recs = went_on_after_commit(&f, 400, 700, utterance(), 3_000);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    assert_eq!(
        times_spoken(&f, "It is noon."),
        2,
        "each reply's first chunk"
    );
    assert_eq!(
        times_spoken(&f, "Have a nice day."),
        1,
        "the merged reply's only"
    );
}

/// A cough while the reply is paused: the chunk held back is made when it plays on, and
/// the whole reply plays, once.
#[test]
fn a_paused_reply_makes_its_held_back_chunk_when_it_plays_on() {
    let f = second_chunk_while_paused(&["Set a timer", ""]);
    let recs = went_on_after_commit(&f, 400, 300, utterance(), 3_000);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    let rec = &recs[0];
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert!(rec.reply_pauses.iter().all(|p| p.resumed.is_some()));
    assert_eq!(times_spoken(&f, "Have a nice day."), 1);
    // 27 characters at 200 ms each, with no gap.
    assert!(
        (rec.reply_audio_s - 5.4).abs() < 0.01,
        "{} s",
        rec.reply_audio_s
    );
    assert_eq!(rec.underruns, 0);
}

/// Paused near the end of its first chunk, a reply goes on making its next one, so that it
/// has audio to play on with.
#[test]
fn a_reply_paused_with_little_audio_left_makes_its_next_chunk() {
    let mut f = second_chunk_while_paused(&["What's the weather", "in Paris?"]);
    // 0.55 s of audio in the first chunk, 0.35 s of it left at the pause.
    f.tts.per_char = 50 * MS;
    let recs = went_on_after_commit(&f, 400, 700, utterance(), 3_000);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    assert_eq!(times_spoken(&f, "Have a nice day."), 2, "both replies'");
}

/// "Mm-hm" (300 ms of speech) over a playing reply: too short to go on from, so the reply
/// plays on, and the words are kept on the record rather than asked.
#[test]
fn a_backchannel_over_a_playing_reply_is_kept_and_the_reply_plays_on() {
    let f = long_reply(&["Set a timer", "Mm-hm."]);
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 400, 300, utterance(), 3_000);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Ok, "{:?}", recs[0].error);
    assert_eq!(recs[0].passed_over, ["Mm-hm."]);
    assert_eq!(last_user_messages(&requests), ["Set a timer"]);
    assert!(recs[0].reply_pauses.iter().all(|p| p.resumed.is_some()));
}

/// A cough 2.5 s into a playing reply, past the 2 s after the commit in which the user is
/// taken to be going on: the reply still pauses, and with no words it plays on. One turn.
#[test]
fn a_cough_late_in_a_playing_reply_pauses_it_and_it_plays_on() {
    let f = long_reply(&["Set a timer", ""]);
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 2_500, 300, utterance(), 4_000);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    let rec = &recs[0];
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    assert_eq!(last_user_messages(&requests), ["Set a timer"]);
    let [pause] = rec.reply_pauses[..] else {
        panic!("one pause: {:?}", rec.reply_pauses);
    };
    assert!(pause.resumed.is_some(), "played on");
}

/// Words 2.5 s into a playing reply: the reply stops, and the LLM is asked the new words
/// after the first question and the reply as far as it was heard.
#[test]
fn words_late_in_a_playing_reply_follow_the_exchange_as_heard() {
    let f = long_reply(&["Set a timer", "And one for the oven."]);
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 2_500, 700, utterance(), 4_000);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    assert_eq!(recs[1].outcome, TurnOutcome::Ok, "{:?}", recs[1].error);
    assert_eq!(recs[1].merged_words, None);
    let heard = assert_heard_between(&requests, "Set a timer", "And one for the oven.");
    assert!(
        heard.len() < "It is noon. Have a nice day.".len(),
        "the reply as heard: {heard:?}"
    );
}

/// "Okay, yeah" for 600 ms over a playing reply: long enough to count as going on by its
/// length alone, but every word is an acknowledgement, so the reply plays on and the LLM is
/// not asked again.
#[test]
fn a_long_backchannel_over_a_playing_reply_lets_it_play_on() {
    let f = long_reply(&["Set a timer", "Okay, yeah."]);
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 400, 600, utterance(), 3_000);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Ok, "{:?}", recs[0].error);
    assert_eq!(recs[0].passed_over, ["Okay, yeah."]);
    assert_eq!(last_user_messages(&requests), ["Set a timer"]);
    assert!(recs[0].reply_pauses.iter().all(|p| p.resumed.is_some()));
}

/// A last word after a pause, shorter than a backchannel's 500 ms ("… word word. Word."),
/// said before the reply is audible: Whisper heard it as speech and it is no
/// acknowledgement, so it joins the turn instead of being passed over, and the LLM is asked
/// again with it.
#[test]
fn a_short_last_word_before_the_reply_is_audible_joins_the_same_user_message() {
    let mut f = long_reply(&["Word another word", "Word."]);
    f.llm.ttft = 1_000 * MS;
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 20, 300, utterance(), 3_000);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    assert!(recs[0].passed_over.is_empty(), "{:?}", recs[0].passed_over);
    assert_eq!(recs[1].outcome, TurnOutcome::Ok, "{:?}", recs[1].error);
    assert_eq!(
        last_user_messages(&requests),
        ["Word another word", "Word another word Word."]
    );
}

/// The same word over a reply already playing: without echo cancellation Whisper may have
/// written the reply's own words, so only half a second of speech goes on from it, and the
/// word is kept on the record.
#[test]
fn a_short_word_over_a_playing_reply_is_passed_over() {
    let f = long_reply(&["Word another word", "Word."]);
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 400, 300, utterance(), 3_000);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0].passed_over, ["Word."]);
    assert_eq!(last_user_messages(&requests), ["Word another word"]);
}

/// The same word over a playing reply, from a source that cannot hear the reply (a replayed
/// recording): Whisper's words are the user's. The reply was audible, so the LLM is asked
/// them after the exchange as it was heard.
#[test]
fn a_short_word_over_a_reply_the_source_cannot_hear_is_asked_after_the_reply_as_heard() {
    let f = long_reply(&["Word another word", "Word."]);
    let requests = f.llm.requests.clone();
    let opts = SessionOptions {
        source_hears_output: false,
        ..SessionOptions::default()
    };
    let recs = went_on_after_commit_with(&f, opts, 400, 300, utterance(), 3_000);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert!(
        recs[0].events.contains_key(&EventKind::PlayoutStart),
        "the reply was playing when the word came"
    );
    assert!(recs[0].passed_over.is_empty(), "{:?}", recs[0].passed_over);
    assert_eq!(
        last_user_messages(&requests),
        ["Word another word", "Word."]
    );
    assert_heard_between(&requests, "Word another word", "Word.");
}

/// The last request's last three messages: `first` from the user, the reply as far as it
/// was heard (a non-empty prefix of the fakes' reply), then `then` from the user.
fn assert_heard_between(
    requests: &std::sync::Mutex<Vec<voxlat_llm::ChatRequest>>,
    first: &str,
    then: &str,
) -> String {
    let asked = requests.lock().unwrap().last().unwrap().messages.clone();
    let n = asked.len();
    assert!(n >= 4, "{asked:?}");
    let tail: Vec<(&str, &str)> = asked[n - 3..]
        .iter()
        .map(|m| (m.role.as_str(), m.content.as_str()))
        .collect();
    assert_eq!(tail[0], ("user", first), "{asked:?}");
    assert_eq!(tail[2], ("user", then), "{asked:?}");
    let (role, heard) = tail[1];
    assert_eq!(role, "assistant", "{asked:?}");
    assert!(
        !heard.is_empty() && "It is noon. Have a nice day.".starts_with(heard),
        "the reply as heard: {heard:?}"
    );
    heard.to_string()
}

/// 300 ms of a noise before the reply is audible, which Whisper wrote a word for believing
/// it heard no speech: the reply plays when the noise is decided, and the word is kept on
/// the record, not asked.
#[test]
fn a_word_whisper_wrote_for_a_noise_is_passed_over() {
    let noise = format!("{}minutes", voxlat_pipeline::fake::NO_SPEECH);
    let mut f = long_reply(&["Set a timer", &noise]);
    f.llm.ttft = 1_000 * MS;
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 20, 300, utterance(), 3_000);
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Ok, "{:?}", recs[0].error);
    assert_eq!(recs[0].passed_over, ["minutes"]);
    assert_eq!(last_user_messages(&requests), ["Set a timer"]);
}

/// The user goes on with words 400 ms after the commit, while the reply plays: it goes
/// silent and is dropped, and the LLM is asked the new words after the first ones and the
/// reply as far as it was heard. Nothing is lost, and nothing is asked twice.
#[test]
fn words_over_a_playing_reply_replace_it_and_follow_the_exchange_as_heard() {
    let f = long_reply(&["What's the weather", "in Paris?"]);
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 400, 700, utterance(), 3_000);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    let [pause] = recs[0].reply_pauses[..] else {
        panic!("one pause: {:?}", recs[0].reply_pauses);
    };
    assert_eq!(pause.resumed, None, "never played on");
    let i = recs[0].interrupted.as_ref().expect("an interruption");
    assert_eq!(i.during, Stage::Playout);
    assert_eq!(i.playback_stopped, Some(pause.silent));
    // The reply was heard in part and stays in the conversation: its compute is no waste.
    assert_eq!(recs[0].speculation_wasted_ms, 0.0);
    assert_eq!(recs[1].outcome, TurnOutcome::Ok, "{:?}", recs[1].error);
    assert_eq!(recs[1].merged_words, None);
    assert_eq!(
        last_user_messages(&requests),
        ["What's the weather", "in Paris?"]
    );
    assert_heard_between(&requests, "What's the weather", "in Paris?");
}

/// The user goes on with words over the playing reply, and pauses: the provisional end's
/// transcript already has their words, so the paused reply gives way there and a reply to
/// them (after the exchange as heard) is made during the pause, held, and ready when the
/// endpoint commits it. Without that the next turn waited for the LLM and Piper after its
/// endpoint.
#[test]
fn a_continuation_gets_its_reply_ready_at_its_endpoint() {
    let f = long_reply(&["What's the weather", "in Paris?"]);
    let requests = f.llm.requests.clone();
    let cfg = PipelineConfig {
        speculative_reply: true,
        ..PipelineConfig::default()
    };
    let recs = live_turns_with(&f, cfg, |tx| async move {
        tx.send(endpoint(false)).await.unwrap();
        tokio::time::sleep(400 * MS).await;
        let start = clock::now();
        tx.send(vad(VadEvent::SpeechStart { at: start }))
            .await
            .unwrap();
        // 700 ms of speech, and the provisional end 200 ms into the pause after it.
        tokio::time::sleep(900 * MS).await;
        tx.send(provisional()).await.unwrap();
        tokio::time::sleep(500 * MS).await;
        tx.send(endpoint(true)).await.unwrap();
        tokio::time::sleep(3_000 * MS).await;
    });
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    let merged = &recs[1];
    assert_eq!(merged.outcome, TurnOutcome::Ok, "{:?}", merged.error);
    assert_eq!(merged.merged_words, None, "the first reply was audible");
    assert_eq!(merged.transcript, "in Paris?");
    let spec = merged
        .speculative_reply
        .as_ref()
        .expect("a reply made during the pause");
    assert!(spec.committed, "{spec:?}");
    let early = spec.before_commit_ms[&EventKind::TtsFirstAudio];
    assert!(early > 0.0, "first audio {early} ms before the endpoint");
    assert_eq!(
        last_user_messages(&requests),
        ["What's the weather", "in Paris?"]
    );
    assert_heard_between(&requests, "What's the weather", "in Paris?");
    assert_eq!(
        f.asr.calls.load(Ordering::SeqCst),
        2,
        "no third transcription"
    );
}

/// The user goes on over the playing reply, and that utterance cannot be transcribed: what
/// they said is unknown, so the reply to the words that are known plays on at once, and the
/// failed utterance gets a record of its own that reports the error.
#[test]
fn an_utterance_that_fails_to_transcribe_over_a_paused_reply_lets_it_play_on() {
    let f = long_reply(&["What's the weather"]);
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 400, 700, Vec::new(), 4_000);
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Ok, "{:?}", recs[0].error);
    let [pause] = recs[0].reply_pauses[..] else {
        panic!("one pause: {:?}", recs[0].reply_pauses);
    };
    assert!(pause.resumed.is_some(), "played on: {pause:?}");
    assert_eq!(recs[1].outcome, TurnOutcome::Error);
    assert!(
        recs[1].error.as_deref().is_some_and(|e| e.contains("ASR")),
        "{:?}",
        recs[1].error
    );
    assert_eq!(last_user_messages(&requests), ["What's the weather"]);
}

/// Words cut short before their reply was heard are carried into the next utterance; when
/// that one cannot be transcribed, they are not lost with it, but answered on their own 2 s
/// later, as after a noise.
#[test]
fn carried_words_outlive_an_utterance_that_fails_to_transcribe() {
    let mut f = Fakes::new();
    f.asr = FakeAsr::new(&["Ask not what your country can do"], 20 * MS);
    f.llm.ttft = 3_000 * MS;
    let requests = f.llm.requests.clone();
    let recs = went_on_after_commit(&f, 2_200, 700, Vec::new(), 7_000);
    assert_eq!(recs.len(), 3, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    assert_eq!(recs[1].outcome, TurnOutcome::Error);
    assert_eq!(recs[2].outcome, TurnOutcome::Ok, "{:?}", recs[2].error);
    assert_eq!(
        recs[2].merged_words.as_deref(),
        Some("Ask not what your country can do")
    );
    assert_eq!(
        last_user_messages(&requests),
        vec!["Ask not what your country can do"; 2],
        "asked before the cut, and again after the failed utterance"
    );
}

/// A noise the barge-in gate takes for the user 300 ms after the commit, and no utterance:
/// the reply pauses, and plays on 2 s later (LiveKit's false interruption).
#[test]
fn a_noise_soon_after_the_commit_pauses_the_reply_and_it_plays_on_two_seconds_later() {
    let f = long_reply(&["Ask not what your country can do"]);
    let requests = f.llm.requests.clone();
    let recs = live_turns(&f, |tx| async move {
        tx.send(endpoint(false)).await.unwrap();
        tokio::time::sleep(300 * MS).await;
        tx.send(SourceEvent::BargeIn {
            onset: clock::now(),
        })
        .await
        .unwrap();
        tokio::time::sleep(4_000 * MS).await;
    });
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Ok, "{:?}", recs[0].error);
    assert_eq!(
        last_user_messages(&requests),
        ["Ask not what your country can do"]
    );
    let [pause] = recs[0].reply_pauses[..] else {
        panic!("one pause: {:?}", recs[0].reply_pauses);
    };
    let waited = clock::ns_to_ms(pause.resumed.expect("played on").signed_since(pause.onset));
    assert!(waited >= 1_999.0, "played on after {waited} ms");
}

/// The gate's first sign of the user 300 ms after the commit pauses the reply; when it dies
/// away with no barge-in and no speech start, the reply plays on at once, not after the 2 s
/// that a pause with no utterance waits.
#[test]
fn a_first_sign_of_the_user_that_dies_away_pauses_the_reply_only_while_it_lasts() {
    let f = long_reply(&["Set a timer"]);
    let requests = f.llm.requests.clone();
    let recs = live_turns(&f, |tx| async move {
        tx.send(endpoint(false)).await.unwrap();
        tokio::time::sleep(300 * MS).await;
        let onset = Some(clock::now());
        tx.send(SourceEvent::Overheard { onset }).await.unwrap();
        tokio::time::sleep(100 * MS).await;
        tx.send(SourceEvent::Overheard { onset: None })
            .await
            .unwrap();
        tokio::time::sleep(4_000 * MS).await;
    });
    assert_eq!(recs.len(), 1, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Ok, "{:?}", recs[0].error);
    assert_eq!(last_user_messages(&requests), ["Set a timer"]);
    let [pause] = recs[0].reply_pauses[..] else {
        panic!("one pause: {:?}", recs[0].reply_pauses);
    };
    let held = clock::ns_to_ms(pause.resumed.expect("played on").signed_since(pause.onset));
    assert!((100.0..1_000.0).contains(&held), "held {held} ms");
}

/// A noise more than 2 s after the commit cuts the turn short before its reply is heard (the
/// barge-in gate fires), and no utterance follows it: the words are not left waiting for the
/// next thing the user says. Two seconds after the cut they are answered on their own, once,
/// with the wait in the turn's `endpointing`. The source stays open throughout (the timer
/// decides, not its end).
#[test]
fn words_cut_short_by_a_noise_that_is_no_utterance_are_answered_after_two_seconds() {
    let mut f = Fakes::new();
    f.asr = FakeAsr::new(&["Ask not what your country can do"], 20 * MS);
    f.llm.ttft = 3_000 * MS;
    let requests = f.llm.requests.clone();
    let recs = live_turns(&f, |tx| async move {
        tx.send(endpoint(false)).await.unwrap();
        tokio::time::sleep(2_200 * MS).await;
        tx.send(SourceEvent::BargeIn {
            onset: clock::now(),
        })
        .await
        .unwrap();
        tokio::time::sleep(8_000 * MS).await;
    });
    assert_eq!(recs.len(), 2, "{recs:#?}");
    assert_eq!(recs[0].outcome, TurnOutcome::Interrupted);
    assert_eq!(recs[1].outcome, TurnOutcome::Ok, "{:?}", recs[1].error);
    assert_eq!(
        recs[1].merged_words.as_deref(),
        Some("Ask not what your country can do")
    );
    assert_eq!(recs[1].transcript, "");
    let asked = last_user_messages(&requests);
    assert_eq!(
        asked,
        vec!["Ask not what your country can do"; 2],
        "asked once before the cut and once after"
    );
    // The first turn's speech end, 600 ms before its endpoint; asked again 2 s after the cut
    // at 2.2 s, so endpointing is at least 4.8 s. Had only the source's end (10.2 s after the
    // endpoint) released the words, it would be over 10.8 s.
    let endpointing = recs[1]
        .breakdown
        .as_ref()
        .expect("a breakdown")
        .segment_ns(voxlat_core::segments::Segment::Endpointing)
        .expect("endpointing") as f64
        / 1e6;
    assert!(
        (4_790.0..10_000.0).contains(&endpointing),
        "endpointing {endpointing} ms"
    );
}

/// TPOT and ITL against the scripted LLM's known token gaps (40 ms; a sleep never ends
/// early, so neither can be below it), and a TTS real-time factor and playback margin for
/// the reply that played.
#[test]
fn a_turns_pace_follows_the_scripted_token_gaps() {
    let mut f = Fakes::new();
    f.llm.itl = 40 * MS;
    let rec = first_live_turn(&f, |tx| async move {
        tx.send(endpoint(false)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    let pace = rec.pace.as_ref().expect("a reply's pace");
    let tpot = pace.tpot_ms.unwrap();
    assert!((40.0..120.0).contains(&tpot), "TPOT {tpot}");
    assert_eq!(pace.itl_ms.len(), 4, "five tokens, four gaps");
    assert!(pace.itl_ms.iter().all(|&g| g >= 39.0), "{:?}", pace.itl_ms);
    assert!(pace.tts_rtf.is_some_and(|r| r > 0.0), "{pace:?}");
}

/// A held reply that finished streaming long before its commit (tokens 40 ms apart, the
/// endpoint 600 ms after the provisional end): its events still read in pipeline order, as a
/// plain turn's do, and its TPOT is the scripted gap, not the time squeezed by the commit.
#[test]
fn a_committed_speculation_keeps_its_events_in_order_and_its_true_pace() {
    let mut f = Fakes::new();
    f.llm.itl = 40 * MS;
    let (rec, _sink) = first_speculating_turn(&f, |tx| async move {
        tx.send(provisional()).await.unwrap();
        tokio::time::sleep(600 * MS).await;
        tx.send(endpoint(true)).await.unwrap();
    });
    assert_eq!(rec.outcome, TurnOutcome::Ok, "{:?}", rec.error);
    let spec = rec.speculative_reply.as_ref().expect("a speculative reply");
    assert!(
        spec.before_commit_ms.contains_key(&EventKind::LlmDone),
        "the stream ended before the commit: {:?}",
        spec.before_commit_ms
    );
    let chain: Vec<(EventKind, Nanos)> = EventKind::ALL
        .iter()
        .take_while(|&&k| k != EventKind::LlmDone)
        .map(|&k| (k, rec.events[&k]))
        .collect();
    for w in chain.windows(2) {
        assert!(w[0].1 <= w[1].1, "{} after {}", w[0].0, w[1].0);
    }
    let tpot = rec.pace.as_ref().and_then(|p| p.tpot_ms).expect("a TPOT");
    assert!((40.0..120.0).contains(&tpot), "TPOT {tpot}");
}

/// History cap 4 (two exchanges): the third turn cuts the history to its own exchange, and
/// before the fourth turn the LLM is asked for one token on exactly the prompt the fourth turn
/// begins with, so the server's cache holds it. No other turn is preceded by such a request.
#[test]
fn a_cut_history_is_evaluated_before_the_next_turn_needs_it() {
    let f = Fakes::new();
    let requests = f.llm.requests.clone();
    let cfg = PipelineConfig {
        history_cap: 4,
        warm_cut_history: true,
        ..PipelineConfig::default()
    };
    let recs = live_turns_with(&f, cfg, |tx| async move {
        for _ in 0..4 {
            tx.send(endpoint(false)).await.unwrap();
            tokio::time::sleep(1_000 * MS).await;
        }
    });
    assert_eq!(recs.len(), 4);
    assert!(recs.iter().all(|r| r.outcome == TurnOutcome::Ok));
    let reqs = requests.lock().unwrap().clone();
    let warm: Vec<usize> = (0..reqs.len())
        .filter(|&i| reqs[i].max_tokens == Some(1))
        .collect();
    assert_eq!(warm, [3], "one warm-up, after the third turn");
    assert_eq!(reqs.len(), 5);
    let (third, warmup, fourth) = (&reqs[2], &reqs[3], &reqs[4]);
    assert!(
        !fourth
            .messages
            .starts_with(&third.messages[..third.messages.len() - 1]),
        "the third turn cut the history"
    );
    assert!(fourth.messages.starts_with(&warmup.messages));
    assert_eq!(fourth.messages.len(), warmup.messages.len() + 1);
    assert!(recs[..3].iter().all(|r| r.history_warmup.is_none()));
    let w = recs[3]
        .history_warmup
        .expect("the fourth turn says it was warmed");
    assert!(w.finished && w.ms > 0.0, "{w:?}");
}

/// Two endpoints reach the session while a turn is still in flight ("Call my" … "sister" …
/// "at nine", each pause long enough to commit, each part said while the part before was
/// still being transcribed): none of them is dropped. The first two give way, and the LLM is
/// asked, after the last, with all three as one message.
#[test]
fn endpoints_queued_behind_a_turn_in_flight_all_reach_the_llm() {
    let mut f = Fakes::new();
    f.asr = FakeAsr::new(&["Call my", "sister", "at nine"], 300 * MS);
    let requests = f.llm.requests.clone();
    let recs = live_turns(&f, |tx| async move {
        tx.send(endpoint(false)).await.unwrap();
        for _ in 0..2 {
            tokio::time::sleep(100 * MS).await;
            tx.send(vad(VadEvent::SpeechStart { at: clock::now() }))
                .await
                .unwrap();
            tokio::time::sleep(50 * MS).await;
            tx.send(endpoint(false)).await.unwrap();
        }
        tokio::time::sleep(3_000 * MS).await;
    });
    let outcomes: Vec<TurnOutcome> = recs.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            TurnOutcome::Interrupted,
            TurnOutcome::Interrupted,
            TurnOutcome::Ok
        ],
        "{recs:#?}"
    );
    assert_eq!(recs[2].merged_words.as_deref(), Some("Call my sister"));
    // The first part's reply was generated while paused (ready, had the rest been a cough),
    // then dropped; the last request has all three parts.
    let asked = last_user_messages(&requests);
    assert_eq!(
        asked.last().map(String::as_str),
        Some("Call my sister at nine")
    );
    assert!(asked.iter().all(|a| a.starts_with("Call my")), "{asked:?}");
}
