//! Where a reply's audio goes: replay's virtual sink, or a real device
//! ([`crate::live::Speaker`]). Either one stamps `playout_queued`, `playout_start` and
//! `playout_done` on the turn's timeline, and reports what it played.

use crate::control::Control;
pub use crate::control::Steer;
use crate::record::ChunkRecord;
pub use crate::record::PauseSpan;
use crate::stages::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use voxlat_core::{clock, EventKind, Nanos, Timeline};
use voxlat_tts::stream::ChunkAudio;

/// What an output did with one reply.
#[derive(Default, Debug)]
pub struct Played {
    pub chunks: Vec<ChunkRecord>,
    pub samples: Vec<f32>,
    pub first_arrival: Option<Nanos>,
    pub underruns: u32,
    pub underrun_ms: f64,
    /// When a barge-in silenced the output.
    pub stopped_at: Option<Nanos>,
    /// Underruns the device driver reported while the reply played.
    pub xruns: u64,
    pub pauses: Vec<PauseSpan>,
}

/// Plays one reply's chunks as they arrive, until the sender closes (or `steer` cancels).
/// The future is spawned, so it owns what it needs. Nothing happens until it is first
/// polled: that is when the output opens (live, the speaker gates the microphone from then
/// on), so a held speculative reply polls it only at its commit.
pub trait Output: Send + Sync {
    fn play(
        &self,
        tl: Arc<Timeline>,
        audio: mpsc::UnboundedReceiver<ChunkAudio>,
        rate: u32,
        steer: Steer,
    ) -> BoxFuture<'static, Played>;
}

/// Replay's output: a virtual device consuming audio at real-time pace. The first sample
/// plays as soon as it arrives; each later chunk is due when the previous one finishes, and
/// arriving after that is an underrun (a gap the listener hears). Playback is computed, not
/// slept through: the output is done when its last chunk arrives. A pause and a resume take
/// effect at once; a cancel stops it while it is paused (the user's words replaced the
/// reply), and a virtual listener never barges in otherwise.
pub struct VirtualSink;

impl Output for VirtualSink {
    fn play(
        &self,
        tl: Arc<Timeline>,
        audio: mpsc::UnboundedReceiver<ChunkAudio>,
        rate: u32,
        steer: Steer,
    ) -> BoxFuture<'static, Played> {
        Box::pin(virtual_sink(tl, audio, rate, steer, false))
    }
}

/// The same virtual device, waited out as a real one is: the output lasts until its last
/// sample has played, so a pause or a cancel reaches audio the listener has not heard yet.
/// For sessions whose user acts while the reply plays (the session tests' scripted users).
pub struct RealTimeSink;

impl Output for RealTimeSink {
    fn play(
        &self,
        tl: Arc<Timeline>,
        audio: mpsc::UnboundedReceiver<ChunkAudio>,
        rate: u32,
        steer: Steer,
    ) -> BoxFuture<'static, Played> {
        Box::pin(virtual_sink(tl, audio, rate, steer, true))
    }
}

/// The virtual device's position: when what is queued finishes, or, paused, how much of it
/// is left.
struct VirtualPlayout {
    tl: Arc<Timeline>,
    rate: u32,
    started: bool,
    playing_until: Option<Nanos>,
    paused: Option<(PauseSpan, Duration)>,
}

impl VirtualPlayout {
    fn chunk(&mut self, p: &mut Played, samples: &[f32]) {
        let arrival = clock::now();
        let dur = Duration::from_secs_f64(samples.len() as f64 / f64::from(self.rate.max(1)));
        p.samples.extend_from_slice(samples);
        if p.first_arrival.is_none() {
            p.first_arrival = Some(arrival);
        }
        if let Some((_, left)) = self.paused.as_mut() {
            *left += dur;
            return;
        }
        let start = match self.playing_until {
            None if !self.started => self.begin(arrival),
            Some(until) if arrival <= until => until,
            Some(until) => {
                p.underruns += 1;
                p.underrun_ms += clock::ns_to_ms(arrival.signed_since(until));
                arrival
            }
            None => arrival,
        };
        self.playing_until = Some(start.saturating_add(dur));
    }

