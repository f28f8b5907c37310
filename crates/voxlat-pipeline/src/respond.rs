//! Everything after the endpoint: ASR result → LLM → clean-end chunker → TTS → output,
//! streaming. A barge-in (`cancel`) interrupts whatever stage is running: the HTTP request is
//! dropped (aborting it), queued TTS chunks are skipped and playback is stopped; the turn
//! keeps the events stamped so far and is marked interrupted.

use crate::config::PipelineConfig;
use crate::error::TurnError;
use crate::meter::Meter;
use crate::output::{Cancel, Output, Played};
use crate::record::{BusySpan, Interruption, TurnOutcome, TurnRecord};
use crate::stages::{BoxFuture, Replier};
use crate::workers::{AsrResult, AsrWorker, TtsMsg, TtsWorker};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};
use voxlat_core::{clock, EventKind, Nanos, Timeline};
use voxlat_llm::{ChatRequest, Message};
use voxlat_tts::chunker::ChunkerConfig;
use voxlat_tts::stream::ChunkAudio;
use voxlat_tts::tail::CleanEndChunker;
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
    pub cancel: Cancel,
    pub progress: &'a ProgressFn,
    /// A speculative reply: its audio is held until this carries the commit (the endpoint),
    /// and never plays if `cancel` fires first.
    pub hold: Option<Hold>,
    /// A speculative reply's: the LLM request and TTS report their time to it, which is the
    /// waste if the reply is discarded.
    pub meter: Option<Meter>,
    /// Words of an earlier commit whose reply the user never heard because they went on:
    /// this turn's transcript continues them, and the LLM is asked with both.
    pub carried: Option<String>,
}

