//! Streaming synthesis for one turn: text chunks in, PCM out per chunk, events on the turn's
//! timeline.
//!
//! Stamps (first stamp wins on a [`Timeline`], so a pipeline that stamped earlier keeps its
//! own): `first_chunk` when the first chunk is submitted, `tts_first_audio` when the first
//! chunk that has something to say has its audio, `tts_done` when the stream is finished.
//! That chunk loses the voice's leading silence ([`crate::lead`]) before anyone plays it.
//! Every chunk also reports its own submit, start and audio times, so a pipeline can show
//! per-chunk figures the single-slot timeline cannot hold.
//!
//! A chunk with nothing to say (only punctuation or emoji, see [`crate::text`]) yields no
//! audio and a [`SkipReason`]; it is not an error and does not end the stream.

use crate::error::{SkipReason, TtsError};
use crate::lead::{self, Lead};
use crate::piper::{Speech, Voice};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use voxlat_core::{clock, EventKind, Nanos, RequestId, Timeline};

/// One chunk's result.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkAudio {
    /// Position in the stream, from 0.
    pub index: usize,
    pub text: String,
    /// Mono samples at `sample_rate`; empty when skipped.
    pub samples: Vec<f32>,
    pub sample_rate: u32,
    pub timing: ChunkTiming,
    /// Why the chunk produced no audio, if it did not.
    pub skipped: Option<SkipReason>,
    /// The call, when a remote server spoke the chunk.
    /// Boxed: most chunks are spoken in process and carry none.
    pub remote: Option<Box<voxlat_core::remote::RemoteCall>>,
    /// The turn's first chunk with audio: the silence trimmed from its start and where its
    /// voice begins ([`crate::lead`]). `None` on every other chunk.
    pub lead: Option<Lead>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkTiming {
    /// Handed to TTS (queued, for the threaded stream).
    pub submitted: Nanos,
    /// Synthesis began.
    pub started: Nanos,
    /// The chunk's audio was available; `None` when skipped.
    pub first_audio: Option<Nanos>,
}

impl ChunkTiming {
    /// submitted → first audio: what a listener waits for this chunk.
    pub fn time_to_first_audio(&self) -> Option<Duration> {
        self.first_audio
            .map(|t| Duration::from_nanos(t.0.saturating_sub(self.submitted.0)))
    }
}

impl ChunkAudio {
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.samples.len() as f64 / f64::from(self.sample_rate.max(1)))
    }
}

/// Totals for a finished stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamSummary {
    pub chunks: usize,
    pub skipped: usize,
    pub failed: usize,
    pub audio: Duration,
    /// Summed synthesis time of the chunks.
    pub compute: Duration,
}

impl StreamSummary {
    /// compute / audio; infinite when there was no audio.
    pub fn real_time_factor(&self) -> f64 {
        let audio = self.audio.as_secs_f64();
        if audio > 0.0 {
            self.compute.as_secs_f64() / audio
        } else {
            f64::INFINITY
        }
    }
}

/// Synthesis of one turn, a method call per chunk.
pub struct TtsStream<'v, V: Synthesize + ?Sized = Voice> {
    voice: &'v mut V,
    timeline: Arc<Timeline>,
    next_index: usize,
    summary: StreamSummary,
    /// A chunk with audio has been spoken, so the next one keeps its leading silence.
    voiced: bool,
}

/// What a stream needs of a voice. Piper's [`Voice`] is the product's; a test can script one
/// (fixed audio, set delays) and still get the stream's stamps and per-chunk records.
pub trait Synthesize {
    fn sample_rate(&self) -> u32;
    /// The whole text's audio. `TtsError::NothingToSay` marks a chunk to skip, not a failure.
    fn synthesize(&mut self, text: &str) -> Result<Speech, TtsError>;
    /// As `synthesize`, for the turn `request`: a remote voice sends it as `X-Request-Id`.
    fn synthesize_for(&mut self, text: &str, request: &RequestId) -> Result<Speech, TtsError> {
        let _ = request;
        self.synthesize(text)
    }
}

impl Synthesize for Voice {
    fn sample_rate(&self) -> u32 {
        Voice::sample_rate(self)
    }
    fn synthesize(&mut self, text: &str) -> Result<Speech, TtsError> {
        Voice::synthesize(self, text)
    }
}

impl<'v, V: Synthesize + ?Sized> TtsStream<'v, V> {
    pub fn new(voice: &'v mut V, timeline: Arc<Timeline>) -> Self {
        Self {
            voice,
            timeline,
            next_index: 0,
            summary: StreamSummary::default(),
            voiced: false,
        }
    }

