//! The speaker's own thread: the commands a reply's player sends it, turned into samples in
//! the output ring, and the device's stamps turned back into playout events, pauses and
//! echo levels.

use super::echo::{rms, EchoRef};
use super::POLL;
use crate::output::PauseSpan;
use std::collections::VecDeque;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use voxlat_audio::playback::Playback;
use voxlat_audio::playout::{OutStamp, ReplyPlayout};
use voxlat_core::{clock, Nanos};

pub(super) enum SpeakerCmd {
    Begin {
        events: mpsc::UnboundedSender<SpeakerEvent>,
    },
    Audio {
        samples: Vec<f32>,
        rate: u32,
    },
    End,
    Stop,
    /// Silence the reply where it is (the user spoke at `onset`), keeping what is left.
    Pause {
        onset: Nanos,
    },
    /// Play on from where the pause stopped it.
    Resume,
}

pub(super) enum SpeakerEvent {
    /// The first sample was queued at .0 and leaves the device at .1.
    Started(Nanos, Nanos),
    Finished {
        done: Option<Nanos>,
        stopped: Option<Nanos>,
        underruns: u32,
        underrun_ms: f64,
        xruns: u64,
    },
    /// The device went silent for a pause.
    Paused(PauseSpan),
}

struct Active {
    events: mpsc::UnboundedSender<SpeakerEvent>,
    /// The part of the reply played since it began or last resumed: ring samples from
    /// `start` are the reply's samples from `from`.
    reply: ReplyPlayout,
    start: u64,
    from: usize,
    pending: VecDeque<f32>,
    /// The reply at the device rate: for the echo levels, and what a resume plays on from.
    audio: Vec<f32>,
    queued: Option<Nanos>,
    xruns_before: u64,
    /// Underruns of the parts before the last resume.
    underruns_before: (u32, f64),
    started: bool,
    ended: bool,
    stop: bool,
    paused: Option<Pausing>,
}

/// A pause asked for, and, once the device's flush is seen, when it went silent.
struct Pausing {
    onset: Nanos,
    silent: Option<Nanos>,
    reported: bool,
    resume: bool,
}

pub(super) fn speaker_thread(
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
                        from: 0,
                        pending: VecDeque::new(),
                        audio: Vec::new(),
                        queued: None,
                        xruns_before: out.health().xruns(),
                        underruns_before: (0, 0.0),
                        started: false,
                        ended: false,
                        stop: false,
                        paused: None,
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
                SpeakerCmd::Pause { onset } => {
                    if let Some(a) = active.as_mut().filter(|a| !a.stop && a.paused.is_none()) {
                        a.paused = Some(Pausing {
                            onset,
                            silent: None,
                            reported: false,
                            resume: false,
                        });
                        out.stop();
                    }
                }
                SpeakerCmd::Resume => {
                    if let Some(p) = active.as_mut().and_then(|a| a.paused.as_mut()) {
                        p.resume = true;
                    }
                }
            }
        }
        stamps.clear();
        out.drain_stamps(&mut stamps);
        let Some(a) = active.as_mut() else {
            continue;
        };
        if !a.pending.is_empty() && a.paused.is_none() {
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
            if s.flushed {
                if let Some(p) = a.paused.as_mut().filter(|p| p.silent.is_none()) {
                    p.silent = Some(out.to_process(s.at_ns));
                }
            }
            let end = s.first + u64::from(s.popped);
            if s.popped > 0 && end > a.start && !s.flushed {
                let from = a.from + (s.first.max(a.start) - a.start) as usize;
                let to = (a.from + (end - a.start) as usize).min(a.audio.len());
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
        if a.paused.as_ref().is_some_and(|p| p.silent.is_some()) && !a.stop {
            paused_or_resumed(a, &out, &echo, tail);
        }
        if a.ended && a.pending.is_empty() && !a.stop && a.paused.is_none() {
            a.reply
                .finish(a.start + (a.audio.len().saturating_sub(a.from)) as u64);
        }
        let finished = if a.stop {
            flushed
        } else {
            a.paused.is_none() && a.ended && a.pending.is_empty() && a.reply.finished()
        };
        if finished {
            let (underruns, underrun_ms) = a.reply.underruns();
            let (underruns, underrun_ms) = (
                underruns + a.underruns_before.0,
                underrun_ms + a.underruns_before.1,
            );
            let done = a.reply.last_at().map(|t| out.to_process(t));
            let stopped = if a.stop {
                // Stopped while paused: the device fell silent at the pause.
                a.paused.as_ref().and_then(|p| p.silent).or_else(|| {
                    stamps
                        .iter()
                        .find(|s| s.flushed)
                        .map(|s| out.to_process(s.at_ns))
                })
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

/// A paused reply: once the device is silent, the pause is reported (and the microphone's
/// gate opens after the echo tail, so the user is heard as any speaker is); once the session
/// asks to play on, what had not played is queued again from where it stopped, as a new part.
fn paused_or_resumed(a: &mut Active, out: &Playback, echo: &EchoRef, tail: Duration) {
    let Some(p) = a.paused.as_mut() else {
        return;
    };
    let Some(silent) = p.silent else {
        return;
    };
    if !p.reported {
        p.reported = true;
        let played = a.reply.played_to();
        let audible_until = played
            .map(|(_, t)| out.to_process(t))
            .map(|t| t.min(silent));
        let first = a.reply.first_at().map(|t| out.to_process(t));
        let overlap_ms = first.zip(audible_until).map_or(0.0, |(f, u)| {
            clock::ns_to_ms(u.signed_since(f.max(p.onset))).max(0.0)
        });
        let _ = a.events.send(SpeakerEvent::Paused(PauseSpan {
            onset: p.onset,
            silent,
            resumed: None,
            overlap_ms,
        }));
        echo.end(audible_until.unwrap_or(silent).saturating_add(tail));
        // Where to play on from: the sample after the last one the device played.
        let played_to = played.map_or(a.start, |(i, _)| i);
        a.from += (played_to.saturating_sub(a.start)) as usize;
        a.from = a.from.min(a.audio.len());
        a.pending.clear();
    }
    if !p.resume {
        return;
    }
    let (n, ms) = a.reply.underruns();
    a.underruns_before.0 += n;
    a.underruns_before.1 += ms;
    a.start = out.pushed();
    a.reply = ReplyPlayout::new(a.start, out.rate);
    a.pending = a.audio[a.from..].iter().copied().collect();
    if !a.started {
        a.queued = None;
    }
    a.paused = None;
    echo.begin();
}
