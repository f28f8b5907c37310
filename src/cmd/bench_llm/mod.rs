//! `voxlat bench-llm`: flags and config file → a run → tables on stdout and a results file.

mod args;

use crate::common::llm::start_embedded;
use crate::common::{shutdown_signal, StopSignal};
use crate::embedded::{CrashWatch, EmbeddedServer, SpawnOptions};
use anyhow::{bail, Context, Result};
pub use args::BenchLlmArgs;
use args::{prompt_source, EMBEDDED_CONTEXT_TOKENS};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use voxlat_bench::text::{render_analysis, render_cell};
use voxlat_bench::{self as bench, runner, BenchConfig, ResultsWriter, RunEvent};
use voxlat_llm::{ClientOptions, ErrorClass, LlmClient};
use voxlat_net::config::{Endpoint, Settings, BASE_URL_VARS};

/// The configured endpoint; when none is configured anywhere (flag, config file, environment,
/// `.env`), the embedded server, started here with its log beside the results.
fn resolve_endpoint(
    settings: &Settings,
    cfg: &BenchConfig,
    args: &BenchLlmArgs,
) -> Result<(Endpoint, Option<EmbeddedServer>)> {
    let base_flag = cfg.base_url.as_deref().map(|v| ("--base-url", v));
    if settings.pick(base_flag, BASE_URL_VARS).is_some() {
        let key_flag = args.api_key.as_deref().map(|v| ("--api-key", v));
        let endpoint = settings.endpoint(base_flag, key_flag)?;
        crate::common::llm::warn_withheld(&endpoint);
        return Ok((endpoint, None));
    }
    let log_dir = args
        .output
        .as_deref()
        .and_then(|p| p.parent())
        .filter(|d| !d.as_os_str().is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| cfg.output_dir.clone());
    eprintln!("no base URL (--base-url, VOXLAT_BASE_URL, OPENAI_BASE_URL or .env): starting the embedded LLM server");
    let server = start_embedded(&SpawnOptions::new(log_dir))?;
    // voxlat's own child checks no key: --api-key and the environment's are not its.
    Ok((Endpoint::embedded(&server.base_url()), Some(server)))
}

