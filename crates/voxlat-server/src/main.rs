//! `voxlat-server`: the embedded OpenAI-compatible LLM server. Usually started as
//! `voxlat serve …` (which runs this binary) or spawned by `voxlat bench-llm`.

use anyhow::{bail, Context, Result};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use voxlat_server::engine::Engine;
use voxlat_server::http::{AppState, Model};
use voxlat_server::llama::{LlamaModelHandle, LoadOptions};
use voxlat_server::sched::Scheduler;

/// Serves a GGUF model over an OpenAI-compatible API (POST /v1/chat/completions, streaming or
/// not; GET /v1/models; GET /health) with llama.cpp, reporting server-side queue, prefill and
/// decode timings in every response.
#[derive(Parser, Debug)]
#[command(name = "voxlat serve", version)]
struct Args {
    /// Address to bind. Anything but loopback exposes the model to the network, unauthenticated.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,

    /// Port to listen on; 0 picks a free one (printed at start-up).
    #[arg(long, default_value_t = 8080)]
    port: u16,

    /// A GGUF file, or a model name from `voxlat models list`.
    /// [default: VOXLAT_LLM_MODEL, else the manifest's default LLM]
    #[arg(long, value_name = "PATH|NAME")]
    model: Option<String>,

    /// CPU threads per slot, for prefill and decode. Keep slots × threads ≤ cores: llama.cpp's
    /// threads spin while they wait and collapse when oversubscribed.
    #[arg(long, default_value_t = 2)]
    threads: u32,

    /// CPU threads per slot for prefill (reading the prompt) only. [default: --threads] In a
    /// voice turn nothing else runs during prefill (ASR is done, TTS has nothing yet), so it
    /// may take every core, while decode overlaps TTS and keeps --threads.
    #[arg(long, value_name = "N")]
    batch_threads: Option<u32>,

    /// Context size in tokens per slot (prompt + reply).
    #[arg(long, default_value_t = 4096)]
    ctx: u32,

    /// Requests generated at once, each in its own llama.cpp context with its own KV cache.
    #[arg(long, default_value_t = 1)]
    slots: usize,

    /// Requests allowed to wait for a slot; more are refused with 503 at once.
    #[arg(long, default_value_t = 8)]
    queue: usize,

    /// A llama.cpp built-in chat template (gemma, chatml, llama3, …) instead of the GGUF's own.
    /// A GGUF without one gets gemma.
    #[arg(long, value_name = "NAME")]
    chat_template: Option<String>,

    /// Give sliding-window layers (Gemma 3) a window-sized KV cache instead of a full one:
    /// less memory at large --ctx, but a cached prefix is then reusable only when the new
    /// prompt diverges within about one window of the end of the cached one.
    #[arg(long)]
    small_swa_cache: bool,

    /// Serve Prometheus metrics (queue depth, busy slots, queue wait, prefill, decode,
    /// prefix-cache hits, requests by outcome) at http://HOST:PORT/metrics, e.g.
    /// 127.0.0.1:9464. Off unless given.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_addr: Option<String>,
}

