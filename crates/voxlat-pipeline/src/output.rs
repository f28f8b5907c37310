//! Where a reply's audio goes: replay's virtual sink, or a real device
//! ([`crate::live::Speaker`]). Either one stamps `playout_queued`, `playout_start` and
//! `playout_done` on the turn's timeline, and reports what it played.

use crate::record::ChunkRecord;
use crate::stages::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use voxlat_core::{clock, EventKind, Nanos, Timeline};
use voxlat_tts::stream::ChunkAudio;

/// A barge-in onset, once there is one; the turn's output stops when it arrives.
pub type Cancel = watch::Receiver<Option<Nanos>>;

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
}

/// Plays one reply's chunks as they arrive, until the sender closes (or `cancel` fires).
/// The future is spawned, so it owns what it needs. Nothing happens until it is first
/// polled: that is when the output opens (live, the speaker gates the microphone from then
/// on), so a held speculative reply polls it only at its commit.
pub trait Output: Send + Sync {
    fn play(
        &self,
        tl: Arc<Timeline>,
        audio: mpsc::UnboundedReceiver<ChunkAudio>,
        rate: u32,
        cancel: Cancel,
    ) -> BoxFuture<'static, Played>;
}

/// Replay's output: a virtual device consuming audio at real-time pace. The first sample
/// plays as soon as it arrives; each later chunk is due when the previous one finishes, and
/// arriving after that is an underrun (a gap the listener hears). Playback is computed, not
/// slept through, and a virtual listener never interrupts.
pub struct VirtualSink;

impl Output for VirtualSink {
    fn play(
        &self,
        tl: Arc<Timeline>,
        audio: mpsc::UnboundedReceiver<ChunkAudio>,
        rate: u32,
        _cancel: Cancel,
    ) -> BoxFuture<'static, Played> {
        Box::pin(virtual_sink(tl, audio, rate))
    }
}

async fn virtual_sink(
    tl: Arc<Timeline>,
    mut rx: mpsc::UnboundedReceiver<ChunkAudio>,
    rate: u32,
) -> Played {
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
                p.underrun_ms += clock::ns_to_ms(arrival.signed_since(until));
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
