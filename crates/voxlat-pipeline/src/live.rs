//! Live audio around the pipeline: the listener (microphone → endpointer, with feedback
//! suppression and barge-in detection) and the speaker (replies → output device, with
//! device-timed playout). Both run on threads of their own; the device callbacks behind them
//! (voxlat-audio) only move samples through ring buffers.
//!
//! Feedback suppression is a gate, the simplest thing that holds: while a reply is playing
//! (and for `echo_tail_ms` after), the microphone is not fed to the endpointer, so the
//! assistant's own voice cannot start a turn. The speaker publishes the level of what it
//! played and when the device played it (device timestamps, process clock); a microphone
//! frame whose level exceeds `barge_in_ratio` × the loudest reply level around the same
//! moment, in `BARGE_IN_HITS` of the last `BARGE_IN_WINDOW` frames, is the user talking over
//! the reply: a barge-in. Its limits: it compares levels, not signals (no echo
//! cancellation), so speakers much louder at the microphone than the user need a higher
//! ratio (or a headset), and a user who talks softly over a loud reply is not heard until
//! the reply ends.

use crate::error::SourceError;
use crate::output::{Cancel, Output, Played};
use crate::record::ChunkRecord;
use crate::session::SourceEvent;
use crate::stages::BoxFuture;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use voxlat_audio::capture::Capture;
use voxlat_audio::playback::Playback;
use voxlat_audio::playout::{OutStamp, ReplyPlayout};
use voxlat_core::{clock, EventKind, Nanos, Timeline};
use voxlat_tts::stream::ChunkAudio;
use voxlat_vad::{Endpointer, EndpointerConfig, WebRtcDetector};

/// Frames (20 ms) looked at for barge-in, and how many of them must exceed the echo.
pub const BARGE_IN_WINDOW: usize = 10;
pub const BARGE_IN_HITS: usize = 4;
/// Slack around a microphone frame when looking up the reply level: covers the mapping
/// error of two device clocks and the acoustic path.
const ECHO_SLACK_NS: u64 = 60_000_000;
const FRAME: usize = 320;
const POLL: Duration = Duration::from_millis(5);

/// The reply audio as the device played it: level per output buffer, on the process clock.
#[derive(Default)]
pub struct EchoRef {
    inner: Mutex<EchoState>,
}

#[derive(Default)]
struct EchoState {
    playing: bool,
    quiet_from: Nanos,
    /// (start, end, RMS) of played buffers.
    levels: VecDeque<(Nanos, Nanos, f32)>,
}

impl EchoRef {
    fn lock(&self) -> std::sync::MutexGuard<'_, EchoState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the microphone may be hearing a reply at `t`.
    pub fn active(&self, t: Nanos) -> bool {
        let s = self.lock();
        s.playing || t < s.quiet_from
    }

    /// The loudest reply level played within [from, to] (with slack).
    pub fn level(&self, from: Nanos, to: Nanos) -> f32 {
        let a = from.0.saturating_sub(ECHO_SLACK_NS);
        let b = to.0 + ECHO_SLACK_NS;
        self.lock()
            .levels
            .iter()
            .filter(|(s, e, _)| e.0 >= a && s.0 <= b)
            .map(|l| l.2)
            .fold(0.0, f32::max)
    }

    fn begin(&self) {
        let mut s = self.lock();
        s.playing = true;
        s.levels.clear();
    }

    fn played(&self, from: Nanos, to: Nanos, rms: f32) {
        let mut s = self.lock();
        if s.levels.len() >= 4096 {
            s.levels.pop_front();
        }
        s.levels.push_back((from, to, rms));
    }

    fn end(&self, quiet_from: Nanos) {
        let mut s = self.lock();
        s.playing = false;
        s.quiet_from = quiet_from;
    }
}

