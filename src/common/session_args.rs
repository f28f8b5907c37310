//! The flags `run` and `replay` share about where a session's results go and how its ASR
//! recovers from a runaway decode.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct SessionArgs {
    /// Directory for results (JSON, CSV, HTML) and the embedded server's log.
    #[arg(long, default_value = "results")]
    pub output_dir: PathBuf,
    /// How a Whisper decode that ran away into a loop is decoded again: full-window,
    /// wider-window (twice the fitted window, then the whole one), temperature or off.
    #[arg(long, value_name = "HOW", default_value = "wider-window", value_parser = super::parse_fallback)]
    pub asr_fallback: voxlat_asr::engine::Fallback,
    /// Write each reply as a WAV into this directory.
    #[arg(long, value_name = "DIR")]
    pub save_replies: Option<PathBuf>,
}

impl SessionArgs {
    /// Checks the directories before a server starts or a model loads: an unwritable or full
    /// one must not be discovered after the measuring.
    pub fn ensure_writable(&self) -> anyhow::Result<()> {
        voxlat_core::fsio::ensure_writable_dir(&self.output_dir)?;
        if let Some(d) = &self.save_replies {
            voxlat_core::fsio::ensure_writable_dir(d)?;
        }
        Ok(())
    }
}
