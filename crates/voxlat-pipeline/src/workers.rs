//! The CPU-heavy stages, each on a dedicated OS thread with an explicit thread count: Whisper
//! and Piper must not be polled from async tasks (they block for hundreds of ms), and neither
//! model is cheap enough to load per turn. A worker runs any [`Transcriber`] or
//! [`Synthesize`]; the model is loaded on the worker's own thread (whisper.cpp's and ONNX
//! Runtime's state stay on the thread that made them).

use crate::asr_prefix::Prefix;
use crate::control::Steer;
use crate::error::StageError;
use crate::meter::Meter;
use crate::record::Stage;
use crate::stages::Transcriber;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use voxlat_asr::engine::{AsrError, Fallback, Transcript, WhisperEngine};
use voxlat_core::{clock, EventKind, Nanos, Timeline};
use voxlat_tts::piper::{Voice, VoiceOptions};
use voxlat_tts::stream::{ChunkAudio, Synthesize, TtsStream};

/// A finished transcription and when the worker ran it.
pub struct AsrResult {
    pub transcript: Result<Transcript, AsrError>,
    pub started: Nanos,
    pub finished: Nanos,
}

/// A transcription to queue.
pub struct AsrRequest {
    /// The utterance from its first sample.
    pub audio: Vec<f32>,
    /// A transcription of the same utterance's start to go on from: only the audio after it
    /// is decoded, if its words are known by then (else the whole).
    pub after: Option<Prefix>,
    /// Filled with this transcription's words, for one that goes on from it.
    pub keep: Option<Prefix>,
    /// A speculative transcription's: told the decode's time even when nobody awaits the
    /// result any more.
    pub meter: Option<Meter>,
    /// Told the words as soon as they are decoded, on the worker's thread (the `cues` rule
    /// reads the transcript's tail to set the stop's wait).
    pub on_text: Option<OnText>,
}

/// What a transcription's words are handed to, once decoded.
pub type OnText = Box<dyn FnOnce(&str) + Send>;

struct AsrJob {
    req: AsrRequest,
    reply: oneshot::Sender<AsrResult>,
}

impl AsrJob {
    /// Nobody awaits the result, and no later transcription goes on from it.
    fn abandoned(&self) -> bool {
        self.reply.is_closed() && !self.req.keep.as_ref().is_some_and(Prefix::wanted)
    }
}

/// Dropping a worker closes its queue and waits for the job in hand: a native library must
/// not be torn down (at process exit) while its thread is still inside it.
pub struct AsrWorker {
    tx: Option<std_mpsc::Sender<AsrJob>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AsrWorker {
    /// Whisper: loads the model on the worker thread; returns once it is ready (or failed).
    pub fn start(
        model: &Path,
        threads: usize,
        fallback: Fallback,
    ) -> Result<AsrWorker, StageError> {
        let model = model.to_path_buf();
        AsrWorker::spawn(move || {
            WhisperEngine::load(&model, threads).map(|mut e| {
                e.set_fallback(fallback);
                e
            })
        })
    }

    /// Any transcriber, made by `load` on the worker thread.
    pub fn spawn<T, E>(
        load: impl FnOnce() -> Result<T, E> + Send + 'static,
    ) -> Result<AsrWorker, StageError>
    where
        T: Transcriber + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let (tx, rx) = std_mpsc::channel::<AsrJob>();
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("asr".into())
            .spawn(move || {
                let mut engine = match load() {
                    Ok(e) => {
                        let _ = ready_tx.send(Ok(()));
                        e
                    }
                    Err(e) => {
                        let _ = ready_tx
                            .send(Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>));
                        return;
                    }
                };
                for mut job in rx {
                    // A speculative transcription nobody wants any more (a newer provisional
                    // end replaced it) would only take the cores from the one that is wanted.
                    if job.abandoned() {
                        continue;
                    }
                    let started = clock::now();
                    // Given up midway too: such a decode would hold the cores for hundreds
                    // of ms while the next provisional end waits.
                    let abandoned = || job.abandoned();
                    let AsrRequest {
                        audio, after, keep, ..
                    } = &job.req;
                    // What the decodes this one goes on from cost counts with it, whether
                    // their words lead it or not.
                    let before = after.as_ref().map(Prefix::spent).unwrap_or_default();
                    let transcript = match after.as_ref().and_then(|p| p.lead_for(audio)) {
                        Some(lead) => engine
                            .transcribe_once_unless(&audio[lead.from()..], &abandoned)
                            .and_then(|rest| match rest.fallback {
                                // Alone, the part has no context to get out of its loop
                                // with; the whole turn has.
                                Some(_) => {
                                    engine.transcribe_unless(audio, &abandoned).map(|whole| {
                                        let t = crate::asr_prefix::instead_of(rest, whole);
                                        crate::asr_prefix::counting(t, before)
                                    })
                                }
                                None => Ok(lead.join(rest, audio.len())),
                            }),
                        None => engine
                            .transcribe_unless(audio, &abandoned)
                            .map(|whole| crate::asr_prefix::counting(whole, before)),
                    };
                    if let (Some(k), Ok(t)) = (keep, &transcript) {
                        k.fill(t);
                    }
                    if let (Some(tell), Ok(t)) = (job.req.on_text.take(), &transcript) {
                        tell(&t.text);
                    }
                    let finished = clock::now();
                    if let Some(m) = &job.req.meter {
                        m.span(started, finished);
                    }
                    let _ = job.reply.send(AsrResult {
                        transcript,
                        started,
                        finished,
                    });
                }
            })
            .map_err(|e| StageError::Thread {
                stage: Stage::Asr,
                detail: e.to_string(),
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(AsrWorker {
                tx: Some(tx),
                thread: Some(thread),
            }),
            Ok(Err(cause)) => Err(StageError::Load {
                stage: Stage::Asr,
                cause,
            }),
            Err(_) => Err(StageError::Thread {
                stage: Stage::Asr,
                detail: "the worker thread ended while loading".into(),
            }),
        }
    }

