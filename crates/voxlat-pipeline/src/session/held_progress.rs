//! A held reply's progress: nobody sees a reply that may never be spoken, so its transcript
//! and text are kept until the commit, then shown as a plain turn's would have been, and
//! passed straight through from then on.

use crate::respond::{Progress, ProgressFn};
use std::sync::{Arc, Mutex};

enum Kept {
    Transcript(String),
    Reply(String),
}

impl Kept {
    fn of(p: &Progress<'_>) -> Option<Kept> {
        match p {
            Progress::Started(_) => None,
            Progress::Transcript(t) => Some(Kept::Transcript((*t).to_owned())),
            Progress::Reply(t) => Some(Kept::Reply((*t).to_owned())),
        }
    }

    fn as_progress(&self) -> Progress<'_> {
        match self {
            Kept::Transcript(t) => Progress::Transcript(t),
            Kept::Reply(t) => Progress::Reply(t),
        }
    }
}

/// `None` once committed: progress then goes straight to the session's own.
type Pending = Mutex<Option<Vec<Kept>>>;

pub(super) struct HeldProgress {
    pending: Arc<Pending>,
    shown: Arc<ProgressFn>,
}

impl HeldProgress {
    /// The held turn's progress function, and the handle that commits it.
    pub(super) fn new(shown: Arc<ProgressFn>) -> (Arc<ProgressFn>, HeldProgress) {
        let pending: Arc<Pending> = Arc::new(Mutex::new(Some(Vec::new())));
        let keep = pending.clone();
        let target = shown.clone();
        // The lock is held while showing, so a piece streamed during the commit cannot
        // overtake the ones kept before it.
        let f: Arc<ProgressFn> = Arc::new(move |p: Progress<'_>| {
            let mut g = keep.lock().unwrap_or_else(|e| e.into_inner());
            match g.as_mut() {
                Some(kept) => kept.extend(Kept::of(&p)),
                None => target(p),
            }
        });
        (f, HeldProgress { pending, shown })
    }

    /// The reply stands as the session's `n`-th turn: show what it did so far.
    pub(super) fn commit(&self, n: u32) {
        let mut g = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        (self.shown)(Progress::Started(n));
        for k in g.take().unwrap_or_default() {
            (self.shown)(k.as_progress());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorder() -> (Arc<ProgressFn>, Arc<Mutex<String>>) {
        let out = Arc::new(Mutex::new(String::new()));
        let o = out.clone();
        let f: Arc<ProgressFn> = Arc::new(move |p: Progress<'_>| {
            let mut s = o.lock().unwrap();
            match p {
                Progress::Started(n) => s.push_str(&format!("[{n}] ")),
                Progress::Transcript(t) => s.push_str(&format!("{t} → ")),
                Progress::Reply(t) => s.push_str(t),
            }
        });
        (f, out)
    }

    #[test]
    fn nothing_shows_before_the_commit_and_everything_in_order_after() {
        let (shown, out) = recorder();
        let (held, handle) = HeldProgress::new(shown);
        held(Progress::Transcript("hi there"));
        held(Progress::Reply("Hello"));
        assert_eq!(*out.lock().unwrap(), "");
        handle.commit(3);
        held(Progress::Reply(", you."));
        assert_eq!(*out.lock().unwrap(), "[3] hi there → Hello, you.");
    }

    #[test]
    fn a_reply_never_committed_shows_nothing() {
        let (shown, out) = recorder();
        let (held, handle) = HeldProgress::new(shown);
        held(Progress::Transcript("hi"));
        drop(handle);
        held(Progress::Reply("Hello"));
        assert_eq!(*out.lock().unwrap(), "");
    }
}
