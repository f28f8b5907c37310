//! Everything after the endpoint: ASR result → LLM → clean-end chunker → TTS → output,
//! streaming. A barge-in (`cancel`) interrupts whatever stage is running: the HTTP request is
//! dropped (aborting it), queued TTS chunks are skipped and playback is stopped; the turn
//! keeps the events stamped so far and is marked interrupted.

mod outcome;
mod reply;
mod transcript;

use crate::config::PipelineConfig;
use crate::control::Steer;
use crate::error::TurnError;
use crate::meter::Meter;
use crate::output::{Output, Played};
use crate::record::{Interruption, Stage, TurnOutcome, TurnRecord};
use crate::stages::{BoxFuture, Replier};
use crate::workers::{AsrRequest, AsrResult, AsrWorker, TtsWorker};
use std::sync::Arc;
use tokio::sync::oneshot;
use voxlat_core::{Nanos, Timeline};
use voxlat_llm::{ChatRequest, Message};
use voxlat_vad::SharedScorer;

/// The stages a session drives, and how.
pub struct Pipeline {
    pub cfg: PipelineConfig,
    asr: AsrWorker,
    tts: TtsWorker,
    llm: Box<dyn Replier>,
    /// The end-of-turn model each endpointer of this pipeline consults, if any.
    turn_model: Option<SharedScorer>,
}