pub fn rms(x: &[f32]) -> f32 {
    if x.is_empty() {
        return 0.0;
    }
    (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_follows_the_reply_as_played_and_its_tail() {
        let e = EchoRef::default();
        assert!(!e.active(Nanos(0)));
        e.begin();
        e.played(Nanos(1_000_000_000), Nanos(1_010_000_000), 0.2);
        e.played(Nanos(1_010_000_000), Nanos(1_020_000_000), 0.05);
        assert!(e.active(Nanos(5_000_000_000)), "playing: gated whenever");
        // The loudest level within the slack of the frame counts; far away, nothing does.
        assert_eq!(e.level(Nanos(1_030_000_000), Nanos(1_050_000_000)), 0.2);
        assert_eq!(e.level(Nanos(2_000_000_000), Nanos(2_020_000_000)), 0.0);
        e.end(Nanos(1_200_000_000));
        assert!(
            e.active(Nanos(1_150_000_000)),
            "the echo tail is still gated"
        );
        assert!(!e.active(Nanos(1_200_000_000)));
        assert!((rms(&[0.5, -0.5]) - 0.5).abs() < 1e-6 && rms(&[]) == 0.0);
    }
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct ListenerConfig {
    pub endpointer: EndpointerConfig,
    /// Ends turns with `endpointer.turn` and this model instead of the plain hangover.
    #[serde(skip)]
    pub turn_model: Option<voxlat_vad::SharedScorer>,
    pub barge_in: bool,
    /// Microphone level over reply level that counts as the user speaking.
    pub barge_in_ratio: f32,
    /// Below this microphone level (dBFS) nothing is a barge-in.
    pub barge_in_floor_db: f32,
    /// The gate stays closed this long after the reply's last sample left the device.
    pub echo_tail_ms: u32,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            endpointer: EndpointerConfig::default(),
            turn_model: None,
            barge_in: true,
            barge_in_ratio: 2.0,
            barge_in_floor_db: -45.0,
            echo_tail_ms: 150,
        }
    }
}

/// The microphone thread: capture → gate → endpointer. Stops when `stop` is raised or the
/// receiver goes away; returns the capture's dropped samples and driver overruns.
pub fn spawn_listener(
    mut capture: Capture,
    cfg: ListenerConfig,
    echo: Arc<EchoRef>,
    tx: mpsc::Sender<SourceEvent>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<(u64, u64)>> {
    std::thread::Builder::new()
        .name("mic+vad".into())
        .spawn(move || {
            let send = |h: SourceEvent| tx.blocking_send(h).is_ok();
            let ep = crate::source::endpointer(&cfg.endpointer, cfg.turn_model.clone());
            let mut ep = match ep {
                Ok(e) => e,
                Err(e) => {
                    send(SourceEvent::Failed(e.into()));
                    return (capture.dropped(), capture.xruns());
                }
            };
            let floor = 10f32.powf(cfg.barge_in_floor_db / 20.0);
            let pre_roll = (cfg.endpointer.pre_roll_ms as usize / 20).max(1);
            let mut recent: VecDeque<voxlat_audio::capture::Frame> = VecDeque::new();
            let mut hits: VecDeque<Option<Nanos>> = VecDeque::new();
            let mut barged = false;
            let feed =
                |ep: &mut Endpointer<WebRtcDetector>, f: &voxlat_audio::capture::Frame| match ep
                    .push(&f.samples, f.t_end)
                {
                    Ok(events) => events.into_iter().all(|ev| {
                        send(SourceEvent::Vad {
                            ev,
                            received: clock::now(),
                        })
                    }),
                    Err(e) => send(SourceEvent::Failed(e.into())),
                };
            while !stop.load(Ordering::Acquire) {
                if capture.failed() {
                    send(SourceEvent::Failed(SourceError::DeviceStopped {
                        device: capture.device.clone(),
                    }));
                    break;
                }
                let Some(f) = capture.next_frame(FRAME) else {
                    std::thread::sleep(POLL);
                    continue;
                };
                let start = Nanos(f.t_end.0.saturating_sub(20_000_000));
                if !echo.active(f.t_end) {
                    barged = false;
                    hits.clear();
                    recent.clear();
                    if !feed(&mut ep, &f) {
                        break;
                    }
                    continue;
                }
                if barged {
                    if !feed(&mut ep, &f) {
                        break;
                    }
                    continue;
                }
                // Gated: the reply may be what the microphone hears.
                let level = rms(&f.samples);
                let hit = cfg.barge_in
                    && level > floor
                    && level > cfg.barge_in_ratio * echo.level(start, f.t_end);
                hits.push_back(hit.then_some(start));
                if hits.len() > BARGE_IN_WINDOW {
                    hits.pop_front();
                }
                recent.push_back(f);
                if recent.len() > pre_roll {
                    recent.pop_front();
                }
                if hits.iter().flatten().count() >= BARGE_IN_HITS {
                    let onset = hits.iter().flatten().next().copied().unwrap_or(start);
                    barged = true;
                    hits.clear();
                    if !send(SourceEvent::BargeIn { onset }) {
                        break;
                    }
                    // The endpointer hears the new utterance from before its onset.
                    for f in recent.drain(..) {
                        if !feed(&mut ep, &f) {
                            return (capture.dropped(), capture.xruns());
                        }
                    }
                }
            }
            (capture.dropped(), capture.xruns())
        })
}

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
#[derive(Clone, Debug, serde::Serialize)]
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
                while !playback.started() && t0.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(POLL);
                }
                playback.raised()
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
                        xruns_before: out.xruns(),
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
                xruns: out.xruns() - a.xruns_before,
            });
            active = None;
        }
    }
}
