//! `voxlat bench-llm`: flags and config file → a run → tables on stdout and a results file.

use super::table::Table;
use crate::embedded::{EmbeddedServer, SpawnOptions};
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use voxlat_llm::bench::{
    self, runner, BenchConfig, CellSummary, PromptSource, ResultsWriter, RunEvent,
};
use voxlat_llm::config::{Endpoint, Settings, BASE_URL_VARS};
use voxlat_llm::{ClientOptions, ErrorClass, LlmClient};

/// Measures TTFT, TPOT, ITL and end-to-end latency of any OpenAI-compatible
/// `/chat/completions` endpoint with `stream: true`.
///
/// The endpoint comes from --base-url, else VOXLAT_BASE_URL, else OPENAI_BASE_URL, else a
/// `.env` file in the current directory; the key likewise from --api-key, VOXLAT_API_KEY,
/// OPENAI_API_KEY. So pointing it at another server is one variable:
///
///   VOXLAT_BASE_URL=http://127.0.0.1:8080/v1 voxlat bench-llm --concurrency 1,4,8
///
/// TTFT runs from the request written to a ready connection to the first delta with
/// non-empty content (role-only chunks do not count); connection setup is not in it. Each
/// cell is warmed up at its own concurrency, so measured requests ride pooled connections;
/// TTFT+connect (from the request handed to the HTTP stack, DNS, TCP and TLS included) is
/// shown for requests that opened one, and is the only difference with --fresh-connections.
/// All times are on one monotonic clock. Warm-up requests are excluded. Results go to results/bench-llm-<UTC time>-<model>.json, rewritten as the
/// run goes, so Ctrl-C keeps every completed request.
///
/// Why is my first token slow? Sweeps and probes find out, and a diagnosis in words follows
/// every run (queueing, prefill, no prefix-cache reuse, connection setup, reasoning,
/// network, client overhead; thresholds in the README):
///
///   voxlat bench-llm --sweep prompt-tokens=100,1000,4000   # ms per 1k prompt tokens + fixed cost
///   voxlat bench-llm --sweep max-tokens=16,256,4000        # TTFT should not move
///   voxlat bench-llm --probe prefix-cache                  # does the server reuse a prefix?
///   voxlat bench-llm --probe connections                   # cold vs warm, HTTP/1.1 vs HTTP/2
///   voxlat compare before.json after.json                  # what changed, and is it significant
#[derive(Args, Debug, Default)]
#[command(verbatim_doc_comment, after_long_help = FIGURES_HELP)]
pub struct BenchLlmArgs {
    /// TOML or JSON file with any of the settings below (same names, snake_case); flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Base URL including the version prefix, e.g. http://127.0.0.1:8080/v1. [env: VOXLAT_BASE_URL, OPENAI_BASE_URL]
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// API key, sent as "Authorization: Bearer <key>". Prefer the environment: flags show in `ps`. [env: VOXLAT_API_KEY, OPENAI_API_KEY]
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,

    /// Model name(s), comma-separated; several models are compared cell by cell, interleaved.
    /// Default: VOXLAT_MODEL, else the first model the server lists at /models.
    #[arg(long, value_name = "NAME[,NAME…]", value_delimiter = ',')]
    pub model: Vec<String>,

    /// Warm-up requests per model before measuring (excluded from statistics). [default: 3]
    #[arg(long, value_name = "N")]
    pub warmup: Option<u32>,

    /// Measured requests per cell (a cell is one model at one load level). [default: 30]
    #[arg(long, value_name = "N")]
    pub requests: Option<u32>,

    /// Measure each cell for this long instead of a request count, e.g. 30s or 2m.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Closed-loop concurrency levels, one cell each, e.g. 1,4,8,16. [default: 1]
    #[arg(long, value_name = "N[,N…]", value_delimiter = ',')]
    pub concurrency: Vec<u32>,

    /// Open-loop Poisson arrivals at R requests/s (one cell per rate) instead of fixed
    /// concurrency. How late each request left against its schedule is recorded, and TTFT is
    /// also reported from the scheduled time, so a falling-behind client cannot hide queueing.
    #[arg(long, value_name = "R[,R…]", value_delimiter = ',')]
    pub rate: Vec<f64>,

    /// With several models: rounds each cell is split into, models alternating. [default: 5]
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,

    /// The user message.
    #[arg(long, value_name = "TEXT")]
    pub prompt: Option<String>,

