//! One turn through the real stages.
//!
//! The source feeds 20 ms frames to the endpointer on its own thread (webrtc-vad is not
//! `Send`), paced in real time by default, so endpointing is measured as a user feels it.
//! Unpaced (`fast`), frames carry audio time and the endpointer's times are mapped onto the
//! process clock at the moment it decides (so endpointing is in audio time; the results say so).

use crate::record::{BusySpan, ChunkRecord, Interruption, TurnOutcome, TurnRecord};
use crate::scenario::LoadedTurn;
use crate::workers::{AsrResult, AsrWorker, TtsMsg, TtsWorker};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use voxlat_core::{clock, EventKind, Nanos, RequestId, Timeline};
use voxlat_llm::{ChatRequest, LlmClient, Message};
use voxlat_tts::chunker::ChunkerConfig;
use voxlat_tts::stream::ChunkAudio;
use voxlat_tts::tail::CleanEndChunker;
use voxlat_vad::{Endpointer, EndpointerConfig, VadEvent, WebRtcDetector};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipelineConfig {
    pub endpointer: EndpointerConfig,
    /// Start ASR on a provisional endpoint; keep the result if the endpoint is confirmed.
    pub speculative_asr: bool,
    /// Feed audio as fast as possible instead of in real time.
    pub fast: bool,
    /// Silence before each utterance, ms.
    pub lead_silence_ms: u32,
    pub model: String,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    pub stop: Vec<String>,
    pub system_prompt: String,
    /// Example exchanges put right after the system prompt. A base model (Gemma 270M has no
    /// chat tuning) otherwise echoes the prompt instead of answering; they also make the
    /// stable prefix longer, which is what a prefix cache reuses. An instruction-tuned model
    /// must get none: it copies them into its answers. The caller, which knows the model
    /// (the manifest's `tuning`), clears them; this crate does not depend on the manifest.
    pub examples: Vec<(String, String)>,
    /// Conversation history kept per session (messages, system prompt excluded).
    pub history_cap: usize,
    pub save_replies: Option<PathBuf>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            endpointer: EndpointerConfig::default(),
            speculative_asr: true,
            fast: false,
            lead_silence_ms: 300,
            model: "default".into(),
            max_tokens: 48,
            temperature: Some(0.0),
            stop: vec!["\n".into()],
            system_prompt: "You are a helpful voice assistant. Answer in one short sentence."
                .into(),
            examples: vec![
                (
                    "What is the capital of France?".into(),
                    "The capital of France is Paris.".into(),
                ),
                (
                    "How many legs does a spider have?".into(),
                    "A spider has eight legs.".into(),
                ),
            ],
            history_cap: 8,
            save_replies: None,
        }
    }
}

pub struct Pipeline {
    pub cfg: PipelineConfig,
    asr: AsrWorker,
    tts: TtsWorker,
    llm: LlmClient,
}

enum VadMsg {
    Event {
        ev: VadEvent,
        received: Nanos,
    },
    /// When the annotated last speech sample entered the pipeline (source clock).
    Truth(Nanos),
    /// The audio ran out without an endpoint.
    Done,
}

impl Pipeline {
    pub fn new(cfg: PipelineConfig, asr: AsrWorker, tts: TtsWorker, llm: LlmClient) -> Pipeline {
        Pipeline { cfg, asr, tts, llm }
    }

    /// Replays one utterance and returns its record. `history` is the conversation so far
    /// (user/assistant messages); the turn's exchange is appended when it succeeds.
    pub async fn run_turn(
        &self,
        turn: &LoadedTurn,
        history: &mut Vec<Message>,
        repeat: u32,
        warmup: bool,
        system_prompt: Option<&str>,
    ) -> TurnRecord {
        let tl = Arc::new(Timeline::new(RequestId::new()));
        let mut rec = TurnRecord {
            repeat,
            warmup,
            speech_end_annotated: turn.speech_end_annotated,
            ..TurnRecord::blank(
                &turn.scenario,
                &turn.spec.id,
                &tl.id().to_string(),
                &turn.spec.transcript,
            )
        };
        if let Err(e) = self
            .drive(
                turn,
                &tl,
                history,
                system_prompt.unwrap_or(&self.cfg.system_prompt),
                &mut rec,
            )
            .await
        {
            rec.outcome = TurnOutcome::Error;
            rec.error = Some(e);
        }
        rec.events = tl.snapshot().events;
        rec.compute_breakdown();
        rec
    }

