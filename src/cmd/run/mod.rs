//! `voxlat run`: the live assistant. Microphone → endpointer → Whisper → LLM → Piper →
//! speaker, one line per turn with the breakdown of where the delay went, barge-in, and the
//! session's results in replay's schema.

use crate::common::pipeline_config::pipeline_config;
use crate::common::remote::RemoteStageArgs;
use crate::common::reply::ReplyArgs;
use crate::common::stack::{Stack, StackSpec};
use crate::common::turn::TurnArgs;
use crate::report::live::print_progress;
use anyhow::{Context, Result};
use clap::Args;
use converse::{converse, finish, TurnLog};
use devices::Devices;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use voxlat_pipeline::results::{ReplayResults, ResultsWriter};
use voxlat_pipeline::{PipelineConfig, Session, SessionOptions, SourceEvent, TurnMeta};
use voxlat_vad::EndpointerConfig;

mod converse;
mod devices;

/// Talk to a local voice assistant through the microphone and speaker. Each turn prints the
/// transcript, the reply as it streams, and the breakdown of "you stopped speaking → you
/// heard the reply" (endpointing / ASR / TTFT / first chunk / TTS / playout / device), the
/// dominant stage marked with *. Speak over a reply to interrupt it (barge-in). Ctrl-C
/// ends the session and writes its results (JSON, CSV, HTML) like `voxlat replay`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Audio host (`voxlat devices` lists them). [default: the platform's]
    #[arg(long)]
    pub host: Option<String>,
    /// Microphone: a device id or part of its name. [default: the host's default input]
    #[arg(long)]
    pub input: Option<String>,
    /// Speaker: a device id or part of its name. [default: the host's default output]
    #[arg(long)]
    pub output: Option<String>,
    /// A TOML file with any of: system_prompt, voice, max_tokens, barge_in, barge_in_ratio,
    /// echo_tail_ms, and an [endpointer] table (mode, hangover_ms, provisional_ms, …).
    /// Flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[arg(long)]
    pub system_prompt: Option<String>,
    /// A Piper voice (.onnx with its .onnx.json beside it). [default: the fetched en_US-joe-medium]
    #[arg(long, value_name = "ONNX")]
    pub voice: Option<PathBuf>,
    /// Any OpenAI-compatible server instead of the embedded one (VOXLAT_BASE_URL works too).
    #[arg(long, value_name = "URL")]
    pub llm_url: Option<String>,
    /// The LLM, as for `voxlat replay --model`: the embedded server's GGUF (a manifest name
    /// or a path), or with --llm-url the model name sent.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Silence (ms) that ends a turn.
    #[arg(long)]
    pub hangover: Option<u32>,
    /// Silence (ms) after which ASR starts speculatively; 0 disables speculation.
    #[arg(long)]
    pub provisional: Option<u32>,
    /// webrtc-vad aggressiveness, 0–3.
    #[arg(long)]
    pub vad_mode: Option<u8>,
    #[command(flatten)]
    pub turn: TurnArgs,
    #[command(flatten)]
    pub reply: ReplyArgs,
    #[command(flatten)]
    pub remote: RemoteStageArgs,
    /// Never interrupt a reply, whatever the microphone hears.
    #[arg(long)]
    pub no_barge_in: bool,
    /// Microphone level over the reply's level that counts as the user speaking over it.
    #[arg(long)]
    pub barge_in_ratio: Option<f32>,
    /// Device period in ms (callback size; output buffers two). Larger survives a busy
    /// machine without xruns (gaps, counted per turn) at the cost of output latency (the
    /// `device` segment); 0 takes the device's default (through ALSA's pulse plugin that
    /// default made cpal's capture thread spin at ~35% of a core).
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub period_ms: u32,
    /// Stop after this many turns that ran to their end (answered, failed or heard nothing;
    /// headless use, tests). An interrupted turn is not counted, since the speech that cut
    /// it short is the next turn, but it is written to the results like every turn shown.
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Serve Prometheus metrics of the turns (segment histograms, turns by outcome) at
    /// http://HOST:PORT/metrics, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// Give up if no turn started within this many seconds (headless use).
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout: Option<u64>,
    #[command(flatten)]
    pub session: crate::common::session_args::SessionArgs,
}

