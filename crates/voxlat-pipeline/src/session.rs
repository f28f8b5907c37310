//! One state machine for replay and live: source events in, turn records out.
//!
//! A source (a scenario's audio on its own thread, or the microphone's listener) runs the
//! endpointer and sends [`SourceEvent`]s. The session turns them into turns:
//!
//! ```text
//! speech start ─→ provisional end ──→ endpoint ─→ turn: ASR → LLM → chunker → TTS → output
//!                   │  (speculative ASR)  ↑
//!                   └── retraction ───────┘  (speech resumed: the speculation is dropped)
//! speech start or barge-in while a turn is in flight ─→ that turn is cancelled
//! ```
//!
//! With `speculative_reply`, the provisional end starts the whole turn, held: its audio waits
//! for the endpoint's commit, and a retraction cancels it (a miss, counted in the next turn).
//!
//! Every turn gets its own timeline and request ID. Source times are on the process clock
//! when the source is paced (replay in real time, the microphone); an unpaced replay runs on
//! audio time, which is mapped onto the process clock at the moment the endpointer decides,
//! so endpointing is then in audio time (the results say so).

use crate::error::{SessionError, SourceError, TurnError};
use crate::output::Output;
use crate::record::{BusySpan, SpeculativeReply, TurnOutcome, TurnRecord};
use crate::respond::{Hold, Pipeline, Progress, ProgressFn, TurnCtx};
use crate::workers::AsrResult;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use voxlat_core::{clock, EventKind, Nanos, RequestId, Timeline};
use voxlat_llm::Message;
use voxlat_vad::VadEvent;

/// What a source tells the session.
#[derive(Debug)]
pub enum SourceEvent {
    /// The endpointer's event, and when it reached the session (process clock).
    Vad { ev: VadEvent, received: Nanos },
    /// When the annotated last speech sample entered the pipeline (replay's ground truth, on
    /// the source clock). It applies to the next endpoint.
    Truth(Nanos),
    /// The user spoke over a reply, from `onset`.
    BargeIn { onset: Nanos },
    /// The source has no more audio.
    Ended,
    /// The source failed.
    Failed(SourceError),
}

/// The clock a source's times are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceClock {
    /// The process clock: paced replay, the microphone.
    Process,
    /// Audio time: unpaced replay. Mapped onto the process clock at the endpoint decision.
    Audio,
}

/// Who a turn is, for its record.
#[derive(Clone, Debug, Default)]
pub struct TurnMeta {
    pub scenario: String,
    pub turn: String,
    pub repeat: u32,
    pub warmup: bool,
    /// What was said, when known: the turn is then scored (WER).
    pub reference: Option<String>,
    pub expect_keywords: Vec<String>,
    pub speech_end_annotated: bool,
    /// Overrides the pipeline's system prompt.
    pub system_prompt: Option<String>,
}

impl TurnMeta {
    /// The n-th turn of a live session.
    pub fn live(n: u32) -> TurnMeta {
        TurnMeta {
            scenario: "live".into(),
            turn: format!("turn-{n}"),
            ..TurnMeta::default()
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct SessionOptions {
    pub clock: SourceClock,
    /// Give up when no speech started and no turn ran for this long.
    pub idle_timeout: Option<Duration>,
    /// A source that ends without one turn still yields a record (replay: the utterance
    /// failed), rather than nothing.
    pub record_empty_source: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            clock: SourceClock::Process,
            idle_timeout: None,
            record_empty_source: false,
        }
    }
}

type TurnFuture<'p> = Pin<Box<dyn Future<Output = (TurnRecord, Vec<Message>)> + Send + 'p>>;
type Labels<'p> = Box<dyn FnMut(u32) -> TurnMeta + Send + 'p>;

struct InFlight<'p> {
    fut: TurnFuture<'p>,
    cancel: watch::Sender<Option<Nanos>>,
    /// A speculative reply not committed yet: the endpoint's facts go here, and its audio is
    /// released through `hold`. Dropping it (the user resumed) makes the reply a miss.
    uncommitted: Option<(oneshot::Sender<Commit>, watch::Sender<Option<Nanos>>)>,
}

/// What the endpoint tells a turn: everything about the user's utterance.
struct Commit {
    speech_start: Nanos,
    speech_end: Nanos,
    received: Nanos,
    vad_error_ms: Option<f64>,
    speculative: bool,
    retractions: u32,
    busy: Vec<BusySpan>,
}