    async fn drive(
        &self,
        turn: &LoadedTurn,
        tl: &Arc<Timeline>,
        history: &mut Vec<Message>,
        system_prompt: &str,
        rec: &mut TurnRecord,
    ) -> Result<(), String> {
        // 1. Source and endpointer.
        let (vad_tx, mut vad_rx) = mpsc::channel::<VadMsg>(64);
        let source = spawn_source(turn, &self.cfg, vad_tx)?;
        let mut speculative: Option<tokio::sync::oneshot::Receiver<AsrResult>> = None;
        let mut truth: Option<Nanos> = None;
        let endpoint = loop {
            let Some(msg) = vad_rx.recv().await else {
                return Err("the audio ended without an endpoint".into());
            };
            match msg {
                VadMsg::Truth(t) => truth = Some(t),
                VadMsg::Done => {
                    return Err("the endpointer found no speech in the utterance".into())
                }
                VadMsg::Event { ev, received } => match ev {
                    VadEvent::SpeechStart { at } => {
                        if !self.cfg.fast {
                            tl.mark_at(EventKind::SpeechStart, at);
                        }
                        rec.busy.push(BusySpan {
                            stage: "vad".into(),
                            from: at,
                            to: received,
                        });
                    }
                    VadEvent::Provisional { audio, .. } => {
                        if self.cfg.speculative_asr {
                            speculative = Some(self.asr.submit(audio));
                        }
                    }
                    VadEvent::Retracted { .. } => {
                        rec.retractions += 1;
                        speculative = None;
                    }
                    ep @ VadEvent::Endpoint { .. } => break (ep, received),
                },
            }
        };
        drop(vad_rx);
        let _ = source.join();
        let (
            VadEvent::Endpoint {
                speech_start,
                speech_end: vad_end,
                at,
                audio,
                confirms_provisional,
                ..
            },
            endpoint_real,
        ) = endpoint
        else {
            unreachable!("the loop breaks only on an endpoint")
        };
        // Source-clock times → process clock: identity when paced; anchored at the decision
        // when unpaced.
        let map = |t: Nanos| {
            if self.cfg.fast {
                Nanos(endpoint_real.0.saturating_sub(at.0.saturating_sub(t.0)))
            } else {
                t
            }
        };
        let speech_end_src = truth.unwrap_or(vad_end);
        tl.mark_at(EventKind::SpeechStart, map(speech_start));
        tl.mark_at(EventKind::SpeechEnd, map(speech_end_src));
        tl.mark_at(EventKind::Endpoint, endpoint_real);
        if let Some(t) = truth {
            rec.vad_speech_end_error_ms = Some(vad_end.signed_since(t) as f64 / 1e6);
        }
        rec.busy.push(BusySpan {
            stage: "endpointer".into(),
            from: map(speech_end_src),
            to: endpoint_real,
        });

        // 2. ASR: the speculative result if the endpoint confirmed it, else a fresh run.
        let pending = match (confirms_provisional, speculative) {
            (true, Some(rx)) => {
                rec.speculative_asr = true;
                rx
            }
            _ => self.asr.submit(audio),
        };
        let heard = Heard {
            asr: pending,
            endpoint: endpoint_real,
            expect_keywords: &turn.spec.expect_keywords,
        };
        self.respond(
            heard,
            tl,
            history,
            system_prompt,
            rec,
            &Output::Virtual,
            None,
            &mut |_| {},
        )
        .await
    }

    /// Submits the utterance to ASR, for callers that run their own endpointer (live mode).
    pub fn transcribe(&self, audio: Vec<f32>) -> oneshot::Receiver<AsrResult> {
        self.asr.submit(audio)
    }

