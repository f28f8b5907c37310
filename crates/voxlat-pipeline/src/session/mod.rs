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
mod annotations;
mod close;
mod commit;
mod continuation;
mod conversation;
mod fold;
mod held_progress;
mod inputs;
mod launch;
mod on_vad;
mod recognition;
mod state;
mod wake;
mod warm;
mod waste;

pub use adds::MIN_GOING_ON_MS;
pub use continuation::RESUMED_WITHIN_MS;
use continuation::{carried_words, AskAgain};

pub use inputs::{SessionOptions, SourceClock, SourceEvent, TurnMeta};

use crate::error::SessionError;
use crate::output::Output;
use crate::record::TurnRecord;
use crate::respond::{Pipeline, Progress, ProgressFn};
use crate::workers::AsrResult;
use commit::{Commit, Endpointed};
use conversation::Conversation;
use recognition::Recognition;
use state::SourceState;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use voxlat_core::{clock, Nanos};
use voxlat_llm::Message;
use wake::{when_some, Deciding, Due};
use warm::Warming;
use waste::Waste;

type TurnFuture<'p> = Pin<Box<dyn Future<Output = (TurnRecord, Vec<Message>)> + Send + 'p>>;
type Labels<'p> = Box<dyn FnMut(u32) -> TurnMeta + Send + 'p>;

/// What a session is given and does not change: the stages, the output, the options, how
/// turns are named and who is shown their progress.
struct Ctx<'p> {
    pipeline: &'p Pipeline,
    output: &'p dyn Output,
    opts: SessionOptions,
    labels: Labels<'p>,
    progress: Arc<ProgressFn>,
}

