//! One state machine for replay and live: source events in, turn records out.
//!
//! A source (a scenario's audio on its own thread, or the microphone's listener) runs the
//! endpointer and sends [`SourceEvent`]s. The session turns them into turns:
//!
//! ```text
//! speech start ─→ provisional end ──→ endpoint ─→ turn: ASR → LLM → chunker → TTS → output
//!                   │  (speculative ASR)  ↑
//!                   └── retraction ───────┘  (speech resumed: the speculation is dropped)
//! speech start or barge-in while a turn is in flight ─→ that turn is cancelled, or, soon
//!   after its commit, paused until the new utterance's words decide ([`continuation`])
//! ```
//!
//! With `speculative_reply`, the provisional end starts the whole turn, held: its audio waits
//! for the endpoint's commit, and a retraction cancels it (a miss, counted in the next turn,
//! with the compute of every discarded speculation: [`waste`]).
//!
//! Every turn gets its own timeline and request ID. Source times are on the process clock
//! when the source is paced (replay in real time, the microphone); an unpaced replay runs on
//! audio time, which is mapped onto the process clock at the moment the endpointer decides,
//! so endpointing is then in audio time (the results say so).

mod adds;
mod close;
mod continuation;
mod held_progress;
mod inputs;
mod launch;
mod on_vad;
mod state;
mod warm;
mod waste;

pub use adds::MIN_GOING_ON_MS;
pub use continuation::RESUMED_WITHIN_MS;
use continuation::{carried_words, AskAgain, Paused};

pub use inputs::{SessionOptions, SourceClock, SourceEvent, TurnMeta};

use crate::asr_prefix::Prefix;
use crate::error::SessionError;
use crate::meter::Spent;
use crate::output::Output;
use crate::record::{BusySpan, TurnRecord};
use crate::respond::{Pipeline, Progress, ProgressFn};
use crate::workers::AsrResult;
use state::{SourceState, TurnSlot};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use voxlat_core::{clock, EventKind, Nanos, Timeline};
use voxlat_llm::Message;
use warm::Warming;
use waste::Waste;

type TurnFuture<'p> = Pin<Box<dyn Future<Output = (TurnRecord, Vec<Message>)> + Send + 'p>>;
type Labels<'p> = Box<dyn FnMut(u32) -> TurnMeta + Send + 'p>;

/// What the endpoint tells a turn: everything about the user's utterance.
struct Commit {
    speech_start: Nanos,
    speech_end: Nanos,
    received: Nanos,
    vad_error_ms: Option<f64>,
    cutoff: Option<voxlat_core::cutoff::Verdict>,
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
        rec.cutoff = self.cutoff;
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
    /// The user spoke again (from then) before its turn could start: it was not the end.
    superseded: Option<Nanos>,
}

