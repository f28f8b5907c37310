//! Replay's turn loop: the plan played by one caller, or by N callers at once per level of a
//! `--sessions` gradient. Each caller is its own pipeline (Whisper and Piper hold one turn at a
//! time) and its own conversations; every finished turn reaches the results as it ends, so a
//! stop keeps all of them.

use super::Stopped;
use crate::common::telemetry_outcome;
use anyhow::Result;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use voxlat_llm::Message;
use voxlat_pipeline::cues::SpeakerPauses;
use voxlat_pipeline::results::ResultsWriter;
use voxlat_pipeline::{LoadedTurn, Pipeline, Scenario, TurnRecord};
use voxlat_telemetry::TurnTelemetry;

/// (scenario index, turn index, repeat, warm-up) in play order.
pub type Step = (usize, usize, u32, bool);

pub struct Level<'a> {
    /// Callers at once; `None` for a plain replay (one caller, turns not tagged).
    pub sessions: Option<u32>,
    pub pipelines: &'a [Pipeline],
    pub scenarios: &'a [(Scenario, Vec<LoadedTurn>)],
    pub plan: &'a [Step],
}

/// Plays the level; returns why it stopped early, if it did.
pub async fn run_level(
    level: Level<'_>,
    writer: &mut ResultsWriter,
    telemetry: &TurnTelemetry,
    mut stop: Pin<&mut impl Future<Output = Stopped>>,
) -> Result<Option<Stopped>> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u32, Vec<TurnRecord>)>();
    let callers: Vec<_> = level
        .pipelines
        .iter()
        .enumerate()
        .map(|(k, p)| caller(p, k as u32 + 1, level.scenarios, level.plan, tx.clone()))
        .collect();
    drop(tx);
    let mut all = std::pin::pin!(futures_util::future::join_all(callers));
    let total = level.plan.len() * level.pipelines.len();
    let (mut done, mut finished) = (0, false);
    loop {
        tokio::select! {
            got = rx.recv() => {
                let Some((session, recs)) = got else { return Ok(None) };
                // One utterance: its records, more than one when a commit inside a pause was
                // followed by the rest of it.
                done += 1;
                for mut rec in recs {
                    if let Some(n) = level.sessions {
                        rec.sessions = n;
                        rec.session = session;
                    }
                    eprintln!("[{done}/{total}]{} {}", caller_label(&rec), turn_line(&rec));
                    if !rec.warmup {
                        telemetry.record_turn(
                            &rec.snapshot(),
                            telemetry_outcome(rec.outcome),
                            rec.error.as_deref(),
                        );
                    }
                    writer.push(rec)?;
                }
            }
            _ = &mut all, if !finished => finished = true,
            why = stop.as_mut() => return Ok(Some(why)),
        }
    }
}

/// One caller: the whole plan in order, conversations keeping their history per pass. A turn
/// cut short by a stop is dropped whole: only finished turns are results.
async fn caller(
    pipeline: &Pipeline,
    session: u32,
    scenarios: &[(Scenario, Vec<LoadedTurn>)],
    plan: &[Step],
    tx: tokio::sync::mpsc::UnboundedSender<(u32, Vec<TurnRecord>)>,
) {
    let mut histories: HashMap<(usize, u32, bool), Vec<Message>> = HashMap::new();
    // A scenario is one speaker: the `cues` rule learns their pauses over its utterances.
    let mut speakers: HashMap<(usize, u32, bool), SpeakerPauses> = HashMap::new();
    for &(si, ti, repeat, warmup) in plan {
        let (scenario, turns) = &scenarios[si];
        let mut scratch = Vec::<Message>::new();
        let history = if scenario.conversation {
            histories.entry((si, repeat, warmup)).or_default()
        } else {
            &mut scratch
        };
        let speaker = speakers.entry((si, repeat, warmup)).or_default();
        let recs = pipeline
            .replay_turn_of(
                &turns[ti],
                history,
                speaker,
                repeat,
                warmup,
                scenario.system_prompt.as_deref(),
            )
            .await;
        if tx.send((session, recs)).is_err() {
            return;
        }
    }
}

fn caller_label(rec: &TurnRecord) -> String {
    if rec.sessions > 0 {
        format!(" [{} at once, caller {}]", rec.sessions, rec.session)
    } else {
        String::new()
    }
}

fn turn_line(rec: &TurnRecord) -> String {
    format!(
        "{}{} #{}: {}",
        if rec.warmup { "(warm-up) " } else { "" },
        rec.turn,
        rec.repeat,
        match (&rec.breakdown, &rec.error) {
            (_, Some(e)) => format!("error: {e}"),
            (Some(b), None) => format!(
                "{:?} → {:?}, {:.0} ms",
                rec.transcript,
                rec.reply_text.chars().take(60).collect::<String>(),
                voxlat_core::clock::ns_to_ms(b.total_ns)
            ),
            (None, None) => format!("{:?}: {:?}", rec.outcome, rec.asr_rejected),
        }
    )
}
