//! The turn's transcript: awaited (or given up at a barge-in, keeping its words) and recorded.

use super::{cancelled, interrupt};
use crate::error::TurnError;
use crate::output::Cancel;
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
    cancel: &Cancel,
) -> Result<Option<Transcript>, TurnError> {
    let asr = tokio::select! {
        r = &mut asr => r.map_err(|_| TurnError::AsrWorkerGone)?,
        onset = cancelled(cancel.clone()) => {
            interrupt(rec, Stage::Asr, onset);
            // The decode finishes anyway: its words are what the next turn continues.
            if let Ok(Ok(t)) = asr.await.map(|r| r.transcript) {
                rec.transcript = t.text;
            }
            return Ok(None);
        }
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
