//! `voxlat serve-audio`: the embedded Whisper and Piper as an OpenAI-compatible speech
//! server, for `--asr-url`/`--tts-url` and for any other client of those endpoints. Whisper
//! and Piper may share this process; llama.cpp may not, and stays in `voxlat serve`.

use crate::common::setup::Setup;
use crate::common::shutdown_signal;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use voxlat_asr::engine::{AsrError, Fallback, WhisperEngine};
use voxlat_models::known::WHISPER;
use voxlat_speech_api::server::{
    EngineError, Heard, ServerOptions, SpeechServer, SpeechToText, TextToSpeech,
};
use voxlat_tts::error::TtsError;
use voxlat_tts::piper::{Voice, VoiceOptions};

/// Serve the embedded Whisper and Piper over OpenAI's speech API: POST
/// /v1/audio/transcriptions (a WAV upload) and POST /v1/audio/speech (pcm or wav), with
/// Server-Timing (queue and compute) and X-Request-Id on every response.
#[derive(Args, Debug)]
pub struct ServeAudioArgs {
    /// Address to listen on. Anything but loopback exposes the server, which has no
    /// authentication, to the network.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 8090)]
    pub port: u16,
    /// Requests that may wait per engine while one runs; more get 503 with Retry-After.
    #[arg(long, default_value_t = 4)]
    pub queue: usize,
    /// Largest upload accepted (413 above it).
    #[arg(long, value_name = "MB", default_value_t = 25)]
    pub max_upload_mb: usize,
    /// Connections served at once; more wait to be accepted until one closes.
    #[arg(long, value_name = "N", default_value_t = voxlat_speech_api::server::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// A Piper voice (.onnx, its .onnx.json beside it) instead of the default.
    #[arg(long, value_name = "PATH")]
    pub voice: Option<PathBuf>,
    /// Whisper's threads [default: every core, up to 8]. ggml's threads spin while they wait,
    /// so on a machine shared with `voxlat serve`, keep this plus its --threads within the
    /// cores.
    #[arg(long, value_name = "N")]
    pub asr_threads: Option<usize>,
    /// Piper's threads [default: the TTS share of the cores].
    #[arg(long, value_name = "N")]
    pub tts_threads: Option<usize>,
    /// How a Whisper decode that ran away into a loop is decoded again.
    #[arg(long, value_name = "HOW", default_value = "wider-window", value_parser = crate::common::parse_fallback)]
    pub asr_fallback: Fallback,
}

struct Whisper(WhisperEngine);

impl SpeechToText for Whisper {
    fn transcribe(&mut self, audio: &[f32]) -> Result<Heard, EngineError> {
        match self.0.transcribe(audio) {
            Ok(t) => Ok(Heard {
                text: t.text,
                scores: t.scores,
            }),
            Err(e @ (AsrError::EmptyAudio | AsrError::NotFinite { .. })) => {
                Err(EngineError::BadInput(format!("the uploaded audio: {e}")))
            }
            Err(e) => Err(EngineError::Failed(Box::new(e))),
        }
    }
}

struct Piper(Voice);

impl TextToSpeech for Piper {
    fn sample_rate(&self) -> u32 {
        self.0.sample_rate()
    }

    fn speak(&mut self, text: &str) -> Result<Vec<f32>, EngineError> {
        match self.0.synthesize(text) {
            Ok(s) => Ok(s.samples),
            Err(TtsError::NothingToSay { reason, .. }) => Err(EngineError::BadInput(format!(
                "`input` has nothing to speak ({reason}): send words"
            ))),
            Err(e) => Err(EngineError::Failed(Box::new(e))),
        }
    }
}

pub fn run(args: ServeAudioArgs) -> Result<ExitCode> {
    anyhow::ensure!(
        (1..=1024).contains(&args.queue),
        "--queue {} is outside 1–1024",
        args.queue
    );
    anyhow::ensure!(
        (1..=1024).contains(&args.max_upload_mb),
        "--max-upload-mb {} is outside 1–1024",
        args.max_upload_mb
    );
    anyhow::ensure!(
        (1..=65_536).contains(&args.max_connections),
        "--max-connections {} is outside 1–65536",
        args.max_connections
    );
    let setup = Setup::open()?;
    let mut budget = setup.budget;
    for (flag, value, slot) in [
        ("--asr-threads", args.asr_threads, &mut budget.asr),
        ("--tts-threads", args.tts_threads, &mut budget.tts),
    ] {
        if let Some(n) = value {
            anyhow::ensure!((1..=64).contains(&n), "{flag} {n} is outside 1–64");
            *slot = n;
        }
    }
    let models = setup.stage_models(args.voice.clone())?;
    // Bind before loading: a taken port should not wait for two models.
    let addr = format!("{}:{}", args.host, args.port);
    let listener = std::net::TcpListener::bind(&addr).with_context(|| {
        format!("cannot listen on {addr}: pick another --port, or stop what holds it")
    })?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() {
        eprintln!(
            "warning: listening on {local}, beyond this machine; the server has no authentication"
        );
    }
    eprintln!(
        "loading Whisper ({} threads) and Piper ({} thread)…",
        budget.asr, budget.tts
    );
    let (whisper, fallback, threads) = (models.whisper.clone(), args.asr_fallback, budget.asr);
    let voice_opts = VoiceOptions {
        intra_threads: budget.tts,
        runtime: Some(models.runtime.clone()),
        ..Default::default()
    };
    let voice = models.voice.clone();
    let opts = ServerOptions {
        queue_depth: args.queue,
        max_upload_bytes: args.max_upload_mb * 1024 * 1024,
        max_connections: args.max_connections,
        asr_model: WHISPER.model.into(),
        tts_model: voice
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "piper".into()),
        english_only: WHISPER.model.ends_with(".en"),
        ..ServerOptions::default()
    };
    let server = SpeechServer::start(
        opts,
        move || {
            WhisperEngine::load(&whisper, threads).map(|mut e| {
                e.set_fallback(fallback);
                Box::new(Whisper(e)) as Box<dyn SpeechToText>
            })
        },
        move || {
            Voice::load(&voice, voice_opts).map(|v| Box::new(Piper(v)) as Box<dyn TextToSpeech>)
        },
    )?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let stopped = rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        println!(
            "serving speech on http://{local}/v1 (POST /audio/transcriptions, POST /audio/speech); Ctrl-C stops"
        );
        let (tx, rx) = tokio::sync::oneshot::channel();
        server
            .serve(listener, async move {
                let sig = shutdown_signal().await;
                let _ = tx.send(sig);
            })
            .await?;
        Ok::<_, anyhow::Error>(rx.await.ok())
    })?;
    Ok(stopped.map_or(ExitCode::SUCCESS, |s| s.exit_code()))
}