pub struct Session<'p> {
    ctx: Ctx<'p>,
    events: mpsc::Receiver<SourceEvent>,
    recognition: Recognition,
    conversation: Conversation<'p>,
    /// A finished turn's record not handed out yet (it waits for `waste` to settle).
    ready: Option<TurnRecord>,
    /// Speculation discarded since the last record.
    waste: Waste,
    source: SourceState,
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
            ctx: Ctx {
                pipeline,
                output,
                opts,
                labels: Box::new(labels),
                progress: Arc::new(|_| {}),
            },
            events,
            recognition: Recognition::default(),
            conversation: Conversation::new(),
            ready: None,
            waste: Waste::default(),
            source: SourceState::Open,
            last_activity: Instant::now(),
        }
    }

    /// Sets each stop's wait by the `cues` rule, on the endpointer that `rule.hold` is
    /// attached to (the source's).
    pub fn with_cues(mut self, rule: crate::cues::CueRule) -> Self {
        self.recognition.cues = Some(rule);
        self
    }

    /// Shown the transcript and the streamed reply of each turn as they happen.
    pub fn with_progress(
        mut self,
        progress: impl Fn(Progress<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.ctx.progress = Arc::new(progress);
        self
    }

    /// The conversation so far (user and assistant messages).
    pub fn with_history(mut self, history: Vec<Message>) -> Self {
        self.conversation.history = history;
        self
    }

    pub fn into_history(self) -> Vec<Message> {
        self.conversation.history
    }

    /// Turns started so far.
    pub fn turns_started(&self) -> u32 {
        self.conversation.started
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
            if self.conversation.turn.is_idle() {
                if let Some(e) = self.conversation.waiting.pop_front() {
                    let superseded = e.superseded;
                    self.start(e);
                    if let Some(onset) = superseded {
                        // The user spoke on after this endpoint: only its words are wanted,
                        // and the turn cancelled in ASR keeps them for the next one.
                        self.conversation.cancel_turn(onset);
                    }
                } else if self.source != SourceState::Open {
                    // No speech can follow: words still carried are answered now.
                    if let Some(a) = self.conversation.words.ask_again.take() {
                        self.conversation.waiting.push_back(a.endpointed());
                        continue;
                    }
                    return Ok(self.empty_source_record());
                }
            }
            let due = self.next_due();
            let deciding = self.deciding();
            let c = &mut self.conversation;
            let decision = match deciding {
                Some(Deciding::Endpointed) => c
                    .paused
                    .as_mut()
                    .and_then(|p| p.deciding.as_mut())
                    .map(|e| &mut e.asr),
                Some(Deciding::Early) => self.recognition.speculation(),
                None => None,
            };
            tokio::select! {
                r = when_some(decision), if deciding.is_some() => match deciding {
                    Some(Deciding::Endpointed) => {
                        let wasted = self.conversation.decide(r, self.ctx.opts.source_hears_output);
                        self.waste.add_ms(wasted.unwrap_or(0.0));
                    }
                    _ => self.decided_early(r),
                },
                _ = tokio::time::sleep_until(due.as_ref().map_or_else(tokio::time::Instant::now, |d| d.0)), if due.is_some() => {
                    match due.map(|d| d.1) {
                        Some(Due::Resume) => self.conversation.resume_paused(),
                        Some(Due::AskAgain) => {
                            if let Some(a) = self.conversation.words.ask_again.take() {
                                self.conversation.waiting.push_back(a.endpointed());
                            }
                        }
                        Some(Due::Idle) => {
                            return Err(SessionError::Idle {
                                secs: self.ctx.opts.idle_timeout.unwrap_or_default().as_secs(),
                            });
                        }
                        None => {}
                    }
                }
                w = when_some(c.warmup.running.as_mut().map(|w| &mut w.fut)), if c.warmup.running.is_some() => {
                    self.conversation.warmup.running = None;
                    self.conversation.warmup.done = Some(w);
                }
                r = when_some(c.turn.in_flight().map(|t| &mut t.fut)), if !c.turn.is_idle() => {
                    if let Some(rec) = self.turn_done(r) {
                        return Ok(Some(rec));
                    }
                }
                ev = self.events.recv(), if self.source == SourceState::Open => {
                    self.on_event(ev)?;
                }
            }
        }
    }

    /// The provisional end's transcription came while a paused reply waits on its utterance.
    fn decided_early(&mut self, r: Result<AsrResult, oneshot::error::RecvError>) {
        self.conversation
            .decide_early(&r, self.ctx.opts.source_hears_output);
        // The endpoint (or the held reply) still awaits this transcription.
        if let Some(rx) = self.recognition.speculation() {
            *rx = continuation::received(r);
        }
    }

    /// What the source said.
    fn on_event(&mut self, ev: Option<SourceEvent>) -> Result<(), SessionError> {
        match ev {
            None | Some(SourceEvent::Ended) => {
                self.source = if ev.is_some() {
                    SourceState::Ended
                } else {
                    SourceState::Gone
                };
                // No endpoint can commit a held reply any more, nor bring words to replace a
                // paused one.
                self.conversation.drop_uncommitted(clock::now());
                if self.conversation.pause_undecided() {
                    self.conversation.resume_paused();
                }
            }
            Some(SourceEvent::Failed(e)) => return Err(e.into()),
            Some(SourceEvent::Truth(t)) => self.recognition.annotations.truth(t),
            Some(SourceEvent::Judged { at, verdict }) => {
                self.recognition.annotations.verdict(at, verdict)
            }
            Some(SourceEvent::BargeIn { onset }) => {
                let soon = self.since_commit(onset).is_some();
                self.conversation.barged_in(onset, soon);
            }
            Some(SourceEvent::Overheard { onset }) => {
                let soon = onset.and_then(|at| self.since_commit(at)).is_some();
                let speaking = self.recognition.speaking;
                self.conversation.overheard(onset, soon, speaking);
            }
            Some(SourceEvent::Vad { ev, received }) => self.on_vad(ev, received),
        }
        Ok(())
    }

    /// Ms since the last commit, if within [`RESUMED_WITHIN_MS`].
    fn since_commit(&self, at: Nanos) -> Option<f64> {
        self.recognition.since_commit(at, RESUMED_WITHIN_MS)
    }

    /// The turn in flight ended with `r`: its record, once its endpoint's annotations are
    /// folded in, unless it was a speculative reply never committed (a miss, no record).
    fn turn_done(&mut self, r: (TurnRecord, Vec<Message>)) -> Option<TurnRecord> {
        let (rec, history) = r;
        let c = &mut self.conversation;
        c.history = history;
        let done = c.turn.take().map(|(t, _)| t);
        c.turn_ended();
        self.last_activity = Instant::now();
        let Some(t) = done else {
            return Some(rec);
        };
        if rec.speculative_reply.as_ref().is_some_and(|s| !s.committed) {
            self.waste
                .miss(t.asr_spent.into_iter().chain([t.reply_spent]));
            return None;
        }
        let (mut rec, t) = fold::record(rec, t, &self.recognition.annotations);
        let c = &mut self.conversation;
        c.words.carried = carried_words(&rec, t.merge);
        c.words.heard_before = continuation::heard_words(&rec, t.merge);
        if c.words.carried.is_some() {
            // Its words go on in the next turn, which answers them afresh: the reply's
            // compute was for nothing. Charged to this record.
            self.waste.discard([t.reply_spent]);
        }
        c.words.ask_again = c.words.carried.as_ref().and_then(|_| AskAgain::after(&rec));
        rec.history_warmup = c.warmup.done.take();
        let asked_with = c.asked_with.take();
        if !self.hold_continuation() {
            if let Some((system_prompt, before)) = asked_with {
                let c = &mut self.conversation;
                c.warmup.running =
                    Warming::after_turn(self.ctx.pipeline, &system_prompt, &before, &c.history);
            }
        }
        // Every stage is idle until the next endpoint: the moment to give back what this
        // turn freed (voxlat_core::memory says why).
        let took = voxlat_core::memory::release_free_memory();
        tracing::debug!(ms = took.as_secs_f64() * 1e3, "released free heap memory");
        Some(rec)
    }

    /// Starts the held reply to a continuation decided early, once the turn it continues has
    /// ended and left its words to carry; true if it did.
    fn hold_continuation(&mut self) -> bool {
        if !self.conversation.take_hold_when_idle() {
            return false;
        }
        match self.recognition.take_speculation() {
            Some((job, spent)) => {
                self.start_held(job, spent);
                true
            }
            None => false,
        }
    }
}
