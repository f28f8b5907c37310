//! Durations from flags and config files, bounded before they are converted.

use super::ArgError;
use std::time::Duration;
use voxlat_core::clock::MAX_INPUT_SECONDS as MAX_SECONDS;

/// `30s`, `1.5` (seconds) or `2m`; at most `MAX_SECONDS`.
pub fn parse_duration(s: &str) -> Result<Duration, ArgError> {
    // Bounded before converting: Duration::from_secs_f64 panics on 1e300, and a timeout of
    // centuries is a typo anyway.
    const MAX: f64 = MAX_SECONDS;
    let too_long = || ArgError::TooLong {
        input: s.to_string(),
        max: MAX,
    };
    let d = match s.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => {
            if secs > MAX {
                return Err(too_long());
            }
            Duration::from_secs_f64(secs)
        }
        _ => humantime::parse_duration(s).map_err(|cause| ArgError::Duration { cause })?,
    };
    if d.as_secs_f64() > MAX {
        return Err(too_long());
    }
    Ok(d)
}
