//! `voxlat compare a.json b.json`: two bench-llm results side by side, and an HTML report.

use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use voxlat_bench::compare::{self, SIGNIFICANCE_ALPHA};
use voxlat_bench::{html, BenchResults};
use voxlat_core::table::Table;

/// Compares two `voxlat bench-llm` results files: per cell and metric (TTFT, first answer,
/// TTFB, TPOT, E2E) the P50, P95, P99 and mean of each run, B − A, and whether the two
/// distributions differ significantly (two-sided Mann–Whitney U test on the per-request
/// samples, p < 0.05; no test with fewer than 5 samples a side). Cells are matched by name,
/// or by position when no name matches and both runs have as many cells.
///
/// Also writes a self-contained HTML report (inline SVG, no scripts, no network): TTFT
/// histogram and CDF per cell with both runs overlaid, sweep curves, and each run's diagnosis.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct CompareArgs {
    /// The "before" results file.
    pub a: PathBuf,
    /// The "after" results file.
    pub b: PathBuf,
    /// Where to write the HTML report. [default: beside B, <B>-vs-<A>.html]
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

fn load(p: &Path) -> Result<BenchResults> {
    let bytes = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
    serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{} is not a bench-llm results file (written by `voxlat bench-llm`)",
            p.display()
        )
    })
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".into())
}

fn signed(v: f64) -> String {
    format!("{v:+.1}")
}

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    let a = load(&args.a)?;
    let b = load(&args.b)?;
    let pairs = compare::compare(&a, &b);
    println!("A = {}\nB = {}", args.a.display(), args.b.display());
    if let Some(w) = voxlat_bench::cache_check::hit_rate_warning(&a, &b) {
        println!("{w}");
    }
    for w in voxlat_bench::stamping::stamping_warnings(&a, &b) {
        println!("{w}");
    }
    if pairs.is_empty() {
        println!(
            "no cell in common (A: {}; B: {})",
            a.cells
                .iter()
                .map(|c| c.cell.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            b.cells
                .iter()
                .map(|c| c.cell.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for p in &pairs {
        let title = if p.cell_a == p.cell_b {
            p.cell_a.clone()
        } else {
            format!("{} (A) vs {} (B)", p.cell_a, p.cell_b)
        };
        println!("\n{title}:");
        let mut t = Table::new(&[
            "ms",
            "stat",
            "A",
            "B",
            "B-A",
            "B/A",
            "n A/B",
            "Mann-Whitney",
        ]);
        for m in &p.metrics {
            for (i, (stat, va, vb)) in [
                ("p50", m.a.p50, m.b.p50),
                ("p95", m.a.p95, m.b.p95),
                ("p99", m.a.p99, m.b.p99),
                ("mean", m.a.mean, m.b.mean),
            ]
            .into_iter()
            .enumerate()
            {
                let verdict = match (i, m.test) {
                    (0, Some(t)) => format!(
                        "p={:.3} {}",
                        t.p,
                        if t.p < SIGNIFICANCE_ALPHA {
                            "significant"
                        } else {
                            "not significant"
                        }
                    ),
                    (0, None) => "too few samples".into(),
                    _ => String::new(),
                };
                t.row(vec![
                    if i == 0 {
                        m.metric.clone()
                    } else {
                        String::new()
                    },
                    stat.into(),
                    format!("{va:.1}"),
                    format!("{vb:.1}"),
                    signed(vb - va),
                    if va > 0.0 {
                        format!("{:.2}x", vb / va)
                    } else {
                        "-".into()
                    },
                    if i == 0 {
                        format!("{}/{}", m.a.n, m.b.n)
                    } else {
                        String::new()
                    },
                    verdict,
                ]);
            }
        }
        print!("{}", t.render());
    }
    println!(
        "\nSignificance: two-sided Mann-Whitney U on every measured request (normal approximation, tie-corrected), alpha = {SIGNIFICANCE_ALPHA}; it tests the whole distribution, so it is shown once per metric."
    );
    let html_path = args.html.clone().unwrap_or_else(|| {
        args.b
            .with_file_name(format!("{}-vs-{}.html", stem(&args.b), stem(&args.a)))
    });
    let report = html::render(&[
        (format!("A: {}", stem(&args.a)), &a),
        (format!("B: {}", stem(&args.b)), &b),
    ]);
    voxlat_core::fsio::write_atomic(&html_path, report.as_bytes())
        .with_context(|| format!("cannot write the HTML report {}", html_path.display()))?;
    println!("HTML report: {}", html_path.display());
    Ok(ExitCode::SUCCESS)
}
