//! Durations from flags and config files, bounded before they are converted.

use std::time::Duration;
use voxlat_core::clock::MAX_INPUT_SECONDS as MAX_SECONDS;

/// `30s`, `1.5` (seconds) or `2m`; at most `MAX_SECONDS`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    // Bounded before converting: Duration::from_secs_f64 panics on 1e300, and a timeout of
    // centuries is a typo anyway.
    const MAX: f64 = MAX_SECONDS;
    let too_long = || format!("{s} is longer than the {MAX:.0} s allowed; use e.g. 30s, 1.5 or 2m");
    let d = match s.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => {
            if secs > MAX {
                return Err(too_long());
            }
            Duration::from_secs_f64(secs)
        }
        _ => humantime::parse_duration(s).map_err(|e| format!("{e}; use e.g. 30s, 1.5 or 2m"))?,
    };
    if d.as_secs_f64() > MAX {
        return Err(too_long());
    }
    Ok(d)
}
