//! Device time → process time. cpal stamps callbacks with a `StreamInstant` on the stream's own
//! clock (an arbitrary origin per stream); the pipeline stamps events on the process clock. The
//! offset between them is measured once per stream by bracketing `Stream::now()` between two
//! reads of the process clock; half the tightest bracket is the mapping error, recorded with
//! the results.

use serde::{Deserialize, Serialize};
use voxlat_core::{clock, Nanos};

/// How many brackets are tried; the tightest wins (a preemption only widens a bracket).
const TRIES: usize = 16;

#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamClock {
    /// process_ns − stream_ns.
    pub offset_ns: i128,
    /// Half the width of the bracket the offset came from.
    pub error_ns: u64,
}

impl StreamClock {
    /// Measures the offset with `stream_now` (a stream's `now()` in nanoseconds).
    pub fn calibrate(mut stream_now: impl FnMut() -> u128) -> StreamClock {
        let mut best = StreamClock {
            offset_ns: 0,
            error_ns: u64::MAX,
        };
        for _ in 0..TRIES {
            let a = clock::now().0;
            let s = stream_now();
            let b = clock::now().0;
            let half = (b - a) / 2;
            if half < best.error_ns {
                best = StreamClock {
                    offset_ns: i128::from(a + half) - s as i128,
                    error_ns: half,
                };
            }
        }
        best
    }

    /// A stream instant (ns on the stream's clock) on the process clock.
    pub fn to_process(&self, stream_ns: u128) -> Nanos {
        Nanos((stream_ns as i128 + self.offset_ns).clamp(0, i128::from(u64::MAX)) as u64)
    }
}

/// CLOCK_MONOTONIC minus the process clock, in ns, with its bracket error: lets another
/// process (a test recording the speaker) put this process's stamps on its own clock.
/// `Instant` is CLOCK_MONOTONIC on Linux, so the two only differ by the origin.
pub fn monotonic_offset() -> (i128, u64) {
    let mut best = (0i128, u64::MAX);
    for _ in 0..TRIES {
        let a = clock::now().0;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
        let ok = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } == 0;
        let b = clock::now().0;
        if !ok {
            continue;
        }
        let mono = i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec);
        let half = (b - a) / 2;
        if half < best.1 {
            best = (mono - i128::from(a + half), half);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_clock_offset_from_the_process_clock_maps_back() {
        voxlat_core::clock::init();
        // A fake stream whose clock started 5 s before the process clock's now.
        let c = StreamClock::calibrate(|| u128::from(clock::now().0) + 5_000_000_000);
        assert!(c.error_ns < 1_000_000, "bracket {} ns", c.error_ns);
        let t = clock::now();
        let mapped = c.to_process(u128::from(t.0) + 5_000_000_000);
        assert!(mapped.signed_since(t).abs() <= 2 * c.error_ns as i64 + 1000);
    }

    #[test]
    fn the_process_clock_is_monotonic_time_shifted() {
        voxlat_core::clock::init();
        let (a, err) = monotonic_offset();
        let (b, _) = monotonic_offset();
        assert!(err < 1_000_000);
        assert!((a - b).abs() < 1_000_000, "{a} vs {b}");
    }
}