    /// The user message, read from a file.
    #[arg(long, value_name = "FILE")]
    pub prompt_file: Option<PathBuf>,

    /// A JSON chat: [{"role": "...", "content": "..."}, ...] or {"messages": [...]}.
    #[arg(long, value_name = "FILE")]
    pub messages_file: Option<PathBuf>,

    /// A synthetic prompt of about N tokens: N common English words that are one token each in
    /// GPT-2/Llama/Gemma vocabularies, different for every request so no prefix cache can hit.
    /// The server's usage.prompt_tokens (recorded per request) gives the true count.
    #[arg(long, value_name = "N")]
    pub prompt_tokens: Option<u32>,

    /// A system message put first.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,

    /// max_tokens for every request. [default: 64]
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,

    /// Sampling temperature sent with every request. [default: the server's]
    #[arg(long, value_name = "T")]
    pub temperature: Option<f32>,

    /// Nucleus-sampling top_p sent with every request. [default: the server's]
    #[arg(long, value_name = "P")]
    pub top_p: Option<f32>,

    /// A stop string (repeatable).
    #[arg(long, value_name = "TEXT")]
    pub stop: Vec<String>,

    /// Sampling seed sent with every request, for repeatable outputs where the server honours
    /// it. Also seeds the synthetic prompts unless --prompt-seed does, so a run given the same
    /// --seed sends the same prompts again.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Seed of the synthetic prompts (--prompt-tokens, prompt sweeps, the cache probe). By
    /// default each run draws a new one and records it in the results, so a server's prompt
    /// cache cannot serve one run's prompts to the next.
    #[arg(long, value_name = "N")]
    pub prompt_seed: Option<u64>,

    /// Do not ask for the usage chunk (stream_options.include_usage); output tokens are then
    /// counted from deltas, and the results say so.
    #[arg(long)]
    pub no_usage: bool,

    /// Any further body parameter, KEY=JSON (repeatable), e.g. --param top_k=40.
    #[arg(long, value_name = "KEY=JSON", value_parser = parse_param)]
    pub param: Vec<(String, serde_json::Value)>,

    /// Open a new connection for every request (cold: DNS, TCP and TLS are then recorded per
    /// request, and TTFT+connect is the figure a user would see). Default: pooled
    /// connections, opened to each cell's concurrency before it is measured.
    #[arg(long)]
    pub fresh_connections: bool,

    /// Speak HTTP/2 (prior knowledge; h2c for http://). Default: HTTP/1.1.
    #[arg(long)]
    pub http2: bool,

    /// Connect timeout, e.g. 10s. [default: 10s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub connect_timeout: Option<Duration>,

    /// Longest wait from sending a request to its response headers. [default: 300s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub headers_timeout: Option<Duration>,

    /// Longest silence between two reads of a stream. [default: 60s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub idle_timeout: Option<Duration>,

    /// Directory for the results file. [default: results]
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,

    /// Exact results file path (overrides --output-dir and the generated name).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Vary one parameter across cells: prompt-tokens=100,1000,4000 (synthetic prompts of
    /// each size at a fixed max_tokens; fits ms per 1k prompt tokens and the fixed cost) or
    /// max-tokens=16,256,4000 (the fixed prompt; each stream is closed at its first answer
    /// token, and TTFT should not move). Prompt sizes above --context-tokens are skipped.
    #[arg(long, value_name = "PARAM=V,V…")]
    pub sweep: Option<bench::config::Sweep>,

    /// Run a probe after the cells (repeatable or comma-separated), --requests rounds each:
    /// prefix-cache (a long prompt new, repeated, changed at the end, changed at the start;
    /// size from --prompt-tokens, default 2000) or connections (cold = new connection vs
    /// warm = pooled, over HTTP/1.1 and HTTP/2: DNS, connect (+TLS), TTFB, TTFT).
    #[arg(long, value_name = "PROBE[,PROBE]", value_delimiter = ',')]
    pub probe: Vec<bench::config::Probe>,

