//! What the output callback reports, and what a reply's playout is derived from it: when its
//! first sample leaves the device, when its last one does, where the device ran dry between
//! chunks (underruns, the stutter a listener hears), and when a stop took effect. Pure
//! bookkeeping on stream-clock nanoseconds, so it is tested without a device.

/// One output callback, as the callback saw it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct OutStamp {
    /// Ring samples consumed before this buffer (after a flush: including the discarded ones).
    pub first: u64,
    /// Ring samples this buffer played; the rest of it was silence.
    pub popped: u32,
    pub frames: u32,
    /// When the buffer's first frame leaves the device (stream clock, ns).
    pub at_ns: u64,
    /// The callback discarded everything queued (a stop) before filling this buffer.
    pub flushed: bool,
}

/// One reply: ring samples `start..end`. Every callback seen since the reply began is kept
/// (a few hundred per minute), so the figures hold whatever order stamps and `finish` come in.
#[derive(Clone, Debug)]
pub struct ReplyPlayout {
    start: u64,
    end: Option<u64>,
    rate: u32,
    stamps: Vec<OutStamp>,
}

impl ReplyPlayout {
    pub fn new(start: u64, rate: u32) -> ReplyPlayout {
        ReplyPlayout {
            start,
            end: None,
            rate: rate.max(1),
            stamps: Vec::new(),
        }
    }

    fn time_in(&self, s: &OutStamp, index: u64) -> u64 {
        s.at_ns + (index - s.first) * 1_000_000_000 / u64::from(self.rate)
    }

    pub fn observe(&mut self, s: &OutStamp) {
        if s.flushed || s.first + u64::from(s.popped) >= self.start {
            self.stamps.push(*s);
        }
    }

    /// Every sample of the reply has been queued: it ends at ring index `end`.
    pub fn finish(&mut self, end: u64) {
        self.end = Some(end);
    }

    /// The stream time at which ring sample `index` leaves the device; with `after`, the
    /// moment the sample before it has finished (so `index` may be one past a buffer's end).
    fn when(&self, index: u64, after: bool) -> Option<u64> {
        self.stamps
            .iter()
            .find(|s| {
                let end = s.first + u64::from(s.popped);
                s.popped > 0 && s.first <= index && (index < end || (after && index == end))
            })
            .map(|s| self.time_in(s, index))
    }

    /// Stream time at which the first sample leaves the device.
    pub fn first_at(&self) -> Option<u64> {
        self.when(self.start, false)
    }

    /// Stream time at which the last sample has left the device.
    pub fn last_at(&self) -> Option<u64> {
        let end = self.end?;
        (end > self.start).then(|| self.when(end, true)).flatten()
    }

    /// Stream time from which a stop silenced the device (a flush after the reply began).
    pub fn stopped_at(&self) -> Option<u64> {
        self.first_at()?;
        self.stamps.iter().find(|s| s.flushed).map(|s| s.at_ns)
    }

    /// How far the reply has played before any stop: the ring index after the last sample
    /// played, and the stream time at which it finished; `None` before the first sample.
    pub fn played_to(&self) -> Option<(u64, u64)> {
        self.stamps
            .iter()
            .take_while(|s| !s.flushed)
            .filter(|s| s.popped > 0 && s.first + u64::from(s.popped) > self.start)
            .map(|s| {
                let end = s.first + u64::from(s.popped);
                (end, self.time_in(s, end))
            })
            .max_by_key(|p| p.0)
    }

    pub fn finished(&self) -> bool {
        self.last_at().is_some() || self.stopped_at().is_some() || self.end == Some(self.start)
    }

    /// Gaps inside the reply: (count, total ms of silence inserted). A buffer that ran dry
    /// counts only when more of the reply came after it.
    pub fn underruns(&self) -> (u32, f64) {
        let end = self.end.unwrap_or(u64::MAX);
        let mut count = 0;
        let mut frames = 0u64;
        let mut last = None;
        for s in self.stamps.iter().take_while(|s| !s.flushed) {
            let dry_at = s.first + u64::from(s.popped);
            if s.popped >= s.frames || dry_at <= self.start || dry_at >= end {
                continue;
            }
            if last != Some(dry_at) {
                count += 1;
                last = Some(dry_at);
            }
            frames += u64::from(s.frames - s.popped);
        }
        (count, frames as f64 * 1e3 / f64::from(self.rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 kHz device, 10-frame buffers every 10 ms: one sample per ms.
    fn stamp(first: u64, popped: u32, at_ms: u64) -> OutStamp {
        OutStamp {
            first,
            popped,
            frames: 10,
            at_ns: at_ms * 1_000_000,
            flushed: false,
        }
    }

    #[test]
    fn first_and_last_sample_times_come_from_the_buffer_that_played_them() {
        let mut p = ReplyPlayout::new(104, 1000);
        p.observe(&stamp(100, 10, 50)); // plays 100..110: sample 104 at 54 ms
        p.observe(&stamp(110, 10, 60));
        p.finish(117);
        p.observe(&stamp(120, 0, 70)); // not involved
        assert_eq!(p.first_at(), Some(54_000_000));
        assert_eq!(
            p.last_at(),
            Some(67_000_000),
            "seen before finish, still found"
        );
        assert_eq!(p.underruns(), (0, 0.0));
    }

    #[test]
    fn a_gap_between_chunks_is_one_underrun_and_the_tail_is_not() {
        let mut p = ReplyPlayout::new(0, 1000);
        p.observe(&stamp(0, 10, 0));
        p.observe(&stamp(10, 5, 10)); // ran dry at 15
        p.observe(&stamp(15, 0, 20)); // still dry: the same gap
        p.observe(&stamp(15, 10, 30)); // the next chunk arrived
        p.observe(&stamp(25, 3, 40)); // the reply ends at 28
        p.finish(28);
        assert_eq!(p.last_at(), Some(43_000_000));
        let (n, ms) = p.underruns();
        assert_eq!(n, 1);
        assert!((ms - 15.0).abs() < 1e-9, "{ms}");
    }

    #[test]
    fn silence_before_the_first_sample_is_not_an_underrun_and_a_flush_is_a_stop() {
        let mut p = ReplyPlayout::new(20, 1000);
        p.observe(&stamp(20, 0, 0));
        p.observe(&stamp(20, 10, 10));
        p.observe(&OutStamp {
            first: 90,
            popped: 0,
            frames: 10,
            at_ns: 20_000_000,
            flushed: true,
        });
        assert_eq!(p.first_at(), Some(10_000_000));
        assert_eq!(p.stopped_at(), Some(20_000_000));
        assert!(p.finished());
        assert_eq!(p.underruns().0, 0);
    }

    /// A pause flushes the ring: what played before the flush is where the reply resumes.
    #[test]
    fn played_to_is_the_last_sample_out_before_a_flush() {
        let mut p = ReplyPlayout::new(100, 1000);
        assert_eq!(p.played_to(), None);
        p.observe(&stamp(100, 10, 0));
        p.observe(&stamp(110, 4, 10)); // 114 out at 14 ms
        p.observe(&OutStamp {
            first: 180,
            popped: 0,
            frames: 10,
            at_ns: 20_000_000,
            flushed: true,
        });
        p.observe(&stamp(180, 10, 30)); // after the flush: not the reply's first part
        assert_eq!(p.played_to(), Some((114, 14_000_000)));
    }
}
