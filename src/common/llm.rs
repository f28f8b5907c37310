//! The LLM a session talks to: a given server, or the embedded one, and the prompt fitted
//! to the model it serves.

use crate::embedded::{EmbeddedServer, SpawnOptions};
use anyhow::{Context, Result};
use std::path::Path;
use voxlat_core::threads::ThreadBudget;
use voxlat_llm::{ClientOptions, LlmClient};
use voxlat_net::config::{Endpoint, Settings, Withheld};
use voxlat_pipeline::PipelineConfig;

/// The LLM endpoint: `--llm-url` (or the environment's base URL), else the embedded server
/// with the LLM's share of the cores (kept running as long as the returned handle lives).
/// The LLM a session talks to.
pub struct ConnectedLlm {
    pub endpoint: voxlat_net::config::Endpoint,
    /// The embedded server, when no URL was given (stopped on drop).
    pub server: Option<EmbeddedServer>,
    /// The model name to send; empty for the embedded server, which serves exactly one.
    pub model: String,
}

/// Connects the LLM ([`connect_llm`]) and fits the pipeline to it: the model name its
/// requests carry and the prompt the model needs ([`fit_prompt`]). Returns the endpoint, the
/// embedded server (kept alive by the caller) and the embedded model's name.
pub fn attach_llm(
    cfg: &mut PipelineConfig,
    store: &voxlat_models::Store,
    llm_url: Option<&str>,
    model: Option<&str>,
    output_dir: &Path,
    budget: &ThreadBudget,
    allow_insecure_key: bool,
) -> Result<(
    voxlat_net::config::Endpoint,
    Option<EmbeddedServer>,
    Option<String>,
)> {
    let llm = connect_llm(llm_url, model, output_dir, budget, allow_insecure_key)?;
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
    allow_insecure_key: bool,
) -> Result<ConnectedLlm> {
    let settings = Settings::from_process()?.allow_insecure_key(allow_insecure_key);
    let configured = settings.pick(
        llm_url.map(|u| ("--llm-url", u)),
        voxlat_net::config::BASE_URL_VARS,
    );
    match configured {
        Some(url) => {
            let endpoint = settings.endpoint_from(url, None)?;
            warn_withheld(&endpoint);
            let model = match settings.model(model.map(|m| ("--model", m))) {
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
            let prefill = budget.llm_prefill.max(budget.llm);
            eprintln!(
                "starting the embedded LLM server ({} thread, {prefill} for prefill)…",
                budget.llm
            );
            let mut opts = SpawnOptions::new(output_dir);
            opts.threads = Some(budget.llm as u32);
            opts.batch_threads = Some(prefill as u32);
            opts.model = model.map(str::to_string);
            let server = start_embedded(&opts)?;
            Ok(ConnectedLlm {
                endpoint: Endpoint::embedded(&server.base_url()),
                server: Some(server),
                model: String::new(),
            })
        }
    }
}

/// The embedded server, for a command given no LLM URL; where it listens and logs is said on
/// stderr.
pub fn start_embedded(opts: &SpawnOptions) -> Result<EmbeddedServer> {
    let server = EmbeddedServer::spawn(opts).context(
        "cannot start the embedded LLM server; --llm-url (run, replay) or --base-url (bench-llm) uses another server",
    )?;
    eprintln!(
        "embedded server: {} ({} build; log: {})",
        server.base_url(),
        server.build(),
        server.log_path().display()
    );
    Ok(server)
}

/// One line on stderr when a key the user configured is held back for their safety (plain
/// http to another machine, or a URL from `.env`), naming the key, the URL and the fix. A
/// key left with the LLM's origin is not warned about: using the LLM's key only there is the
/// rule, and a 401 from that server explains it.
pub fn warn_withheld(endpoint: &Endpoint) {
    if let Some(w) = &endpoint.withheld_key {
        if !matches!(w.reason, Withheld::OtherOrigin { .. }) {
            let flag = match w.reason {
                Withheld::PlainHttp => " (--allow-insecure-key sends it anyway)",
                _ => "",
            };
            eprintln!(
                "warning: {}{flag}",
                w.describe(endpoint.service, &endpoint.base_url.value)
            );
        }
    }
}

/// A remote server's first listed model, for when none was named: OpenAI-compatible servers
/// other than llama.cpp's reject requests without one.
fn first_listed_model(endpoint: &voxlat_net::config::Endpoint) -> Result<String> {
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
