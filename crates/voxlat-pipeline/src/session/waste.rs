//! Speculation the session threw away since the last record: the replies discarded (misses)
//! and every stage's compute spent on discarded work, held replies and speculative
//! transcriptions alike. Work still running when it was dropped (a Whisper decode, a Piper
//! chunk) reports through its [`Spent`], so a record waits briefly for it.

use crate::meter::Spent;
use crate::record::TurnRecord;
use std::time::Duration;

/// Longer than a Whisper decode or a Piper chunk takes; a stage stuck past it has its time
/// counted on a later record instead.
const SETTLE: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
pub(super) struct Waste {
    misses: u32,
    ms: f64,
    pending: Vec<Spent>,
}

impl Waste {
    /// A speculative reply discarded, and what it cost.
    pub(super) fn miss(&mut self, spent: impl IntoIterator<Item = Spent>) {
        self.misses += 1;
        self.discard(spent);
    }

    /// Work dropped without a miss of its own: a speculative transcription, or a committed
    /// reply whose words go on in the next turn.
    pub(super) fn discard(&mut self, spent: impl IntoIterator<Item = Spent>) {
        self.pending.extend(spent);
    }

    /// Compute already measured, spent on work nobody uses (a transcription with no words
    /// that a paused reply waited for).
    pub(super) fn add_ms(&mut self, ms: f64) {
        self.ms += ms.max(0.0);
    }

    /// Nothing to report so far.
    pub(super) fn is_empty(&mut self) -> bool {
        self.collect();
        self.misses == 0 && self.ms == 0.0
    }

    /// Waits until the discarded work still running is done (cancel-safe).
    pub(super) async fn settle(&mut self) {
        let all = async {
            for s in &mut self.pending {
                s.finished().await;
            }
        };
        let _ = tokio::time::timeout(SETTLE, all).await;
    }

    /// Puts the waste so far on `rec`, and starts counting afresh.
    pub(super) fn charge(&mut self, rec: &mut TurnRecord) {
        self.collect();
        rec.speculation_misses = std::mem::take(&mut self.misses);
        rec.speculation_wasted_ms = std::mem::take(&mut self.ms);
    }

    fn collect(&mut self) {
        for s in &mut self.pending {
            self.ms += s.take();
        }
        self.pending.retain(Spent::open);
    }
}