    /// Queues a transcription; the receiver yields its result.
    pub fn submit(&self, audio: Vec<f32>) -> oneshot::Receiver<AsrResult> {
        self.request(AsrRequest {
            audio,
            after: None,
            keep: None,
            meter: None,
            on_text: None,
        })
    }

    /// Queues a transcription with its links to others and its meter.
    pub fn request(&self, req: AsrRequest) -> oneshot::Receiver<AsrResult> {
        let (reply, rx) = oneshot::channel();
        if let Some(tx) = &self.tx {
            let _ = tx.send(AsrJob { req, reply });
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

/// What a turn's stream is synthesized for.
pub struct TtsBegin {
    pub timeline: Arc<Timeline>,
    pub out: mpsc::UnboundedSender<ChunkAudio>,
    /// Told each chunk's synthesis time, heard or not.
    pub meter: Option<Meter>,
    /// The turn's control: cancelled, the chunks still queued are skipped, not synthesized;
    /// paused, synthesis stops once [`PAUSED_AHEAD_S`] of its audio is left to play.
    pub steer: Steer,
}

/// Messages to the TTS worker, each naming its turn: a turn that is dropped mid-stream, or
/// one that begins before the last has ended, cannot take another turn's chunks or end it.
enum TtsMsg {
    Begin(u64, Box<TtsBegin>),
    Chunk {
        turn: u64,
        text: String,
        submitted: Nanos,
    },
    End(u64),
}

impl TtsMsg {
    fn turn(&self) -> u64 {
        match self {
            TtsMsg::Begin(t, _) | TtsMsg::End(t) | TtsMsg::Chunk { turn: t, .. } => *t,
        }
    }
}

/// One turn's stream to the TTS worker. Dropping it ends the turn, however the turn ends
/// (finished, cancelled, or its future dropped), so the worker is never left waiting on it.
pub struct TtsTurn {
    id: u64,
    tx: Option<std_mpsc::Sender<TtsMsg>>,
}

impl TtsTurn {
    pub fn chunk(&self, text: String, submitted: Nanos) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(TtsMsg::Chunk {
                turn: self.id,
                text,
                submitted,
            });
        }
    }
}

impl Drop for TtsTurn {
    fn drop(&mut self) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(TtsMsg::End(self.id));
        }
    }
}

/// Joined on drop, like [`AsrWorker`].
pub struct TtsWorker {
    tx: Option<std_mpsc::Sender<TtsMsg>>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub sample_rate: u32,
    turns: std::sync::atomic::AtomicU64,
}

impl TtsWorker {
    /// Piper: loads the voice on the worker thread.
    pub fn start(voice_model: &Path, options: VoiceOptions) -> Result<TtsWorker, StageError> {
        let model = voice_model.to_path_buf();
        TtsWorker::spawn(move || Voice::load(&model, options))
    }

