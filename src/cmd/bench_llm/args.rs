//! bench-llm's flags, and the config file they are laid over.

use crate::common::{parse_duration, ArgError};
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use voxlat_bench::{self as bench, BenchConfig, PromptSource};

/// Measures TTFT, TPOT, ITL and end-to-end latency of any OpenAI-compatible
/// `/chat/completions` endpoint with `stream: true`.
///
/// The endpoint comes from --base-url, else VOXLAT_BASE_URL, else OPENAI_BASE_URL, else a
/// `.env` file in the current directory; the key likewise from --api-key, VOXLAT_API_KEY,
/// OPENAI_API_KEY. A key goes only over https:// or to this machine (plain http:// to
/// another host needs --allow-insecure-key), a base URL from `.env` gets a key only from the
/// same `.env` or --api-key, and the embedded server gets none. So pointing it at another
/// server is one variable:
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
/// network, client overhead; thresholds in docs/guide.md):
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

    /// Send the API key over plain http:// to a host that is not loopback. Without it the key
    /// is withheld, with a warning: it would cross the network in clear text.
    #[arg(long)]
    pub allow_insecure_key: bool,

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
pub(super) const EMBEDDED_CONTEXT_TOKENS: u32 = 4096;

fn parse_param(s: &str) -> Result<(String, serde_json::Value), ArgError> {
    let (k, v) = s.split_once('=').ok_or(ArgError::Param)?;
    let v = serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
    Ok((k.trim().to_string(), v))
}

impl BenchLlmArgs {
    /// The config file (or defaults) with every given flag laid over it.
    pub(super) fn config(&self) -> Result<BenchConfig> {
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
        c.validate()
            .map_err(|bad| anyhow::anyhow!(self.name_bad(&bad)))?;
        // Resolved here and recorded, so the results file says which prompts were sent.
        c.prompt_seed = c
            .prompt_seed
            .or(c.seed)
            .or_else(|| Some(voxlat_bench::prompt::new_run_seed()));
        Ok(c)
    }
}

/// The flag that sets a config key.
fn flag_of(key: &str) -> &'static str {
    match key {
        "concurrency" => "--concurrency",
        "rate" => "--rate",
        "duration_s" => "--duration",
        "requests" => "--requests",
        "prompt" => "--prompt/--prompt-file/--messages-file/--prompt-tokens",
        "prompt.tokens" => "--prompt-tokens",
        "sweep" => "--sweep",
        "connect_timeout_s" => "--connect-timeout",
        "headers_timeout_s" => "--headers-timeout",
        "idle_timeout_s" => "--idle-timeout",
        _ => "",
    }
}

impl BenchLlmArgs {
    /// A bad setting named where it came from: the config file and key ("bench.toml:
    /// concurrency = [0]: …"), or the flag as typed ("--concurrency 0: …").
    fn name_bad(&self, b: &voxlat_bench::config::BadSetting) -> String {
        match self.file_of(b.key) {
            Some(file) => format!("{file}: {b}"),
            None if b.flag_value.is_empty() => format!("{}: {}", flag_of(b.key), b.problem),
            None => format!("{} {}: {}", flag_of(b.key), b.flag_value, b.problem),
        }
    }

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
            "prompt.tokens" => self.prompt_tokens.is_some(),
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

pub(super) fn prompt_source(c: &BenchConfig) -> Result<PromptSource> {
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
