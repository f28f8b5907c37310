//! `voxlat devices`: audio hosts, their input and output devices and what each supports.

use anyhow::Result;
use clap::Args;
use std::process::ExitCode;

/// Lists audio hosts, their input and output devices (default ones marked) and the
/// configurations each supports. Pass an id or part of a name to `voxlat run --input/--output`.
#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DevicesArgs) -> Result<ExitCode> {
    let hosts = voxlat_audio::device::list();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&hosts)?);
        return Ok(ExitCode::SUCCESS);
    }
    for h in &hosts {
        println!(
            "host {}{}",
            h.host,
            if h.default { " (default)" } else { "" }
        );
        if let Some(e) = &h.error {
            println!("  error: {e}");
        }
        for d in &h.devices {
            let mut marks = Vec::new();
            if d.default_input {
                marks.push("default input");
            }
            if d.default_output {
                marks.push("default output");
            }
            println!(
                "  {}  \"{}\"{}",
                d.id,
                d.name,
                if marks.is_empty() {
                    String::new()
                } else {
                    format!("  [{}]", marks.join(", "))
                }
            );
            for (kind, ranges) in [("in ", &d.inputs), ("out", &d.outputs)] {
                if let Some(line) = summarize(ranges) {
                    println!("      {kind} {line}");
                }
            }
        }
    }
    if hosts.iter().all(|h| h.devices.is_empty()) {
        println!("No audio devices found. Without a sound card, see README.md (\"Live mode without a sound card\") for a virtual one.");
    }
    Ok(ExitCode::SUCCESS)
}

/// One line for a direction's configurations: channel and rate spans, sample formats.
fn summarize(ranges: &[voxlat_audio::device::ConfigRange]) -> Option<String> {
    let ch_min = ranges.iter().map(|r| r.channels).min()?;
    let ch_max = ranges.iter().map(|r| r.channels).max()?;
    let lo = ranges.iter().map(|r| r.min_rate).min()?;
    let hi = ranges.iter().map(|r| r.max_rate).max()?;
    let mut formats: Vec<&str> = ranges.iter().map(|r| r.format.as_str()).collect();
    formats.sort_unstable();
    formats.dedup();
    let span = |a: u32, b: u32| {
        if a == b {
            a.to_string()
        } else {
            format!("{a}–{b}")
        }
    };
    Some(format!(
        "{} ch, {} Hz, {}",
        span(u32::from(ch_min), u32::from(ch_max)),
        span(lo, hi),
        formats.join("/")
    ))
}
