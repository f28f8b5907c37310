//! The process clock: one `Instant` origin, every event as nanoseconds since it.
//!
//! `SystemTime` never enters a duration: it jumps (NTP, suspend) and would make two stamps
//! on different clocks incomparable. Wall-clock time is only a label on result files.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// Takes the origin now if nobody has yet. Call it first thing in `main`, so that the origin
/// is the process start and not the first event.
pub fn init() -> Instant {
    let origin = origin();
    anchor();
    origin
}

/// The wall clock's reading at one point of the process clock, taken once per process: every
/// file and span that converts a stamp to wall time uses this one pair, so they agree with each
/// other and keep the monotonic spacing even if the wall clock is stepped later.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    /// Nanoseconds since the Unix epoch, read at `process_ns`.
    pub wall_unix_ns: u64,
    /// The same moment on the process clock.
    pub process_ns: Nanos,
}

impl Anchor {
    /// `t` on the wall clock.
    pub fn wall(&self, t: Nanos) -> std::time::SystemTime {
        let d = t.signed_since(self.process_ns);
        let at = std::time::UNIX_EPOCH + Duration::from_nanos(self.wall_unix_ns);
        let abs = Duration::from_nanos(d.unsigned_abs());
        if d >= 0 {
            at + abs
        } else {
            at - abs
        }
    }
}

/// The process's [`Anchor`], taken on first use (by [`init`], in `main`).
pub fn anchor() -> Anchor {
    static ANCHOR: OnceLock<Anchor> = OnceLock::new();
    *ANCHOR.get_or_init(|| {
        // Not through `now()`: `init` calls this, and `now` calls `init`.
        let origin = origin();
        let process = Instant::now().saturating_duration_since(origin);
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Anchor {
            wall_unix_ns: u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX),
            process_ns: Nanos(u64::try_from(process.as_nanos()).unwrap_or(u64::MAX)),
        }
    })
}

/// The origin every [`Nanos`] counts from.
pub fn origin() -> Instant {
    *ORIGIN.get_or_init(Instant::now)
}

/// Now, on the process clock.
pub fn now() -> Nanos {
    Nanos::from_instant(Instant::now())
}

/// A point on the process clock: nanoseconds since [`origin`].
///
/// u64 nanoseconds last 584 years, so overflow is not a concern; arithmetic between points
/// is signed ([`Nanos::signed_since`]) so that a misordered pair shows as negative rather than
/// wrapping or saturating silently.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);

    /// Maps an `Instant` onto the process clock. Instants before the origin map to zero.
    pub fn from_instant(t: Instant) -> Nanos {
        let d = t.saturating_duration_since(origin());
        Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The `Instant` this point stands for.
    pub fn to_instant(self) -> Instant {
        origin() + Duration::from_nanos(self.0)
    }

    /// `self - earlier` in nanoseconds, negative when `earlier` is in fact later.
    pub fn signed_since(self, earlier: Nanos) -> i64 {
        (self.0 as i128 - earlier.0 as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// `ms` milliseconds after the origin (fixtures and scripted timelines).
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }

    pub fn saturating_add(self, d: Duration) -> Nanos {
        Nanos(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} ms", self.0 as f64 / 1e6)
    }
}

/// The longest duration accepted from a flag or a config file, in seconds: far beyond any
/// real run; it exists so that `1e300` is an error rather than a panic converting to a
/// `Duration`.
pub const MAX_INPUT_SECONDS: f64 = 1e6;

/// Nanoseconds (signed) to milliseconds, for display and statistics.
pub fn ns_to_ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// A duration in milliseconds, for display and statistics. The one `fn ms` of the workspace
/// (`tests/tidy.rs`): every other conversion to milliseconds calls one of these.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `samples` at `rate` Hz, in milliseconds (a rate of 0 counts as 1).
pub fn samples_to_ms(samples: usize, rate: u32) -> f64 {
    samples as f64 * 1000.0 / f64::from(rate.max(1))
}

/// The wall-clock time as an RFC 3339 UTC label (seconds precision). A label only: never
/// subtract two of these.
pub fn wall_label() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// A wall-clock label fit for a file name: `20261130T060102Z`.
pub fn wall_label_compact() -> String {
    wall_label().replace(['-', ':'], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_monotonic_and_after_origin() {
        init();
        let a = now();
        let b = now();
        assert!(b >= a);
        assert!(a.to_instant() >= origin());
    }

    #[test]
    fn signed_since_is_negative_for_misordered_pairs() {
        assert_eq!(Nanos(10).signed_since(Nanos(4)), 6);
        assert_eq!(Nanos(4).signed_since(Nanos(10)), -6);
    }

    #[test]
    fn instant_round_trip_is_exact_to_the_nanosecond() {
        let t = now();
        assert_eq!(Nanos::from_instant(t.to_instant()), t);
    }

    #[test]
    fn compact_label_has_no_separators() {
        let l = wall_label_compact();
        assert!(l.ends_with('Z'), "{l}");
        assert!(!l.contains(':') && !l.contains('-'), "{l}");
    }

    #[test]
    fn the_anchor_is_taken_once_and_maps_stamps_onto_the_wall_clock() {
        let a = anchor();
        assert_eq!(a, anchor(), "one anchor per process");
        let later = Nanos(a.process_ns.0 + 1_500_000_000);
        let d = a.wall(later).duration_since(a.wall(a.process_ns)).unwrap();
        assert_eq!(d, Duration::from_millis(1500));
        assert!(now() >= a.process_ns);
    }
}
