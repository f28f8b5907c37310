//! `voxlat replay`: recorded utterances through the real pipeline, with the per-segment
//! breakdown of user-stopped-speaking → first audio.

use super::table::{fmt_num, Table};
use crate::embedded::{EmbeddedServer, SpawnOptions};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use voxlat_core::threads::ThreadBudget;
use voxlat_llm::config::Settings;
use voxlat_llm::{ClientOptions, LlmClient, Message};
use voxlat_pipeline::results::{ReplayResults, ResultsWriter};
use voxlat_pipeline::workers::{AsrWorker, TtsWorker};
use voxlat_pipeline::{LoadedTurn, Pipeline, PipelineConfig, Scenario};
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
    /// Feed audio as fast as possible (endpointing is then in audio time; the report says so).
    #[arg(long)]
    pub fast: bool,
    /// Silence (ms) that ends a turn.
    #[arg(long, default_value_t = 600)]
    pub hangover: u32,
    /// Silence (ms) after which ASR starts speculatively; 0 disables speculation.
    #[arg(long, default_value_t = 200)]
    pub provisional: u32,
    /// Only run the endpointer over the scenarios for each hangover (ms) and report
    /// endpointing delay against cut-off rate, e.g. 200,300,500,800.
    #[arg(long, value_delimiter = ',', value_name = "MS,…")]
    pub sweep_hangover: Vec<u32>,
    /// Directory for results (JSON, CSV, HTML) and the embedded server's log.
    #[arg(long, default_value = "results")]
    pub output_dir: PathBuf,
    /// Write each reply as a WAV into this directory.
    #[arg(long, value_name = "DIR")]
    pub save_replies: Option<PathBuf>,
    /// Longest silence between two reads of the LLM stream before the turn fails as a timeout.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::bench_llm::parse_duration)]
    pub idle_timeout: Duration,
    /// Serve Prometheus metrics of the measured turns (segment histograms, turns by outcome)
    /// at http://HOST:PORT/metrics while the replay runs, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
}

