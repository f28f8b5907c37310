//! One pause of a reply's output, as the output reports it and the record keeps it.

use voxlat_core::Nanos;

/// One pause of a reply's output.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PauseSpan {
    /// The user's speech onset that paused it.
    pub onset: Nanos,
    /// When the output went silent (live: the device's own timestamp of the flush); for a
    /// reply not yet audible, when its audio started being held.
    pub silent: Nanos,
    /// When it played on; `None` if it never did (the user's words replaced it).
    pub resumed: Option<Nanos>,
    /// Reply audio playing while the user talked: onset → silent, over what was audible, ms.
    pub overlap_ms: f64,
}
