//! Starting a turn: its own timeline, control and record, and the pipeline's response as one
//! future; the endpoint's facts are the session's, folded in when the turn ends.

use super::held_progress::HeldProgress;
use super::state::{InFlight, SourceState, TurnSlot};
use super::{Endpointed, Session, TurnMeta};
use crate::control::TurnControl;
use crate::error::TurnError;
use crate::meter::{meter, Spent};
use crate::record::{SpeculativeReply, TurnOutcome, TurnRecord};
use crate::respond::{Progress, ProgressFn, TurnCtx};
use crate::workers::AsrResult;
use std::sync::Arc;
use tokio::sync::oneshot;
use voxlat_core::{Nanos, RequestId, Timeline};

impl<'p> Session<'p> {
    pub(super) fn start(&mut self, e: Endpointed) {
        self.conversation.started += 1;
        let meta = (self.ctx.labels)(self.conversation.started);
        let progress = self.ctx.progress.clone();
        let endpoint = e.commit.received;
        let mut turn = self.launch(meta, e.asr, Some(endpoint), progress);
        turn.commit = Some(e.commit);
        self.conversation.turn = TurnSlot::Running(turn);
    }

    /// A speculative reply, from the provisional end's transcription (whose decode reports
    /// its time to `asr_spent`): it runs through TTS but is held (and quiet) until the
    /// endpoint commits it.
    pub(super) fn start_held(&mut self, asr: oneshot::Receiver<AsrResult>, asr_spent: Spent) {
        let meta = (self.ctx.labels)(self.conversation.started + 1);
        let (quiet, progress) = HeldProgress::new(self.ctx.progress.clone());
        let mut turn = self.launch(meta, asr, None, quiet);
        turn.asr_spent = Some(asr_spent);
        self.conversation.turn = TurnSlot::Held(turn, progress);
    }

    /// A turn's future: from its transcription to its reply played, and the record so far.
    /// `endpoint` is when the endpoint reached the session; none for a held reply, whose
    /// transcript is not bound to an endpoint yet (its stamps are raised to the endpoint at
    /// the commit instead). The commit's facts are folded in when it ends ([`super::fold`]).
    fn launch(
        &mut self,
        meta: TurnMeta,
        asr: oneshot::Receiver<AsrResult>,
        endpoint: Option<Nanos>,
        progress: Arc<ProgressFn>,
    ) -> InFlight<'p> {
        let c = &mut self.conversation;
        c.stop_warming();
        let pipeline = self.ctx.pipeline;
        let output = self.ctx.output;
        let mut history = std::mem::take(&mut c.history);
        c.asked_with = Some((
            meta.system_prompt
                .clone()
                .unwrap_or_else(|| pipeline.cfg.system_prompt.clone()),
            history.clone(),
        ));
        // Cloned, not taken: a held reply that is dropped must not take the words with it.
        let carried = c.words.carried.clone();
        let heard_before = c.words.heard_before.clone();
        let held = endpoint.is_none();
        let (control, steer) = TurnControl::new(held);
        let (meter, reply_spent) = meter();
        if !held {
            progress(Progress::Started(c.started));
        }
        let tl = Arc::new(Timeline::new(RequestId::new()));
        let turn_tl = tl.clone();
        let fut = Box::pin(async move {
            let mut rec = blank_record(&meta, &tl);
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
                steer: steer.clone(),
                progress: &*progress,
                held,
                meter,
                carried,
            };
            if let Err(err) = pipeline
                .respond(asr, endpoint.unwrap_or(Nanos(0)), cx)
                .await
            {
                fail(&mut rec, &err);
            }
            if held && !steer.committed().await {
                rec.speculative_reply = Some(SpeculativeReply {
                    committed: false,
                    compute_ms: rec.compute_ms(),
                    ..SpeculativeReply::default()
                });
                return (rec, history);
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
            (rec, history)
        });
        InFlight {
            fut,
            control,
            asr_spent: None,
            reply_spent,
            resumed_after_ms: None,
            merge: false,
            passed_over: Vec::new(),
            tl: turn_tl,
            commit: None,
            speculative: held,
        }
    }

    /// Replay's utterance that never reached an endpoint still has a record, once.
    pub(super) fn empty_source_record(&mut self) -> Option<TurnRecord> {
        if !self.ctx.opts.record_empty_source || self.conversation.started > 0 {
            return None;
        }
        self.conversation.started += 1;
        let meta = (self.ctx.labels)(1);
        let tl = Timeline::new(RequestId::new());
        let mut rec = blank_record(&meta, &tl);
        rec.retractions = self.recognition.retractions();
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
