//! One control per turn: the session steers a turn in flight (commit, pause, resume,
//! cancel) through one watch channel that carries the turn's state, and every stage that
//! cares reads the same channel: the transcript wait, the LLM stream, TTS and the output.
//! A watch, not a queue: a stage that looks late sees where the turn stands, not a backlog
//! (LiveKit's `SpeechHandle` and Pipecat's in-band interruption frames play this part).

use tokio::sync::watch;
use voxlat_core::Nanos;

/// Where a turn in flight stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// A speculative reply: made, but quiet until the endpoint commits it.
    Held,
    /// It may play.
    Play,
    /// The user spoke from `onset`: its audio holds where it is until the session resumes or
    /// cancels it.
    Paused { onset: Nanos },
    /// Stopped for good: the user cut it short at `onset`. Nothing leaves this state.
    Cancelled { onset: Nanos },
    /// A held reply cancelled before its commit (the user went on from `onset`): it never
    /// plays, and is a miss. Nothing leaves this state.
    Dropped { onset: Nanos },
}

impl Control {
    /// The onset that stopped the turn for good, if one did.
    pub fn stopped_at(self) -> Option<Nanos> {
        match self {
            Control::Cancelled { onset } | Control::Dropped { onset } => Some(onset),
            _ => None,
        }
    }
}

/// The session's end of a turn's control.
pub struct TurnControl(watch::Sender<Control>);

impl TurnControl {
    /// A turn's control, held (a speculative reply) or free to play, and the stages' end.
    pub fn new(held: bool) -> (TurnControl, Steer) {
        let (tx, rx) = watch::channel(if held { Control::Held } else { Control::Play });
        (TurnControl(tx), Steer(rx))
    }

    /// Held → play: the endpoint confirmed the speculative reply.
    pub fn commit(&self) {
        self.0.send_if_modified(|c| {
            let held = *c == Control::Held;
            if held {
                *c = Control::Play;
            }
            held
        });
    }

    /// Pauses a reply that may play (or moves the onset of a paused one).
    pub fn pause(&self, onset: Nanos) {
        self.0.send_if_modified(|c| {
            let steerable = matches!(c, Control::Play | Control::Paused { .. });
            if steerable {
                *c = Control::Paused { onset };
            }
            steerable
        });
    }

    /// A paused reply plays on from where it stopped.
    pub fn resume(&self) {
        self.0.send_if_modified(|c| {
            let paused = matches!(c, Control::Paused { .. });
            if paused {
                *c = Control::Play;
            }
            paused
        });
    }

    /// Cancels the turn, once: the first onset is the one that cut it short. A held reply is
    /// dropped.
    pub fn cancel(&self, onset: Nanos) {
        self.0.send_if_modified(|c| {
            let next = match c {
                Control::Held => Control::Dropped { onset },
                Control::Play | Control::Paused { .. } => Control::Cancelled { onset },
                Control::Cancelled { .. } | Control::Dropped { .. } => return false,
            };
            *c = next;
            true
        });
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.borrow().stopped_at().is_some()
    }
}

/// A stage's end of a turn's control.
#[derive(Clone, Debug)]
pub struct Steer(watch::Receiver<Control>);

impl Steer {
    /// A control no session steers: the turn plays through. For tests and tools.
    pub fn free() -> Steer {
        TurnControl::new(false).1
    }

    /// Where the turn stands now.
    pub fn now(&self) -> Control {
        *self.0.borrow()
    }

    /// The onset that cancelled (or dropped) the turn, if one did.
    pub fn cancelled_at(&self) -> Option<Nanos> {
        self.now().stopped_at()
    }

    /// A held reply dropped before its commit: a miss.
    pub fn dropped(&self) -> bool {
        matches!(self.now(), Control::Dropped { .. })
    }

    /// The onset of the user's speech the turn is paused for, if it is.
    pub fn paused_at(&self) -> Option<Nanos> {
        match self.now() {
            Control::Paused { onset } => Some(onset),
            _ => None,
        }
    }

    /// The session has let go of the turn: nothing will change its state any more.
    pub fn let_go(&self) -> bool {
        self.0.has_changed().is_err()
    }

    /// Resolves with the onset once the turn is cancelled (or dropped); never if the session
    /// lets go without cancelling it.
    pub async fn cancelled(&self) -> Nanos {
        let mut rx = self.0.clone();
        if let Ok(c) = rx.wait_for(|c| c.stopped_at().is_some()).await {
            if let Some(onset) = c.stopped_at() {
                return onset;
            }
        }
        std::future::pending().await
    }

    /// Resolves once a held turn is committed (true), or cancelled or let go of first
    /// (false); at once for a turn that was never held.
    pub async fn committed(&self) -> bool {
        let mut rx = self.0.clone();
        let committed = match rx.wait_for(|c| *c != Control::Held).await {
            Ok(c) => !matches!(*c, Control::Dropped { .. }),
            Err(_) => false,
        };
        committed
    }

    /// The next change of state, seen once; `None` once the session has let go.
    pub async fn changed(&mut self) -> Option<Control> {
        self.0.changed().await.ok()?;
        Some(*self.0.borrow_and_update())
    }

    /// The state now, marked seen (a later [`Steer::changed`] waits for the next change).
    pub fn seen(&mut self) -> Control {
        *self.0.borrow_and_update()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_moves_only_along_its_states() {
        let (c, s) = TurnControl::new(true);
        c.pause(Nanos(1));
        c.resume();
        assert_eq!(
            s.now(),
            Control::Held,
            "a held reply is neither paused nor resumed"
        );
        c.commit();
        assert_eq!(s.now(), Control::Play);
        c.pause(Nanos(2));
        assert_eq!(s.paused_at(), Some(Nanos(2)));
        c.commit();
        assert_eq!(s.paused_at(), Some(Nanos(2)), "a commit does not resume");
        c.resume();
        assert_eq!(s.now(), Control::Play);
        c.cancel(Nanos(3));
        c.cancel(Nanos(4));
        c.resume();
        c.pause(Nanos(5));
        assert_eq!(
            s.cancelled_at(),
            Some(Nanos(3)),
            "the first onset, for good"
        );
        assert!(c.is_cancelled());
    }

    #[test]
    fn a_held_turn_is_committed_or_not_and_the_session_letting_go_is_seen() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (c, s) = TurnControl::new(true);
        c.commit();
        assert!(rt.block_on(s.committed()));
        let (c, s) = TurnControl::new(true);
        c.cancel(Nanos(1));
        assert!(s.dropped(), "cancelled before its commit");
        assert!(!rt.block_on(s.committed()));
        assert_eq!(rt.block_on(s.cancelled()), Nanos(1));
        let (c, s) = TurnControl::new(true);
        assert!(!s.let_go());
        drop(c);
        assert!(s.let_go());
        assert!(
            !rt.block_on(s.committed()),
            "dropped before its commit: a miss"
        );
    }
}
