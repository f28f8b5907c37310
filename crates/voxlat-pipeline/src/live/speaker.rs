//! The speaker thread: replies → output device, with device-timed playout stamps and the
//! levels the listener compares the microphone with.

use super::echo::{rms, EchoRef};
use super::POLL;
use crate::output::{Cancel, Output, Played};
use crate::record::ChunkRecord;
use crate::stages::BoxFuture;
use std::collections::VecDeque;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use voxlat_audio::playback::Playback;
use voxlat_audio::playout::{OutStamp, ReplyPlayout};
use voxlat_core::{clock, EventKind, Nanos, Timeline};
use voxlat_tts::stream::ChunkAudio;

enum SpeakerCmd {
    Begin {
        events: mpsc::UnboundedSender<SpeakerEvent>,
    },
    Audio {
        samples: Vec<f32>,
        rate: u32,
    },
    End,
    Stop,
}

enum SpeakerEvent {
    /// The first sample was queued at .0 and leaves the device at .1.
    Started(Nanos, Nanos),
    Finished {
        done: Option<Nanos>,
        stopped: Option<Nanos>,
        underruns: u32,
        underrun_ms: f64,
        xruns: u64,
    },
}

/// What the output device is, for results.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct OutputInfo {
    pub device: String,
    pub rate: u32,
    pub channels: u16,
    pub clock_error_ns: u64,
    /// The output callback runs at a raised scheduling weight (known once it has run).
    pub raised: bool,
}

/// A handle on the speaker thread. One reply at a time.
#[derive(Clone)]
pub struct Speaker {
    tx: std_mpsc::Sender<SpeakerCmd>,
    pub echo: Arc<EchoRef>,
    pub info: OutputInfo,
}

struct Active {
    events: mpsc::UnboundedSender<SpeakerEvent>,
    reply: ReplyPlayout,
    start: u64,
    pending: VecDeque<f32>,
    /// The reply at the device rate, for the echo levels.
    audio: Vec<f32>,
    queued: Option<Nanos>,
    xruns_before: u64,
    started: bool,
    ended: bool,
    stop: bool,
}

impl Speaker {
    /// Starts the speaker thread on an opened output.
    pub fn start(playback: Playback, echo_tail_ms: u32) -> std::io::Result<Speaker> {
        let (tx, rx) = std_mpsc::channel();
        let echo = Arc::new(EchoRef::default());
        let info = OutputInfo {
            device: playback.device.clone(),
            rate: playback.rate,
            channels: playback.channels,
            clock_error_ns: playback.clock.error_ns,
            raised: {
                let t0 = std::time::Instant::now();
                while !playback.health().started() && t0.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(POLL);
                }
                playback.health().raised()
            },
        };
        let e = echo.clone();
        std::thread::Builder::new()
            .name("speaker".into())
            .spawn(move || speaker_thread(playback, rx, e, echo_tail_ms))?;
        Ok(Speaker { tx, echo, info })
    }

    /// Plays one reply's chunks as they arrive; stamps `playout_queued`, `playout_start` and
    /// `playout_done` from the device; stops early when `cancel` carries a barge-in.
    async fn play_reply(
        self,
        tl: Arc<Timeline>,
        mut rx: mpsc::UnboundedReceiver<ChunkAudio>,
        rate: u32,
        mut cancel: Cancel,
    ) -> Played {
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let mut p = Played::default();
        if self.tx.send(SpeakerCmd::Begin { events: ev_tx }).is_err() {
            return p;
        }
        let mut audio_open = true;
        let mut stopping = false;
        loop {
            tokio::select! {
                c = rx.recv(), if audio_open => match c {
                    Some(c) => {
                        p.chunks.push(ChunkRecord::of(&c));
                        if !c.samples.is_empty() {
                            p.first_arrival.get_or_insert_with(clock::now);
                            p.samples.extend_from_slice(&c.samples);
                            let _ = self.tx.send(SpeakerCmd::Audio { samples: c.samples, rate });
                        }
                    }
                    None => {
                        audio_open = false;
                        let _ = self.tx.send(SpeakerCmd::End);
                    }
                },
                _ = barge_in(&mut cancel), if !stopping => {
                    stopping = true;
                    audio_open = false;
                    let _ = self.tx.send(SpeakerCmd::Stop);
                }
                ev = ev_rx.recv() => match ev {
                    Some(SpeakerEvent::Started(queued, start)) => {
                        tl.mark_at(EventKind::PlayoutQueued, queued);
                        tl.mark_at(EventKind::PlayoutStart, start);
                    }
                    Some(SpeakerEvent::Finished { done, stopped, underruns, underrun_ms, xruns }) => {
                        p.xruns = xruns;
                        if let Some(t) = done {
                            tl.mark_at(EventKind::PlayoutDone, t);
                        }
                        p.stopped_at = stopped;
                        p.underruns = underruns;
                        p.underrun_ms = underrun_ms;
                        break;
                    }
                    None => break,
                },
            }
        }
        p
    }
}

