//! `voxlat annotate WAV…`: the energy-based speech bounds to write into scenario files.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Prints where speech starts and ends in each WAV (first and last 10 ms frame within 40 dB
/// of the loudest), as `speech_end_ms` lines for scenario files. A file whose sound is too
/// quiet (below −50 dBFS), too short (under 100 ms) or too steady (noise) to be speech is
/// reported as having none, and the exit status is 1. Meaningful on clean recordings only;
/// check noisy ones by ear.
#[derive(Args, Debug)]
pub struct AnnotateArgs {
    #[arg(required = true, value_name = "WAV")]
    pub files: Vec<PathBuf>,
}

pub fn run(args: AnnotateArgs) -> Result<ExitCode> {
    let mut failed = false;
    for f in &args.files {
        match voxlat_pipeline::scenario::annotate(f) {
            Ok(a) => println!(
                "# {}: speech {:.0}–{:.0} ms\nspeech_end_ms = {:.0}",
                f.display(),
                a.start_ms,
                a.end_ms,
                a.end_ms
            ),
            Err(e) => {
                let advice = match &e {
                    voxlat_pipeline::scenario::AnnotateError::Wav(w) => {
                        crate::common::wav_advice(w)
                    }
                    _ => "",
                };
                eprintln!("error: {e}{advice}");
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