fn scenario_files(args: &[PathBuf]) -> Vec<PathBuf> {
    let roots = if args.is_empty() {
        vec![PathBuf::from("scenarios")]
    } else {
        args.to_vec()
    };
    let mut out = Vec::new();
    for r in roots {
        if r.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(&r)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            v.sort();
            out.extend(v);
        } else {
            out.push(r);
        }
    }
    out
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
    Signal(super::bench_llm::StopSignal),
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
    let endpointer = EndpointerConfig {
        hangover_ms: args.hangover,
        provisional_ms: args.provisional,
        tail_ms: EndpointerConfig::default()
            .tail_ms
            .min(args.provisional.max(1)),
        ..EndpointerConfig::default()
    };
    endpointer.validate()?;
    // Before the server starts or a model loads: an unwritable or full output directory must
    // not be discovered after the measuring.
    voxlat_core::fsio::ensure_writable_dir(&args.output_dir)?;
    if let Some(d) = &args.save_replies {
        voxlat_core::fsio::ensure_writable_dir(d)?;
    }
    if !args.sweep_hangover.is_empty() {
        return sweep(&args, &all_turns, &endpointer);
    }

    let budget = ThreadBudget::detect();
    let store = voxlat_models::Store::open_default(None)?;
    let whisper = store.ready_path("whisper-tiny.en", "ggml-tiny.en.bin")?;
    let voice = store.ready_path("piper-en_US-joe-medium", "en_US-joe-medium.onnx")?;
    let runtime = store.ready_path("onnxruntime", "libonnxruntime.so.1.32.0")?;
    let mut cfg = PipelineConfig {
        endpointer,
        speculative_asr: args.provisional > 0,
        fast: args.fast,
        max_tokens: args.max_tokens,
        save_replies: args.save_replies.clone(),
        ..PipelineConfig::default()
    };
    if let Some(d) = &args.save_replies {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }

    let (endpoint, _server, llm_model) = attach_llm(
        &mut cfg,
        &store,
        args.llm_url.as_deref(),
        args.model.as_deref(),
        &args.output_dir,
        &budget,
    )?;
    let stages = serde_json::json!({
        "asr": whisper.display().to_string(),
        "tts": voice.display().to_string(),
        "onnxruntime": runtime.display().to_string(),
        "llm": endpoint.base_url.value,
        "llm_model": llm_model,
    });
    let mut results = ReplayResults::new(cfg.clone(), budget, stages);
    results.scenarios = scenarios
        .iter()
        .map(|(s, _)| s.path.display().to_string())
        .collect();
    results.skipped = skipped;
    let mut writer = ResultsWriter::new(&args.output_dir, results)?;
    let telemetry = voxlat_telemetry::TurnTelemetry::start(args.metrics_addr.as_deref())?;
    if let Some(url) = telemetry.metrics_url() {
        eprintln!("metrics on {url}");
    }

    let (asr, tts, client) = load_stages(
        &budget,
        &whisper,
        &voice,
        runtime,
        endpoint,
        args.idle_timeout,
    )?;
    let pipeline = Pipeline::new(cfg, asr, tts, client);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let watch = _server.as_ref().map(EmbeddedServer::watch);
    let stopped: Option<Stopped> = rt.block_on(async {
        let mut signal = std::pin::pin!(super::bench_llm::shutdown_signal());
        let mut crashed = std::pin::pin!(async {
            match &watch {
                Some(w) => w.crashed().await,
                None => std::future::pending().await,
            }
        });
        let plan = plan(&scenarios, args.warmup, args.repeat);
        let total = plan.len();
        // Conversation scenarios carry history across their turns within one pass.
        let mut histories: std::collections::HashMap<(usize, u32, bool), Vec<Message>> =
            Default::default();
        for (i, (si, ti, repeat, warmup)) in plan.into_iter().enumerate() {
            let (scenario, turns) = &scenarios[si];
            let turn = &turns[ti];
            let mut scratch = Vec::<Message>::new();
            let history = if scenario.conversation {
                histories.entry((si, repeat, warmup)).or_default()
            } else {
                &mut scratch
            };
            let fut = pipeline.run_turn(
                turn,
                history,
                repeat,
                warmup,
                scenario.system_prompt.as_deref(),
            );
            // A turn cut short by a signal or a crash is dropped whole: only finished turns
            // are results.
            let rec = tokio::select! {
                r = fut => r,
                sig = &mut signal => return Ok::<_, anyhow::Error>(Some(Stopped::Signal(sig))),
                why = &mut crashed => return Ok(Some(Stopped::ServerCrashed(why))),
            };
            eprintln!(
                "[{}/{total}] {}{} #{}: {}",
                i + 1,
                if warmup { "(warm-up) " } else { "" },
                rec.turn,
                rec.repeat,
                match (&rec.breakdown, &rec.error) {
                    (_, Some(e)) => format!("error: {e}"),
                    (Some(b), None) => format!(
                        "{:?} → {:?}, {:.0} ms",
                        rec.transcript,
                        rec.reply_text.chars().take(60).collect::<String>(),
                        b.total_ns as f64 / 1e6
                    ),
                    (None, None) => format!("{:?}: {:?}", rec.outcome, rec.asr_rejected),
                }
            );
            if !rec.warmup {
                telemetry.record_turn(
                    &rec.snapshot(),
                    telemetry_outcome(rec.outcome),
                    rec.error.as_deref(),
                );
            }
            writer.push(rec)?;
        }
        Ok(None)
    })?;
    match &stopped {
        Some(Stopped::Signal(sig)) => writer.finish_stopped(sig.name())?,
        Some(Stopped::ServerCrashed(why)) => writer.finish_stopped(why)?,
        None => writer.finish(false)?,
    }
    let html = writer.json.with_extension("html");
    voxlat_core::fsio::write_atomic(
        &html,
        crate::report_html::render(&writer.results).as_bytes(),
    )?;
    print_report(&writer.results);
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

/// The LLM endpoint: `--llm-url` (or the environment's base URL), else the embedded server
/// with the LLM's share of the cores (kept running as long as the returned handle lives).
/// The LLM a session talks to.
pub(crate) struct ConnectedLlm {
    pub endpoint: voxlat_llm::config::Endpoint,
    /// The embedded server, when no URL was given (stopped on drop).
    pub server: Option<EmbeddedServer>,
    /// The model name to send; empty for the embedded server, which serves exactly one.
    pub model: String,
}

