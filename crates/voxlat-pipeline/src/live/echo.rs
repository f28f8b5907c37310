//! What the speaker played, for the listener: whether a reply may be in the microphone (the
//! gate), and how loud it was around a given moment (the barge-in reference).

use std::collections::VecDeque;
use std::sync::Mutex;
use voxlat_core::Nanos;

/// Slack around a microphone frame when looking up the reply level: covers the mapping
/// error of two device clocks and the acoustic path.
const ECHO_SLACK_NS: u64 = 60_000_000;

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

    /// Whether the microphone may be hearing a reply at `t`: from the reply's first played
    /// buffer, not from when its playout was opened. Before any of it plays there is nothing
    /// to hear, and a gate would take the room's noise for a barge-in (the reply has no level
    /// for the noise to stay under): a committed reply still being generated was cancelled by
    /// the hiss at the end of a recording, and answered 2 s later.
    pub fn active(&self, t: Nanos) -> bool {
        let s = self.lock();
        (s.playing && !s.levels.is_empty()) || t < s.quiet_from
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

    pub(super) fn begin(&self) {
        let mut s = self.lock();
        s.playing = true;
        s.levels.clear();
    }

    pub(super) fn played(&self, from: Nanos, to: Nanos, rms: f32) {
        let mut s = self.lock();
        if s.levels.len() >= 4096 {
            s.levels.pop_front();
        }
        s.levels.push_back((from, to, rms));
    }

    pub(super) fn end(&self, quiet_from: Nanos) {
        let mut s = self.lock();
        s.playing = false;
        // A reply stopped before any of it played leaves no echo to wait out.
        if !s.levels.is_empty() {
            s.quiet_from = quiet_from;
        }
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

    /// Barge-in compares the microphone with the reply's level; before the reply plays, there
    /// is no level, so an open gate would stop the reply for any noise.
    #[test]
    fn the_gate_opens_with_the_first_played_buffer_not_with_the_playout() {
        let e = EchoRef::default();
        e.begin();
        assert!(!e.active(Nanos(100_000_000)), "nothing played yet");
        e.end(Nanos(900_000_000));
        assert!(
            !e.active(Nanos(200_000_000)),
            "a reply stopped unplayed leaves no echo tail"
        );
        e.begin();
        e.played(Nanos(300_000_000), Nanos(320_000_000), 0.2);
        assert!(e.active(Nanos(310_000_000)));
    }
}