/// What a live caller sees of a turn as it happens.
pub enum Progress<'a> {
    /// The n-th turn of the session begins (its endpoint was reached).
    Started(u32),
    Transcript(&'a str),
    /// A piece of the reply text, as streamed.
    Reply(&'a str),
}

pub type ProgressFn = dyn Fn(Progress<'_>) + Send + Sync;

/// One turn's surroundings while it responds.
pub(crate) struct TurnCtx<'a> {
    pub tl: &'a Arc<Timeline>,
    pub rec: &'a mut TurnRecord,
    pub history: &'a mut Vec<Message>,
    pub system_prompt: &'a str,
    pub expect_keywords: &'a [String],
    pub output: &'a dyn Output,
    /// The turn's control: cancel, pause and resume, and a held reply's commit.
    pub steer: Steer,
    pub progress: &'a ProgressFn,
    /// A speculative reply: its audio is held until `steer` commits it, and never plays if
    /// it is dropped first.
    pub held: bool,
    /// A speculative reply's: the LLM request and TTS report their time to it, which is the
    /// waste if the reply is discarded.
    /// Told the reply's LLM and TTS compute, heard or not.
    pub meter: Meter,
    /// Words of an earlier commit whose reply the user never heard because they went on:
    /// this turn's transcript continues them, and the LLM is asked with both.
    pub carried: Option<String>,
}

impl Pipeline {
    pub fn new(
        cfg: PipelineConfig,
        asr: AsrWorker,
        tts: TtsWorker,
        llm: Box<dyn Replier>,
    ) -> Pipeline {
        Pipeline {
            cfg,
            asr,
            tts,
            llm,
            turn_model: None,
        }
    }

    /// Ends turns with `cfg.endpointer.turn` and this model instead of the plain hangover.
    pub fn with_turn_model(mut self, scorer: SharedScorer) -> Pipeline {
        self.turn_model = Some(scorer);
        self
    }

    pub fn turn_model(&self) -> Option<&SharedScorer> {
        self.turn_model.as_ref()
    }

    /// Queues an utterance for transcription.
    pub(crate) fn transcribe(&self, req: AsrRequest) -> oneshot::Receiver<AsrResult> {
        self.asr.request(req)
    }

    /// From the transcription in flight to the reply played. `endpoint` is when the
    /// endpoint decision reached the pipeline: the transcript counts from then at the
    /// earliest.
    pub(crate) async fn respond(
        &self,
        asr: oneshot::Receiver<AsrResult>,
        endpoint: Nanos,
        cx: TurnCtx<'_>,
    ) -> Result<(), TurnError> {
        let TurnCtx {
            tl,
            rec,
            history,
            system_prompt,
            expect_keywords,
            output,
            steer,
            progress,
            held,
            meter,
            carried,
        } = cx;
        rec.merged_words = carried.clone();
        let Some(transcript) = transcript::awaited(asr, endpoint, tl, rec, &steer).await? else {
            return Ok(());
        };
        // What the user said in this turn, earlier words first: a cough after an early
        // commit leaves the earlier words to answer.
        let user_text = crate::history::continued(carried.as_deref(), &transcript.text);
        if user_text.trim().is_empty() {
            rec.outcome = TurnOutcome::NoSpeech;
            return Ok(());
        }
        progress(Progress::Transcript(&user_text));
        let req = self.request(system_prompt, history, Some(&user_text));
        let ask = reply::Ask {
            req: &req,
            tl,
            language_hint: format!("{system_prompt} {user_text}"),
            output,
            steer: &steer,
            progress,
            held,
            meter,
        };
        let mut reply = self.stream_reply(ask, rec).await?;
        outcome::record_output(rec, tl, &mut reply.played, self.tts.sample_rate, &self.cfg);
        outcome::record_keywords(rec, expect_keywords);
        if outcome::ended_by_cancel(rec, tl, &steer, reply.aborted, &reply.played) {
            // What the user heard of it stays in the conversation, so that what they say next
            // is read against it ("And Germany?" after "The capital of France is Par…").
            if let Some(heard) = outcome::heard_reply(rec, tl, &reply.spoken) {
                if let Some(i) = rec.interrupted.as_mut() {
                    i.heard = Some(heard.clone());
                }
                crate::history::remember(history, user_text, heard, self.cfg.history_cap);
            }
            return Ok(());
        }
        if let Some(e) = reply.err {
            return Err(TurnError::Llm(e));
        }
        if reply.played.samples.is_empty() {
            return Err(TurnError::NoAudio(rec.reply_text.clone()));
        }
        let spoken = reply.spoken.join(" ");
        outcome::grade(rec, &spoken, &user_text, system_prompt, expect_keywords);
        // What the user heard, without a withheld stray token: the model should not see its
        // own noise as part of the conversation.
        crate::history::remember(history, user_text, spoken, self.cfg.history_cap);
        rec.outcome = TurnOutcome::Ok;
        Ok(())
    }

    /// Evaluates the prompt the next turn will start with (system prompt, examples, `history`)
    /// with a one-token request whose answer nobody reads: the server's prefix cache then
    /// holds it (`PipelineConfig::warm_cut_history`). True when the request ended without an
    /// error; dropping the future abandons it.
    pub(crate) fn warm_prefix(
        &self,
        system_prompt: &str,
        history: &[Message],
    ) -> BoxFuture<'_, bool> {
        let mut req = self.request(system_prompt, history, None);
        req.max_tokens = Some(1);
        req.include_usage = false;
        Box::pin(async move {
            let tl = Timeline::new(voxlat_core::RequestId::new());
            let mut ignore = |_: voxlat_llm::client::TextDelta<'_>| {};
            let (_, err) = self.llm.stream_chat(&req, &tl, &mut ignore).await;
            err.is_none()
        })
    }

    /// System prompt, the examples the model needs, the history, then the user's words.
    fn request(&self, system_prompt: &str, history: &[Message], user: Option<&str>) -> ChatRequest {
        let mut messages = vec![Message::new("system", system_prompt)];
        for (q, a) in &self.cfg.examples {
            messages.push(Message::new("user", q.clone()));
            messages.push(Message::new("assistant", a.clone()));
        }
        messages.extend(history.iter().cloned());
        messages.extend(user.map(|u| Message::new("user", u)));
        ChatRequest {
            model: self.cfg.model.clone(),
            messages,
            max_tokens: Some(self.cfg.max_tokens),
            temperature: self.cfg.temperature,
            stop: self.cfg.stop.clone(),
            include_usage: true,
            ..ChatRequest::default()
        }
    }
}

fn interrupt(rec: &mut TurnRecord, stage: Stage, onset: Nanos) {
    rec.outcome = TurnOutcome::Interrupted;
    rec.interrupted = Some(Interruption {
        onset,
        during: stage,
        playback_stopped: None,
        reaction_ms: None,
        llm_aborted: false,
        heard: None,
    });
}

/// Starts a held reply's output only once `steer` commits it: its audio waits in the
/// channel meanwhile, and a reply dropped first never opens the output, so nothing plays.
/// Opening is what matters live: the speaker gates the microphone from the moment a reply
/// begins, and a gate closed at the provisional end would keep from the endpointer the very
/// silence that commits the turn.
fn opened_at_commit(play: BoxFuture<'static, Played>, steer: Steer) -> BoxFuture<'static, Played> {
    Box::pin(async move {
        if steer.committed().await {
            play.await
        } else {
            Played::default()
        }
    })
}
