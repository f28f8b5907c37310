//! The product's stages, loaded the one way every command loads them.

use crate::common::remote::RemoteStages;
use anyhow::Result;
use std::path::PathBuf;
use std::time::Duration;
use voxlat_asr::engine::Fallback;
use voxlat_core::threads::ThreadBudget;
use voxlat_llm::{ClientOptions, LlmClient};
use voxlat_pipeline::stages::RemoteVoice;
use voxlat_pipeline::workers::{AsrWorker, TtsWorker};
use voxlat_pipeline::{Pipeline, PipelineConfig};
use voxlat_speech_api::{AsrClient, TtsClient};

/// The fetched models' paths, each checked to be present (else the error says how to fetch).
pub struct ModelPaths {
    pub whisper: PathBuf,
    pub voice: PathBuf,
    pub runtime: PathBuf,
}

/// How the stages run, beyond their models.
#[derive(Clone, Debug)]
pub struct StageOptions {
    /// Longest silence between two reads of the LLM stream.
    pub llm_idle_timeout: Duration,
    /// How a Whisper decode that ran away is decoded again.
    pub asr_fallback: Fallback,
    /// The stages that run on speech servers instead of in process.
    pub remote: RemoteStages,
}

/// Whisper and Piper on their worker threads, and the LLM client, as one pipeline.
pub fn load_pipeline(
    cfg: PipelineConfig,
    budget: &ThreadBudget,
    models: &ModelPaths,
    endpoint: voxlat_net::config::Endpoint,
    opts: StageOptions,
) -> Result<Pipeline> {
    let (asr, tts, client) = load_stages(budget, models, endpoint, opts)?;
    Ok(Pipeline::new(cfg, asr, tts, Box::new(client)))
}

/// Whisper and Piper on their worker threads, and the LLM client.
fn load_stages(
    budget: &ThreadBudget,
    models: &ModelPaths,
    endpoint: voxlat_net::config::Endpoint,
    opts: StageOptions,
) -> Result<(AsrWorker, TtsWorker, LlmClient)> {
    let asr = match opts.remote.asr.clone() {
        Some((endpoint, o)) => {
            eprintln!("ASR: {}", endpoint.base_url.value);
            AsrWorker::spawn(move || AsrClient::new(endpoint, o))?
        }
        None => {
            eprintln!("loading Whisper ({} threads)…", budget.asr);
            AsrWorker::start(&models.whisper, budget.asr, opts.asr_fallback)?
        }
    };
    let tts = match opts.remote.tts.clone() {
        Some((endpoint, o)) => {
            eprintln!("TTS: {}", endpoint.base_url.value);
            TtsWorker::spawn(move || TtsClient::new(endpoint, o).map(RemoteVoice::new))?
        }
        None => {
            eprintln!("loading Piper ({} thread)…", budget.tts);
            let tts_opts = voxlat_tts::piper::VoiceOptions {
                intra_threads: budget.tts,
                runtime: Some(models.runtime.clone()),
                ..Default::default()
            };
            TtsWorker::start(&models.voice, tts_opts)?
        }
    };
    let client = LlmClient::new(
        endpoint,
        ClientOptions {
            idle_timeout: opts.llm_idle_timeout,
            ..ClientOptions::default()
        },
    )?;
    Ok((asr, tts, client))
}