    /// Everything after the endpoint: ASR → LLM → chunker → TTS → output, streaming. `cancel`
    /// (live mode's barge-in) interrupts whatever stage is running: the HTTP request is
    /// dropped (aborting it), queued TTS chunks are skipped and playback is stopped; the
    /// turn keeps the events stamped so far and is marked interrupted. `progress` sees the
    /// transcript, then the reply as it streams.
    #[allow(clippy::too_many_arguments)]
    pub async fn respond(
        &self,
        heard: Heard<'_>,
        tl: &Arc<Timeline>,
        history: &mut Vec<Message>,
        system_prompt: &str,
        rec: &mut TurnRecord,
        output: &Output,
        cancel: Option<watch::Receiver<Option<Nanos>>>,
        progress: &mut (dyn FnMut(Progress<'_>) + Send),
    ) -> Result<(), String> {
        let interrupt = |rec: &mut TurnRecord, stage: &str, onset: Nanos| {
            rec.outcome = TurnOutcome::Interrupted;
            rec.interrupted = Some(Interruption {
                onset,
                during: stage.into(),
                playback_stopped: None,
                reaction_ms: None,
                llm_aborted: false,
            });
        };
        let endpoint_real = heard.endpoint;
        let asr = tokio::select! {
            r = heard.asr => r.map_err(|_| "the ASR worker stopped".to_string())?,
            onset = cancelled(cancel.clone()) => {
                interrupt(rec, "asr", onset);
                return Ok(());
            }
        };
        // The transcript is available to the turn at confirmation at the earliest.
        let asr_done = Nanos(asr.finished.0.max(endpoint_real.0));
        tl.mark_at(EventKind::AsrDone, asr_done);
        rec.busy.push(BusySpan {
            stage: "asr".into(),
            from: asr.started,
            to: asr.finished,
        });
        let transcript = asr.transcript.map_err(|e| format!("ASR failed: {e}"))?;
        rec.asr_compute_ms = Some(transcript.compute.as_secs_f64() * 1e3);
        rec.asr_rtf = Some(transcript.real_time_factor);
        rec.asr_fallback = transcript.fallback.as_ref().map(|f| f.reason.clone());
        rec.asr_fallback_ms = transcript
            .fallback
            .as_ref()
            .map(|_| transcript.fallback_compute().as_secs_f64() * 1e3);
        rec.transcript = transcript.text.clone();
        rec.asr_rejected = transcript.rejected.clone();
        rec.wer = Some(voxlat_core::text::wer(&rec.reference, &rec.transcript));
        if transcript.text.trim().is_empty() {
            rec.outcome = TurnOutcome::NoSpeech;
            return Ok(());
        }
        progress(Progress::Transcript(&transcript.text));

        // 3. LLM → chunker → TTS → output, streaming.
        let mut messages = vec![Message::new("system", system_prompt)];
        for (q, a) in &self.cfg.examples {
            messages.push(Message::new("user", q.clone()));
            messages.push(Message::new("assistant", a.clone()));
        }
        messages.extend(history.iter().cloned());
        messages.push(Message::new("user", transcript.text.clone()));
        let req = ChatRequest {
            model: self.cfg.model.clone(),
            messages,
            max_tokens: Some(self.cfg.max_tokens),
            temperature: self.cfg.temperature,
            stop: self.cfg.stop.clone(),
            include_usage: true,
            ..ChatRequest::default()
        };
        let (audio_tx, audio_rx) = mpsc::unbounded_channel::<ChunkAudio>();
        let rate = self.tts.sample_rate;
        let sink = match output {
            Output::Virtual => tokio::spawn(sink(tl.clone(), audio_rx, rate)),
            Output::Device(speaker) => {
                let speaker = speaker.clone();
                let tl = tl.clone();
                let cancel = cancel.clone();
                tokio::spawn(async move { speaker.play(tl, audio_rx, rate, cancel).await })
            }
        };
        let tts_cancel = Arc::new(AtomicBool::new(false));
        self.tts.send(TtsMsg::Begin {
            timeline: tl.clone(),
            out: audio_tx,
            cancel: tts_cancel.clone(),
        });
        // The clean-end chunker withholds a trailing fragment or stray token once the stream
        // is done (voxlat_tts::tail), so Piper never speaks it.
        let mut chunker = CleanEndChunker::new(ChunkerConfig::default())
            .with_language_of(&format!("{system_prompt} {}", transcript.text));
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
        let stream = self.llm.stream_chat(&req, tl, |d| {
            if !d.reasoning {
                progress(Progress::Reply(d.text));
                streamed.push_str(d.text);
                for c in chunker.push(d.text) {
                    hand_over(c);
                }
            }
        });
        let llm_result = tokio::select! {
            r = stream => Some(r),
            _ = cancelled(cancel.clone()) => None,
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
                // The request future is dropped above: reqwest closes the connection, and
                // the server sees the client go away. Chunks still queued are not spoken.
                tts_cancel.store(true, Ordering::Release);
                rec.reply_text = streamed;
                None
            }
        };
        self.tts.send(TtsMsg::End);
        if let (Some(a), Some(b)) = (tl.get(EventKind::LlmSent), tl.get(EventKind::LlmDone)) {
            rec.busy.push(BusySpan {
                stage: "llm".into(),
                from: a,
                to: b,
            });
        }
        let played = sink
            .await
            .map_err(|e| format!("the audio sink failed: {e}"))?;
        tts_cancel.store(true, Ordering::Release);
        for c in &played.chunks {
            if let Some(fa) = c.first_audio {
                rec.busy.push(BusySpan {
                    stage: "tts".into(),
                    from: c.started,
                    to: fa,
                });
            }
        }
        if let (Some(a), Some(b)) = (played.first_arrival, tl.get(EventKind::PlayoutQueued)) {
            rec.busy.push(BusySpan {
                stage: "sink".into(),
                from: a,
                to: b,
            });
        }
        if let (Some(a), Some(b)) = (
            tl.get(EventKind::PlayoutQueued),
            tl.get(EventKind::PlayoutStart),
        ) {
            rec.busy.push(BusySpan {
                stage: "device".into(),
                from: a,
                to: b,
            });
        }
        rec.chunks = played.chunks;
        rec.underruns = played.underruns;
        rec.underrun_ms = played.underrun_ms;
        rec.device_xruns = played.xruns;
        rec.reply_audio_s = played.samples.len() as f64 / f64::from(rate.max(1));
        let lower = rec.reply_text.to_lowercase();
        rec.missing_keywords = heard
            .expect_keywords
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
        let onset = cancel.as_ref().and_then(|c| *c.borrow());
        if let Some(onset) = onset.filter(|_| aborted || played.stopped_at.is_some()) {
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
                    .map(|t| t.signed_since(onset) as f64 / 1e6);
            }
            return Ok(());
        }
        if let Some(e) = err {
            return Err(format!("LLM: {e}"));
        }
        if played.samples.is_empty() {
            return Err(format!(
                "the reply produced no audio (reply text {:?})",
                rec.reply_text
            ));
        }
        let spoken = spoken.join(" ");
        rec.quality = Some(crate::quality::check(
            &spoken,
            &transcript.text,
            system_prompt,
            heard.expect_keywords,
            &crate::quality::Bounds::default(),
        ));
        history.push(Message::new("user", transcript.text));
        // What the user heard, without a withheld stray token: the model should not see its
        // own noise as part of the conversation.
        history.push(Message::new("assistant", spoken));
        let cap = self.cfg.history_cap;
        if history.len() > cap {
            history.drain(..history.len() - cap);
        }
        rec.outcome = TurnOutcome::Ok;
        Ok(())
    }
}