    /// The model's context in tokens; prompts that would not fit with max_tokens are not
    /// sent. Known without this flag for the embedded server (4096).
    #[arg(long, value_name = "N")]
    pub context_tokens: Option<u32>,

    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Shown at the end of `--help`: the subcommand's one-line summary replaces the struct's doc
/// comment there, so the definitions live here.
const FIGURES_HELP: &str = "\
Figures (ms, one monotonic clock, warm-up excluded):
  TTFT          request written to a ready connection -> first delta with non-empty content
                (role-only chunks do not count). On a pooled connection that is the moment
                the request is handed to the HTTP stack; on a connection the request opened,
                the moment it became usable, so DNS, TCP and TLS are not in TTFT. Each cell is
                warmed up at its own concurrency first, so measured requests ride pooled
                connections; the cell header says how many opened one.
  TTFT+connect  request handed to the HTTP stack -> the same delta: connection setup included,
                what a user waits for. Shown when a request opened a connection (every request
                with --fresh-connections).
  TTFB, E2E     ready connection -> response headers, -> end of stream.
A pooled connection the server had closed is retried once on a new one, timed from the retry
and counted in the cell header.";

/// `voxlat-server`'s default `--ctx`, used as the context of the embedded server.
const EMBEDDED_CONTEXT_TOKENS: u32 = 4096;

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    // Bounded before converting: Duration::from_secs_f64 panics on 1e300, and a timeout of
    // centuries is a typo anyway.
    const MAX: f64 = bench::config::MAX_SECONDS;
    let too_long = || format!("{s} is longer than the {MAX:.0} s allowed; use e.g. 30s, 1.5 or 2m");
    let d = match s.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => {
            if secs > MAX {
                return Err(too_long());
            }
            Duration::from_secs_f64(secs)
        }
        _ => humantime::parse_duration(s).map_err(|e| format!("{e}; use e.g. 30s, 1.5 or 2m"))?,
    };
    if d.as_secs_f64() > MAX {
        return Err(too_long());
    }
    Ok(d)
}

fn parse_param(s: &str) -> Result<(String, serde_json::Value), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or("expected KEY=JSON, e.g. top_k=40")?;
    let v = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
    Ok((k.trim().to_string(), v))
}

impl BenchLlmArgs {
    /// The config file (or defaults) with every given flag laid over it.
    fn config(&self) -> Result<BenchConfig> {
        let mut c = match &self.config {
            Some(p) => BenchConfig::from_file(p)?,
            None => BenchConfig::default(),
        };
        if self.base_url.is_some() {
            c.base_url = self.base_url.clone();
        }
        if !self.model.is_empty() {
            c.models = self.model.clone();
        }
        macro_rules! set {
            ($($field:ident => $target:expr),*) => { $(if let Some(v) = self.$field.clone() { $target = v; })* };
        }
        set!(warmup => c.warmup, requests => c.requests, rounds => c.rounds, output_dir => c.output_dir);
        if let Some(d) = self.duration {
            c.duration_s = Some(d.as_secs_f64());
        }
        if !self.concurrency.is_empty() {
            c.concurrency = self.concurrency.clone();
        }
        if !self.rate.is_empty() {
            c.rate = self.rate.clone();
        }
        let p = &mut c.prompt;
        if self.prompt.is_some()
            || self.prompt_file.is_some()
            || self.messages_file.is_some()
            || self.prompt_tokens.is_some()
        {
            // A prompt flag replaces whatever prompt the file chose.
            p.text = self.prompt.clone();
            p.file = self.prompt_file.clone();
            p.messages_file = self.messages_file.clone();
            p.tokens = self.prompt_tokens;
        }
        if self.system.is_some() {
            p.system = self.system.clone();
        }
        if self.max_tokens.is_some() {
            c.max_tokens = self.max_tokens;
        }
        if self.temperature.is_some() {
            c.temperature = self.temperature;
        }
        if self.top_p.is_some() {
            c.top_p = self.top_p;
        }
        if self.prompt_seed.is_some() {
            c.prompt_seed = self.prompt_seed;
        }
        if self.seed.is_some() {
            c.seed = self.seed;
        }
        if !self.stop.is_empty() {
            c.stop = self.stop.clone();
        }
        if self.no_usage {
            c.include_usage = false;
        }
        for (k, v) in &self.param {
            c.extra.insert(k.clone(), v.clone());
        }
        c.fresh_connections |= self.fresh_connections;
        c.http2 |= self.http2;
        if let Some(d) = self.connect_timeout {
            c.connect_timeout_s = d.as_secs_f64();
        }
        if let Some(d) = self.headers_timeout {
            c.headers_timeout_s = d.as_secs_f64();
        }
        if let Some(d) = self.idle_timeout {
            c.idle_timeout_s = d.as_secs_f64();
        }
        if self.sweep.is_some() {
            c.sweep = self.sweep.clone();
        }
        for p in &self.probe {
            if !c.probes.contains(p) {
                c.probes.push(*p);
            }
        }
        if self.context_tokens.is_some() {
            c.context_tokens = self.context_tokens;
        }
        c.validate_named(|key| self.file_of(key))?;
        // Resolved here and recorded, so the results file says which prompts were sent.
        c.prompt_seed = c
            .prompt_seed
            .or(c.seed)
            .or_else(|| Some(voxlat_llm::bench::prompt::new_run_seed()));
        Ok(c)
    }
}