/// Connects the LLM ([`connect_llm`]) and fits the pipeline to it: the model name its
/// requests carry and the prompt the model needs ([`fit_prompt`]). Returns the endpoint, the
/// embedded server (kept alive by the caller) and the embedded model's name.
pub(crate) fn attach_llm(
    cfg: &mut PipelineConfig,
    store: &voxlat_models::Store,
    llm_url: Option<&str>,
    model: Option<&str>,
    output_dir: &Path,
    budget: &ThreadBudget,
) -> Result<(
    voxlat_llm::config::Endpoint,
    Option<EmbeddedServer>,
    Option<String>,
)> {
    let llm = connect_llm(llm_url, model, output_dir, budget)?;
    cfg.model = llm.model;
    let name = fit_prompt(cfg, store, llm.server.is_some(), model)?;
    Ok((llm.endpoint, llm.server, name))
}

/// `--llm-url` (or VOXLAT_BASE_URL) when given, else the embedded server serving `model`.
fn connect_llm(
    llm_url: Option<&str>,
    model: Option<&str>,
    output_dir: &Path,
    budget: &ThreadBudget,
) -> Result<ConnectedLlm> {
    let settings = Settings::from_process()?;
    let configured = settings.pick(
        llm_url.map(|u| ("--llm-url", u)),
        voxlat_llm::config::BASE_URL_VARS,
    );
    match configured {
        Some(url) => {
            let endpoint = settings.endpoint(Some(&url.value), None)?;
            let model = match settings.model(model) {
                Some(m) => m.value,
                None => first_listed_model(&endpoint)?,
            };
            Ok(ConnectedLlm {
                endpoint,
                server: None,
                model,
            })
        }
        None => {
            eprintln!("starting the embedded LLM server ({} thread)…", budget.llm);
            let mut opts = SpawnOptions::new(output_dir);
            opts.threads = Some(budget.llm as u32);
            opts.model = model.map(str::to_string);
            let server = EmbeddedServer::spawn(&opts).context(
                "cannot start the embedded LLM server; pass --llm-url to use another server",
            )?;
            Ok(ConnectedLlm {
                endpoint: settings.endpoint(Some(&server.base_url()), None)?,
                server: Some(server),
                model: String::new(),
            })
        }
    }
}

/// A remote server's first listed model, for when none was named: OpenAI-compatible servers
/// other than llama.cpp's reject requests without one.
fn first_listed_model(endpoint: &voxlat_llm::config::Endpoint) -> Result<String> {
    let client = LlmClient::new(endpoint.clone(), ClientOptions::default())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let listed = rt.block_on(client.list_models()).map_err(|e| {
        anyhow::anyhow!(
            "no model given (--model or VOXLAT_MODEL), and asking the server failed: {e}"
        )
    })?;
    let first = listed.first().cloned().with_context(|| {
        format!(
            "no model given (--model or VOXLAT_MODEL), and {} lists none",
            endpoint.url("models")
        )
    })?;
    eprintln!(
        "model: {first} (the first of {} listed by the server; --model chooses)",
        listed.len()
    );
    Ok(first)
}

/// Fits the prompt to the model being served: a base model keeps the example exchanges, an
/// instruction-tuned one gets its chat template (applied by the server) and the system prompt
/// alone. The embedded server serves the manifest's selected LLM, so its `tuning` decides;
/// an external server (`--llm-url`) is taken to serve a chat model. Returns the model's
/// manifest name when known.
fn fit_prompt(
    cfg: &mut PipelineConfig,
    store: &voxlat_models::Store,
    embedded: bool,
    model_flag: Option<&str>,
) -> Result<Option<String>> {
    let (tuning, name) = if embedded {
        // `--model` may be a GGUF path rather than a manifest name: then nothing is known of
        // its tuning and the prompt stays as for a base model (examples help those most).
        let named = match model_flag {
            Some(m) if store.manifest().require(m).is_err() => None,
            Some(m) => Some(store.manifest().require(m)?),
            None => Some(voxlat_models::selected_llm(store.manifest())?),
        };
        match named {
            Some(model) => (model.tuning, Some(model.name.clone())),
            None => (None, model_flag.map(str::to_string)),
        }
    } else {
        (Some(voxlat_models::Tuning::Instruct), None)
    };
    if tuning == Some(voxlat_models::Tuning::Instruct) {
        cfg.examples.clear();
    }
    Ok(name)
}