pub fn run(args: BenchLlmArgs) -> Result<ExitCode> {
    let mut cfg = args.config()?;
    let settings = Settings::from_process()?.allow_insecure_key(args.allow_insecure_key);
    // Before any server starts or request is sent: an unwritable or full output directory
    // must not be discovered after the measuring.
    let out_dir = args
        .output
        .as_deref()
        .and_then(Path::parent)
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| cfg.output_dir.clone());
    voxlat_core::fsio::ensure_writable_dir(&out_dir)?;
    // Lives until the run ends; dropping it stops the embedded server.
    let (endpoint, _embedded) = resolve_endpoint(&settings, &cfg, &args)?;
    if _embedded.is_some() {
        cfg.context_tokens.get_or_insert(EMBEDDED_CONTEXT_TOKENS);
    }
    cfg.base_url = Some(endpoint.base_url.value.clone());
    let (_, skipped) = runner::sweep_variants(&cfg);
    if !skipped.is_empty() {
        eprintln!(
            "sweep: skipping prompt-tokens {skipped:?}: they do not fit the model's context of {} tokens with max_tokens {}",
            cfg.context_tokens.unwrap_or(0),
            cfg.max_tokens.unwrap_or(0)
        );
    }
    let prompt = prompt_source(&cfg)?;
    let opts = ClientOptions {
        fresh_connections: cfg.fresh_connections,
        http2: cfg.http2,
        connect_timeout: Duration::from_secs_f64(cfg.connect_timeout_s),
        headers_timeout: Duration::from_secs_f64(cfg.headers_timeout_s),
        idle_timeout: Duration::from_secs_f64(cfg.idle_timeout_s),
    };
    let client = LlmClient::new(endpoint.clone(), opts)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;

    rt.block_on(async move {
        if cfg.models.is_empty() {
            cfg.models = match settings.model(None) {
                Some(m) => vec![m.value],
                None => {
                    let listed = client.list_models().await.map_err(|e| {
                        anyhow::anyhow!("no model given (--model or VOXLAT_MODEL), and asking the server failed: {e}")
                    })?;
                    let first = listed.first().cloned().with_context(|| {
                        format!("no model given (--model or VOXLAT_MODEL), and {} lists none", endpoint.url("models"))
                    })?;
                    eprintln!("model: {first} (the first of {} listed by the server; --model chooses)", listed.len());
                    vec![first]
                }
            };
        }
        let models = cfg.models.clone();
        let cells = runner::cells(&cfg, &models);
        let path = args
            .output
            .clone()
            .unwrap_or_else(|| bench::results::default_path(&cfg.output_dir, &models));
        let mut writer = ResultsWriter::new(path, cfg.clone(), &endpoint, prompt.describe(), cells.clone())?;

        let blocks = runner::plan(&cfg, &models);
        let total: Option<u64> = blocks.iter().map(|b| b.count.map(u64::from)).sum();
        let bar = progress_bar(total, args.quiet);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut handle = tokio::spawn(bench::run(client, cfg, prompt, models, tx));
        let mut signal = std::pin::pin!(shutdown_signal());
        let watch = CrashWatch::of(_embedded.as_ref());
        let mut crashed = std::pin::pin!(watch.crashed());
        let mut interrupted = false;
        let mut stop: Option<StopSignal> = None;
        let mut server_crash: Option<String> = None;
        let mut run_error = None;
        let mut run_done = false;
        let mut guard = bench::guard::FailureGuard::new();
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Some(RunEvent::Block { cell, warmup, .. }) => {
                        bar.set_message(if warmup { cell } else { format!("measuring {cell}") });
                    }
                    Some(RunEvent::Record(r)) => {
                        if server_crash.is_some() {
                            // Sent to a server already known dead: noise of our own making.
                            continue;
                        }
                        let lost_server = matches!(
                            r.error_class,
                            Some(ErrorClass::ConnectionRefused | ErrorClass::Disconnected | ErrorClass::ConnectionClosed | ErrorClass::Connect)
                        );
                        bar.inc(1);
                        let dead_endpoint = guard.observe(&r);
                        writer.push(*r)?;
                        // An endpoint that fails every request the same way, or a file that
                        // outgrew its budget: stop, keeping what was recorded.
                        let budget = writer.over_budget().then(|| format!(
                            "stopped: the results file reached its {} MiB budget",
                            bench::results::RESULTS_BUDGET_BYTES >> 20
                        ));
                        if let Some(why) = dead_endpoint.or(budget) {
                            interrupted = true;
                            bar.println(format!("{why}; keeping every completed request"));
                            server_crash = Some(why);
                            handle.abort();
                            continue;
                        }
                        // A connection failure on the embedded server: if it died, stop here
                        // rather than record a burst of refused connections.
                        if lost_server {
                            if let Some(why) = watch.crashed_within(Duration::from_secs(2)).await {
                                interrupted = true;
                                bar.println("the embedded LLM server exited: stopping, keeping every completed request");
                                server_crash = Some(why);
                                handle.abort();
                            }
                        }
                    }
                    None => break,
                },
                sig = &mut signal, if !interrupted => {
                    interrupted = true;
                    stop = Some(sig);
                    bar.println(format!("interrupted ({}): stopping, keeping every completed request", sig.name()));
                    handle.abort();
                }
                why = &mut crashed, if server_crash.is_none() && !interrupted => {
                    // Requests in flight fail as disconnects; nothing later would be valid.
                    interrupted = true;
                    bar.println("the embedded LLM server exited: stopping, keeping every completed request");
                    server_crash = Some(why);
                    handle.abort();
                }
                res = &mut handle, if !run_done => {
                    run_done = true;
                    if let Ok(Err(e)) = res { run_error = Some(e); }
                }
            }
        }
        if !run_done {
            // The record channel closes when the run ends or is aborted; its result follows.
            if let Ok(Err(e)) = handle.await {
                run_error = Some(e);
            }
        }
        bar.finish_and_clear();
        match (&server_crash, stop) {
            (Some(why), _) => writer.finish_stopped(why)?,
            (None, Some(sig)) => writer.finish_stopped(sig.name())?,
            (None, None) => writer.finish(interrupted)?,
        }
        let results = writer.results();
        for cell in &results.cells {
            print!("{}", render_cell(cell));
        }
        print!("{}", render_analysis(results));
        println!(
            "Clock: one monotonic process clock. TTFT = request written to a ready connection -> first non-empty content delta (role-only chunks excluded); TTFT+connect = request handed to the HTTP stack -> the same delta, connection setup included (shown when a request opened a connection); TTFB and E2E from the ready connection to the headers and the end of stream. Times in ms; warm-up excluded; percentiles are nearest-rank."
        );
        if let Some(cpu) = results.client.cpu_ms_per_request {
            println!("Client CPU: {cpu:.2} ms per request ({} requests).", results.client.requests);
        }
        println!("Results: {}{}", writer.path().display(), if interrupted { " (interrupted)" } else { "" });
        let html_path = writer.path().with_extension("html");
        let label = html_path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let report = bench::html::render(&[(label, results)]);
        match voxlat_core::fsio::write_atomic(&html_path, report.as_bytes()) {
            Ok(()) => println!("Report: {} (TTFT histogram and CDF per cell, sweep curves)", html_path.display()),
            Err(e) => eprintln!("warning: cannot write the HTML report: {e}"),
        }
        if let Some(why) = server_crash {
            bail!("{why}\nEvery request completed before it is kept in {}", writer.path().display());
        }
        if let Some(e) = run_error {
            bail!("{e}");
        }
        let measured_ok: usize = results.cells.iter().map(|c| c.ok).sum();
        if measured_ok == 0 && !interrupted {
            let first = results.requests.iter().find_map(|r| r.error.clone()).unwrap_or_default();
            bail!("every request failed; the first error: {first}");
        }
        Ok(stop.map_or(ExitCode::SUCCESS, StopSignal::exit_code))
    })
}

fn progress_bar(total: Option<u64>, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    match total {
        Some(n) => {
            let b = ProgressBar::new(n);
            b.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} requests  {elapsed_precise}  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        }
        None => {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} {pos} requests  {elapsed_precise}  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b.enable_steady_tick(Duration::from_millis(200));
            b
        }
    }
}