/// What the session has heard since the last endpoint.
#[derive(Default)]
struct Listening {
    speculative: Option<(oneshot::Receiver<AsrResult>, Spent)>,
    /// The words of the latest provisional end's transcription, once decoded.
    decoded: Option<Prefix>,
    /// Those of the last provisional end the user spoke past: the next transcription of this
    /// utterance goes on from them.
    kept: Option<Prefix>,
    truth: Option<Nanos>,
    cutoff: Option<voxlat_core::cutoff::Verdict>,
    retractions: u32,
    /// (speech start on the source clock, when the session heard of it).
    vad_busy: Vec<(Nanos, Nanos)>,
    /// A paused reply waits on this utterance, and the provisional end's transcription,
    /// when it comes, can decide it before the endpoint does: where that provisional end put
    /// the end of speech (source clock).
    decides_early: Option<Nanos>,
    /// Its words decided it: a held reply answers the whole message as soon as the paused
    /// one has given way.
    hold_when_idle: bool,
    /// The standing provisional end: when it came and where it put the end of speech (source
    /// clock), to time the pause when the speaker goes on.
    stop: Option<(Nanos, Nanos)>,
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
    turn: TurnSlot<'p>,
    /// Utterances endpointed while a turn was in flight, in order. One followed by more
    /// speech starts superseded: cancelled in ASR, its words carry into the next turn.
    waiting: std::collections::VecDeque<Endpointed>,
    /// When the last endpoint committed (source clock).
    last_commit: Option<Nanos>,
    /// The words of a committed turn the user went on from before its reply was audible:
    /// the next turn continues them (one user message, never two, never lost).
    carried: Option<String>,
    /// The words of a turn whose reply the user heard part of before going on: they stay in
    /// the history, and the next turn's WER is scored on them and its own words together (a
    /// recording's utterance answered in two parts is still one utterance).
    heard_before: Option<String>,
    /// When the carried words are asked again on their own, if no speech follows.
    ask_again: Option<AskAgain>,
    /// The committed reply is paused: the user spoke soon after its commit.
    paused: Option<Paused>,
    /// The endpointer heard speech start and has not ended it yet.
    speaking: bool,
    started: u32,
    /// A finished turn's record not handed out yet (it waits for `waste` to settle).
    ready: Option<TurnRecord>,
    /// Speculation discarded since the last record.
    waste: Waste,
    source: SourceState,
    last_activity: Instant,
    /// The system prompt and history the turn in flight was asked with.
    asked_with: Option<(String, Vec<Message>)>,
    /// The shortened history being evaluated ahead of the next turn, and the last one done.
    warming: Option<Warming<'p>>,
    warmed: Option<crate::record::Warmed>,
    /// Ends turns by the `cues` rule, on the source's endpointer.
    cues: Option<crate::cues::CueRule>,
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
            turn: TurnSlot::Idle,
            waiting: std::collections::VecDeque::new(),
            last_commit: None,
            carried: None,
            heard_before: None,
            ask_again: None,
            paused: None,
            speaking: false,
            started: 0,
            ready: None,
            waste: Waste::default(),
            source: SourceState::Open,
            last_activity: Instant::now(),
            asked_with: None,
            warming: None,
            warmed: None,
            cues: None,
        }
    }

    /// Sets each stop's wait by the `cues` rule, on the endpointer that `rule.hold` is
    /// attached to (the source's).
    pub fn with_cues(mut self, rule: crate::cues::CueRule) -> Self {
        self.cues = Some(rule);
        self
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
    /// every turn is done. Cancel-safe: a turn that ended while the caller stopped waiting is
    /// returned by the next call, or by [`Session::close`], which also reports what the
    /// session still owes the results. Dropping the session mid-turn drops that turn (its LLM
    /// request is abandoned).
    pub async fn next_turn(&mut self) -> Result<Option<TurnRecord>, SessionError> {
        if self.ready.is_none() {
            self.ready = self.run_to_record().await?;
        }
        self.waste.settle().await;
        Ok(self.ready.take().map(|mut rec| {
            self.waste.charge(&mut rec);
            rec
        }))
    }

    async fn run_to_record(&mut self) -> Result<Option<TurnRecord>, SessionError> {
        loop {
            if self.turn.is_idle() {
                if let Some(e) = self.waiting.pop_front() {
                    let superseded = e.superseded;
                    self.start(e);
                    if let Some(onset) = superseded {
                        // The user spoke on after this endpoint: only its words are wanted,
                        // and the turn cancelled in ASR keeps them for the next one.
                        self.cancel_turn(onset);
                    }
                } else if self.source != SourceState::Open {
                    // No speech can follow: words still carried are answered now.
                    if let Some(a) = self.ask_again.take() {
                        self.waiting.push_back(a.endpointed());
                        continue;
                    }
                    return Ok(self.empty_source_record());
                }
            }
            let idle_left = self
                .opts
                .idle_timeout
                .filter(|_| self.turn.is_idle())
                .map(|d| d.saturating_sub(self.last_activity.elapsed()));
            let ask_at = self
                .ask_again
                .as_ref()
                .filter(|_| self.turn.is_idle() && self.waiting.is_empty() && !self.speaking)
                .map(|a| a.due);
            let resume_at = self
                .paused
                .as_ref()
                .filter(|p| p.deciding.is_none() && !self.speaking)
                .map(|p| p.due);
            let deciding = self.paused.as_ref().is_some_and(|p| p.deciding.is_some());
            let early =
                self.listening.decides_early.is_some() && self.listening.speculative.is_some();
            tokio::select! {
                r = async { (&mut self.listening.speculative.as_mut().expect("guarded").0).await }, if early => {
                    self.decide_early(r);
                }
                r = async { (&mut self.paused.as_mut().and_then(|p| p.deciding.as_mut()).expect("guarded").asr).await }, if deciding => {
                    self.decide(r);
                }
                _ = tokio::time::sleep_until(resume_at.unwrap_or_else(tokio::time::Instant::now)), if resume_at.is_some() => {
                    // No utterance came: a noise, not the user going on.
                    self.resume_paused();
                }
                _ = tokio::time::sleep_until(ask_at.unwrap_or_else(tokio::time::Instant::now)), if ask_at.is_some() => {
                    if let Some(a) = self.ask_again.take() {
                        self.waiting.push_back(a.endpointed());
                    }
                }
                _ = tokio::time::sleep(idle_left.unwrap_or_default()), if idle_left.is_some() => {
                    return Err(SessionError::Idle {
                        secs: self.opts.idle_timeout.unwrap_or_default().as_secs(),
                    });
                }
                w = async { self.warming.as_mut().expect("guarded").fut.as_mut().await }, if self.warming.is_some() => {
                    self.warming = None;
                    self.warmed = Some(w);
                }
                r = async { self.turn.in_flight().map(|t| t.fut.as_mut()).expect("guarded").await }, if !self.turn.is_idle() => {
                    let (mut rec, history) = r;
                    self.history = history;
                    let done = self.turn.take().map(|(t, _)| t);
                    self.turn_ended();
                    let (merge, asr_spent, reply_spent) = match done {
                        Some(t) => {
                            rec.resumed_after_ms = t.resumed_after_ms;
                            rec.passed_over = t.passed_over;
                            (t.merge, t.asr_spent, Some(t.reply_spent))
                        }
                        None => (false, None, None),
                    };
                    self.last_activity = Instant::now();
                    if rec.speculative_reply.as_ref().is_some_and(|s| !s.committed) {
                        self.waste.miss(asr_spent.into_iter().chain(reply_spent));
                        continue;
                    }
                    self.carried = carried_words(&rec, merge);
                    self.heard_before = continuation::heard_words(&rec, merge);
                    if self.carried.is_some() {
                        // Its words go on in the next turn, which answers them afresh: the
                        // reply's compute was for nothing. Charged to this record.
                        self.waste.discard(reply_spent);
                    }
                    self.ask_again = self.carried.as_ref().and_then(|_| AskAgain::after(&rec));
                    rec.history_warmup = self.warmed.take();
                    let asked_with = self.asked_with.take();
                    if !self.hold_continuation() {
                        if let Some((system_prompt, before)) = asked_with {
                            self.warming = Warming::after_turn(
                                self.pipeline,
                                &system_prompt,
                                &before,
                                &self.history,
                            );
                        }
                    }
                    // Every stage is idle until the next endpoint: the moment to give back
                    // what this turn freed (voxlat_core::memory says why).
                    let took = voxlat_core::memory::release_free_memory();
                    tracing::debug!(ms = took.as_secs_f64() * 1e3, "released free heap memory");
                    return Ok(Some(rec));
                }
                ev = self.events.recv(), if self.source == SourceState::Open => match ev {
                    None | Some(SourceEvent::Ended) => {
                        self.source = if ev.is_some() { SourceState::Ended } else { SourceState::Gone };
                        // No endpoint can commit a held reply any more, nor bring words to
                        // replace a paused one.
                        self.drop_uncommitted(clock::now());
                        if self.paused.as_ref().is_some_and(|p| p.deciding.is_none()) {
                            self.resume_paused();
                        }
                    }
                    Some(SourceEvent::Failed(e)) => return Err(e.into()),
                    Some(SourceEvent::Truth(t)) => self.listening.truth = Some(t),
                    Some(SourceEvent::Judged(v)) => self.listening.cutoff = Some(v),
                    Some(SourceEvent::BargeIn { onset }) => self.barged_in(onset),
                    Some(SourceEvent::Overheard { onset }) => self.overheard(onset),
                    Some(SourceEvent::Vad { ev, received }) => self.on_vad(ev, received),
                },
            }
        }
    }

    /// The next utterance needs the cores: a warm-up still running gives way.
    fn stop_warming(&mut self) {
        if let Some(w) = self.warming.take() {
            self.warmed = Some(w.abandon());
        }
    }

    fn cancel_turn(&mut self, onset: Nanos) {
        self.turn.cancel(onset);
    }

    /// The user resumed: a speculative reply not yet committed is cancelled (its LLM request
    /// dropped, its audio never played) and counted as a miss.
    fn drop_uncommitted(&mut self, at: Nanos) {
        if self.turn.is_held() {
            self.turn.cancel(at);
        }
    }
}