    /// Synthesizes a chunk submitted now.
    pub fn speak(&mut self, text: &str) -> Result<ChunkAudio, TtsError> {
        self.speak_submitted(text, clock::now())
    }

    /// Synthesizes a chunk that was submitted (queued) at `submitted`.
    pub fn speak_submitted(
        &mut self,
        text: &str,
        submitted: Nanos,
    ) -> Result<ChunkAudio, TtsError> {
        let index = self.next_index;
        self.next_index += 1;
        self.summary.chunks += 1;
        if index == 0 {
            self.timeline.mark_at(EventKind::FirstChunk, submitted);
        }
        let started = clock::now();
        let sample_rate = self.voice.sample_rate();
        let mut chunk = ChunkAudio {
            index,
            text: text.to_string(),
            samples: Vec::new(),
            sample_rate,
            timing: ChunkTiming {
                submitted,
                started,
                first_audio: None,
            },
            skipped: None,
            remote: None,
            lead: None,
        };
        match self.voice.synthesize_for(text, self.timeline.id()) {
            Ok(mut speech) => {
                // A streamed response had audio before its end: that is when a listener
                // could have started hearing it.
                let now = speech.first_audio.unwrap_or_else(clock::now);
                self.timeline.mark_at(EventKind::TtsFirstAudio, now);
                chunk.remote = speech.remote.take().map(Box::new);
                if !self.voiced && !speech.samples.is_empty() {
                    self.voiced = true;
                    chunk.lead = Some(lead::trim(&mut speech.samples, speech.sample_rate));
                }
                self.summary.audio += speech.duration();
                self.summary.compute += speech.compute;
                chunk.samples = speech.samples;
                chunk.timing.first_audio = Some(now);
                Ok(chunk)
            }
            Err(TtsError::NothingToSay { reason, .. }) => {
                self.summary.skipped += 1;
                chunk.skipped = Some(reason);
                Ok(chunk)
            }
            Err(e) => {
                self.summary.failed += 1;
                Err(e)
            }
        }
    }

    /// Ends the stream: stamps `tts_done`.
    pub fn finish(self) -> StreamSummary {
        self.timeline.mark(EventKind::TtsDone);
        self.summary
    }
}

/// What the threaded stream sends back.
#[derive(Debug)]
pub enum TtsEvent {
    Chunk(ChunkAudio),
    /// A chunk failed; the stream goes on with the next one.
    Failed {
        index: usize,
        error: TtsError,
    },
    /// The input was closed and every chunk is done; `tts_done` is stamped.
    Done(StreamSummary),
}

/// The sending side of a threaded stream. Dropping it ends the stream.
#[derive(Debug, Clone)]
pub struct TtsInput {
    tx: mpsc::Sender<(String, Nanos)>,
}

impl TtsInput {
    /// Queues a chunk, stamped as submitted now. Fails only if the worker has gone.
    pub fn say(&self, text: impl Into<String>) -> Result<(), TtsError> {
        self.tx
            .send((text.into(), clock::now()))
            .map_err(|_| TtsError::Worker {
                detail: "the TTS thread has stopped; its last event says why".into(),
            })
    }
}

/// The parts of a threaded stream: chunks go in through [`TtsInput`], results come out of the
/// receiver in order, and the thread returns the voice when the stream ends, for the next turn.
pub type Spawned = (
    TtsInput,
    mpsc::Receiver<TtsEvent>,
    thread::JoinHandle<Voice>,
);

/// Runs synthesis on its own thread (see [`Spawned`]).
pub fn spawn(mut voice: Voice, timeline: Arc<Timeline>) -> Result<Spawned, TtsError> {
    let (in_tx, in_rx) = mpsc::channel::<(String, Nanos)>();
    let (out_tx, out_rx) = mpsc::channel();
    let handle = thread::Builder::new()
        .name("voxlat-tts".into())
        .spawn(move || {
            let mut stream = TtsStream::new(&mut voice, timeline);
            for (text, submitted) in in_rx {
                let index = stream.next_index;
                let event = match stream.speak_submitted(&text, submitted) {
                    Ok(chunk) => TtsEvent::Chunk(chunk),
                    Err(error) => TtsEvent::Failed { index, error },
                };
                // A dropped receiver means nobody listens any more: stop working.
                if out_tx.send(event).is_err() {
                    break;
                }
            }
            let summary = stream.finish();
            let _ = out_tx.send(TtsEvent::Done(summary));
            voice
        })
        .map_err(|e| TtsError::Worker {
            detail: format!("cannot start the TTS thread: {e}"),
        })?;
    Ok((TtsInput { tx: in_tx }, out_rx, handle))
}