impl BenchLlmArgs {
    /// The config file a key's value came from: the file, unless a flag set the key. (A key
    /// neither set holds its default, which is valid, so it never reaches an error.)
    fn file_of(&self, key: &str) -> Option<String> {
        let flag_given = match key {
            "concurrency" => !self.concurrency.is_empty(),
            "rate" => !self.rate.is_empty(),
            "duration_s" => self.duration.is_some(),
            "requests" => self.requests.is_some(),
            "prompt" => {
                self.prompt.is_some()
                    || self.prompt_file.is_some()
                    || self.messages_file.is_some()
                    || self.prompt_tokens.is_some()
            }
            "sweep" => self.sweep.is_some(),
            "connect_timeout_s" => self.connect_timeout.is_some(),
            "headers_timeout_s" => self.headers_timeout.is_some(),
            "idle_timeout_s" => self.idle_timeout.is_some(),
            _ => false,
        };
        (!flag_given)
            .then(|| self.config.as_ref().map(|p| p.display().to_string()))
            .flatten()
    }
}

fn prompt_source(c: &BenchConfig) -> Result<PromptSource> {
    let p = &c.prompt;
    Ok(if let Some(t) = &p.text {
        PromptSource::Text(t.clone())
    } else if let Some(f) = &p.file {
        PromptSource::from_file(f)?
    } else if let Some(f) = &p.messages_file {
        PromptSource::from_messages_file(f)?
    } else if let Some(n) = p.tokens {
        PromptSource::Synthetic {
            tokens: n,
            seed: c.prompt_seed.unwrap_or(0),
        }
    } else {
        PromptSource::Text("Explain in two sentences why the sky is blue.".into())
    })
}

/// The configured endpoint; when none is configured anywhere (flag, config file, environment,
/// `.env`), the embedded server, started here with its log beside the results.
fn resolve_endpoint(
    settings: &Settings,
    cfg: &BenchConfig,
    args: &BenchLlmArgs,
) -> Result<(Endpoint, Option<EmbeddedServer>)> {
    let base_flag = cfg.base_url.as_deref();
    if settings
        .pick(base_flag.map(|v| ("--base-url", v)), BASE_URL_VARS)
        .is_some()
    {
        let endpoint = settings.endpoint(base_flag, args.api_key.as_deref())?;
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
    let server = EmbeddedServer::spawn(&SpawnOptions::new(log_dir)).context(
        "cannot start the embedded LLM server; pass --base-url (or set VOXLAT_BASE_URL) to use another server",
    )?;
    eprintln!(
        "embedded server: {} (log: {})",
        server.base_url(),
        server.log_path().display()
    );
    let endpoint = settings.endpoint(Some(&server.base_url()), args.api_key.as_deref())?;
    Ok((endpoint, Some(server)))
}

pub fn run(args: BenchLlmArgs) -> Result<ExitCode> {
    let mut cfg = args.config()?;
    let settings = Settings::from_process()?;
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
        let watch = _embedded.as_ref().map(EmbeddedServer::watch);
        let mut crashed = std::pin::pin!(async {
            match &watch {
                Some(w) => w.crashed().await,
                None => std::future::pending().await,
            }
        });
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
                        if let (true, Some(w)) = (lost_server, &watch) {
                            if let Some(why) = w.crashed_within(Duration::from_secs(2)).await {
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

/// A request to stop from outside: Ctrl-C or a service manager's SIGTERM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    Interrupt,
    Terminate,
}

impl StopSignal {
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// The shell convention: 128 + the signal number.
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
        })
    }
}

pub async fn shutdown_signal() -> StopSignal {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => StopSignal::Interrupt,
                _ = term.recv() => StopSignal::Terminate,
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    StopSignal::Interrupt
}