/// Resolves with the barge-in onset once `cancel` carries one; never without a receiver.
async fn cancelled(cancel: Option<watch::Receiver<Option<Nanos>>>) -> Nanos {
    if let Some(mut rx) = cancel {
        if let Ok(v) = rx.wait_for(|v| v.is_some()).await {
            if let Some(t) = *v {
                return t;
            }
        }
    }
    std::future::pending().await
}

/// An utterance the endpointer has closed, with its transcription under way.
pub struct Heard<'a> {
    pub asr: oneshot::Receiver<AsrResult>,
    /// When the endpoint decision reached the pipeline.
    pub endpoint: Nanos,
    pub expect_keywords: &'a [String],
}

/// What a live caller sees of a turn as it happens.
pub enum Progress<'a> {
    Transcript(&'a str),
    /// A piece of the reply text, as streamed.
    Reply(&'a str),
}

/// Where replies are played.
pub enum Output {
    /// Replay's sink: plays as audio arrives, computes rather than sleeps.
    Virtual,
    /// A real output device.
    Device(crate::live::Speaker),
}

/// Feeds the utterance (with lead and trail silence) to an endpointer on its own thread.
fn spawn_source(
    turn: &LoadedTurn,
    cfg: &PipelineConfig,
    tx: mpsc::Sender<VadMsg>,
) -> Result<std::thread::JoinHandle<()>, String> {
    let rate = voxlat_audio::PIPELINE_RATE as usize;
    let lead = rate * cfg.lead_silence_ms as usize / 1000;
    let trail = rate * (cfg.endpointer.hangover_ms as usize + 1000) / 1000;
    let mut samples = vec![0.0f32; lead];
    samples.extend_from_slice(&turn.audio.samples);
    samples.extend(std::iter::repeat_n(0.0, trail));
    let truth_idx = lead + turn.speech_end_sample.saturating_sub(1);
    let ep_cfg = cfg.endpointer.clone();
    let fast = cfg.fast;
    std::thread::Builder::new()
        .name("source+vad".into())
        .spawn(move || {
            let detector = match WebRtcDetector::new(ep_cfg.mode, ep_cfg.frame_ms) {
                Ok(d) => d,
                Err(_) => return,
            };
            let Ok(mut ep) = Endpointer::new(ep_cfg, detector) else {
                return;
            };
            let frame = 320;
            let start = Instant::now();
            let t0 = clock::now();
            let mut truth_sent = false;
            for (k, chunk) in samples.chunks(frame).enumerate() {
                let last = k * frame + chunk.len() - 1;
                let t_end = if fast {
                    Nanos(t0.0 + (last as u64 * 1_000_000_000) / rate as u64)
                } else {
                    // Real time: frame k is complete (20 ms of audio captured) at (k+1)·20 ms.
                    let due = start
                        + Duration::from_micros(((last + 1) as u64 * 1_000_000) / rate as u64);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    clock::now()
                };
                if !truth_sent && last >= truth_idx {
                    truth_sent = true;
                    let back = ((last - truth_idx) as u64 * 1_000_000_000) / rate as u64;
                    if tx
                        .blocking_send(VadMsg::Truth(Nanos(t_end.0.saturating_sub(back))))
                        .is_err()
                    {
                        return;
                    }
                }
                let Ok(events) = ep.push(chunk, t_end) else {
                    return;
                };
                for ev in events {
                    let is_end = matches!(ev, VadEvent::Endpoint { .. });
                    if tx
                        .blocking_send(VadMsg::Event {
                            ev,
                            received: clock::now(),
                        })
                        .is_err()
                        || is_end
                    {
                        return;
                    }
                }
            }
            let _ = tx.blocking_send(VadMsg::Done);
        })
        .map_err(|e| e.to_string())
}

/// What an output did with one reply.
#[derive(Default)]
pub(crate) struct Played {
    pub chunks: Vec<ChunkRecord>,
    pub samples: Vec<f32>,
    pub first_arrival: Option<Nanos>,
    pub underruns: u32,
    pub underrun_ms: f64,
    /// When a barge-in silenced the output.
    pub stopped_at: Option<Nanos>,
    /// Underruns the device driver reported while the reply played.
    pub xruns: u64,
}

/// A virtual output device consuming audio at real-time pace: the first sample plays as soon
/// as it arrives; each later chunk is due when the previous one finishes, and arriving after
/// that is an underrun (a gap the listener hears). Playback is computed, not slept through.
async fn sink(tl: Arc<Timeline>, mut rx: mpsc::UnboundedReceiver<ChunkAudio>, rate: u32) -> Played {
    let mut p = Played::default();
    let mut playing_until: Option<Nanos> = None;
    while let Some(c) = rx.recv().await {
        let arrival = clock::now();
        p.chunks.push(ChunkRecord::of(&c));
        if c.samples.is_empty() {
            continue;
        }
        let dur = Duration::from_secs_f64(c.samples.len() as f64 / f64::from(rate.max(1)));
        let start = match playing_until {
            None => {
                p.first_arrival = Some(arrival);
                // No buffer: queued and leaving the "device" are the same moment.
                let t = tl.mark(EventKind::PlayoutQueued);
                tl.mark_at(EventKind::PlayoutStart, t);
                t
            }
            Some(until) if arrival > until => {
                p.underruns += 1;
                p.underrun_ms += arrival.signed_since(until) as f64 / 1e6;
                arrival
            }
            Some(until) => until,
        };
        playing_until = Some(start.saturating_add(dur));
        p.samples.extend_from_slice(&c.samples);
    }
    if let Some(end) = playing_until {
        tl.mark_at(EventKind::PlayoutDone, end);
    }
    p
}