/// Whisper and Piper on their worker threads, and the LLM client.
pub(crate) fn load_stages(
    budget: &ThreadBudget,
    whisper: &Path,
    voice: &Path,
    runtime: PathBuf,
    endpoint: voxlat_llm::config::Endpoint,
    llm_idle_timeout: Duration,
) -> Result<(AsrWorker, TtsWorker, LlmClient)> {
    eprintln!(
        "loading Whisper ({} threads) and Piper ({} thread)…",
        budget.asr, budget.tts
    );
    let asr = AsrWorker::start(whisper, budget.asr).map_err(anyhow::Error::msg)?;
    let tts_opts = voxlat_tts::piper::VoiceOptions {
        intra_threads: budget.tts,
        runtime: Some(runtime),
        ..Default::default()
    };
    let tts = TtsWorker::start(voice, tts_opts).map_err(anyhow::Error::msg)?;
    let client = LlmClient::new(
        endpoint,
        ClientOptions {
            idle_timeout: llm_idle_timeout,
            ..ClientOptions::default()
        },
    )?;
    Ok((asr, tts, client))
}

/// The metrics and spans name for a turn's outcome.
pub(crate) fn telemetry_outcome(
    o: voxlat_pipeline::record::TurnOutcome,
) -> voxlat_telemetry::Outcome {
    use voxlat_pipeline::record::TurnOutcome as T;
    match o {
        T::Ok => voxlat_telemetry::Outcome::Ok,
        T::NoSpeech => voxlat_telemetry::Outcome::NoSpeech,
        T::Interrupted => voxlat_telemetry::Outcome::Interrupted,
        T::Error => voxlat_telemetry::Outcome::Error,
    }
}

