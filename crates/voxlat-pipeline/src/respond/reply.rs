//! The reply as it streams: LLM deltas through the clean-end chunker to TTS, and TTS audio to
//! the output, all at once; a barge-in drops the request and skips what is still queued.

use super::{opened_at_commit, Pipeline, Progress, ProgressFn};
use crate::control::Steer;
use crate::error::TurnError;
use crate::meter::Meter;
use crate::output::{Output, Played};
use crate::record::{Stage, TurnRecord};
use crate::workers::{TtsBegin, TtsTurn};
use std::sync::Arc;
use tokio::sync::mpsc;
use voxlat_core::{clock, EventKind, Timeline};
use voxlat_llm::{ChatRequest, LlmError, StreamOutcome};
use voxlat_tts::chunker::ChunkerConfig;
use voxlat_tts::stream::ChunkAudio;
use voxlat_tts::tail::CleanEndChunker;

/// What the reply is asked with, and where it goes.
pub(super) struct Ask<'a> {
    pub req: &'a ChatRequest,
    pub tl: &'a Arc<Timeline>,
    /// Text in the reply's language, for the chunker's sentence rules.
    pub language_hint: String,
    pub output: &'a dyn Output,
    pub steer: &'a Steer,
    pub progress: &'a ProgressFn,
    /// A speculative reply: its output opens at the commit.
    pub held: bool,
    pub meter: Meter,
}

/// How the reply went.
pub(super) struct Streamed {
    /// A barge-in dropped the LLM request.
    pub aborted: bool,
    pub err: Option<LlmError>,
    /// The chunks handed to TTS, in order.
    pub spoken: Vec<String>,
    pub played: Played,
}

impl Pipeline {
    /// Streams the reply to the output and waits until it has played (or was stopped).
    pub(super) async fn stream_reply(
        &self,
        ask: Ask<'_>,
        rec: &mut TurnRecord,
    ) -> Result<Streamed, TurnError> {
        let Ask { tl, steer, .. } = ask;
        let (audio_tx, audio_rx) = mpsc::unbounded_channel::<ChunkAudio>();
        let play = ask
            .output
            .play(tl.clone(), audio_rx, self.tts.sample_rate, steer.clone());
        let sink = tokio::spawn(if ask.held {
            opened_at_commit(play, steer.clone())
        } else {
            play
        });
        // Cancelled, TTS skips what is still queued; the output stops on the same control.
        let tts = self.tts.begin(TtsBegin {
            timeline: tl.clone(),
            out: audio_tx,
            meter: Some(ask.meter.clone()),
            steer: steer.clone(),
        });
        let (llm, spoken) = self
            .stream_text(ask.req, tl, &ask.language_hint, steer, ask.progress, &tts)
            .await;
        let aborted = llm.is_none();
        let err = match llm {
            Some((outcome, err, dropped)) => {
                rec.dropped_tail = dropped;
                rec.reply_text = outcome.text.clone();
                rec.llm = Some(outcome);
                err
            }
            None => {
                // The request future was dropped: the connection closes, and the server sees
                // the client go away. Chunks still queued are not spoken (the turn is
                // cancelled).
                rec.reply_text = spoken.streamed;
                None
            }
        };
        // The turn's text is all handed over; its audio plays on.
        drop(tts);
        // An abandoned request was busy until it was dropped.
        let llm_busy = tl.get(EventKind::LlmSent).zip(
            tl.get(EventKind::LlmDone)
                .or_else(|| aborted.then(clock::now)),
        );
        if let Some((from, to)) = llm_busy {
            ask.meter.span(from, to);
        }
        rec.push_span(Stage::Llm, llm_busy.map(|b| b.0), llm_busy.map(|b| b.1));
        let played = sink.await.map_err(|e| TurnError::Output(e.to_string()))?;
        Ok(Streamed {
            aborted,
            err,
            spoken: spoken.chunks,
            played,
        })
    }

    /// The LLM stream, chunked for TTS as it comes: the outcome, its error and the tail the
    /// chunker withheld; `None` if a barge-in came first.
    async fn stream_text(
        &self,
        req: &ChatRequest,
        tl: &Timeline,
        language_hint: &str,
        steer: &Steer,
        progress: &ProgressFn,
        tts: &TtsTurn,
    ) -> (
        Option<(StreamOutcome, Option<LlmError>, Option<String>)>,
        Text,
    ) {
        // The clean-end chunker withholds a trailing fragment or stray token once the stream
        // is done (voxlat_tts::tail), so Piper never speaks it.
        let mut chunker = CleanEndChunker::new(ChunkerConfig {
            first_chunk_max_chars: self.cfg.first_chunk_max_chars,
            ..ChunkerConfig::default()
        })
        .with_language_of(language_hint);
        let mut text = Text::default();
        let result = {
            let mut on_delta = |d: voxlat_llm::client::TextDelta<'_>| {
                if !d.reasoning {
                    progress(Progress::Reply(d.text));
                    text.streamed.push_str(d.text);
                    for c in chunker.push(d.text) {
                        hand_over(tl, &mut text, c, tts);
                    }
                }
            };
            tokio::select! {
                r = self.llm.stream_chat(req, tl, &mut on_delta) => Some(r),
                _ = steer.cancelled() => None,
            }
        };
        let Some((outcome, err)) = result else {
            return (None, text);
        };
        let end = chunker.finish(outcome.finish_reason.as_deref() == Some("length"));
        for c in end.chunks {
            hand_over(tl, &mut text, c, tts);
        }
        (Some((outcome, err, end.dropped)), text)
    }
}

fn hand_over(tl: &Timeline, text: &mut Text, chunk: String, tts: &TtsTurn) {
    text.chunks.push(chunk.clone());
    let submitted = clock::now();
    tl.mark_at(EventKind::FirstChunk, submitted);
    tts.chunk(chunk, submitted);
}

/// The reply's text so far: as streamed, and as handed to TTS.
#[derive(Default)]
pub(super) struct Text {
    pub streamed: String,
    pub chunks: Vec<String>,
}
