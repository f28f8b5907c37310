//! What wakes the session besides its source and its turn: a timer (a paused reply plays on,
//! carried words are asked again, nothing happened for too long), or the transcription that
//! decides a paused reply.

use super::Session;
use std::future::Future;

/// Why the session's clock woke it.
#[derive(Clone, Copy)]
pub(super) enum Due {
    /// A paused reply waited long enough and no utterance came: a noise, not the user going
    /// on, and it plays on.
    Resume,
    /// Carried words are asked again on their own.
    AskAgain,
    /// Nothing happened for `idle_timeout`.
    Idle,
}

/// Which transcription decides a paused reply.
#[derive(Clone, Copy)]
pub(super) enum Deciding {
    /// The endpointed utterance it waits on.
    Endpointed,
    /// The provisional end's, before the endpoint.
    Early,
}

impl Session<'_> {
    /// The earliest of the session's timers, if any runs.
    pub(super) fn next_due(&self) -> Option<(tokio::time::Instant, Due)> {
        let c = &self.conversation;
        let speaking = self.recognition.speaking;
        let idle = self
            .ctx
            .opts
            .idle_timeout
            .filter(|_| c.turn.is_idle())
            .map(|d| {
                let left = d.saturating_sub(self.last_activity.elapsed());
                (tokio::time::Instant::now() + left, Due::Idle)
            });
        let ask = c
            .words
            .ask_again
            .as_ref()
            .filter(|_| c.free() && !speaking)
            .map(|a| (a.due, Due::AskAgain));
        let resume = c
            .paused
            .as_ref()
            .filter(|p| p.deciding.is_none() && !speaking)
            .map(|p| (p.due, Due::Resume));
        [resume, ask, idle]
            .into_iter()
            .flatten()
            .min_by_key(|d| d.0)
    }

    /// The transcription that decides a paused reply, when one is awaited.
    pub(super) fn deciding(&self) -> Option<Deciding> {
        if self
            .conversation
            .paused
            .as_ref()
            .is_some_and(|p| p.deciding.is_some())
        {
            Some(Deciding::Endpointed)
        } else if self.conversation.early.decides.is_some() && self.recognition.has_speculation() {
            Some(Deciding::Early)
        } else {
            None
        }
    }
}

/// Awaits `f` when there is one; never resolves otherwise (its arm's guard keeps it
/// unpolled then, so no arm has to unwrap what its guard checked).
pub(super) async fn when_some<F: Future + Unpin>(f: Option<&mut F>) -> F::Output {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}
