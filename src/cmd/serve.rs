//! `voxlat serve`: runs the embedded LLM server, `voxlat-server`, a separate binary so that
//! llama.cpp's ggml never shares a process with whisper.cpp's (their symbols clash).

use crate::embedded::server_builds;
use anyhow::{Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::process::ExitCode;

/// Serve a GGUF model over an OpenAI-compatible API with llama.cpp (POST /v1/chat/completions,
/// GET /v1/models, GET /health), with server-side queue/prefill/decode timings in each reply.
/// Every argument is passed to `voxlat-server`; `voxlat serve --help` lists them.
#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct ServeArgs {
    /// Arguments for voxlat-server, e.g. --port 8080 --model gemma-3-270m --threads 2.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<OsString>,
}

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    // The best build this CPU runs; exec leaves no way back, so a variant that fails is
    // reported by the server itself (VOXLAT_SERVER_BUILD=portable pins the other).
    let build = server_builds()?.remove(0);
    eprintln!("voxlat-server build: {}", build.name);
    let bin = build.path;
    let mut cmd = std::process::Command::new(&bin);
    cmd.args(&args.args);
    #[cfg(unix)]
    {
        // Replace this process: signals, exit status and the pid are then the server's own.
        use std::os::unix::process::CommandExt;
        let err = cmd.exec();
        Err(err).with_context(|| format!("cannot run {}", bin.display()))
    }
    #[cfg(not(unix))]
    {
        let status = cmd
            .status()
            .with_context(|| format!("cannot run {}", bin.display()))?;
        Ok(ExitCode::from(
            status.code().unwrap_or(1).clamp(0, 255) as u8
        ))
    }
}
