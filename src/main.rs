//! The `voxlat` command line: one subcommand per user task. Each subcommand lives in its own
//! module under `cmd/`; this file only parses and dispatches.

mod cmd;
mod common;
mod embedded;
mod report;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "voxlat",
    version,
    about = "A real-time voice agent pipeline that measures itself"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmark an OpenAI-compatible streaming endpoint: TTFT, TPOT, ITL and E2E per cell.
    BenchLlm(Box<cmd::bench_llm::BenchLlmArgs>),
    /// Compare two bench-llm results files: deltas per metric and percentile with significance, and an HTML report.
    Compare(cmd::compare::CompareArgs),
    /// Live assistant: talk through the microphone, hear the reply, see where each turn's delay went.
    Run(Box<cmd::run::RunArgs>),
    /// List audio hosts, input and output devices and their supported configurations.
    Devices(cmd::devices::DevicesArgs),
    /// Replay scenario utterances through the full pipeline and report the latency breakdown.
    Replay(Box<cmd::replay::ReplayArgs>),
    /// Time each voice stage in isolation (VAD, Whisper, Piper) and under thread contention.
    BenchStages(cmd::bench_stages::BenchStagesArgs),
    /// Measure end-of-turn policies on turns with cut-off truth: cut-off rate against latency, eot-bench's way.
    EvalTurns(cmd::eval_turns::EvalTurnsArgs),
    /// Time live turns from a recording of the loopback device and compare with what `voxlat run` reported.
    CheckLoopback(cmd::check_loopback::CheckLoopbackArgs),
    /// Print the speech bounds of WAV files, for scenario files.
    Annotate(cmd::annotate::AnnotateArgs),
    /// Re-render the HTML report (and print the tables) of a replay results file.
    Report(cmd::report::ReportArgs),
    /// Transcribe WAV files with Whisper and print each transcript with its timing.
    Transcribe(cmd::transcribe::TranscribeArgs),
    /// Print the endpointer's speech segments and decisions for WAV files.
    Vad(cmd::vad::VadArgs),
    /// Speak text into a WAV file with Piper and print the time to first audio and RTF.
    Speak(cmd::speak::SpeakArgs),
    /// Fetch, list and verify the models and native libraries (Whisper, Piper, ONNX Runtime, Gemma, Silero VAD).
    Models(cmd::models::ModelsArgs),
    /// Run the embedded OpenAI-compatible LLM server (llama.cpp) with server-side timings; `voxlat serve --help` for its flags.
    Serve(cmd::serve::ServeArgs),
    /// Serve the embedded Whisper and Piper over OpenAI's speech API (transcriptions and speech), for --asr-url/--tts-url and other clients.
    ServeAudio(cmd::serve_audio::ServeAudioArgs),
}

fn main() -> ExitCode {
    voxlat_core::clock::init();
    let _telemetry = common::init_tracing();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::BenchLlm(args) => cmd::bench_llm::run(*args),
        Command::Compare(args) => cmd::compare::run(args),
        Command::Replay(args) => cmd::replay::run(*args),
        Command::Run(args) => cmd::run::run(*args),
        Command::Devices(args) => cmd::devices::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Annotate(args) => cmd::annotate::run(args),
        Command::EvalTurns(args) => cmd::eval_turns::run(args),
        Command::CheckLoopback(args) => cmd::check_loopback::run(args),
        Command::BenchStages(args) => cmd::bench_stages::run(args),
        Command::Transcribe(args) => cmd::transcribe::run(args),
        Command::Vad(args) => cmd::vad::run(args),
        Command::Speak(args) => cmd::speak::run(args),
        Command::Models(args) => cmd::models::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::ServeAudio(args) => cmd::serve_audio::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if let Some(advice) = common::advice::for_error(&e) {
                eprintln!("hint: {advice}");
            }
            ExitCode::from(2)
        }
    }
}
