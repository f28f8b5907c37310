//! The live conversation: turns until Ctrl-C, a crash of the embedded server, the idle timeout
//! or `--max-turns`, each logged as it ends; then the results and the report.

use crate::common::{shutdown_signal, telemetry_outcome};
use crate::embedded::CrashWatch;
use crate::report::{live::turn_line, print_report};
use anyhow::Result;
use std::process::ExitCode;
use voxlat_pipeline::results::ResultsWriter;
use voxlat_pipeline::{Session, SessionError, TurnRecord};
use voxlat_telemetry::TurnTelemetry;

/// Where each turn goes as it ends: the terminal, the telemetry and the results.
pub(super) struct TurnLog {
    pub writer: ResultsWriter,
    pub telemetry: TurnTelemetry,
}

impl TurnLog {
    pub fn push(&mut self, rec: TurnRecord) -> Result<()> {
        println!("{}", turn_line(&rec));
        self.telemetry.record_turn(
            &rec.snapshot(),
            telemetry_outcome(rec.outcome),
            rec.error.as_deref(),
        );
        self.writer.push(rec)?;
        Ok(())
    }
}

/// Runs turns until one of the ends; true when Ctrl-C (or a termination signal) ended it.
pub(super) async fn converse(
    session: &mut Session<'_>,
    log: &mut TurnLog,
    max_turns: Option<u32>,
    watch: CrashWatch,
) -> Result<bool> {
    let mut signal = std::pin::pin!(shutdown_signal());
    let mut crashed = std::pin::pin!(watch.crashed());
    let mut n = 0u32;
    loop {
        let next = tokio::select! {
            _ = &mut signal => return Ok(true),
            why = &mut crashed => anyhow::bail!("{why}"),
            next = session.next_turn() => next,
        };
        let rec = match next {
            Ok(Some(rec)) => rec,
            Ok(None) => anyhow::bail!("the microphone thread stopped"),
            Err(e @ SessionError::Idle { .. }) => anyhow::bail!("{e} (--idle-timeout)"),
            Err(e) => return Err(e.into()),
        };
        n += u32::from(rec.outcome.ran_to_end());
        log.push(rec)?;
        if max_turns.is_some_and(|m| n >= m) {
            return Ok(false);
        }
    }
}

/// Writes the results (what the microphone lost included) and the report, or, when the
/// conversation failed, the results so far and the error naming them.
pub(super) fn finish(
    mut writer: ResultsWriter,
    outcome: Result<bool>,
    dropped: u64,
    xruns: u64,
) -> Result<ExitCode> {
    let interrupted = match outcome {
        Ok(i) => i,
        Err(e) => {
            writer.finish(true)?;
            return Err(e.context(format!("results so far: {}", writer.json.display())));
        }
    };
    if let Some(live) = writer.results.stages.live.as_mut() {
        live.input_dropped_samples = Some(dropped);
        live.input_xruns = Some(xruns);
    }
    writer.finish(interrupted)?;
    let html = crate::report::html::write_beside(&writer.results, &writer.json)?;
    print_report(&writer.results);
    let a = &writer.results.aggregate;
    if a.interrupted > 0 {
        println!(
            "Interrupted turns (barge-in, left out of the figures above): {}{}",
            a.interrupted,
            a.barge_in_reaction
                .as_ref()
                .map(|s| format!(
                    "; reaction (speech onset → playback stopped) p50 {:.0} ms, max {:.0} ms",
                    s.p50, s.max
                ))
                .unwrap_or_default()
        );
    }
    println!(
        "Results: {} (CSV {}, report {})",
        writer.json.display(),
        writer.csv.display(),
        html.display()
    );
    Ok(ExitCode::SUCCESS)
}