pub fn render_cell(c: &CellSummary) -> String {
    let mut out = String::new();
    let rps = c
        .throughput_rps
        .map(|r| format!(", {r:.2} req/s"))
        .unwrap_or_default();
    let tokens = if c.tokens_from_delta_count > 0 {
        format!(
            ", output tokens counted from deltas for {} requests (no usage sent)",
            c.tokens_from_delta_count
        )
    } else {
        String::new()
    };
    // Said every time, zero included: whether measured requests rode ready connections is
    // what tells TTFT from TTFT-plus-connect.
    let retried = if c.retried > 0 {
        format!(
            ", {} retried on a new connection after a stale one",
            c.retried
        )
    } else {
        String::new()
    };
    out.push_str(&format!(
        "\n{}: {} ok, {} errors{rps}, {} opened a connection{retried}{tokens}\n",
        c.cell, c.ok, c.errors, c.new_connections
    ));
    let mut t = Table::new(&["ms", "n", "mean", "p50", "p95", "p99", "max"]);
    t.summary_row("TTFT", c.ttft_ms.as_ref());
    if c.new_connections > 0 {
        t.summary_row("TTFT+connect", c.ttft_with_connect_ms.as_ref());
    }
    if c.ttfat_ms != c.ttft_ms {
        t.summary_row("first answer", c.ttfat_ms.as_ref());
    }
    t.summary_row("TTFB", c.ttfb_ms.as_ref());
    t.summary_row("first event", c.first_event_ms.as_ref());
    t.summary_row("TPOT", c.tpot_ms.as_ref());
    t.summary_row("ITL", c.itl_ms.as_ref());
    t.summary_row("E2E", c.e2e_ms.as_ref());
    if c.send_lag_ms.is_some() {
        t.summary_row("send lag", c.send_lag_ms.as_ref());
        t.summary_row("TTFT from due", c.ttft_from_schedule_ms.as_ref());
    }
    if c.thinking_ms.is_some() {
        t.summary_row("thinking", c.thinking_ms.as_ref());
        t.summary_row("reasoning tok", c.reasoning_tokens.as_ref());
    }
    if c.dns_ms.is_some() {
        t.summary_row("DNS", c.dns_ms.as_ref());
    }
    if c.connect_ms.is_some() {
        t.summary_row("connect", c.connect_ms.as_ref());
    }
    for (name, s) in &c.server_timings {
        t.summary_row(&format!("server {name}"), Some(s));
    }
    if let Some(v) = &c.server_view {
        t.summary_row("outside server", v.outside_server_ms.as_ref());
    }
    out.push_str(&t.render());
    for (class, e) in &c.errors_by_class {
        out.push_str(&format!("  error {class} x{}: {}\n", e.count, e.example));
    }
    out
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// Sweeps, probes, the server view and the diagnosis, after the cell tables.
pub fn render_analysis(r: &bench::BenchResults) -> String {
    use voxlat_llm::bench::analysis::{CacheVerdict, *};
    use voxlat_llm::bench::config::SweepParam;
    let a = &r.analysis;
    let mut out = String::new();
    for s in &a.sweeps {
        out.push_str(&format!(
            "\nSweep {} ({} {}):\n",
            s.param.name(),
            s.model,
            s.load
        ));
        let mut t = Table::new(&[s.param.name(), "prompt tok", "n", "TTFT p50 ms"]);
        for p in &s.points {
            t.row(vec![
                p.value.to_string(),
                p.prompt_tokens.map_or("-".into(), |v| format!("{v:.0}")),
                p.n.to_string(),
                format!("{:.1}", p.ttft_p50_ms),
            ]);
        }
        out.push_str(&t.render());
        match (s.param, &s.fit, s.spread) {
            (SweepParam::PromptTokens, Some(f), _) => out.push_str(&format!(
                "  fit (least squares over the points' P50): TTFT = {:.1} ms + {:.2} ms per 1k prompt tokens; R² {:.3} over {} points{}\n",
                f.intercept_ms,
                f.slope_ms_per_1k,
                f.r2,
                f.points,
                if f.points < 3 { " (two points always fit exactly)" } else { "" }
            )),
            (SweepParam::PromptTokens, None, _) => {
                out.push_str("  fit: needs at least two points with different prompt sizes\n")
            }
            (SweepParam::MaxTokens, _, Some(sp)) => out.push_str(&format!(
                "  spread of TTFT P50 across max_tokens: {:.0}% ({} above {:.0}% and {:.0} ms)\n",
                sp * 100.0,
                if sp > MAX_TOKENS_MAX_SPREAD { "flagged when" } else { "flat: flagged only" },
                MAX_TOKENS_MAX_SPREAD * 100.0,
                MAX_TOKENS_MIN_DELTA_MS
            )),
            _ => {}
        }
    }
    for c in &a.cache {
        out.push_str(&format!("\nPrefix-cache probe ({}):\n", c.model));
        let mut t = Table::new(&["step", "TTFT p50 ms", "cached tokens"]);
        for (step, v) in &c.ttft_p50_ms {
            let cached = c
                .cached_tokens
                .iter()
                .find(|(k, _)| k == step)
                .map_or("-".into(), |(_, n)| format!("{n:.0}"));
            t.row(vec![step.name().into(), format!("{v:.1}"), cached]);
        }
        out.push_str(&t.render());
        out.push_str(&format!(
            "  verdict: {}\n",
            match c.verdict {
                CacheVerdict::PrefixCache => "the server caches prefixes (a repeat and a change at the end are fast, a change at the start is not)",
                CacheVerdict::ExactMatchOnly => "only an identical prompt is fast: the cache does not reuse a shared prefix",
                CacheVerdict::NoReuse => "no reuse: a repeated prompt costs a full prefill",
                CacheVerdict::Inconclusive => "inconclusive: prefill of this prompt is too short to tell; raise --prompt-tokens",
            }
        ));
    }
    if !a.connections.is_empty() {
        out.push_str("\nConnections (P50, ms; cold = new connection, warm = pooled):\n");
        let mut t = Table::new(&[
            "protocol",
            "DNS",
            "connect",
            "cold TTFB",
            "warm TTFB",
            "cold TTFT",
            "warm TTFT",
            "errors",
        ]);
        for c in &a.connections {
            t.row(vec![
                format!("{} {}", c.model, c.protocol),
                ms(c.dns_p50_ms),
                ms(c.connect_p50_ms),
                ms(c.cold_ttfb_p50_ms),
                ms(c.warm_ttfb_p50_ms),
                ms(c.cold_ttft_p50_ms),
                ms(c.warm_ttft_p50_ms),
                c.errors.to_string(),
            ]);
        }
        out.push_str(&t.render());
        for c in r
            .cells
            .iter()
            .filter(|c| c.errors > 0 && c.cell.contains("HTTP/2"))
        {
            if let Some((class, e)) = c.errors_by_class.iter().next() {
                out.push_str(&format!("  {}: {class}: {}\n", c.cell, e.example));
            }
        }
    }
    let views: Vec<_> = r
        .cells
        .iter()
        .filter_map(|c| Some((c, c.server_view.as_ref()?)))
        .collect();
    if !views.is_empty() {
        out.push_str(
            "\nServer view (P50, ms; outside = client TTFT - server TTFT, per request):\n",
        );
        let mut t = Table::new(&[
            "cell",
            "client TTFT",
            "server TTFT",
            "queue",
            "prefill",
            "decode",
            "outside",
            "joined by id",
        ]);
        for (c, v) in views {
            let p = |s: &Option<voxlat_core::stats::Summary>| ms(s.as_ref().map(|s| s.p50));
            t.row(vec![
                c.cell.clone(),
                p(&c.ttft_ms),
                p(&v.server_ttft_ms),
                p(&v.queue_ms),
                p(&v.prefill_ms),
                p(&v.decode_ms),
                p(&v.outside_server_ms),
                format!("{}/{}", v.joined_by_request_id, v.requests),
            ]);
        }
        out.push_str(&t.render());
        out.push_str("  (server times as reported: llama.cpp timings, Ollama durations or the embedded server's fields)\n");
        let by_response: usize = r
            .cells
            .iter()
            .filter_map(|c| c.server_view.as_ref())
            .map(|v| v.joined_by_response)
            .sum();
        if by_response > 0 {
            out.push_str(&format!("  ({by_response} requests' server times were joined by the response that carried them, in their own stream: the server did not echo X-Request-Id)\n"));
        }
    }
    out.push_str("\nDiagnosis:\n");
    if a.findings.is_empty() {
        out.push_str("  nothing stands out: no heavy tail, no prompt-driven prefill, cache and connections fine (within the thresholds in the README)\n");
    }
    for f in &a.findings {
        out.push_str(&format!(
            "  - {}: {}\n    -> {}\n",
            f.cause.name(),
            f.evidence,
            f.advice
        ));
    }
    if let Some(cpu) = r.client.cpu_ms_per_request {
        out.push_str(&format!(
            "  client overhead: {cpu:.2} ms CPU per request (warned above {:.0}% of TTFT)\n",
            CLIENT_OVERHEAD_WARN_SHARE * 100.0
        ));
    }
    out
}
