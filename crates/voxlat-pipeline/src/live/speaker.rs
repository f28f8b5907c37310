//! The speaker: a reply's player on the async side, which hands its audio, pauses and stops
//! to the speaker's own thread ([`super::speaker_thread`]) and stamps the playout events that
//! thread reports from the device.

use super::echo::EchoRef;
use super::speaker_thread::{speaker_thread, SpeakerCmd, SpeakerEvent};
use super::POLL;
use crate::control::Control;
use crate::output::{Output, Played, Steer};
use crate::record::ChunkRecord;
use crate::stages::BoxFuture;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use voxlat_audio::playback::Playback;
use voxlat_core::{clock, EventKind, Timeline};
use voxlat_tts::stream::ChunkAudio;

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
    /// `playout_done` from the device; pauses and plays on as `steer` says, and stops early
    /// when it carries a barge-in.
    async fn play_reply(
        self,
        tl: Arc<Timeline>,
        mut rx: mpsc::UnboundedReceiver<ChunkAudio>,
        rate: u32,
        steer: Steer,
    ) -> Played {
        let mut steer = steer;
        let cancel = steer.clone();
        let mut steered = true;
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let mut p = Played::default();
        if self.tx.send(SpeakerCmd::Begin { events: ev_tx }).is_err() {
            return p;
        }
        let mut audio_open = true;
        let mut stopping = false;
        if let Control::Paused { onset } = steer.seen() {
            let _ = self.tx.send(SpeakerCmd::Pause { onset });
        }
        loop {
            tokio::select! {
                r = steer.changed(), if steered && !stopping => match r {
                    Some(Control::Paused { onset }) => {
                        let _ = self.tx.send(SpeakerCmd::Pause { onset });
                    }
                    Some(Control::Play) => {
                        if let Some(p) = p.pauses.last_mut().filter(|p| p.resumed.is_none()) {
                            p.resumed = Some(clock::now());
                        }
                        let _ = self.tx.send(SpeakerCmd::Resume);
                    }
                    Some(Control::Held | Control::Cancelled { .. } | Control::Dropped { .. }) => {}
                    None => steered = false,
                },
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
                _ = cancel.cancelled(), if !stopping => {
                    stopping = true;
                    audio_open = false;
                    let _ = self.tx.send(SpeakerCmd::Stop);
                }
                ev = ev_rx.recv() => match ev {
                    Some(SpeakerEvent::Paused(span)) => p.pauses.push(span),
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
        steer: Steer,
    ) -> BoxFuture<'static, Played> {
        Box::pin(self.clone().play_reply(tl, audio, rate, steer))
    }
}
