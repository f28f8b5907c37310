//! The one way a talking command (`run`, `replay`) sets itself up: the thread budget, the
//! models, the LLM (a given server, or the embedded one, watched for a crash), the end-of-turn
//! model, the stages, and the `stages` block its results record. The copies this replaced
//! had drifted: live never watched the embedded server, and each wrote its own keys.
//! `bench-llm` loads no stage; it shares the LLM part ([`crate::common::llm::start_embedded`],
//! [`CrashWatch`]).

use crate::common::llm::attach_llm;
use crate::common::remote::{RemoteStageArgs, RemoteStages};
use crate::common::setup::Setup;
use crate::common::stages::{load_pipeline, ModelPaths, StageOptions};
use crate::embedded::{CrashWatch, EmbeddedServer};
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Duration;
use voxlat_asr::engine::Fallback;
use voxlat_core::threads::ThreadBudget;
use voxlat_net::config::Endpoint;
use voxlat_pipeline::setup::Stages;
use voxlat_pipeline::{Pipeline, PipelineConfig};
use voxlat_vad::SharedScorer;

/// What a command asks of its stack, from its flags.
pub struct StackSpec<'a> {
    pub remote: &'a RemoteStageArgs,
    pub llm_url: Option<&'a str>,
    /// The LLM: the embedded server's GGUF, or the remote server's model name.
    pub model: Option<&'a str>,
    /// A Piper voice instead of the default one.
    pub voice: Option<PathBuf>,
    /// Where the embedded server's log goes.
    pub output_dir: &'a Path,
    /// Callers sharing the cores (`--sessions`); 1 otherwise.
    pub callers: usize,
    /// `--turn-model`, when one is asked for.
    pub turn_model: Option<&'a str>,
    pub llm_idle_timeout: Duration,
    pub asr_fallback: Fallback,
}

pub struct Stack {
    /// The budget for one caller; [`Stack::pipeline`] shares it among several.
    pub budget: ThreadBudget,
    pub models: ModelPaths,
    pub endpoint: Endpoint,
    /// The embedded server, stopped when the stack is dropped.
    pub server: Option<EmbeddedServer>,
    pub turn_model: Option<SharedScorer>,
    pub stages: Stages,
    /// The pipeline's configuration, fitted to the LLM (its model name and prompt).
    pub cfg: PipelineConfig,
    opts: StageOptions,
}

impl Stack {
    /// Resolves the models and the LLM, and keeps `cfg` fitted to the LLM (its model name
    /// and prompt) as [`Stack::cfg`]. Checks the cheap things first: a wrong URL fails before
    /// any model loads.
    pub fn start(spec: StackSpec<'_>, mut cfg: PipelineConfig) -> Result<Stack> {
        let remote = RemoteStages::resolve(spec.remote, spec.llm_url)?;
        let setup = Setup::open()?;
        let budget = setup.budget;
        let models = setup.stage_models(spec.voice)?;
        let turn_model = match spec.turn_model {
            Some(_) => Some(setup.turn_model()?),
            None => None,
        };
        // With several callers, one's prefill overlaps the others' stages.
        let (endpoint, server, llm_model) = attach_llm(
            &mut cfg,
            &setup.store,
            spec.llm_url,
            spec.model,
            spec.output_dir,
            &budget.shared_by(spec.callers),
            spec.remote.allow_insecure_key,
        )?;
        // The embedded server is local and free: a cut history is evaluated ahead of the
        // next turn. A remote one may bill the extra request, so it is not sent there.
        cfg.warm_cut_history = server.is_some();
        let (asr, tts) = remote.labels(&models);
        let stages = Stages {
            asr,
            tts,
            onnxruntime: models.runtime.display().to_string(),
            asr_fallback: spec.asr_fallback.name().into(),
            // "off" is written too, as results files always had it.
            turn_model: Some(spec.turn_model.unwrap_or("off").to_string()),
            llm: endpoint.base_url.value.clone(),
            llm_model,
            live: None,
        };
        let opts = StageOptions {
            llm_idle_timeout: spec.llm_idle_timeout,
            asr_fallback: spec.asr_fallback,
            remote,
        };
        Ok(Stack {
            budget,
            models,
            endpoint,
            server,
            turn_model,
            stages,
            cfg,
            opts,
        })
    }

    /// One caller's pipeline, its stages loaded with the cores shared among `callers`.
    pub fn pipeline(&self, callers: usize) -> Result<Pipeline> {
        let share = self.budget.shared_by(callers);
        let p = load_pipeline(
            self.cfg.clone(),
            &share,
            &self.models,
            self.endpoint.clone(),
            self.opts.clone(),
        )?;
        Ok(match &self.turn_model {
            Some(m) => p.with_turn_model(m.clone()),
            None => p,
        })
    }

    /// What the embedded server ran with, for the results; `None` for a remote LLM.
    pub fn server_threads(&self, callers: usize) -> Option<ThreadBudget> {
        self.server.as_ref().map(|_| self.budget.shared_by(callers))
    }

    /// Which build of the embedded server runs (`portable`, `avx512`); `None` for a remote LLM.
    pub fn server_build(&self) -> Option<String> {
        self.server.as_ref().map(|s| s.build().to_string())
    }

    /// Resolves with how the embedded server died, if it does; never for a remote LLM.
    pub fn crash_watch(&self) -> CrashWatch {
        CrashWatch::of(self.server.as_ref())
    }
}