impl Output for Speaker {
    fn play(
        &self,
        tl: Arc<Timeline>,
        audio: mpsc::UnboundedReceiver<ChunkAudio>,
        rate: u32,
        cancel: Cancel,
    ) -> BoxFuture<'static, Played> {
        Box::pin(self.clone().play_reply(tl, audio, rate, cancel))
    }
}

async fn barge_in(cancel: &mut Cancel) {
    if cancel.wait_for(|v| v.is_some()).await.is_ok() {
        return;
    }
    std::future::pending().await
}

fn speaker_thread(
    mut out: Playback,
    rx: std_mpsc::Receiver<SpeakerCmd>,
    echo: Arc<EchoRef>,
    echo_tail_ms: u32,
) {
    let mut active: Option<Active> = None;
    let mut stamps: Vec<OutStamp> = Vec::new();
    let tail = Duration::from_millis(u64::from(echo_tail_ms));
    loop {
        let cmd = match rx.recv_timeout(POLL) {
            Ok(c) => Some(c),
            Err(std_mpsc::RecvTimeoutError::Timeout) => None,
            Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
        };
        for cmd in cmd
            .into_iter()
            .chain(std::iter::from_fn(|| rx.try_recv().ok()))
        {
            match cmd {
                SpeakerCmd::Begin { events } => {
                    echo.begin();
                    let start = out.pushed();
                    active = Some(Active {
                        events,
                        reply: ReplyPlayout::new(start, out.rate),
                        start,
                        pending: VecDeque::new(),
                        audio: Vec::new(),
                        queued: None,
                        xruns_before: out.health().xruns(),
                        started: false,
                        ended: false,
                        stop: false,
                    });
                }
                SpeakerCmd::Audio { samples, rate } => {
                    if let Some(a) = active.as_mut().filter(|a| !a.stop) {
                        let t = std::time::Instant::now();
                        // Both rates come from our own voice and device, never a file, so a
                        // refusal is a bug to log, and the chunk is dropped rather than played
                        // at the wrong speed.
                        let dev = match voxlat_audio::resample::resample(&samples, rate, out.rate) {
                            Ok(d) => d,
                            Err(e) => {
                                tracing::warn!(error = %e, "speaker: chunk dropped");
                                continue;
                            }
                        };
                        tracing::debug!(
                            samples = samples.len(),
                            ms = t.elapsed().as_secs_f64() * 1e3,
                            "speaker: chunk resampled"
                        );
                        a.audio.extend_from_slice(&dev);
                        a.pending.extend(dev);
                    }
                }
                SpeakerCmd::End => {
                    if let Some(a) = active.as_mut() {
                        a.ended = true;
                    }
                }
                SpeakerCmd::Stop => {
                    if let Some(a) = active.as_mut() {
                        a.stop = true;
                        a.ended = true;
                        a.pending.clear();
                        out.stop();
                    }
                }
            }
        }
        stamps.clear();
        out.drain_stamps(&mut stamps);
        let Some(a) = active.as_mut() else {
            continue;
        };
        if !a.pending.is_empty() {
            let now = clock::now();
            let n = out.push(a.pending.make_contiguous());
            if n > 0 && a.queued.is_none() {
                a.queued = Some(now);
                tracing::debug!("speaker: first sample queued");
            }
            a.pending.drain(..n);
        }
        let mut flushed = false;
        for s in &stamps {
            a.reply.observe(s);
            flushed |= s.flushed && a.stop;
            let end = s.first + u64::from(s.popped);
            if s.popped > 0 && end > a.start {
                let from = (s.first.max(a.start) - a.start) as usize;
                let to = ((end - a.start) as usize).min(a.audio.len());
                if from < to {
                    let t0 = out.to_process(s.at_ns);
                    let dur = Duration::from_nanos(
                        u64::from(s.popped) * 1_000_000_000 / u64::from(out.rate.max(1)),
                    );
                    echo.played(t0, t0.saturating_add(dur), rms(&a.audio[from..to]));
                }
            }
        }
        if !a.started {
            if let (Some(q), Some(first)) = (a.queued, a.reply.first_at()) {
                a.started = true;
                let _ = a
                    .events
                    .send(SpeakerEvent::Started(q, out.to_process(first)));
            }
        }
        if a.ended && a.pending.is_empty() && !a.stop {
            a.reply.finish(a.start + a.audio.len() as u64);
        }
        let finished = if a.stop {
            flushed
        } else {
            a.ended && a.pending.is_empty() && a.reply.finished()
        };
        if finished {
            let (underruns, underrun_ms) = a.reply.underruns();
            let done = a.reply.last_at().map(|t| out.to_process(t));
            let stopped = if a.stop {
                stamps
                    .iter()
                    .find(|s| s.flushed)
                    .map(|s| out.to_process(s.at_ns))
            } else {
                None
            };
            let quiet = done.or(stopped).unwrap_or_else(clock::now);
            echo.end(quiet.saturating_add(tail));
            let _ = a.events.send(SpeakerEvent::Finished {
                done,
                stopped,
                underruns,
                underrun_ms,
                xruns: out.health().xruns() - a.xruns_before,
            });
            active = None;
        }
    }
}
