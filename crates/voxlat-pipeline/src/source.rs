//! Replay's source: one recorded utterance, with lead and trail silence, fed in 20 ms frames
//! to an endpointer on its own thread (webrtc-vad is not `Send`). Paced in real time by
//! default, so endpointing is measured as a user feels it. Unpaced (`fast`), frames carry audio
//! time, and only the silence after a provisional end is fed in real time.

use crate::config::PipelineConfig;
use crate::error::{SourceError, TurnError};
use crate::scenario::LoadedTurn;
use crate::session::SourceEvent;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use voxlat_core::{clock, Nanos};
use voxlat_vad::{
    Endpointer, EndpointerConfig, SharedScorer, StopHold, VadError, VadEvent, WebRtcDetector,
};

const FRAME: usize = 320;

/// The product's endpointer: webrtc-vad frames, and the turn model or the stop hold (the
/// `cues` rule's waits) when there is one.
pub fn endpointer(
    cfg: &EndpointerConfig,
    turn_model: Option<SharedScorer>,
    hold: Option<StopHold>,
) -> Result<Endpointer<WebRtcDetector>, VadError> {
    let mut ep = WebRtcDetector::new(cfg.mode, cfg.frame_ms)
        .and_then(|d| Endpointer::new(cfg.clone(), d))?;
    if let Some(m) = turn_model {
        ep = ep.with_turn_model(m)?;
    }
    if let Some(h) = hold {
        ep = ep.with_stop_hold(h)?;
    }
    Ok(ep)
}

/// Starts feeding `turn`. The thread stops after an endpoint at or past the turn's speech
/// end, or when the session goes. An endpoint before it (a commit inside a pause) is followed
/// by the rest of the audio, as a live user goes on, so the session pauses the reply and
/// merges the words; except unpaced (`fast`), where audio time runs ahead of the clock that
/// the session's pause and merge windows are timed on, and the first endpoint ends the turn.
pub fn spawn_scenario_source(
    turn: &LoadedTurn,
    cfg: &PipelineConfig,
    turn_model: Option<SharedScorer>,
    hold: Option<StopHold>,
) -> Result<(mpsc::Receiver<SourceEvent>, std::thread::JoinHandle<()>), TurnError> {
    let (tx, rx) = mpsc::channel::<SourceEvent>(64);
    let rate = voxlat_audio::PIPELINE_RATE as usize;
    let lead = rate * cfg.lead_silence_ms as usize / 1000;
    // Enough silence after the speech for the longest wait the endpointer can be held to:
    // the hangover, the cues rule's longest wait, or Smart Turn's hold for an unsure turn.
    let longest_ms = [
        Some(cfg.endpointer.hangover_ms),
        hold.as_ref().map(|_| crate::cues::MAX_WAIT_MS as u32),
        turn_model.as_ref().map(|_| cfg.endpointer.turn.max_ms),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(cfg.endpointer.hangover_ms) as usize;
    let trail = rate * (longest_ms + 1000) / 1000;
    let mut samples = vec![0.0f32; lead];
    samples.extend_from_slice(&turn.audio.samples);
    samples.extend(std::iter::repeat_n(0.0, trail));
    let truth_idx = lead + turn.speech_end_sample.saturating_sub(1);
    // The annotated end and pauses judge where in the audio the endpoint commits.
    let judge = turn.speech_end_annotated.then(|| {
        let (end_ms, pauses) = crate::turn_eval::truth(turn);
        move |commit_sample: usize| {
            let ms = commit_sample.saturating_sub(lead) as f64 * 1000.0 / rate as f64;
            voxlat_core::cutoff::judge(ms, end_ms, &pauses)
        }
    });
    let ep_cfg = cfg.endpointer.clone();
    let fast = cfg.fast;
    let thread = std::thread::Builder::new()
        .name("source+vad".into())
        .spawn(move || {
            let send = |ev: SourceEvent| tx.blocking_send(ev).is_ok();
            let mut ep = match endpointer(&ep_cfg, turn_model, hold) {
                Ok(ep) => ep,
                Err(e) => {
                    send(SourceEvent::Failed(e.into()));
                    return;
                }
            };
            let start = Instant::now();
            let t0 = clock::now();
            // When the frame ending at sample `last` is due, if the audio from `from_sample`
            // on is fed in real time from `from_instant`.
            let due = |(from_instant, from_sample): (Instant, usize), last: usize| {
                from_instant
                    + Duration::from_micros(
                        ((last + 1 - from_sample) as u64 * 1_000_000) / rate as u64,
                    )
            };
            let wait_until = |due: Instant| {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            };
            // Unpaced, the silence after a provisional end is still fed in real time, until
            // the endpoint or a retraction: the speculative reply gets the pause it has live,
            // so what follows the commit is the product's, not a reply started at the commit.
            let mut paused_since: Option<(Instant, usize)> = None;
            let mut truth_sent = false;
            let mut fed = (0usize, t0);
            for (k, chunk) in samples.chunks(FRAME).enumerate() {
                let last = k * FRAME + chunk.len() - 1;
                let t_end = if fast {
                    if let Some(from) = paused_since {
                        wait_until(due(from, last));
                    }
                    Nanos(t0.0 + (last as u64 * 1_000_000_000) / rate as u64)
                } else {
                    // Real time: frame k is complete (20 ms of audio captured) at (k+1)·20 ms.
                    wait_until(due((start, 0), last));
                    clock::now()
                };
                if !truth_sent && last >= truth_idx {
                    truth_sent = true;
                    let back = ((last - truth_idx) as u64 * 1_000_000_000) / rate as u64;
                    if !send(SourceEvent::Truth(Nanos(t_end.0.saturating_sub(back)))) {
                        return;
                    }
                }
                fed = (last, t_end);
                let events = match ep.push(chunk, t_end) {
                    Ok(events) => events,
                    Err(e) => {
                        send(SourceEvent::Failed(e.into()));
                        return;
                    }
                };
                for ev in events {
                    match ev {
                        VadEvent::Provisional { .. } => {
                            paused_since = Some((Instant::now(), last + 1));
                        }
                        VadEvent::Retracted { .. } => paused_since = None,
                        _ => {}
                    }
                    let is_end = matches!(ev, VadEvent::Endpoint { .. });
                    if let (Some(judge), VadEvent::Endpoint { at, .. }) = (judge.as_ref(), &ev) {
                        let verdict = judge(last);
                        if !send(SourceEvent::Judged { at: *at, verdict }) {
                            return;
                        }
                    }
                    if !send(SourceEvent::Vad {
                        ev,
                        received: clock::now(),
                    }) || (is_end && (truth_sent || fast))
                    {
                        return;
                    }
                }
            }
            // A turn still open when the audio ends (held past everything fed) ends there, as
            // a live source's end ends it: it gets a commit and a verdict, not "no speech".
            let (last, t_end) = fed;
            for ev in ep.finish(t_end) {
                if let (Some(judge), VadEvent::Endpoint { at, .. }) = (judge.as_ref(), &ev) {
                    let verdict = judge(last);
                    if !send(SourceEvent::Judged { at: *at, verdict }) {
                        return;
                    }
                }
                if !send(SourceEvent::Vad {
                    ev,
                    received: clock::now(),
                }) {
                    return;
                }
            }
            send(SourceEvent::Ended);
        })
        .map_err(|e| TurnError::Source(SourceError::Thread(e)))?;
    Ok((rx, thread))
}