    /// The first sample leaves: no buffer, so queued and leaving are the same moment.
    fn begin(&mut self, at: Nanos) -> Nanos {
        self.started = true;
        self.tl.mark_at(EventKind::PlayoutQueued, at);
        self.tl.mark_at(EventKind::PlayoutStart, at);
        at
    }

    fn pause(&mut self, onset: Nanos) {
        if self.paused.is_some() {
            return;
        }
        let now = clock::now();
        let audible_from = self.tl.get(EventKind::PlayoutStart).map(|s| s.max(onset));
        let overlap_ms = audible_from
            .zip(self.playing_until)
            .map_or(0.0, |(from, until)| {
                clock::ns_to_ms(until.min(now).signed_since(from)).max(0.0)
            });
        let left = self.playing_until.map_or(Duration::ZERO, |u| {
            Duration::from_nanos(u.0.saturating_sub(now.0))
        });
        // What already finished keeps its end; what was still to play waits.
        if !left.is_zero() {
            self.playing_until = None;
        }
        let span = PauseSpan {
            onset,
            silent: now,
            resumed: None,
            overlap_ms,
        };
        self.paused = Some((span, left));
    }

    fn resume(&mut self, p: &mut Played) {
        let Some((mut span, left)) = self.paused.take() else {
            return;
        };
        let now = clock::now();
        span.resumed = Some(now);
        p.pauses.push(span);
        if left.is_zero() {
            return;
        }
        let start = if self.started { now } else { self.begin(now) };
        self.playing_until = Some(start.saturating_add(left));
    }

    /// Cancelled: what was left never plays.
    fn stop(&mut self, p: &mut Played) {
        match self.paused.take() {
            Some((span, _)) => {
                p.stopped_at = Some(span.silent);
                p.pauses.push(span);
            }
            None => p.stopped_at = Some(clock::now()),
        }
        self.playing_until = None;
    }

    /// How long until what is queued has played, if anything is playing.
    fn left_to_play(&self) -> Option<Duration> {
        let until = self.playing_until.filter(|_| self.paused.is_none())?;
        let now = clock::now();
        (until > now).then(|| Duration::from_nanos(until.0 - now.0))
    }
}

/// `linger`: wait until the last sample has played (else done when the audio ends).
async fn virtual_sink(
    tl: Arc<Timeline>,
    mut rx: mpsc::UnboundedReceiver<ChunkAudio>,
    rate: u32,
    steer: Steer,
    linger: bool,
) -> Played {
    let mut steer = steer;
    let cancel = steer.clone();
    let mut p = Played::default();
    let mut v = VirtualPlayout {
        tl: tl.clone(),
        rate,
        started: false,
        playing_until: None,
        paused: None,
    };
    let mut audio_open = true;
    let mut steered = true;
    // An onset already there when the output opens.
    if let Control::Paused { onset } = steer.seen() {
        v.pause(onset);
    }
    loop {
        let playing = linger.then(|| v.left_to_play()).flatten();
        if !audio_open && playing.is_none() && (v.paused.is_none() || !steered) {
            break;
        }
        let stoppable = v.paused.is_some() || playing.is_some();
        tokio::select! {
            _ = tokio::time::sleep(playing.unwrap_or_default()), if !audio_open && playing.is_some() => {}
            c = rx.recv(), if audio_open => match c {
                Some(c) => {
                    p.chunks.push(ChunkRecord::of(&c));
                    if !c.samples.is_empty() {
                        v.chunk(&mut p, &c.samples);
                    }
                }
                None => audio_open = false,
            },
            r = steer.changed(), if steered => match r {
                Some(Control::Paused { onset }) => v.pause(onset),
                Some(Control::Play) => v.resume(&mut p),
                Some(Control::Held | Control::Cancelled { .. } | Control::Dropped { .. }) => {}
                // The session let go of the turn: nothing will resume it.
                None => steered = false,
            },
            _ = cancel.cancelled(), if stoppable && steered => {
                v.stop(&mut p);
                break;
            }
        }
    }
    if let Some((span, _)) = v.paused.take() {
        p.stopped_at = Some(span.silent);
        p.pauses.push(span);
    }
    if let Some(end) = v.playing_until {
        tl.mark_at(EventKind::PlayoutDone, end);
    }
    p
}
