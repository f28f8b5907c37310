//! `voxlat speak "TEXT" -o out.wav`: Piper TTS from the command line, like Piper's own CLI, with
//! the figures that matter for a voice agent: time to first audio, real-time factor and
//! session load time.
//!
//! The text goes through the same sentence chunker as a live reply, so the time to first audio
//! printed here is the one a listener would wait for.

use crate::common::setup::Setup;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use voxlat_core::{EventKind, RequestId, Timeline};
use voxlat_tts::chunker::{Chunker, ChunkerConfig};
use voxlat_tts::piper::{Voice, VoiceOptions};
use voxlat_tts::stream::TtsStream;

/// Speaks TEXT (or standard input when TEXT is absent) into a 16-bit mono WAV file.
#[derive(Args, Debug)]
pub struct SpeakArgs {
    /// What to say. Read from standard input when absent.
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// The WAV file to write (replaced atomically).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// A Piper voice (.onnx, with its .onnx.json beside it). [default: piper-en_US-joe-medium
    /// from the model cache]
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// The ONNX Runtime library. [default: ORT_DYLIB_PATH, else the model cache]
    #[arg(long, value_name = "FILE")]
    pub runtime: Option<PathBuf>,
    /// ONNX Runtime intra-op threads. [default: the TTS share of the thread budget]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

pub fn run(args: SpeakArgs) -> Result<ExitCode> {
    let text = match args.text {
        Some(t) => t,
        None => {
            let mut t = String::new();
            std::io::stdin()
                .read_to_string(&mut t)
                .context("reading the text from standard input")?;
            t
        }
    };
    if text.trim().is_empty() {
        bail!("nothing to say: the text is empty. Pass TEXT, or pipe text on standard input");
    }
    // Fail on an unwritable destination before spending time on synthesis.
    voxlat_core::fsio::ensure_writable_dir(output_dir(&args.output))?;

    let setup = Setup::open()?;
    let model = match args.model {
        Some(p) => p,
        None => {
            // Piper reads the voice's settings from beside it: both must be fetched.
            setup.model(voxlat_models::known::PIPER_VOICE_CONFIG)?;
            setup.model(voxlat_models::known::PIPER_VOICE)?
        }
    };
    let threads = args.threads.unwrap_or(setup.budget.tts).max(1);
    let options = VoiceOptions {
        intra_threads: threads,
        runtime: args.runtime,
        ..VoiceOptions::default()
    };
    let silence = options.sentence_silence;
    let mut voice = Voice::load(&model, options)?;
    let load = voice.load_times();
    let rate = voice.sample_rate();

    let chunks = Chunker::split(&text, ChunkerConfig::default());
    let timeline = Arc::new(Timeline::new(RequestId::new()));
    let mut tts = TtsStream::new(&mut voice, timeline.clone());
    let mut samples: Vec<f32> = Vec::new();
    let gap = (silence.as_secs_f64() * f64::from(rate)) as usize;
    let mut first_spoken: Option<String> = None;
    for chunk in &chunks {
        let audio = tts.speak(chunk)?;
        if let Some(reason) = audio.skipped {
            eprintln!("skipped chunk {:?}: {reason}", audio.text);
            continue;
        }
        if !samples.is_empty() {
            samples.resize(samples.len() + gap, 0.0);
        }
        samples.extend_from_slice(&audio.samples);
        first_spoken.get_or_insert(audio.text);
    }
    let summary = tts.finish();
    let Some(first_spoken) = first_spoken else {
        bail!(
            "nothing to say in {:?}: it has no letters or digits (only punctuation, symbols or \
             emoji). No file was written",
            text.trim()
        );
    };

    voxlat_audio::wav::write(&args.output, &samples, rate)?;

    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let ttfa = timeline
        .snapshot()
        .span_ns(EventKind::FirstChunk, EventKind::TtsFirstAudio)
        .map_or(f64::NAN, |ns| ns as f64 / 1e6);
    let audio_s = samples.len() as f64 / f64::from(rate);
    println!(
        "wrote {}: {audio_s:.2} s of audio at {rate} Hz, {} chunk(s){}",
        args.output.display(),
        summary.chunks - summary.skipped,
        if summary.skipped > 0 {
            format!(", {} skipped", summary.skipped)
        } else {
            String::new()
        }
    );
    println!(
        "  session load         {:>7.0} ms  (ONNX Runtime library {:.0} ms, {threads} intra-op thread(s))",
        ms(load.session),
        ms(load.runtime)
    );
    println!("  time to first audio  {ttfa:>7.0} ms  (first chunk: {first_spoken:?})");
    println!(
        "  synthesis            {:>7.0} ms  RTF {:.3}",
        ms(summary.compute),
        summary.real_time_factor()
    );
    Ok(ExitCode::SUCCESS)
}

fn output_dir(output: &Path) -> &Path {
    match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}