impl Commit {
    fn apply(self, tl: &Timeline, rec: &mut TurnRecord) {
        tl.mark_at(EventKind::SpeechStart, self.speech_start);
        tl.mark_at(EventKind::SpeechEnd, self.speech_end);
        tl.mark_at(EventKind::Endpoint, self.received);
        rec.speculative_asr = self.speculative;
        rec.retractions = self.retractions;
        rec.vad_speech_end_error_ms = self.vad_error_ms;
        rec.busy.extend(self.busy);
    }
}

/// The endpoint's facts, known when the turn starts or still to come (a held reply).
enum Facts {
    Known(Commit),
    Pending(oneshot::Receiver<Commit>),
}

/// An utterance the endpointer closed, waiting for its turn.
struct Endpointed {
    commit: Commit,
    asr: oneshot::Receiver<AsrResult>,
}

/// What the session has heard since the last endpoint.
#[derive(Default)]
struct Listening {
    speculative: Option<oneshot::Receiver<AsrResult>>,
    truth: Option<Nanos>,
    retractions: u32,
    /// (speech start on the source clock, when the session heard of it).
    vad_busy: Vec<(Nanos, Nanos)>,
}

pub struct Session<'p> {
    pipeline: &'p Pipeline,
    output: &'p dyn Output,
    events: mpsc::Receiver<SourceEvent>,
    opts: SessionOptions,
    labels: Labels<'p>,
    progress: Arc<ProgressFn>,
    history: Vec<Message>,
    listening: Listening,
    turn: Option<InFlight<'p>>,
    waiting: Option<Endpointed>,
    started: u32,
    /// Speculative replies discarded since the last turn returned, and their compute (ms).
    misses: (u32, f64),
    source_open: bool,
    ended: bool,
    last_activity: Instant,
}

