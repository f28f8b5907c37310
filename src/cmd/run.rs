//! `voxlat run`: the live assistant. Microphone → endpointer → Whisper → LLM → Piper →
//! speaker, one line per turn with the breakdown of where the delay went, barge-in, and the
//! session's results in replay's schema.

use super::replay::{attach_llm, load_stages, print_report, telemetry_outcome};
use anyhow::{Context, Result};
use clap::Args;
use serde::Deserialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};
use voxlat_audio::device::{self, Direction};
use voxlat_core::threads::ThreadBudget;
use voxlat_core::{EventKind, Nanos, RequestId, Timeline};
use voxlat_llm::Message;
use voxlat_pipeline::live::{self, ListenerConfig, MicEvent, Speaker};
use voxlat_pipeline::record::BusySpan;
use voxlat_pipeline::results::{ReplayResults, ResultsWriter};
use voxlat_pipeline::workers::AsrResult;
use voxlat_pipeline::{Heard, Output, Pipeline, PipelineConfig, Progress, TurnOutcome, TurnRecord};
use voxlat_vad::{EndpointerConfig, VadEvent};

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
    /// Stop after this many turns (headless use, tests).
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Serve Prometheus metrics of the turns (segment histograms, turns by outcome) at
    /// http://HOST:PORT/metrics, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<String>,
    /// Give up if no turn started within this many seconds (headless use).
    #[arg(long, value_name = "SECONDS")]
    pub idle_timeout: Option<u64>,
    /// Directory for results and the embedded server's log.
    #[arg(long, default_value = "results")]
    pub output_dir: PathBuf,
    /// Write each reply as a WAV into this directory.
    #[arg(long, value_name = "DIR")]
    pub save_replies: Option<PathBuf>,
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

struct Turn<'a> {
    fut: Pin<Box<dyn std::future::Future<Output = (TurnRecord, Vec<Message>)> + 'a>>,
    cancel: watch::Sender<Option<Nanos>>,
}

