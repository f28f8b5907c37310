//! The silence that ends the standing stop, set from outside the endpointer.
//!
//! The endpointer hears only audio. A rule that also reads what was said (the speculative
//! transcript's tail) learns it on another thread, some time after the provisional end. It
//! sets the wait for that stop here, and the endpointer reads it at each frame in place of
//! the hangover. A wait names its stop by the provisional end's time, so one that arrives
//! after the speaker went on never applies to the next stop.

use std::sync::{Arc, Mutex};
use voxlat_core::Nanos;

/// Shared between the endpointer's thread and whoever decides the wait.
#[derive(Clone, Debug, Default)]
pub struct StopHold(Arc<Mutex<Option<(Nanos, u32)>>>);

impl StopHold {
    /// The stop whose provisional end came at `provisional_at` ends after `hold_ms` of
    /// silence, counted as the hangover is (from the refined end of speech).
    pub fn set(&self, provisional_at: Nanos, hold_ms: u32) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some((provisional_at, hold_ms));
    }

    /// The wait set for the stop at `provisional_at`, if one was.
    pub fn get(&self, provisional_at: Nanos) -> Option<u32> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .filter(|&(at, _)| at == provisional_at)
            .map(|(_, ms)| ms)
    }
}