impl<'p> Session<'p> {
    /// `labels` names the n-th turn (from 1).
    pub fn new(
        pipeline: &'p Pipeline,
        output: &'p dyn Output,
        events: mpsc::Receiver<SourceEvent>,
        opts: SessionOptions,
        labels: impl FnMut(u32) -> TurnMeta + Send + 'p,
    ) -> Session<'p> {
        Session {
            pipeline,
            output,
            events,
            opts,
            labels: Box::new(labels),
            progress: Arc::new(|_| {}),
            history: Vec::new(),
            listening: Listening::default(),
            turn: None,
            waiting: None,
            started: 0,
            misses: (0, 0.0),
            source_open: true,
            ended: false,
            last_activity: Instant::now(),
        }
    }

    /// Shown the transcript and the streamed reply of each turn as they happen.
    pub fn with_progress(
        mut self,
        progress: impl Fn(Progress<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.progress = Arc::new(progress);
        self
    }

    /// The conversation so far (user and assistant messages).
    pub fn with_history(mut self, history: Vec<Message>) -> Self {
        self.history = history;
        self
    }

    pub fn into_history(self) -> Vec<Message> {
        self.history
    }

    /// Turns started so far.
    pub fn turns_started(&self) -> u32 {
        self.started
    }

    /// Runs until a turn ends and returns its record; `None` once the source has ended and
    /// every turn is done. Dropping the session mid-turn drops that turn (its LLM request is
    /// abandoned).
    pub async fn next_turn(&mut self) -> Result<Option<TurnRecord>, SessionError> {
        loop {
            if self.turn.is_none() {
                if let Some(e) = self.waiting.take() {
                    self.start(e);
                } else if !self.source_open {
                    return Ok(self.empty_source_record());
                }
            }
            let idle_left = self
                .opts
                .idle_timeout
                .filter(|_| self.turn.is_none())
                .map(|d| d.saturating_sub(self.last_activity.elapsed()));
            tokio::select! {
                _ = tokio::time::sleep(idle_left.unwrap_or_default()), if idle_left.is_some() => {
                    return Err(SessionError::Idle {
                        secs: self.opts.idle_timeout.unwrap_or_default().as_secs(),
                    });
                }
                r = async { self.turn.as_mut().map(|t| t.fut.as_mut()).expect("guarded").await }, if self.turn.is_some() => {
                    let (mut rec, history) = r;
                    self.history = history;
                    self.turn = None;
                    self.last_activity = Instant::now();
                    if let Some(spec) = rec.speculative_reply.as_ref().filter(|s| !s.committed) {
                        self.misses.0 += 1;
                        self.misses.1 += spec.compute_ms;
                        continue;
                    }
                    rec.speculation_misses = self.misses.0;
                    rec.speculation_wasted_ms = self.misses.1;
                    self.misses = (0, 0.0);
                    // Every stage is idle until the next endpoint: the moment to give back
                    // what this turn freed (voxlat_core::memory says why).
                    let took = voxlat_core::memory::release_free_memory();
                    tracing::debug!(ms = took.as_secs_f64() * 1e3, "released free heap memory");
                    return Ok(Some(rec));
                }
                ev = self.events.recv(), if self.source_open => match ev {
                    None | Some(SourceEvent::Ended) => {
                        self.source_open = false;
                        self.ended = ev.is_some();
                    }
                    Some(SourceEvent::Failed(e)) => return Err(e.into()),
                    Some(SourceEvent::Truth(t)) => self.listening.truth = Some(t),
                    Some(SourceEvent::BargeIn { onset }) => self.cancel_turn(onset),
                    Some(SourceEvent::Vad { ev, received }) => self.on_vad(ev, received),
                },
            }
        }
    }

    fn on_vad(&mut self, ev: VadEvent, received: Nanos) {
        match ev {
            VadEvent::SpeechStart { at } => {
                self.last_activity = Instant::now();
                self.listening.vad_busy.push((at, received));
                // Speaking again before the reply is heard: the user was not done, so the
                // turn in flight gives way.
                self.cancel_turn(at);
            }
            VadEvent::Provisional { audio, .. } => {
                if self.pipeline.cfg.speculative_asr {
                    let job = self.pipeline.transcribe(audio);
                    if self.pipeline.cfg.speculative_reply
                        && self.turn.is_none()
                        && self.waiting.is_none()
                    {
                        self.start_held(job);
                    } else {
                        self.listening.speculative = Some(job);
                    }
                }
            }
            VadEvent::Retracted { at, .. } => {
                self.listening.retractions += 1;
                self.listening.speculative = None;
                self.drop_uncommitted(at);
            }
            VadEvent::Endpoint {
                speech_start,
                speech_end,
                at,
                audio,
                confirms_provisional,
                ..
            } => {
                self.last_activity = Instant::now();
                let heard = std::mem::take(&mut self.listening);
                // Source times → process clock: identity when paced; anchored at the
                // decision when in audio time.
                let clock_kind = self.opts.clock;
                let map = |t: Nanos| match clock_kind {
                    SourceClock::Process => t,
                    SourceClock::Audio => {
                        Nanos(received.0.saturating_sub(at.0.saturating_sub(t.0)))
                    }
                };
                let held = self.turn.as_ref().is_some_and(|t| t.uncommitted.is_some());
                if held && !confirms_provisional {
                    // A forced end: its audio is not what the reply was started on.
                    self.drop_uncommitted(at);
                }
                let spec = heard.speculative.filter(|_| confirms_provisional);
                let speculative = spec.is_some() || (held && confirms_provisional);
                let end = heard.truth.unwrap_or(speech_end);
                let mut busy: Vec<BusySpan> = heard
                    .vad_busy
                    .iter()
                    .map(|&(from, to)| BusySpan {
                        stage: "vad".into(),
                        from: map(from),
                        to,
                    })
                    .collect();
                busy.push(BusySpan {
                    stage: "endpointer".into(),
                    from: map(end),
                    to: received,
                });
                let commit = Commit {
                    speech_start: map(speech_start),
                    speech_end: map(end),
                    received,
                    vad_error_ms: heard
                        .truth
                        .map(|t| clock::ns_to_ms(speech_end.signed_since(t))),
                    speculative,
                    retractions: heard.retractions,
                    busy,
                };
                if let Some((facts, hold)) = self
                    .turn
                    .as_mut()
                    .filter(|_| confirms_provisional)
                    .and_then(|t| t.uncommitted.take())
                {
                    // The speculative reply stands: same audio, so the same transcript.
                    self.started += 1;
                    (self.progress)(Progress::Started(self.started));
                    let _ = facts.send(commit);
                    let _ = hold.send(Some(received));
                    return;
                }
                let asr = spec.unwrap_or_else(|| self.pipeline.transcribe(audio));
                self.waiting = Some(Endpointed { commit, asr });
            }
        }
    }

    fn cancel_turn(&mut self, onset: Nanos) {
        if let Some(t) = &mut self.turn {
            t.uncommitted = None;
            if t.cancel.borrow().is_none() {
                let _ = t.cancel.send(Some(onset));
            }
        }
    }

    /// The user resumed: a speculative reply not yet committed is cancelled (its LLM request
    /// dropped, its audio never played) and counted as a miss.
    fn drop_uncommitted(&mut self, at: Nanos) {
        if self.turn.as_ref().is_some_and(|t| t.uncommitted.is_some()) {
            self.cancel_turn(at);
        }
    }

    fn start(&mut self, e: Endpointed) {
        self.started += 1;
        let meta = (self.labels)(self.started);
        let progress = self.progress.clone();
        self.launch(meta, e.asr, Facts::Known(e.commit), progress, None);
    }

    /// A speculative reply, from the provisional end's transcription: it runs through TTS
    /// but is held (and quiet) until the endpoint commits it.
    fn start_held(&mut self, asr: oneshot::Receiver<AsrResult>) {
        let meta = (self.labels)(self.started + 1);
        let (facts, facts_rx) = oneshot::channel();
        let (hold, hold_rx) = watch::channel(None);
        // Nothing is shown of a reply that may never be spoken.
        let quiet: Arc<ProgressFn> = Arc::new(|_| {});
        self.launch(meta, asr, Facts::Pending(facts_rx), quiet, Some(hold_rx));
        if let Some(t) = &mut self.turn {
            t.uncommitted = Some((facts, hold));
        }
    }

    fn launch(
        &mut self,
        meta: TurnMeta,
        asr: oneshot::Receiver<AsrResult>,
        facts: Facts,
        progress: Arc<ProgressFn>,
        hold: Option<Hold>,
    ) {
        let pipeline = self.pipeline;
        let output = self.output;
        let mut history = std::mem::take(&mut self.history);
        let (cancel, cancel_rx) = watch::channel(None);
        if matches!(facts, Facts::Known(_)) {
            progress(Progress::Started(self.started));
        }
        let fut = Box::pin(async move {
            let tl = Arc::new(Timeline::new(RequestId::new()));
            let mut rec = blank_record(&meta, &tl);
            let (known, pending) = match facts {
                Facts::Known(c) => (Some(c), None),
                Facts::Pending(rx) => (None, Some(rx)),
            };
            // A held reply's transcript is not bound to an endpoint yet: its stamps are
            // raised to the endpoint at the commit instead.
            let endpoint = known.as_ref().map_or(Nanos(0), |c| c.received);
            if let Some(c) = known {
                c.apply(&tl, &mut rec);
            }
            let system_prompt = meta
                .system_prompt
                .as_deref()
                .unwrap_or(&pipeline.cfg.system_prompt);
            let cx = TurnCtx {
                tl: &tl,
                rec: &mut rec,
                history: &mut history,
                system_prompt,
                expect_keywords: &meta.expect_keywords,
                output,
                cancel: cancel_rx,
                progress: &*progress,
                hold,
            };
            if let Err(err) = pipeline.respond(asr, endpoint, cx).await {
                fail(&mut rec, &err);
            }
            let mut committed_at = None;
            if let Some(rx) = pending {
                match rx.await {
                    Ok(c) => {
                        committed_at = Some(c.received);
                        c.apply(&tl, &mut rec);
                    }
                    Err(_) => {
                        rec.speculative_reply = Some(SpeculativeReply {
                            committed: false,
                            compute_ms: rec.compute_ms(),
                            ..SpeculativeReply::default()
                        });
                        return (rec, history);
                    }
                }
            }
            if let Some(reference) = &meta.reference {
                if rec.asr_compute_ms.is_some() {
                    rec.wer = Some(voxlat_core::text::wer(reference, &rec.transcript));
                }
            }
            rec.events = tl.snapshot().events;
            if let Some(at) = committed_at {
                rec.commit_speculation(at);
            }
            rec.compute_breakdown();
            (rec, history)
        });
        self.turn = Some(InFlight {
            fut,
            cancel,
            uncommitted: None,
        });
    }

    /// Replay's utterance that never reached an endpoint still has a record, once.
    fn empty_source_record(&mut self) -> Option<TurnRecord> {
        if !self.opts.record_empty_source || self.started > 0 {
            return None;
        }
        self.started += 1;
        let meta = (self.labels)(1);
        let tl = Timeline::new(RequestId::new());
        let mut rec = blank_record(&meta, &tl);
        rec.retractions = self.listening.retractions;
        fail(
            &mut rec,
            &if self.ended {
                TurnError::NoSpeech
            } else {
                TurnError::NoEndpoint
            },
        );
        Some(rec)
    }
}

fn blank_record(meta: &TurnMeta, tl: &Timeline) -> TurnRecord {
    TurnRecord {
        repeat: meta.repeat,
        warmup: meta.warmup,
        speech_end_annotated: meta.speech_end_annotated,
        ..TurnRecord::blank(
            &meta.scenario,
            &meta.turn,
            &tl.id().to_string(),
            meta.reference.as_deref().unwrap_or(""),
        )
    }
}

fn fail(rec: &mut TurnRecord, err: &TurnError) {
    rec.outcome = TurnOutcome::Error;
    rec.error = Some(err.to_string());
}