    /// Any synthesizer, made by `load` on the worker thread.
    pub fn spawn<V, E>(
        load: impl FnOnce() -> Result<V, E> + Send + 'static,
    ) -> Result<TtsWorker, StageError>
    where
        V: Synthesize + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let (tx, rx) = std_mpsc::channel::<TtsMsg>();
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("tts".into())
            .spawn(move || {
                let mut voice = match load() {
                    Ok(v) => {
                        let _ = ready_tx.send(Ok(v.sample_rate()));
                        v
                    }
                    Err(e) => {
                        let _ = ready_tx
                            .send(Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>));
                        return;
                    }
                };
                serve_tts(&mut voice, &rx);
            })
            .map_err(|e| StageError::Thread {
                stage: Stage::Tts,
                detail: e.to_string(),
            })?;
        let sample_rate = match ready_rx.recv() {
            Ok(Ok(rate)) => rate,
            Ok(Err(cause)) => {
                return Err(StageError::Load {
                    stage: Stage::Tts,
                    cause,
                })
            }
            Err(_) => {
                return Err(StageError::Thread {
                    stage: Stage::Tts,
                    detail: "the worker thread ended while loading".into(),
                })
            }
        };
        Ok(TtsWorker {
            tx: Some(tx),
            thread: Some(thread),
            sample_rate,
            turns: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Opens a turn's stream. Turns are synthesized one at a time, in the order they began:
    /// one that begins while another is still open waits for that one to end.
    pub fn begin(&self, begin: TtsBegin) -> TtsTurn {
        let id = self.turns.fetch_add(1, Ordering::Relaxed);
        let tx = self.tx.clone();
        if let Some(tx) = &tx {
            let _ = tx.send(TtsMsg::Begin(id, Box::new(begin)));
        }
        TtsTurn { id, tx }
    }
}

/// The worker's mailbox: messages of a turn that began while another was open wait here, in
/// order, until that turn is served.
struct Inbox<'a> {
    rx: &'a std_mpsc::Receiver<TtsMsg>,
    held: std::collections::VecDeque<TtsMsg>,
}

impl Inbox<'_> {
    /// The next turn to serve; `None` once the worker is dropped.
    fn next_begin(&mut self) -> Option<(u64, TtsBegin)> {
        loop {
            let msg = match self.held.pop_front() {
                Some(m) => m,
                None => self.rx.recv().ok()?,
            };
            // Anything else belongs to a turn already served.
            if let TtsMsg::Begin(id, b) = msg {
                return Some((id, *b));
            }
        }
    }

    /// The next message of `turn`; `None` once the worker is dropped.
    fn next_of(&mut self, turn: u64) -> Option<TtsMsg> {
        if let Some(i) = self.held.iter().position(|m| m.turn() == turn) {
            return self.held.remove(i);
        }
        loop {
            let msg = self.rx.recv().ok()?;
            if msg.turn() == turn {
                return Some(msg);
            }
            self.held.push_back(msg);
        }
    }
}

/// One turn at a time: a stream borrows the voice from its `Begin` to its `End`.
fn serve_tts<V: Synthesize>(voice: &mut V, rx: &std_mpsc::Receiver<TtsMsg>) {
    let mut inbox = Inbox {
        rx,
        held: std::collections::VecDeque::new(),
    };
    while let Some((turn, begin)) = inbox.next_begin() {
        let TtsBegin {
            timeline,
            out,
            meter,
            steer,
        } = begin;
        let stream_tl = timeline.clone();
        let mut stream = TtsStream::new(voice, timeline);
        // Seconds of audio made for this reply so far.
        let mut made_s = 0.0;
        while let Some(TtsMsg::Chunk {
            text, submitted, ..
        }) = inbox.next_of(turn)
        {
            if steer.cancelled_at().is_some() {
                continue;
            }
            // A paused reply that has enough audio to play on with makes no more until the
            // user's words decide it: the deciding transcription gets the cores, and a reply
            // that gives way wastes less synthesis.
            wait_while_paused(&steer, &stream_tl, made_s);
            if steer.cancelled_at().is_some() {
                continue;
            }
            let started = clock::now();
            let spoken = stream.speak_submitted(&text, submitted);
            if let Some(m) = &meter {
                m.span(started, clock::now());
            }
            match spoken {
                Ok(chunk) => {
                    if chunk.sample_rate > 0 {
                        made_s += chunk.samples.len() as f64 / f64::from(chunk.sample_rate);
                    }
                    let _ = out.send(chunk);
                }
                Err(e) => tracing::warn!("TTS failed on {text:?}: {e}"),
            }
        }
        stream.finish();
    }
}

