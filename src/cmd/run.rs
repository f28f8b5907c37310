//! `voxlat run`: the live assistant. Microphone → endpointer → Whisper → LLM → Piper →
//! speaker, one line per turn with the breakdown of where the delay went, barge-in, and the
//! session's results in replay's schema.

use crate::common::remote::RemoteStageArgs;
use crate::common::reply::ReplyArgs;
use crate::common::stack::{Stack, StackSpec};
use crate::common::turn::TurnArgs;
use crate::common::{shutdown_signal, telemetry_outcome};
use crate::report::{
    live::{print_progress, turn_line},
    print_report,
};
use anyhow::{Context, Result};
use clap::Args;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use voxlat_audio::device::{self, Direction};
use voxlat_pipeline::live::{self, ListenerConfig, Speaker};
use voxlat_pipeline::results::{ReplayResults, ResultsWriter};
use voxlat_pipeline::setup::{ClockOffset, InputInfo, LiveSetup};
use voxlat_pipeline::{
    PipelineConfig, Session, SessionError, SessionOptions, SourceEvent, TurnMeta, TurnRecord,
};
use voxlat_vad::EndpointerConfig;

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
    let mut endpointer = file.endpointer.clone().unwrap_or_default();
    if let Some(h) = args.hangover {
        endpointer.hangover_ms = h;
    }
    if let Some(p) = args.provisional {
        endpointer.provisional_ms = p;
        endpointer.tail_ms = endpointer.tail_ms.min(p.max(1));
    }
    if let Some(m) = args.vad_mode {
        endpointer.mode = m;
    }
    endpointer.validate()?;
    args.turn
        .apply(&mut endpointer.turn, endpointer.hangover_ms)?;
    let mut listener = ListenerConfig {
        endpointer: endpointer.clone(),
        barge_in: !args.no_barge_in && file.barge_in.unwrap_or(true),
        barge_in_ratio: args
            .barge_in_ratio
            .or(file.barge_in_ratio)
            .unwrap_or(ListenerConfig::default().barge_in_ratio),
        echo_tail_ms: file
            .echo_tail_ms
            .unwrap_or(ListenerConfig::default().echo_tail_ms),
        ..ListenerConfig::default()
    };
    anyhow::ensure!(
        listener.barge_in_ratio.is_finite() && listener.barge_in_ratio > 0.0,
        "--barge-in-ratio must be a positive number (2 = the user must be twice as loud as the reply's echo)"
    );

    // Devices first: a wrong name should fail before minutes of model loading.
    let host = device::host(args.host.as_deref())?;
    let input = device::pick(&host, Direction::Input, args.input.as_deref())?;
    let output = device::pick(&host, Direction::Output, args.output.as_deref())?;
    // Both streams open now, for the same reason; what the microphone hears while the
    // models load is discarded before listening.
    let period = |rate: u32| (args.period_ms > 0).then(|| (rate * args.period_ms / 1000).max(16));
    let out_rate = device::default_rate(&output, Direction::Output).unwrap_or(48_000);
    let in_rate = device::default_rate(&input, Direction::Input).unwrap_or(48_000);
    use voxlat_audio::{capture::Capture, playback::Playback};
    // A device that refuses the period still works with its own.
    let playback = Playback::open(&output, period(out_rate)).or_else(|e| {
        eprintln!("warning: {e}; using the device's default period");
        Playback::open(&output, None)
    })?;
    let speaker = Speaker::start(playback, listener.echo_tail_ms)?;
    let capture =
        Capture::open(&input, voxlat_audio::PIPELINE_RATE, period(in_rate)).or_else(|e| {
            eprintln!("warning: {e}; using the device's default period");
            Capture::open(&input, voxlat_audio::PIPELINE_RATE, None)
        })?;

    let defaults = PipelineConfig::default();
    let cfg = PipelineConfig {
        endpointer: endpointer.clone(),
        speculative_asr: endpointer.provisional_ms > 0,
        speculative_reply: args.reply.speculative_reply(),
        whole_turn_asr: !args.reply.part_asr,
        turn_cues: args.turn.cues(),
        first_chunk_max_chars: args.reply.first_chunk_max_chars(),
        history_cap: usize::from(args.reply.history),
        fast: false,
        lead_silence_ms: 0,
        max_tokens: args.max_tokens.or(file.max_tokens).unwrap_or(48),
        system_prompt: args
            .system_prompt
            .clone()
            .or(file.system_prompt.clone())
            .unwrap_or(defaults.system_prompt.clone()),
        save_replies: args.session.save_replies.clone(),
        ..defaults
    };
    anyhow::ensure!(
        !cfg.turn_cues || cfg.speculative_asr,
        "--turn-model cues reads the speculative transcript at each provisional end: give --provisional above 0, or choose another --turn-model"
    );
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
    let cfg = &stack.cfg;
    let pipeline = stack.pipeline(1)?;
    listener.turn_model = stack.turn_model.clone();
    // One speaker for the whole session: the `cues` rule learns their pauses as they talk.
    let cues = cfg.turn_cues.then(|| voxlat_pipeline::cues::CueRule {
        base_ms: f64::from(cfg.endpointer.hangover_ms),
        hold: voxlat_vad::StopHold::default(),
        speaker: voxlat_pipeline::cues::SpeakerPauses::default(),
    });
    listener.stop_hold = cues.as_ref().map(|c| c.hold.clone());

    let (monotonic_minus_process_ns, error_ns) = voxlat_audio::clockmap::monotonic_offset();
    let mut stages = stack.stages.clone();
    stages.live = Some(LiveSetup {
        clock: ClockOffset {
            monotonic_minus_process_ns: i64::try_from(monotonic_minus_process_ns)
                .unwrap_or(i64::MIN),
            error_ns,
        },
        host: host.id().name().to_string(),
        input: InputInfo {
            device: capture.device.clone(),
            rate: capture.rate,
            channels: capture.channels,
            clock_error_ns: capture.clock.error_ns,
            raised: capture.health().raised(),
        },
        output: speaker.info.clone(),
        listener: listener.clone(),
        input_dropped_samples: None,
        input_xruns: None,
    });
    let mut results = ReplayResults::new(pipeline.cfg.clone(), stack.budget, stages);
    results.llm_server_threads = stack.server_threads(1);
    results.llm_server_build = stack.server_build();
    results.timing_note = "live: speech_end is the endpointer's retro-dated end of speech on the microphone's own capture timestamps, mapped onto the process clock; endpoint is when its decision reached the pipeline; playout_queued is when the first reply sample was written to the output ring, playout_start when the device reports it leaves the speaker (its playback timestamp), so `device` is output buffering and device latency".into();
    let mut writer = ResultsWriter::with_prefix(&args.session.output_dir, "live", results)?;
    let telemetry = voxlat_telemetry::TurnTelemetry::start(
        args.metrics_addr.as_deref().map(|a| ("--metrics-addr", a)),
    )?;
    if let Some(url) = telemetry.metrics_url() {
        eprintln!("metrics on {url}");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (mic_tx, mic_rx) = mpsc::channel::<SourceEvent>(256);
    let started = Instant::now();
    let mut capture = capture;
    while !capture.health().started() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    anyhow::ensure!(
        capture.health().started(),
        "the input device {} delivered no audio within 5 s",
        capture.device
    );
    capture.discard();
    let listener_thread = live::spawn_listener(
        capture,
        listener,
        speaker.echo.clone(),
        mic_tx,
        stop.clone(),
    )?;
    eprintln!(
        "listening on {} → {} (Ctrl-C to stop)",
        device::device_id(&input),
        speaker.info.device
    );
    let opts = SessionOptions {
        idle_timeout: args.idle_timeout.map(Duration::from_secs),
        ..SessionOptions::default()
    };
    let mut session = Session::new(&pipeline, &speaker, mic_rx, opts, TurnMeta::live)
        .with_progress(print_progress);
    if let Some(rule) = cues {
        session = session.with_cues(rule);
    }
    let max_turns = args.max_turns;
    let mut log_turn = |rec: TurnRecord| -> Result<()> {
        println!("{}", turn_line(&rec));
        telemetry.record_turn(
            &rec.snapshot(),
            telemetry_outcome(rec.outcome),
            rec.error.as_deref(),
        );
        writer.push(rec)?;
        Ok(())
    };
    let watch = stack.crash_watch();
    let outcome: Result<bool> = rt.block_on(async {
        let mut signal = std::pin::pin!(shutdown_signal());
        let mut crashed = std::pin::pin!(watch.crashed());
        let mut n = 0u32;
        loop {
            let next = tokio::select! {
                _ = &mut signal => return Ok(true),
                why = &mut crashed => anyhow::bail!("{why}"),
                next = session.next_turn() => next,
            };
            let rec = match next {
                Ok(Some(rec)) => rec,
                Ok(None) => anyhow::bail!("the microphone thread stopped"),
                Err(e @ SessionError::Idle { .. }) => anyhow::bail!("{e} (--idle-timeout)"),
                Err(e) => return Err(e.into()),
            };
            n += u32::from(rec.outcome.ran_to_end());
            log_turn(rec)?;
            if max_turns.is_some_and(|m| n >= m) {
                return Ok(false);
            }
        }
    });
    // What the session still owes the results: a turn already shown, the speculation
    // discarded since the last record.
    for rec in rt.block_on(session.close()) {
        log_turn(rec)?;
    }
    drop(session);
    stop.store(true, Ordering::Release);
    let (dropped, xruns) = listener_thread.join().unwrap_or((0, 0));
    let interrupted = match outcome {
        Ok(i) => i,
        Err(e) => {
            writer.finish(true)?;
            return Err(e.context(format!("results so far: {}", writer.json.display())));
        }
    };
    if let Some(live) = writer.results.stages.live.as_mut() {
        live.input_dropped_samples = Some(dropped);
        live.input_xruns = Some(xruns);
    }
    writer.finish(interrupted)?;
    let html = writer.json.with_extension("html");
    voxlat_core::fsio::write_atomic(
        &html,
        crate::report::html::render(&writer.results).as_bytes(),
    )?;
    print_report(&writer.results);
    let a = &writer.results.aggregate;
    if a.interrupted > 0 {
        println!(
            "Interrupted turns (barge-in, left out of the figures above): {}{}",
            a.interrupted,
            a.barge_in_reaction
                .as_ref()
                .map(|s| format!(
                    "; reaction (speech onset → playback stopped) p50 {:.0} ms, max {:.0} ms",
                    s.p50, s.max
                ))
                .unwrap_or_default()
        );
    }
    println!(
        "Results: {} (CSV {}, report {})",
        writer.json.display(),
        writer.csv.display(),
        html.display()
    );
    Ok(ExitCode::SUCCESS)
}