/// The config file; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct FileConfig {
    system_prompt: Option<String>,
    voice: Option<PathBuf>,
    max_tokens: Option<u32>,
    barge_in: Option<bool>,
    barge_in_ratio: Option<f32>,
    echo_tail_ms: Option<u32>,
    endpointer: Option<EndpointerConfig>,
}

fn read_config(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| {
        format!(
            "{}: invalid config (see `voxlat run --help` for its keys)",
            path.display()
        )
    })
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let file = match &args.config {
        Some(p) => read_config(p)?,
        None => FileConfig::default(),
    };
    let (endpointer, mut listener) = devices::listener_config(&args, &file)?;
    // Devices first: a wrong name should fail before minutes of model loading.
    let devices = Devices::open(&args, listener.echo_tail_ms)?;
    let base = pipeline_config(endpointer, &args.reply, &args.turn, &args.session)?;
    let cfg = PipelineConfig {
        fast: false,
        lead_silence_ms: 0,
        max_tokens: args.max_tokens.or(file.max_tokens).unwrap_or(48),
        system_prompt: args
            .system_prompt
            .clone()
            .or(file.system_prompt.clone())
            .unwrap_or(base.system_prompt.clone()),
        ..base
    };
    args.session.ensure_writable()?;
    let spec = StackSpec {
        remote: &args.remote,
        llm_url: args.llm_url.as_deref(),
        model: args.model.as_deref(),
        voice: args.voice.clone().or(file.voice.clone()),
        output_dir: &args.session.output_dir,
        callers: 1,
        turn_model: args.turn.enabled().then_some(args.turn.turn_model.name()),
        llm_idle_timeout: Duration::from_secs(60),
        asr_fallback: args.session.asr_fallback,
    };
    let stack = Stack::start(spec, cfg)?;
    let pipeline = stack.pipeline(1)?;
    listener.turn_model = stack.turn_model.clone();
    // One speaker for the whole session: the `cues` rule learns their pauses as they talk.
    let cues = stack.cfg.turn_cues.then(|| voxlat_pipeline::cues::CueRule {
        base_ms: f64::from(stack.cfg.endpointer.hangover_ms),
        hold: voxlat_vad::StopHold::default(),
        speaker: voxlat_pipeline::cues::SpeakerPauses::default(),
    });
    listener.stop_hold = cues.as_ref().map(|c| c.hold.clone());

    let mut stages = stack.stages.clone();
    stages.live = Some(devices.live_setup(&listener));
    let mut results = ReplayResults::new(pipeline.cfg.clone(), stack.budget, stages);
    results.llm_server_threads = stack.server_threads(1);
    results.llm_server_build = stack.server_build();
    results.timing_note = "live: speech_end is the endpointer's retro-dated end of speech on the microphone's own capture timestamps, mapped onto the process clock; endpoint is when its decision reached the pipeline; playout_queued is when the first reply sample was written to the output ring, playout_start when the device reports it leaves the speaker (its playback timestamp), so `device` is output buffering and device latency".into();
    let writer = ResultsWriter::with_prefix(&args.session.output_dir, "live", results)?;
    let telemetry = crate::common::turn_telemetry(args.metrics_addr.as_deref())?;
    let rt = crate::common::session_runtime()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (mic_tx, mic_rx) = mpsc::channel::<SourceEvent>(256);
    let (listener_thread, speaker) = devices.listen(listener, mic_tx, stop.clone())?;
    let opts = SessionOptions {
        idle_timeout: args.idle_timeout.map(Duration::from_secs),
        ..SessionOptions::default()
    };
    let mut session = Session::new(&pipeline, &speaker, mic_rx, opts, TurnMeta::live)
        .with_progress(print_progress);
    if let Some(rule) = cues {
        session = session.with_cues(rule);
    }
    let mut log = TurnLog { writer, telemetry };
    let outcome = rt.block_on(converse(
        &mut session,
        &mut log,
        args.max_turns,
        stack.crash_watch(),
    ));
    // What the session still owes the results: a turn already shown, the speculation
    // discarded since the last record.
    for rec in rt.block_on(session.close()) {
        log.push(rec)?;
    }
    drop(session);
    stop.store(true, Ordering::Release);
    let (dropped, xruns) = listener_thread.join().unwrap_or((0, 0));
    finish(log.writer, outcome, dropped, xruns)
}