/// When a held reply may play: `Some(endpoint)` once the turn is committed.
pub(crate) type Hold = watch::Receiver<Option<Nanos>>;

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
    pub(crate) fn transcribe(&self, audio: Vec<f32>) -> oneshot::Receiver<AsrResult> {
        self.asr.submit(audio)
    }

    /// Queues a speculative transcription, its decode time reported to `meter`.
    pub(crate) fn transcribe_metered(
        &self,
        audio: Vec<f32>,
        meter: Meter,
    ) -> oneshot::Receiver<AsrResult> {
        self.asr.submit_metered(audio, Some(meter))
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
            cancel,
            progress,
            hold,
            meter,
            carried,
        } = cx;
        rec.merged_words = carried.clone();
        let mut asr = asr;
        let asr = tokio::select! {
            r = &mut asr => r.map_err(|_| TurnError::AsrWorkerGone)?,
            onset = cancelled(cancel.clone()) => {
                interrupt(rec, "asr", onset);
                // The decode finishes anyway: its words are what the next turn continues.
                if let Ok(Ok(t)) = asr.await.map(|r| r.transcript) {
                    rec.transcript = t.text;
                }
                return Ok(());
            }
        };
        let asr_done = Nanos(asr.finished.0.max(endpoint.0));
        tl.mark_at(EventKind::AsrDone, asr_done);
        rec.busy.push(BusySpan {
            stage: "asr".into(),
            from: asr.started,
            to: asr.finished,
        });
        let transcript = asr.transcript.map_err(TurnError::Asr)?;
        rec.asr_compute_ms = Some(transcript.compute.as_secs_f64() * 1e3);
        rec.asr_rtf = Some(transcript.real_time_factor);
        rec.asr_remote = transcript.remote.clone();
        rec.asr_fallback = transcript.fallback.as_ref().map(|f| f.reason.clone());
        rec.asr_fallback_ms = transcript
            .fallback
            .as_ref()
            .map(|_| transcript.fallback_compute().as_secs_f64() * 1e3);
        rec.transcript = transcript.text.clone();
        rec.asr_rejected = transcript.rejected.clone();
        // What the user said in this turn, earlier words first: a cough after an early
        // commit leaves the earlier words to answer.
        let user_text = crate::history::continued(carried.as_deref(), &transcript.text);
        if user_text.trim().is_empty() {
            rec.outcome = TurnOutcome::NoSpeech;
            return Ok(());
        }
        progress(Progress::Transcript(&user_text));

        let req = self.request(system_prompt, history, &user_text);
        let (audio_tx, audio_rx) = mpsc::unbounded_channel::<ChunkAudio>();
        let rate = self.tts.sample_rate;
        let play = output.play(tl.clone(), audio_rx, rate, cancel.clone());
        let sink = tokio::spawn(match hold {
            Some(h) => opened_at_commit(play, h, cancel.clone()),
            None => play,
        });
        let tts_cancel = Arc::new(AtomicBool::new(false));
        self.tts.send(TtsMsg::Begin {
            timeline: tl.clone(),
            out: audio_tx,
            cancel: tts_cancel.clone(),
            meter: meter.clone(),
        });
        // The clean-end chunker withholds a trailing fragment or stray token once the stream
        // is done (voxlat_tts::tail), so Piper never speaks it.
        let mut chunker = CleanEndChunker::new(ChunkerConfig {
            first_chunk_max_chars: self.cfg.first_chunk_max_chars,
            ..ChunkerConfig::default()
        })
        .with_language_of(&format!("{system_prompt} {user_text}"));
        let tts = &self.tts;
        let mut spoken: Vec<String> = Vec::new();
        let mut hand_over = |chunk: String| {
            spoken.push(chunk.clone());
            let submitted = clock::now();
            tl.mark_at(EventKind::FirstChunk, submitted);
            tts.send(TtsMsg::Chunk {
                text: chunk,
                submitted,
            });
        };
        let mut streamed = String::new();
        let llm_result = {
            let mut on_delta = |d: voxlat_llm::client::TextDelta<'_>| {
                if !d.reasoning {
                    progress(Progress::Reply(d.text));
                    streamed.push_str(d.text);
                    for c in chunker.push(d.text) {
                        hand_over(c);
                    }
                }
            };
            let stream = self.llm.stream_chat(&req, tl, &mut on_delta);
            tokio::select! {
                r = stream => Some(r),
                _ = cancelled(cancel.clone()) => None,
            }
        };
        let aborted = llm_result.is_none();
        let err = match llm_result {
            Some((outcome, err)) => {
                let capped = outcome.finish_reason.as_deref() == Some("length");
                let end = chunker.finish(capped);
                for c in end.chunks {
                    hand_over(c);
                }
                rec.dropped_tail = end.dropped;
                rec.reply_text = outcome.text.clone();
                rec.llm = Some(outcome);
                err
            }
            None => {
                // The request future is dropped above: the connection closes, and the server
                // sees the client go away. Chunks still queued are not spoken.
                tts_cancel.store(true, Ordering::Release);
                rec.reply_text = streamed;
                None
            }
        };
        self.tts.send(TtsMsg::End);
        // An abandoned request was busy until it was dropped.
        let llm_busy = tl.get(EventKind::LlmSent).zip(
            tl.get(EventKind::LlmDone)
                .or_else(|| aborted.then(clock::now)),
        );
        if let (Some(m), Some((from, to))) = (&meter, llm_busy) {
            m.span(from, to);
        }
        rec.push_span("llm", llm_busy.map(|b| b.0), llm_busy.map(|b| b.1));
        let played = sink.await.map_err(|e| TurnError::Output(e.to_string()))?;
        tts_cancel.store(true, Ordering::Release);
        for c in &played.chunks {
            rec.push_span("tts", Some(c.started), c.first_audio);
        }
        rec.push_span(
            "sink",
            played.first_arrival,
            tl.get(EventKind::PlayoutQueued),
        );
        rec.push_span(
            "device",
            tl.get(EventKind::PlayoutQueued),
            tl.get(EventKind::PlayoutStart),
        );
        rec.underruns = played.underruns;
        rec.underrun_ms = played.underrun_ms;
        rec.device_xruns = played.xruns;
        rec.reply_audio_s = played.samples.len() as f64 / f64::from(rate.max(1));
        let lower = rec.reply_text.to_lowercase();
        rec.missing_keywords = expect_keywords
            .iter()
            .filter(|k| !lower.contains(&k.to_lowercase()))
            .cloned()
            .collect();
        if let Some(dir) = &self.cfg.save_replies {
            let path = dir.join(format!("{}-{}-{}.wav", rec.scenario, rec.turn, rec.repeat));
            if let Err(e) = voxlat_audio::wav::write(&path, &played.samples, rate) {
                tracing::warn!("{e}");
            }
        }
        rec.chunks = played.chunks;
        let onset = *cancel.borrow();
        // Cancelled with nothing heard (a speculative reply whose user resumed) is an
        // interruption too, not a reply without audio.
        if let Some(onset) =
            onset.filter(|_| aborted || played.stopped_at.is_some() || played.samples.is_empty())
        {
            let during = if tl.get(EventKind::PlayoutStart).is_some() {
                "playout"
            } else if aborted {
                "llm"
            } else {
                "tts"
            };
            interrupt(rec, during, onset);
            if let Some(i) = rec.interrupted.as_mut() {
                i.llm_aborted = aborted;
                i.playback_stopped = played.stopped_at;
                i.reaction_ms = played
                    .stopped_at
                    .map(|t| clock::ns_to_ms(t.signed_since(onset)));
            }
            return Ok(());
        }
        if let Some(e) = err {
            return Err(TurnError::Llm(e));
        }
        if played.samples.is_empty() {
            return Err(TurnError::NoAudio(rec.reply_text.clone()));
        }
        let spoken = spoken.join(" ");
        rec.quality = Some(crate::quality::check(
            &spoken,
            &user_text,
            system_prompt,
            expect_keywords,
            &crate::quality::Bounds::default(),
        ));
        // Graded again as the LLM wrote it: the filter withholds what would fail, so the
        // spoken verdict alone would flatter the model.
        rec.quality_before_filter = Some(crate::quality::check(
            &crate::quality::before_filter(&spoken, rec.dropped_tail.as_deref()),
            &user_text,
            system_prompt,
            expect_keywords,
            &crate::quality::Bounds::default(),
        ));
        // What the user heard, without a withheld stray token: the model should not see its
        // own noise as part of the conversation.
        crate::history::remember(history, user_text, spoken, self.cfg.history_cap);
        rec.outcome = TurnOutcome::Ok;
        Ok(())
    }

    /// System prompt, the examples the model needs, the history, then the user's words.
    fn request(&self, system_prompt: &str, history: &[Message], user: &str) -> ChatRequest {
        let mut messages = vec![Message::new("system", system_prompt)];
        for (q, a) in &self.cfg.examples {
            messages.push(Message::new("user", q.clone()));
            messages.push(Message::new("assistant", a.clone()));
        }
        messages.extend(history.iter().cloned());
        messages.push(Message::new("user", user));
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

fn interrupt(rec: &mut TurnRecord, stage: &str, onset: Nanos) {
    rec.outcome = TurnOutcome::Interrupted;
    rec.interrupted = Some(Interruption {
        onset,
        during: stage.into(),
        playback_stopped: None,
        reaction_ms: None,
        llm_aborted: false,
    });
}

/// Starts a held reply's output only once `hold` carries the commit: its audio waits in the
/// channel meanwhile, and a reply cancelled first never opens the output, so nothing plays.
/// Opening is what matters live: the speaker gates the microphone from the moment a reply
/// begins, and a gate closed at the provisional end would keep from the endpointer the very
/// silence that commits the turn.
fn opened_at_commit(
    play: BoxFuture<'static, Played>,
    mut hold: Hold,
    cancel: Cancel,
) -> BoxFuture<'static, Played> {
    Box::pin(async move {
        let go = tokio::select! {
            r = hold.wait_for(|c| c.is_some()) => r.is_ok(),
            _ = cancelled(cancel) => false,
        };
        if go {
            play.await
        } else {
            Played::default()
        }
    })
}

/// Resolves with the barge-in onset once `cancel` carries one; never if its sender is gone
/// without one.
pub(crate) async fn cancelled(mut cancel: Cancel) -> Nanos {
    if let Ok(v) = cancel.wait_for(|v| v.is_some()).await {
        if let Some(t) = *v {
            return t;
        }
    }
    std::future::pending().await
}
