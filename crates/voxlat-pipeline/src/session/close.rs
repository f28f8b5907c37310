//! Ending a session (Ctrl-C, `--max-turns`): the records it still owes the results.

use super::fold;
use super::launch::{blank_record, fail};
use super::Session;
use crate::error::TurnError;
use crate::record::TurnRecord;
use crate::respond::Progress;
use std::time::Duration;
use voxlat_core::{clock, RequestId, Timeline};

/// How long a cancelled turn may take to wind down (its request dropped, its output stopped).
const WIND_DOWN: Duration = Duration::from_secs(5);

impl Session<'_> {
    /// Ends the session. A turn already shown as started is cancelled (an interruption at
    /// this moment) and its record returned, as is one that ended while the caller had
    /// stopped waiting; a held reply not committed yet is dropped (a miss). Speculation
    /// discarded since the last record goes on the last record returned or, when there is
    /// none, on a record of the unfinished utterance (an error: the session ended before its
    /// endpoint), so no miss goes unreported. An utterance endpointed but not started is
    /// dropped: nothing of it was shown.
    pub async fn close(&mut self) -> Vec<TurnRecord> {
        let mut out: Vec<TurnRecord> = self.ready.take().into_iter().collect();
        let held = self.conversation.turn.is_held();
        self.conversation.cancel_turn(clock::now());
        if let Some((mut t, _)) = self.conversation.turn.take() {
            let ended = tokio::time::timeout(WIND_DOWN, &mut t.fut).await;
            match ended {
                Ok((rec, history)) => {
                    self.conversation.history = history;
                    if held {
                        self.waste
                            .miss(t.asr_spent.into_iter().chain([t.reply_spent]));
                    } else {
                        out.push(fold::record(rec, t, &self.recognition.annotations).0);
                    }
                }
                Err(_) if held => self
                    .waste
                    .miss(t.asr_spent.into_iter().chain([t.reply_spent])),
                Err(_) => {
                    tracing::warn!("the turn in flight did not wind down; its record is lost")
                }
            }
        }
        self.conversation.waiting.clear();
        let dropped = self.recognition.take_speculation();
        self.waste.discard(dropped.map(|d| d.1));
        self.waste.settle().await;
        if out.is_empty() && !self.waste.is_empty() {
            out.push(self.unfinished_record());
        }
        if let Some(last) = out.last_mut() {
            self.waste.charge(last);
        }
        out
    }

    fn unfinished_record(&mut self) -> TurnRecord {
        let c = &mut self.conversation;
        c.started += 1;
        (self.ctx.progress)(Progress::Started(c.started));
        let meta = (self.ctx.labels)(c.started);
        let mut rec = blank_record(&meta, &Timeline::new(RequestId::new()));
        rec.retractions = self.recognition.retractions();
        fail(&mut rec, &TurnError::SessionEnded);
        rec
    }
}