fn main() -> std::process::ExitCode {
    voxlat_core::clock::init();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,llama_cpp_2=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: the embedded server's log is a file that error
        // messages quote.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let args = Args::parse();
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// The model file and the id clients will see.
fn resolve_model(arg: Option<&str>) -> Result<(PathBuf, String)> {
    let stem = |p: &Path| {
        p.file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("model")
            .to_string()
    };
    if let Some(a) = arg {
        let p = Path::new(a);
        if p.is_file() {
            return Ok((p.to_path_buf(), stem(p)));
        }
        if a.ends_with(".gguf") || a.contains(std::path::MAIN_SEPARATOR) {
            bail!(
                "--model {a}: no such file (give a GGUF path, or a name from `voxlat models list`)"
            );
        }
    }
    let store = voxlat_models::Store::open_default(None)?;
    let model = match arg {
        Some(name) => store.manifest().require(name)?,
        None => voxlat_models::selected_llm(store.manifest())?,
    };
    let file = model
        .files
        .iter()
        .find(|f| f.name.ends_with(".gguf"))
        .with_context(|| {
            format!(
                "model `{}` has no .gguf file in the manifest; it is not an LLM",
                model.name
            )
        })?;
    let path = store.ready_path(&model.name, &file.name)?;
    Ok((path, model.name.clone()))
}

fn run(args: Args) -> Result<()> {
    if args.threads == 0 || args.batch_threads == Some(0) || args.ctx < 16 || args.slots == 0 {
        bail!("--threads, --batch-threads and --slots must be at least 1, and --ctx at least 16");
    }
    let (path, id) = resolve_model(args.model.as_deref())?;
    let t0 = std::time::Instant::now();
    let handle = LlamaModelHandle::load(&LoadOptions {
        path: path.clone(),
        id,
        n_ctx: args.ctx,
        threads: args.threads,
        batch_threads: args.batch_threads.unwrap_or(args.threads),
        chat_template: args.chat_template.clone(),
        small_swa_cache: args.small_swa_cache,
    })?;
    let handle: &'static LlamaModelHandle = Box::leak(Box::new(handle));
    // Bound before the slots start, so a busy address fails fast.
    let (metrics, metrics_server) = match &args.metrics_addr {
        Some(addr) => {
            let mut registry = voxlat_telemetry::Registry::default();
            let m = voxlat_telemetry::ServerMetrics::register(&mut registry, args.slots);
            let server =
                voxlat_telemetry::MetricsServer::start("--metrics-addr", addr, Arc::new(registry))?;
            (Some(m), Some(server))
        }
        None => (None, None),
    };
    let sched = Scheduler::start_with_metrics(args.slots, args.queue, metrics, move |_slot| {
        handle
            .new_slot()
            .map(|s| Box::new(s) as Box<dyn Engine>)
            .map_err(Into::into)
    })?;
    let load_ms = t0.elapsed().as_millis();

    let rt = tokio::runtime::Builder::new_multi_thread()
        // The slots do the heavy work on their own threads; HTTP needs little.
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let addr = format!("{}:{}", args.host, args.port);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (in use? try another --port, or 0)"))?;
        let local = listener.local_addr()?;
        let model: Arc<dyn Model> = Arc::new(Handle(handle));
        println!(
            "voxlat-server listening on http://{local}/v1 (pid {}; model {} from {}; template {}; {} slot(s) x {} thread(s) ({} for prefill), ctx {}, queue {}; sliding window {}; loaded in {load_ms} ms)",
            std::process::id(),
            handle.id,
            path.display(),
            handle.template_label(),
            args.slots,
            handle.threads,
            handle.batch_threads,
            handle.n_ctx,
            args.queue,
            handle.n_swa,
        );
        if let Some(m) = &metrics_server {
            println!("voxlat-server metrics on {}", m.url());
        }
        let state = AppState::new(model, Arc::new(sched));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            shutdown_signal().await;
            tracing::info!("shutting down");
            let _ = stop_tx.send(());
            // Streams in flight get a moment to finish; then the process ends regardless.
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            std::process::exit(0);
        });
        voxlat_server::serve(listener, state, async {
            let _ = stop_rx.await;
        })
        .await
        .context("server failed")?;
        // Slot threads may be mid-generation; their requests' clients are gone.
        std::process::exit(0)
    })
}

/// `&'static LlamaModelHandle` as an `Arc<dyn Model>`.
struct Handle(&'static LlamaModelHandle);

impl Model for Handle {
    fn id(&self) -> &str {
        self.0.id()
    }
    fn aliases(&self) -> &[String] {
        self.0.aliases()
    }
    fn prepare(
        &self,
        req: &voxlat_server::request::ChatRequest,
    ) -> Result<(Vec<i32>, Vec<String>), voxlat_server::ApiError> {
        Model::prepare(self.0, req)
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
