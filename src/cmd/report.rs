//! `voxlat report results.json`: re-renders a replay's HTML report and tables.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use voxlat_pipeline::results::ReplayResults;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A replay results file (replay-*.json).
    pub results: PathBuf,
    /// Where to write the HTML. [default: beside the results, .html]
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    let r = ReplayResults::load(&args.results)?;
    let out = args
        .output
        .unwrap_or_else(|| args.results.with_extension("html"));
    voxlat_core::fsio::write_atomic(&out, crate::report::html::render(&r).as_bytes())?;
    if r.levels.is_empty() {
        crate::report::print_report(&r);
    } else {
        crate::report::print_levels(&r);
    }
    println!("Report: {}", out.display());
    Ok(ExitCode::SUCCESS)
}
