//! The CPU-heavy stages, each on a dedicated OS thread with an explicit thread count: Whisper
//! and Piper must not be polled from async tasks (they block for hundreds of ms), and neither
//! model is cheap enough to load per turn.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use voxlat_asr::engine::{Transcript, WhisperEngine};
use voxlat_core::{clock, Nanos, Timeline};
use voxlat_tts::piper::{Voice, VoiceOptions};
use voxlat_tts::stream::{ChunkAudio, TtsStream};

/// A finished transcription and when the worker ran it.
pub struct AsrResult {
    pub transcript: Result<Transcript, String>,
    pub started: Nanos,
    pub finished: Nanos,
}

struct AsrJob {
    audio: Vec<f32>,
    reply: oneshot::Sender<AsrResult>,
}

/// Dropping a worker closes its queue and waits for the job in hand: a native library must
/// not be torn down (at process exit) while its thread is still inside it.
pub struct AsrWorker {
    tx: Option<std_mpsc::Sender<AsrJob>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AsrWorker {
    /// Loads the model on the worker thread; returns once it is ready (or failed).
    pub fn start(model: &Path, threads: usize) -> Result<AsrWorker, String> {
        let (tx, rx) = std_mpsc::channel::<AsrJob>();
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let model = model.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("asr".into())
            .spawn(move || {
                let mut engine = match WhisperEngine::load(&model, threads) {
                    Ok(e) => {
                        let _ = ready_tx.send(Ok(()));
                        e
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                for job in rx {
                    let started = clock::now();
                    let transcript = engine.transcribe(&job.audio).map_err(|e| e.to_string());
                    let _ = job.reply.send(AsrResult {
                        transcript,
                        started,
                        finished: clock::now(),
                    });
                }
            })
            .map_err(|e| e.to_string())?;
        ready_rx.recv().map_err(|e| e.to_string())??;
        Ok(AsrWorker {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues a transcription; the receiver yields its result.
    pub fn submit(&self, audio: Vec<f32>) -> oneshot::Receiver<AsrResult> {
        let (reply, rx) = oneshot::channel();
        if let Some(tx) = &self.tx {
            let _ = tx.send(AsrJob { audio, reply });
        }
        rx
    }
}

impl Drop for AsrWorker {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Messages to the TTS worker for one turn.
pub enum TtsMsg {
    Begin {
        timeline: Arc<Timeline>,
        out: mpsc::UnboundedSender<ChunkAudio>,
        /// Raised on barge-in: chunks still queued are skipped, not synthesized.
        cancel: Arc<AtomicBool>,
    },
    Chunk {
        text: String,
        submitted: Nanos,
    },
    End,
}

/// Joined on drop, like [`AsrWorker`].
pub struct TtsWorker {
    tx: Option<std_mpsc::Sender<TtsMsg>>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub sample_rate: u32,
}

impl TtsWorker {
    pub fn start(voice_model: &Path, options: VoiceOptions) -> Result<TtsWorker, String> {
        let (tx, rx) = std_mpsc::channel::<TtsMsg>();
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let model = voice_model.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("tts".into())
            .spawn(move || {
                let mut voice = match Voice::load(&model, options) {
                    Ok(v) => {
                        let _ = ready_tx.send(Ok(v.sample_rate()));
                        v
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                // One turn at a time: a stream borrows the voice from Begin to End.
                while let Ok(msg) = rx.recv() {
                    let TtsMsg::Begin {
                        timeline,
                        out,
                        cancel,
                    } = msg
                    else {
                        continue;
                    };
                    let mut stream = TtsStream::new(&mut voice, timeline);
                    loop {
                        match rx.recv() {
                            Ok(TtsMsg::Chunk { .. }) if cancel.load(Ordering::Acquire) => {}
                            Ok(TtsMsg::Chunk { text, submitted }) => {
                                match stream.speak_submitted(&text, submitted) {
                                    Ok(chunk) => {
                                        let _ = out.send(chunk);
                                    }
                                    Err(e) => tracing::warn!("TTS failed on {text:?}: {e}"),
                                }
                            }
                            Ok(TtsMsg::End) | Err(_) => break,
                            Ok(TtsMsg::Begin { .. }) => {
                                tracing::warn!(
                                    "TTS: a turn began before the previous one ended; dropping it"
                                );
                                break;
                            }
                        }
                    }
                    stream.finish();
                }
            })
            .map_err(|e| e.to_string())?;
        let sample_rate = ready_rx.recv().map_err(|e| e.to_string())??;
        Ok(TtsWorker {
            tx: Some(tx),
            thread: Some(thread),
            sample_rate,
        })
    }

    pub fn send(&self, msg: TtsMsg) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(msg);
        }
    }
}

impl Drop for TtsWorker {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
