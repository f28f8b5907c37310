//! Starting a turn: the endpoint's facts (known, or still to come for a held speculative
//! reply), the turn's own timeline and record, and the pipeline's response as one future.

use super::held_progress::HeldProgress;
use super::state::{InFlight, SourceState, TurnSlot, Uncommitted};
use super::{Endpointed, Facts, Session, TurnMeta};
use crate::error::TurnError;
use crate::meter::{meter, Spent};
use crate::record::{SpeculativeReply, TurnOutcome, TurnRecord};
use crate::respond::{Hold, Progress, ProgressFn, TurnCtx};
use crate::workers::AsrResult;
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use voxlat_core::{Nanos, RequestId, Timeline};

impl<'p> Session<'p> {
    pub(super) fn start(&mut self, e: Endpointed) {
        self.started += 1;
        let meta = (self.labels)(self.started);
        let progress = self.progress.clone();
        let turn = self.launch(meta, e.asr, Facts::Known(e.commit), progress, None);
        self.turn = TurnSlot::Running(turn);
    }

    /// A speculative reply, from the provisional end's transcription (whose decode reports
    /// its time to `asr_spent`): it runs through TTS but is held (and quiet) until the
    /// endpoint commits it.
    pub(super) fn start_held(&mut self, asr: oneshot::Receiver<AsrResult>, asr_spent: Spent) {
        let meta = (self.labels)(self.started + 1);
        let (facts, facts_rx) = oneshot::channel();
        let (release, hold) = watch::channel(None);
        let (quiet, progress) = HeldProgress::new(self.progress.clone());
        let facts_rx = Facts::Pending(facts_rx);
        let mut turn = self.launch(meta, asr, facts_rx, quiet, Some(hold));
        turn.asr_spent = Some(asr_spent);
        self.turn = TurnSlot::Held(
            turn,
            Uncommitted {
                facts,
                release,
                progress,
            },
        );
    }

    fn launch(
        &mut self,
        meta: TurnMeta,
        asr: oneshot::Receiver<AsrResult>,
        facts: Facts,
        progress: Arc<ProgressFn>,
        hold: Option<Hold>,
    ) -> InFlight<'p> {
        self.stop_warming();
        let pipeline = self.pipeline;
        let output = self.output;
        let mut history = std::mem::take(&mut self.history);
        self.asked_with = Some((
            meta.system_prompt
                .clone()
                .unwrap_or_else(|| pipeline.cfg.system_prompt.clone()),
            history.clone(),
        ));
        // Cloned, not taken: a held reply that is dropped must not take the words with it.
        let carried = self.carried.clone();
        let heard_before = self.heard_before.clone();
        let (cancel, cancel_rx) = watch::channel(None);
        let (pause, pause_rx) = watch::channel(None);
        let (meter, reply_spent) = meter();
        if matches!(facts, Facts::Known(_)) {
            progress(Progress::Started(self.started));
        }
        let tl = Arc::new(Timeline::new(RequestId::new()));
        let turn_tl = tl.clone();
        let fut = Box::pin(async move {
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
                pause: pause_rx,
                progress: &*progress,
                hold,
                meter,
                carried,
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
                    // What the user said: a merged turn's words begin in an earlier one, and
                    // so do those after a reply the user heard part of.
                    let asked =
                        crate::history::continued(rec.merged_words.as_deref(), &rec.transcript);
                    let said = crate::history::continued(heard_before.as_deref(), &asked);
                    rec.wer = Some(voxlat_core::text::wer(reference, &said));
                }
            }
            rec.events = tl.snapshot().events;
            if let Some(at) = committed_at {
                rec.commit_speculation(at);
            }
            rec.compute_breakdown();
            (rec, history)
        });
        InFlight {
            fut,
            cancel,
            asr_spent: None,
            reply_spent,
            resumed_after_ms: None,
            pause,
            merge: false,
            passed_over: Vec::new(),
            tl: turn_tl,
        }
    }

    /// Replay's utterance that never reached an endpoint still has a record, once.
    pub(super) fn empty_source_record(&mut self) -> Option<TurnRecord> {
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
            &if self.source == SourceState::Ended {
                TurnError::NoSpeech
            } else {
                TurnError::NoEndpoint
            },
        );
        Some(rec)
    }
}

pub(super) fn blank_record(meta: &TurnMeta, tl: &Timeline) -> TurnRecord {
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

pub(super) fn fail(rec: &mut TurnRecord, err: &TurnError) {
    rec.outcome = TurnOutcome::Error;
    rec.error = Some(err.to_string());
}
