//! Progress goes out through a [`Reporter`]; the library never prints. The CLI turns these
//! events into progress bars, tests record them.

use std::path::Path;

#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// All files were present and verified; nothing was fetched.
    AlreadyPresent {
        model: &'a str,
    },
    /// A file was present but wrong, so it will be fetched again.
    Replacing {
        model: &'a str,
        file: &'a str,
        reason: &'a str,
    },
    SourceStart {
        model: &'a str,
        source: &'a str,
    },
    /// A long step without byte progress (pip, npm, unpacking, converting).
    Step {
        model: &'a str,
        message: &'a str,
    },
    /// Bytes of one transfer or hash; `total` when known.
    Bytes {
        model: &'a str,
        what: &'a str,
        done: u64,
        total: Option<u64>,
    },
    /// The transfer or hash named by `what` is over.
    BytesDone {
        model: &'a str,
        what: &'a str,
    },
    SourceFailed {
        model: &'a str,
        source: &'a str,
        error: &'a str,
    },
    FileReady {
        model: &'a str,
        file: &'a str,
        path: &'a Path,
        size: u64,
        sha256: &'a str,
        /// The sha256 was not pinned anywhere and has just been recorded.
        pinned_now: bool,
    },
}

pub trait Reporter: Sync {
    fn event(&self, event: Event<'_>);
}

/// Discards everything.
pub struct Quiet;

impl Reporter for Quiet {
    fn event(&self, _: Event<'_>) {}
}