/// (scenario index, turn index, repeat, warm-up) in play order. Conversation scenarios keep
/// their turns in order; warm-up takes the first turns of the plan.
fn plan(
    scenarios: &[(Scenario, Vec<LoadedTurn>)],
    warmup: u32,
    repeat: u32,
) -> Vec<(usize, usize, u32, bool)> {
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

pub fn print_report(r: &ReplayResults) {
    let mut t = Table::new(&[
        "turn",
        "transcript",
        "WER",
        "reply starts",
        "checks",
        "endpt",
        "asr",
        "ttft",
        "think",
        "1st chunk",
        "tts",
        "playout",
        "device",
        "total",
    ]);
    for rec in r.turns.iter().filter(|t| !t.warmup) {
        let mut row = vec![
            format!("{} #{}", rec.turn, rec.repeat),
            rec.transcript.chars().take(38).collect(),
            rec.wer
                .map(|w| format!("{:.0}%", w * 100.0))
                .unwrap_or_default(),
            rec.error
                .as_deref()
                .map(|e| format!("error: {e}"))
                .unwrap_or_else(|| rec.reply_text.clone())
                .chars()
                .take(28)
                .collect(),
            rec.quality
                .as_ref()
                .map(|q| match q.failures() {
                    f if f.is_empty() => "ok".to_string(),
                    f => f.join(","),
                })
                .unwrap_or_else(|| "-".into()),
        ];
        match &rec.breakdown {
            Some(b) => {
                row.extend(b.segments.iter().map(|s| fmt_num(s.ns as f64 / 1e6)));
                row.push(fmt_num(b.total_ns as f64 / 1e6));
            }
            None => {
                row.extend(std::iter::repeat_n("-".to_string(), 8));
                row.push(format!("{:?}", rec.outcome).to_lowercase());
            }
        }
        t.row(row);
    }
    print!("\nPer turn (ms):\n{}", t.render());
    let a = &r.aggregate;
    let mut t = Table::new(&["ms", "n", "mean", "p50", "p95", "p99", "max"]);
    for (name, s) in &a.segments {
        let mark = if a.dominant_p50.as_deref() == Some(name) {
            " *"
        } else {
            ""
        };
        t.summary_row(&format!("{name}{mark}"), Some(s));
    }
    t.summary_row("total", a.total.as_ref());
    t.summary_row("overhead", a.overhead.as_ref());
    print!(
        "\nUser stopped speaking → first audio ({} turns: {} ok, {} no speech, {} errors):\n{}",
        a.turns,
        a.ok,
        a.no_speech,
        a.errors,
        t.render()
    );
    println!(
        "Dominant stage (*): {} at P50{}. Segments sum exactly to the total: {}. Playout underruns: {}. Mean WER {}.",
        a.dominant_p50.as_deref().unwrap_or("-"),
        match (&a.dominant_p95, &a.dominant_p50) {
            (Some(p95), Some(p50)) if p95 != p50 => format!(", {p95} at P95"),
            _ => String::new(),
        },
        if a.sums_exact { "yes" } else { "NO" },
        a.underruns,
        a.wer_mean.map(|w| format!("{:.1}%", w * 100.0)).unwrap_or_else(|| "-".into())
    );
    if let Some(e) = &a.speech_end_error {
        println!(
            "Endpointer speech end vs the annotation ({} turns): |error| P50 {:.0} ms, P95 {:.0} ms, worst {:.0} ms.",
            e.n, e.p50, e.p95, e.max
        );
    }
    let q = &a.quality;
    if q.replies > 0 {
        use voxlat_pipeline::quality::QualityCounts as Q;
        println!(
            "Reply quality ({} spoken replies; checks in crates/voxlat-pipeline/src/quality.rs): not an echo {}, clean end {}, no foreign-script token {}, length {}, keywords {}; echo+end+foreign together {}. Stray tails withheld from TTS: {}.",
            q.replies,
            Q::pct(q.not_echo, q.replies),
            Q::pct(q.clean_end, q.replies),
            Q::pct(q.no_foreign, q.replies),
            Q::pct(q.length_ok, q.replies),
            if q.keywords_checked == 0 {
                "-".to_string()
            } else {
                format!("{}/{}", q.keywords_ok, q.keywords_checked)
            },
            Q::pct(q.core_pass, q.replies),
            q.tails_dropped
        );
    }
    if let Some(c) = &a.asr_compute {
        println!(
            "Whisper: {} of {} decodes ran away and were decoded again; compute P50 {:.0} ms, P95 {:.0} ms, worst {:.0} ms.",
            a.asr_fallbacks, c.n, c.p50, c.p95, c.max
        );
    }
    println!("{}", r.timing_note);
    if !r.skipped.is_empty() {
        println!("\nSkipped ({}), not measured:", r.skipped.len());
        for s in &r.skipped {
            println!("  {s}");
        }
    }
}

fn sweep(args: &ReplayArgs, turns: &[LoadedTurn], base: &EndpointerConfig) -> Result<ExitCode> {
    let rows = voxlat_pipeline::sweep::sweep(turns, base, &args.sweep_hangover)?;
    let mut t = Table::new(&[
        "hangover ms",
        "utterances",
        "split",
        "truncated",
        "cut-off",
        "delay p50",
        "delay p95",
    ]);
    for r in &rows {
        t.row(vec![
            r.hangover_ms.to_string(),
            r.utterances.to_string(),
            r.split.to_string(),
            r.truncated.to_string(),
            format!("{:.0}%", r.cut_off_rate * 100.0),
            r.delay_ms
                .as_ref()
                .map(|s| fmt_num(s.p50))
                .unwrap_or_else(|| "-".into()),
            r.delay_ms
                .as_ref()
                .map(|s| fmt_num(s.p95))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    print!(
        "Endpointing delay (decision − true end of speech, audio time) against cut-offs:\n{}",
        t.render()
    );
    voxlat_core::fsio::ensure_writable_dir(&args.output_dir)?;
    let path: PathBuf = Path::new(&args.output_dir).join(format!(
        "sweep-{}.json",
        voxlat_core::clock::wall_label_compact()
    ));
    let doc = serde_json::json!({ "header": voxlat_core::report::ResultsHeader::new("sweep", env!("CARGO_PKG_VERSION")), "endpointer": base, "rows": rows });
    voxlat_core::fsio::write_atomic(&path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    println!("Results: {}", path.display());
    Ok(ExitCode::SUCCESS)
}
