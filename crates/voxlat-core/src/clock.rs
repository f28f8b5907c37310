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
    *ORIGIN.get_or_init(Instant::now)
}

/// The origin every [`Nanos`] counts from.
pub fn origin() -> Instant {
    init()
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
}
