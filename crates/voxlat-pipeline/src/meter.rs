//! The compute a speculation cost, reported by whoever did the work (the ASR and TTS workers,
//! the LLM request) as each piece finishes. A discarded speculation's Whisper decode or Piper
//! chunk is often still running when its turn is dropped, so its record cannot hold that time;
//! the meter outlives the turn and its [`Spent`] collects the rest. That waste is what decides
//! whether speculation pays.

use tokio::sync::mpsc;
use voxlat_core::{clock, Nanos};

/// Cloned into every job done for one speculation; dropped with the job.
#[derive(Clone, Debug)]
pub struct Meter(mpsc::UnboundedSender<f64>);

/// The other end: the milliseconds reported so far, and whether any job can still report.
#[derive(Debug)]
pub struct Spent {
    rx: mpsc::UnboundedReceiver<f64>,
    ms: f64,
    open: bool,
}

pub fn meter() -> (Meter, Spent) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Meter(tx),
        Spent {
            rx,
            ms: 0.0,
            open: true,
        },
    )
}

impl Meter {
    /// A stage was busy for this speculation from `from` to `to` (process clock).
    pub fn span(&self, from: Nanos, to: Nanos) {
        // Nobody listening: the speculation was kept, so its time is no waste.
        let _ = self.0.send(clock::ns_to_ms(to.signed_since(from)).max(0.0));
    }
}

impl Spent {
    /// Takes what has been reported since the last call; `open` stays true while a job that
    /// holds the meter is still queued or running.
    pub fn take(&mut self) -> f64 {
        loop {
            match self.rx.try_recv() {
                Ok(ms) => self.ms += ms,
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.open = false;
                    break;
                }
            }
        }
        std::mem::take(&mut self.ms)
    }

    pub fn open(&self) -> bool {
        self.open
    }

    /// Resolves once every job holding the meter is done. Cancel-safe: what arrived while
    /// waiting is kept for [`Spent::take`].
    pub async fn finished(&mut self) {
        while let Some(ms) = self.rx.recv().await {
            self.ms += ms;
        }
        self.open = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_reported_after_a_take_are_kept_for_the_next() {
        let (m, mut s) = meter();
        m.span(Nanos(0), Nanos(2_000_000));
        assert_eq!(s.take(), 2.0);
        assert!(s.open());
        m.span(Nanos(5_000_000), Nanos(8_000_000));
        drop(m);
        assert_eq!(s.take(), 3.0);
        assert!(!s.open(), "no job holds the meter any more");
        assert_eq!(s.take(), 0.0);
    }
}
