//! `voxlat replay`: recorded utterances through the real pipeline, with the per-segment
//! breakdown of user-stopped-speaking → first audio.

mod callers;

use crate::common::pipeline_config::pipeline_config;
use crate::common::remote::RemoteStageArgs;
use crate::common::reply::ReplyArgs;
use crate::common::setup::Setup;
use crate::common::stack::{Stack, StackSpec};
use crate::common::turn::TurnArgs;
use crate::common::{parse_duration, shutdown_signal, StopSignal};
use crate::report::{print_levels, print_report, print_sweep};
use anyhow::{bail, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use voxlat_pipeline::results::{ReplayResults, ResultsWriter};
use voxlat_pipeline::{LoadedTurn, PipelineConfig, Scenario};
use voxlat_vad::EndpointerConfig;

/// Replays scenario utterances through VAD → Whisper → LLM → chunker → Piper → sink and
/// reports, per turn and in aggregate (n, mean, P50, P95, P99, max), every segment of
/// "user stopped speaking → first audio", the dominant stage and the pipeline overhead.
/// Audio is paced in real time unless --fast. Without --llm-url the embedded server runs
/// the bundled model. Each finished turn is appended to a JSON Lines file and the CSV; the
/// summary JSON and the HTML report are rendered at the end (and on Ctrl-C).
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Scenario TOML files or directories of them. [default: scenarios/]
    #[arg(value_name = "SCENARIO")]
    pub scenarios: Vec<PathBuf>,
    /// Times each utterance is replayed (measured).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Turns replayed first and excluded from statistics (model and cache warm-up).
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Any OpenAI-compatible server instead of the embedded one (VOXLAT_BASE_URL works too).
    #[arg(long, value_name = "URL")]
    pub llm_url: Option<String>,
    /// The LLM. Embedded server: the GGUF it serves, a manifest name (`voxlat models list`) or a
    /// path [default: VOXLAT_LLM_MODEL, else the manifest's default]. With --llm-url: the model
    /// name sent in requests [default: VOXLAT_MODEL, else the first model the server lists].
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    #[arg(long, default_value_t = 48)]
    pub max_tokens: u32,
    /// Feed the speech as fast as possible and only the pause after it in real time, so a
    /// speculative reply still has the pause to get ready in (endpointing is then in audio time;
    /// the report says so).
    #[arg(long)]
    pub fast: bool,
    /// Silence (ms) that ends a turn.
    #[arg(long, default_value_t = 600)]
    pub hangover: u32,
    /// Silence (ms) after which ASR starts speculatively; 0 disables speculation.
    #[arg(long, default_value_t = voxlat_vad::EndpointerConfig::default().provisional_ms)]
    pub provisional: u32,
    /// Count the provisional silence from the VAD's last voiced frame, as before 2026-12-05,
    /// not from the refined end of speech (50-300 ms sooner; see docs/latency-model.md).
    #[arg(long)]
    pub provisional_from_vad: bool,
    #[command(flatten)]
    pub turn: TurnArgs,
    #[command(flatten)]
    pub reply: ReplyArgs,
    #[command(flatten)]
    pub remote: RemoteStageArgs,
    /// Only run the endpointer over the scenarios for each hangover (ms) and report
    /// endpointing delay against cut-off rate, e.g. 200,300,500,800.
    #[arg(long, value_delimiter = ',', value_name = "MS,…")]
    pub sweep_hangover: Vec<u32>,
    /// Only run the endpointer with the turn model for each high threshold (the other
    /// --turn-* settings as given) and report delay against cut-off rate, with the plain
    /// --hangover rule as the baseline row, e.g. 0.8,0.9,0.95,0.98.
    #[arg(long, value_delimiter = ',', value_name = "P,…")]
    pub sweep_turn_high: Vec<f32>,
    /// Concurrency levels: replay every scenario with this many simulated callers at once, one
    /// level after the other, e.g. 1,4,8,16; reports each level and the stage that saturates
    /// first. Each caller has its own conversations, request IDs and (embedded) Whisper and
    /// Piper, so on 2 cores the embedded levels stay small; remote stages scale further.
    #[arg(long, value_delimiter = ',', value_name = "N,…")]
    pub sessions: Vec<u32>,
    #[command(flatten)]
    pub session: crate::common::session_args::SessionArgs,
    /// Longest silence between two reads of the LLM stream before the turn fails as a timeout.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Serve Prometheus metrics of the measured turns (segment histograms, turns by outcome)
    /// at http://HOST:PORT/metrics while the replay runs, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

fn scenario_files(args: &[PathBuf]) -> Vec<PathBuf> {
    if args.is_empty() {
        voxlat_pipeline::discover::scenario_files(&[PathBuf::from("scenarios")], false)
    } else {
        voxlat_pipeline::discover::scenario_files(args, false)
    }
}

/// Loads every scenario and turn it can, reporting (not failing on) the ones it cannot.
fn load_all(files: &[PathBuf]) -> voxlat_pipeline::scenario::LoadReport {
    let loaded = voxlat_pipeline::scenario::load_all(files);
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    for e in &loaded.skipped {
        eprintln!("error: {e} (skipped; the other scenarios and turns still run)");
    }
    loaded
}

/// Why a replay ended before its plan did.
enum Stopped {
    Signal(StopSignal),
    ServerCrashed(String),
}

pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    let files = scenario_files(&args.scenarios);
    let loaded = load_all(&files);
    let skipped = loaded.skipped;
    let scenarios = loaded.scenarios;
    let all_turns: Vec<LoadedTurn> = scenarios.iter().flat_map(|(_, t)| t.clone()).collect();
    anyhow::ensure!(
        !all_turns.is_empty(),
        "no utterance could be loaded from {files:?}{}",
        if skipped.is_empty() {
            String::new()
        } else {
            format!(" ({} skipped, listed above)", skipped.len())
        }
    );
    let mut endpointer = EndpointerConfig {
        hangover_ms: args.hangover,
        provisional_ms: args.provisional,
        early_provisional: !args.provisional_from_vad,
        tail_ms: EndpointerConfig::default()
            .tail_ms
            .min(args.provisional.max(1)),
        ..EndpointerConfig::default()
    };
    endpointer.validate()?;
    args.turn
        .apply(&mut endpointer.turn, endpointer.hangover_ms)?;
    args.session.ensure_writable()?;
    if !args.sweep_hangover.is_empty() || !args.sweep_turn_high.is_empty() {
        anyhow::ensure!(
            args.sessions.is_empty(),
            "--sessions cannot be combined with a sweep: a sweep runs only the endpointer"
        );
        return sweep(&args, &all_turns, &endpointer);
    }
    check_sessions(&args.sessions)?;

    let cfg = PipelineConfig {
        fast: args.fast,
        max_tokens: args.max_tokens,
        ..pipeline_config(endpointer, &args.reply, &args.turn, &args.session)?
    };
    let callers = args.sessions.iter().copied().max().unwrap_or(1) as usize;
    let spec = StackSpec {
        remote: &args.remote,
        llm_url: args.llm_url.as_deref(),
        model: args.model.as_deref(),
        voice: None,
        output_dir: &args.session.output_dir,
        callers,
        turn_model: args.turn.enabled().then_some(args.turn.turn_model.name()),
        llm_idle_timeout: args.idle_timeout,
        asr_fallback: args.session.asr_fallback,
    };
    let stack = Stack::start(spec, cfg)?;
    let mut results = ReplayResults::new(stack.cfg.clone(), stack.budget, stack.stages.clone());
    results.llm_server_threads = stack.server_threads(callers);
    results.llm_server_build = stack.server_build();
    results.scenarios = scenarios
        .iter()
        .map(|(s, _)| s.path.display().to_string())
        .collect();
    results.skipped = skipped;
    let mut writer = ResultsWriter::new(&args.session.output_dir, results)?;
    let telemetry = crate::common::turn_telemetry(args.metrics_addr.as_deref())?;
    // One pipeline per caller (Whisper and Piper each hold one turn at a time), loaded per
    // level with the cores shared among the callers.
    let load_callers = |n: usize| -> Result<Vec<voxlat_pipeline::Pipeline>> {
        (0..n).map(|_| stack.pipeline(n)).collect()
    };

    let rt = crate::common::session_runtime()?;
    let watch = stack.crash_watch();
    let plan = plan(&scenarios, args.warmup, args.repeat);
    let stopped: Option<Stopped> = rt.block_on(async {
        let mut stop = std::pin::pin!(async {
            tokio::select! {
                sig = shutdown_signal() => Stopped::Signal(sig),
                why = watch.crashed() => Stopped::ServerCrashed(why),
            }
        });
        let levels: Vec<Option<u32>> = if args.sessions.is_empty() {
            vec![None]
        } else {
            args.sessions.iter().copied().map(Some).collect()
        };
        for sessions in levels {
            if let Some(n) = sessions {
                eprintln!("— {n} session(s) at once —");
            }
            let pipelines = load_callers(sessions.unwrap_or(1) as usize)?;
            let level = callers::Level {
                sessions,
                pipelines: &pipelines,
                scenarios: &scenarios,
                plan: &plan,
            };
            if let Some(why) =
                callers::run_level(level, &mut writer, &telemetry, stop.as_mut()).await?
            {
                return Ok::<_, anyhow::Error>(Some(why));
            }
        }
        Ok(None)
    })?;
    match &stopped {
        Some(Stopped::Signal(sig)) => writer.finish_stopped(sig.name())?,
        Some(Stopped::ServerCrashed(why)) => writer.finish_stopped(why)?,
        None => writer.finish(false)?,
    }
    let html = crate::report::html::write_beside(&writer.results, &writer.json)?;
    if args.sessions.is_empty() {
        print_report(&writer.results);
    } else {
        print_levels(&writer.results);
    }
    println!(
        "Results: {} (turns as JSON Lines {}, CSV {}, report {})",
        writer.json.display(),
        writer.jsonl.display(),
        writer.csv.display(),
        html.display()
    );
    let failed = writer.results.aggregate.errors;
    Ok(if let Some(Stopped::ServerCrashed(why)) = stopped {
        bail!(
            "{why}\nEvery turn finished before it is kept in {}",
            writer.json.display()
        );
    } else if let Some(Stopped::Signal(sig)) = stopped {
        sig.exit_code()
    } else if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--sessions`: ascending levels of 1 to 64 callers.
fn check_sessions(levels: &[u32]) -> Result<()> {
    if let Some(bad) = levels.iter().find(|n| !(1..=64).contains(*n)) {
        bail!("--sessions {bad}: each level must be 1 to 64 callers");
    }
    if levels.windows(2).any(|w| w[0] >= w[1]) {
        bail!(
            "--sessions {}: give the levels in ascending order without repeats, e.g. 1,2,4",
            levels
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    Ok(())
}

/// (scenario index, turn index, repeat, warm-up) in play order. Conversation scenarios keep
/// their turns in order; warm-up takes the first turns of the plan.
fn plan(scenarios: &[(Scenario, Vec<LoadedTurn>)], warmup: u32, repeat: u32) -> Vec<callers::Step> {
    let mut out = Vec::new();
    let all: Vec<(usize, usize)> = scenarios
        .iter()
        .enumerate()
        .flat_map(|(si, (_, t))| (0..t.len()).map(move |ti| (si, ti)))
        .collect();
    for (k, &(si, ti)) in all.iter().cycle().take(warmup as usize).enumerate() {
        out.push((si, ti, k as u32, true));
    }
    for r in 0..repeat {
        for &(si, ti) in &all {
            out.push((si, ti, r, false));
        }
    }
    out
}

fn sweep(args: &ReplayArgs, turns: &[LoadedTurn], base: &EndpointerConfig) -> Result<ExitCode> {
    let policies =
        voxlat_pipeline::sweep::policies(base, &args.sweep_hangover, &args.sweep_turn_high)
            .map_err(|e| anyhow::anyhow!("--sweep-turn-high: {e}"))?;
    // After the policies are checked: a bad threshold should not wait for a model.
    let model = if policies.iter().any(|p| p.turn.is_some()) {
        Some(Setup::open()?.turn_model()?)
    } else {
        None
    };
    let report = voxlat_pipeline::sweep::sweep(turns, base, &policies, model)?;
    print_sweep(&report);
    voxlat_core::fsio::ensure_writable_dir(&args.session.output_dir)?;
    let path: PathBuf = Path::new(&args.session.output_dir).join(format!(
        "sweep-{}.json",
        voxlat_core::clock::wall_label_compact()
    ));
    let doc = serde_json::json!({ "header": voxlat_core::report::ResultsHeader::new("sweep", env!("CARGO_PKG_VERSION")), "endpointer": base, "rows": report.rows, "curves": report.curves, "turn_score_ms": report.score_ms });
    voxlat_core::fsio::write_atomic(&path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    println!("Results: {}", path.display());
    Ok(ExitCode::SUCCESS)
}
