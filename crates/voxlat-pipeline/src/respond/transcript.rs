//! The turn's transcript: awaited (or given up at a barge-in, keeping its words) and recorded.

use super::interrupt;
use crate::control::Steer;
use crate::error::TurnError;
use crate::record::{BusySpan, Stage, TurnRecord};
use crate::workers::AsrResult;
use tokio::sync::oneshot;
use voxlat_asr::engine::Transcript;
use voxlat_core::{EventKind, Nanos, Timeline};

/// The transcript, stamped and recorded; `None` when a barge-in came first (the turn is then
/// marked interrupted during ASR).
pub(super) async fn awaited(
    mut asr: oneshot::Receiver<AsrResult>,
    endpoint: Nanos,
    tl: &Timeline,
    rec: &mut TurnRecord,
    steer: &Steer,
) -> Result<Option<Transcript>, TurnError> {
    let asr = tokio::select! {
        // A turn superseded by the time its transcript is in must not open an LLM request:
        // when both are ready, the cancel is read first.
        biased;
        onset = steer.cancelled() => {
            interrupt(rec, Stage::Asr, onset);
            // A reply dropped before its commit is a miss, and its record goes nowhere:
            // waiting for its decode would only keep the next provisional end from starting
            // a reply of its own.
            if steer.dropped() {
                return Ok(None);
            }
            // The decode finishes anyway: its words are what the next turn continues.
            if let Ok(Ok(t)) = asr.await.map(|r| r.transcript) {
                rec.transcript = t.text;
            }
            return Ok(None);
        }
        r = &mut asr => r.map_err(|_| TurnError::AsrWorkerGone)?,
    };
    tl.mark_at(EventKind::AsrDone, Nanos(asr.finished.0.max(endpoint.0)));
    rec.busy.push(BusySpan {
        stage: Stage::Asr,
        from: asr.started,
        to: asr.finished,
    });
    let transcript = asr.transcript.map_err(TurnError::Asr)?;
    record(rec, &transcript);
    Ok(Some(transcript))
}

fn record(rec: &mut TurnRecord, t: &Transcript) {
    rec.asr_compute_ms = Some(t.compute.as_secs_f64() * 1e3);
    rec.asr_rtf = Some(t.real_time_factor);
    rec.asr_remote = t.remote.clone();
    rec.asr_fallback = t.fallback.as_ref().map(|f| f.reason.clone());
    rec.asr_fallback_ms = t
        .fallback
        .as_ref()
        .map(|_| t.fallback_compute().as_secs_f64() * 1e3);
    rec.transcript = t.text.clone();
    rec.asr_rejected = t.rejected.clone();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::TurnControl;
    use std::time::Duration;
    use voxlat_core::RequestId;

    /// A turn cancelled while its decode runs on: how long `awaited` keeps it.
    fn cancelled_during_a_decode(committed: bool) -> Option<Result<Option<Transcript>, TurnError>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            // The decode never ends while this sender lives.
            let (_decoding, asr) = oneshot::channel::<AsrResult>();
            let (control, steer) = TurnControl::new(true);
            if committed {
                control.commit();
            }
            control.cancel(Nanos(1));
            let tl = Timeline::new(RequestId::new());
            let mut rec = TurnRecord::blank("s", "t", "r", "");
            let turn = awaited(asr, Nanos(0), &tl, &mut rec, &steer);
            tokio::time::timeout(Duration::from_millis(200), turn)
                .await
                .ok()
        })
    }

    #[test]
    fn a_reply_dropped_before_its_commit_does_not_wait_for_its_decode() {
        assert!(matches!(cancelled_during_a_decode(false), Some(Ok(None))));
        // A committed turn's record keeps what was said, so it waits for the words.
        assert!(cancelled_during_a_decode(true).is_none());
    }

    /// The transcript and the cancel are both there when the turn looks: the turn is
    /// interrupted, every time, and no LLM request follows.
    #[test]
    fn a_turn_cancelled_by_the_time_its_transcript_is_in_goes_no_further() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for _ in 0..32 {
            let (tx, rx) = oneshot::channel();
            tx.send(AsrResult {
                transcript: Ok(Transcript {
                    text: "What time is it?".into(),
                    ..Transcript::no_new_words()
                }),
                started: Nanos(1),
                finished: Nanos(2),
            })
            .ok()
            .unwrap();
            let (control, steer) = TurnControl::new(false);
            control.cancel(Nanos(3));
            let tl = Timeline::new(RequestId::new());
            let mut rec = TurnRecord::blank("s", "t", "r", "x");
            let got = rt
                .block_on(awaited(rx, Nanos(0), &tl, &mut rec, &steer))
                .unwrap();
            assert!(got.is_none(), "a superseded turn went on to the LLM");
            assert!(rec.interrupted.is_some());
        }
    }
}