struct Endpointed {
    speech_start: Nanos,
    speech_end: Nanos,
    received: Nanos,
    asr: oneshot::Receiver<AsrResult>,
    speculative: bool,
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
    let listener = ListenerConfig {
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

    let budget = ThreadBudget::detect();
    let store = voxlat_models::Store::open_default(None)?;
    let whisper = store.ready_path("whisper-tiny.en", "ggml-tiny.en.bin")?;
    let voice = match args.voice.clone().or(file.voice.clone()) {
        Some(v) => {
            anyhow::ensure!(v.exists(), "voice {} not found", v.display());
            v
        }
        None => store.ready_path("piper-en_US-joe-medium", "en_US-joe-medium.onnx")?,
    };
    let runtime = store.ready_path("onnxruntime", "libonnxruntime.so.1.32.0")?;
    let defaults = PipelineConfig::default();
    let mut cfg = PipelineConfig {
        endpointer: endpointer.clone(),
        speculative_asr: endpointer.provisional_ms > 0,
        fast: false,
        lead_silence_ms: 0,
        max_tokens: args.max_tokens.or(file.max_tokens).unwrap_or(48),
        system_prompt: args
            .system_prompt
            .clone()
            .or(file.system_prompt.clone())
            .unwrap_or(defaults.system_prompt.clone()),
        save_replies: args.save_replies.clone(),
        ..defaults
    };
    // Before the server starts or a model loads, as replay does.
    voxlat_core::fsio::ensure_writable_dir(&args.output_dir)?;
    if let Some(d) = &args.save_replies {
        voxlat_core::fsio::ensure_writable_dir(d)?;
    }
    let (endpoint, _server, _) = attach_llm(
        &mut cfg,
        &store,
        args.llm_url.as_deref(),
        args.model.as_deref(),
        &args.output_dir,
        &budget,
    )?;
    let llm_url = endpoint.base_url.value.clone();
    let (asr, tts, client) = load_stages(
        &budget,
        &whisper,
        &voice,
        runtime.clone(),
        endpoint,
        Duration::from_secs(60),
    )?;

    let input_info = serde_json::json!({
        "device": capture.device,
        "rate": capture.rate,
        "channels": capture.channels,
        "clock_error_ns": capture.clock.error_ns,
        "raised": capture.raised(),
    });
    let (mono, mono_err) = voxlat_audio::clockmap::monotonic_offset();
    let stages = serde_json::json!({
        "clock": { "monotonic_minus_process_ns": i64::try_from(mono).unwrap_or(i64::MIN), "error_ns": mono_err },
        "asr": whisper.display().to_string(),
        "tts": voice.display().to_string(),
        "onnxruntime": runtime.display().to_string(),
        "llm": llm_url,
        "host": host.id().name(),
        "input": input_info,
        "output": speaker.info,
        "listener": listener,
    });
    let mut results = ReplayResults::new(cfg.clone(), budget, stages);
    results.timing_note = "live: speech_end is the endpointer's retro-dated end of speech on the microphone's own capture timestamps, mapped onto the process clock; endpoint is when its decision reached the pipeline; playout_queued is when the first reply sample was written to the output ring, playout_start when the device reports it leaves the speaker (its playback timestamp), so `device` is output buffering and device latency".into();
    let mut writer = ResultsWriter::with_prefix(&args.output_dir, "live", results)?;
    let telemetry = voxlat_telemetry::TurnTelemetry::start(args.metrics_addr.as_deref())?;
    if let Some(url) = telemetry.metrics_url() {
        eprintln!("metrics on {url}");
    }
    let pipeline = Pipeline::new(cfg, asr, tts, client);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (mic_tx, mut mic_rx) = mpsc::channel::<MicEvent>(256);
    let started = Instant::now();
    let mut capture = capture;
    while !capture.started() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    anyhow::ensure!(
        capture.started(),
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
    let system_prompt = pipeline.cfg.system_prompt.clone();
    let output = Output::Device(speaker.clone());
    let idle = args.idle_timeout.map(Duration::from_secs);
    let max_turns = args.max_turns;
    let outcome: Result<bool> = rt.block_on(async {
        let mut signal = std::pin::pin!(super::bench_llm::shutdown_signal());
        let mut history: Vec<Message> = Vec::new();
        let mut speculative: Option<oneshot::Receiver<AsrResult>> = None;
        let mut turn: Option<Turn> = None;
        let mut waiting: Option<Endpointed> = None;
        let mut n = 0u32;
        let mut last_activity = Instant::now();
        loop {
            if turn.is_none() {
                if let Some(e) = waiting.take() {
                    n += 1;
                    turn = Some(start_turn(
                        &pipeline,
                        &output,
                        &system_prompt,
                        n,
                        e,
                        std::mem::take(&mut history),
                    ));
                }
            }
            let idle_left = idle.map(|d| d.saturating_sub(last_activity.elapsed()));
            tokio::select! {
                _ = &mut signal => return Ok(true),
                _ = tokio::time::sleep(idle_left.unwrap_or(Duration::from_secs(3600))), if idle_left.is_some() && turn.is_none() => {
                    anyhow::bail!("no speech heard for {} s (--idle-timeout)", idle.unwrap_or_default().as_secs());
                }
                r = async { turn.as_mut().map(|t| t.fut.as_mut()).expect("guarded").await }, if turn.is_some() => {
                    let (rec, h) = r;
                    history = h;
                    turn = None;
                    last_activity = Instant::now();
                    println!("{}", summary(&rec));
                    telemetry.record_turn(&rec.snapshot(), telemetry_outcome(rec.outcome), rec.error.as_deref());
                    writer.push(rec)?;
                    if max_turns.is_some_and(|m| n >= m) && waiting.is_none() {
                        return Ok(false);
                    }
                }
                ev = mic_rx.recv() => {
                    let Some(ev) = ev else { anyhow::bail!("the microphone thread stopped") };
                    match ev {
                        MicEvent::Failed(e) => anyhow::bail!("{e}"),
                        MicEvent::BargeIn { onset } => {
                            if let Some(t) = &turn {
                                let _ = t.cancel.send(Some(onset));
                            }
                        }
                        MicEvent::Vad { ev, received } => match ev {
                            VadEvent::SpeechStart { at } => {
                                last_activity = Instant::now();
                                // Speaking again before the reply is heard: the user was not
                                // done, so the turn in flight gives way.
                                if let Some(t) = &turn {
                                    if t.cancel.borrow().is_none() {
                                        let _ = t.cancel.send(Some(at));
                                    }
                                }
                            }
                            VadEvent::Provisional { audio, .. } => {
                                if pipeline.cfg.speculative_asr {
                                    speculative = Some(pipeline.transcribe(audio));
                                }
                            }
                            VadEvent::Retracted { .. } => speculative = None,
                            VadEvent::Endpoint { speech_start, speech_end, audio, confirms_provisional, .. } => {
                                last_activity = Instant::now();
                                let spec = speculative.take().filter(|_| confirms_provisional);
                                let speculative = spec.is_some();
                                let asr = spec.unwrap_or_else(|| pipeline.transcribe(audio));
                                waiting = Some(Endpointed { speech_start, speech_end, received, asr, speculative });
                            }
                        },
                    }
                }
            }
        }
    });
    stop.store(true, Ordering::Release);
    let (dropped, xruns) = listener_thread.join().unwrap_or((0, 0));
    let interrupted = match outcome {
        Ok(i) => i,
        Err(e) => {
            writer.finish(true)?;
            return Err(e.context(format!("results so far: {}", writer.json.display())));
        }
    };
    if let Some(s) = writer.results.stages.as_object_mut() {
        s.insert("input_dropped_samples".into(), dropped.into());
        s.insert("input_xruns".into(), xruns.into());
    }
    writer.finish(interrupted)?;
    let html = writer.json.with_extension("html");
    voxlat_core::fsio::write_atomic(
        &html,
        crate::report_html::render(&writer.results).as_bytes(),
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

fn start_turn<'a>(
    pipeline: &'a Pipeline,
    output: &'a Output,
    system_prompt: &'a str,
    n: u32,
    e: Endpointed,
    mut history: Vec<Message>,
) -> Turn<'a> {
    let (cancel, cancel_rx) = watch::channel(None);
    let fut = Box::pin(async move {
        let tl = Arc::new(Timeline::new(RequestId::new()));
        tl.mark_at(EventKind::SpeechStart, e.speech_start);
        tl.mark_at(EventKind::SpeechEnd, e.speech_end);
        tl.mark_at(EventKind::Endpoint, e.received);
        let mut rec = TurnRecord::blank("live", &format!("turn-{n}"), &tl.id().to_string(), "");
        rec.speculative_asr = e.speculative;
        rec.busy.push(BusySpan {
            stage: "endpointer".into(),
            from: e.speech_end,
            to: e.received,
        });
        let mut out = std::io::stdout();
        let _ = write!(out, "[{n}] ");
        let _ = out.flush();
        let mut progress = |p: Progress<'_>| {
            let mut out = std::io::stdout();
            let _ = match p {
                Progress::Transcript(t) => write!(out, "{:?} → ", t.trim()),
                Progress::Reply(t) => write!(out, "{t}"),
            };
            let _ = out.flush();
        };
        let heard = Heard {
            asr: e.asr,
            endpoint: e.received,
            expect_keywords: &[],
        };
        if let Err(err) = pipeline
            .respond(
                heard,
                &tl,
                &mut history,
                system_prompt,
                &mut rec,
                output,
                Some(cancel_rx),
                &mut progress,
            )
            .await
        {
            rec.outcome = TurnOutcome::Error;
            rec.error = Some(err);
        }
        rec.events = tl.snapshot().events;
        rec.wer = None;
        rec.compute_breakdown();
        (rec, history)
    });
    Turn { fut, cancel }
}

/// The rest of a turn's line: the breakdown, dominant stage starred, or what went wrong.
fn summary(rec: &TurnRecord) -> String {
    if let Some(i) = &rec.interrupted {
        return format!(
            " [interrupted during {}{}{}]",
            i.during,
            i.reaction_ms
                .map(|r| format!(": playback stopped {r:.0} ms after you spoke"))
                .unwrap_or_default(),
            if i.llm_aborted {
                ", LLM request aborted"
            } else {
                ""
            }
        );
    }
    if let Some(e) = &rec.error {
        return format!(" [error: {e}]");
    }
    let Some(b) = &rec.breakdown else {
        return format!(" [{:?}]", rec.outcome).to_lowercase();
    };
    let dominant = b.dominant().map(|d| d.name.clone());
    let parts: Vec<String> = b
        .segments
        .iter()
        .filter(|s| s.name != "llm_thinking" || s.ns != 0)
        .map(|s| {
            format!(
                "{} {:.0}{}",
                s.name,
                s.ns as f64 / 1e6,
                if Some(&s.name) == dominant.as_ref() {
                    "*"
                } else {
                    ""
                }
            )
        })
        .collect();
    format!(
        "  |  {} = {:.0} ms{}",
        parts.join(" · "),
        b.total_ns as f64 / 1e6,
        match (rec.underruns, rec.device_xruns) {
            (0, 0) => String::new(),
            (u, x) => format!(
                " ({u} underruns between chunks, {:.0} ms; {x} device xruns)",
                rec.underrun_ms
            ),
        }
    )
}