/// Unplayed audio a paused reply keeps made, so that when it plays on, what is left covers
/// the synthesis of its next chunk (Piper takes 0.1–0.3 s for a chunk on one busy core) and
/// the resumed reply does not stall.
const PAUSED_AHEAD_S: f64 = 1.0;
/// How often paused synthesis looks whether it may go on: far less than the audio it keeps.
const PAUSE_POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// Returns once the reply is not paused (or its pause is over for good: cancelled, or let go
/// of), or less than [`PAUSED_AHEAD_S`] of the `made_s` seconds made is left to play.
fn wait_while_paused(steer: &Steer, tl: &Timeline, made_s: f64) {
    loop {
        let Some(onset) = steer.paused_at() else {
            return;
        };
        // Played before the pause: from the first sample to the user's onset (an upper bound
        // on what is left, by the device's reaction time).
        let played_s = tl.get(EventKind::PlayoutStart).map_or(0.0, |start| {
            clock::ns_to_ms(onset.signed_since(start)).max(0.0) / 1e3
        });
        if made_s - played_s < PAUSED_AHEAD_S || steer.let_go() {
            return;
        }
        std::thread::sleep(PAUSE_POLL);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeAsr;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    #[test]
    fn a_queued_transcription_nobody_awaits_is_skipped() {
        let fake = FakeAsr::new(&["first", "third"], Duration::from_millis(200));
        let calls = fake.calls.clone();
        let worker = AsrWorker::spawn(move || Ok::<_, std::convert::Infallible>(fake))
            .expect("the worker starts");
        let audio = vec![0.1f32; 1600];
        let first = worker.submit(audio.clone());
        // Queued behind the first, and given up before the worker reaches it.
        drop(worker.submit(audio.clone()));
        let third = worker.submit(audio);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (a, c) = rt.block_on(async { (first.await, third.await) });
        assert_eq!(a.expect("first").transcript.expect("text").text, "first");
        assert_eq!(c.expect("third").transcript.expect("text").text, "third");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "the abandoned job never ran"
        );
    }

    /// Writes how many samples it heard, and runs away on fewer than half a second of them.
    struct LoopsWithoutContext;

    impl crate::stages::Transcriber for LoopsWithoutContext {
        fn transcribe(&mut self, audio: &[f32]) -> Result<Transcript, AsrError> {
            use voxlat_asr::engine::FallbackReport;
            let compute = Duration::from_millis(audio.len() as u64 / 160);
            Ok(Transcript {
                text: format!("{} samples", audio.len()),
                raw: String::new(),
                rejected: None,
                levels: voxlat_asr::filter::levels(audio),
                compute,
                audio: Duration::from_secs_f64(audio.len() as f64 / 16_000.0),
                real_time_factor: 0.0,
                tokens: 2,
                scores: None,
                fallback: (audio.len() < 8_000).then(|| FallbackReport {
                    reason: "reached the token cap".into(),
                    strategy: Fallback::Off,
                    retries: 0,
                    recovered: false,
                    first_compute: compute,
                }),
                remote: None,
            })
        }
    }

    #[test]
    fn a_part_after_a_pause_that_runs_away_is_decoded_again_as_the_whole_turn() {
        let worker = AsrWorker::spawn(|| Ok::<_, std::convert::Infallible>(LoopsWithoutContext))
            .expect("the worker starts");
        let said = |whole: usize| {
            let before = Prefix::covering(16_000);
            before.fill(&Transcript {
                text: "What's the weather".into(),
                compute: Duration::from_millis(100),
                ..Transcript::no_new_words()
            });
            let rx = worker.request(AsrRequest {
                audio: vec![0.1f32; whole],
                after: Some(before),
                keep: None,
                meter: None,
                on_text: None,
            });
            rx.blocking_recv()
                .expect("an answer")
                .transcript
                .expect("a transcript")
        };
        let joined = said(26_000);
        assert_eq!(joined.text, "What's the weather 10000 samples");
        assert_eq!(joined.compute, Duration::from_millis(100 + 62));
        assert!(joined.fallback.is_none());

        let whole = said(22_000);
        assert_eq!(whole.text, "22000 samples", "the whole turn, not the part");
        let f = whole
            .fallback
            .clone()
            .expect("the part's runaway is reported");
        assert_eq!(f.reason, "reached the token cap");
        assert_eq!(f.strategy, Fallback::WholeTurn);
        assert!(f.recovered && f.retries == 1, "{f:?}");
        // The decode before the pause (100 ms), the part's 6000 samples (37 ms) and the
        // whole turn's 22000 (137 ms): the retry cost only the last.
        assert_eq!(f.first_compute, Duration::from_millis(137));
        assert_eq!(whole.compute, Duration::from_millis(274));
        assert_eq!(whole.fallback_compute(), Duration::from_millis(137));
    }

    #[test]
    fn a_word_s_tail_after_a_pause_is_decoded_with_the_part_before_it() {
        let worker = AsrWorker::spawn(|| Ok::<_, std::convert::Infallible>(LoopsWithoutContext))
            .expect("the worker starts");
        let said = |text: &str| Transcript {
            text: text.into(),
            ..Transcript::no_new_words()
        };
        let first = Prefix::covering(16_000);
        first.fill(&said("What's the weather"));
        let second = Prefix::covering_after(30_000, Some(first));
        second.fill(&Transcript {
            compute: Duration::from_millis(300),
            ..said("What's the weather like in Paris")
        });
        // 100 ms more: a final consonant's release retracted the second provisional end.
        let rx = worker.request(AsrRequest {
            audio: vec![0.1f32; 31_600],
            after: Some(second),
            keep: None,
            meter: None,
            on_text: None,
        });
        let t = rx
            .blocking_recv()
            .expect("an answer")
            .transcript
            .expect("a transcript");
        assert_eq!(t.text, "What's the weather 15600 samples");
        assert!(t.fallback.is_none(), "{:?}", t.fallback);
        // The decodes up to the second pause (300 ms) were spent on it too, and the rest's
        // 15600 samples (97 ms).
        assert_eq!(t.compute, Duration::from_millis(397));
    }

    #[test]
    fn a_running_transcription_nobody_awaits_stops_midway() {
        let fake = FakeAsr::new(&["given up"], Duration::from_secs(30));
        let abandoned = fake.abandoned.clone();
        let worker = AsrWorker::spawn(move || Ok::<_, std::convert::Infallible>(fake))
            .expect("the worker starts");
        let running = worker.submit(vec![0.1f32; 1600]);
        std::thread::sleep(Duration::from_millis(50));
        drop(running);
        // Dropping the worker waits for the job in hand: 30 s, unless it stopped.
        let t0 = std::time::Instant::now();
        while abandoned.load(Ordering::SeqCst) == 0 && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            abandoned.load(Ordering::SeqCst),
            1,
            "the running job gave up"
        );
        drop(worker);
    }

    fn tts_turn(worker: &TtsWorker) -> (TtsTurn, mpsc::UnboundedReceiver<ChunkAudio>) {
        let (out, rx) = mpsc::unbounded_channel();
        let turn = worker.begin(TtsBegin {
            timeline: Arc::new(Timeline::new(voxlat_core::RequestId::new())),
            out,
            meter: None,
            steer: crate::control::Steer::free(),
        });
        (turn, rx)
    }

    /// Audio of every chunk the turn's stream delivered, once the stream has ended.
    fn heard(rx: &mut mpsc::UnboundedReceiver<ChunkAudio>) -> usize {
        let mut n = 0;
        while let Some(c) = rx.blocking_recv() {
            n += usize::from(!c.samples.is_empty());
        }
        n
    }

    #[test]
    fn a_turn_dropped_mid_stream_leaves_the_next_turn_its_audio() {
        let fake = crate::fake::FakeTts::new(Duration::from_millis(5));
        let worker = TtsWorker::spawn(move || Ok::<_, std::convert::Infallible>(fake))
            .expect("the worker starts");
        let (dropped, mut dropped_rx) = tts_turn(&worker);
        dropped.chunk("Hello there.".into(), clock::now());
        // The next turn begins before the first is given up, as a superseded turn does.
        let (next, mut next_rx) = tts_turn(&worker);
        dropped.chunk("A late chunk of the first turn.".into(), clock::now());
        next.chunk("The capital is Paris.".into(), clock::now());
        drop(dropped);
        next.chunk("It is large.".into(), clock::now());
        drop(next);
        assert_eq!(
            heard(&mut dropped_rx),
            2,
            "the first turn keeps its own chunks"
        );
        assert_eq!(
            heard(&mut next_rx),
            2,
            "the next turn gets all of its chunks"
        );
    }
}
