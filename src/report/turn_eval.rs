//! `eval-turns`' tables: eot-bench's figures per policy, then each policy's curve.

use std::path::PathBuf;
use voxlat_core::cpu::CpuInfo;
use voxlat_core::table::Table;
use voxlat_pipeline::turn_eval::choose::{Choices, TARGETS};
use voxlat_pipeline::turn_eval::EvalReport;

fn rate(v: Option<f64>) -> String {
    v.map_or_else(|| "no setting".into(), |r| format!("{:.1}%", r * 100.0))
}

fn label_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "not reached".into(), |l| format!("{l:.0} ms"))
}

pub fn print_turn_eval(report: &EvalReport, cpu: &CpuInfo) {
    println!(
        "Turn-taking on {} turns with {} labelled pauses (eot-bench's metric, stricter: a commit inside a pause or anywhere before the true end cuts the speaker off; latency is the silence after the true end until the commit, mean (P50) over the turns not cut off, audio time):",
        report.turns, report.pauses
    );
    let mut t = Table::new(&[
        "policy",
        "cut-off within 300 ms",
        "within 600 ms",
        "latency at 5 % cut-offs",
        "at 10 %",
    ]);
    for p in &report.policies {
        let c = &p.curve;
        let with_p50 = |mean: Option<f64>, p50: Option<f64>| match (mean, p50) {
            (Some(_), Some(p50)) => format!("{} ({p50:.0})", label_ms(mean)),
            _ => label_ms(mean),
        };
        t.row(vec![
            c.name.clone(),
            rate(c.cutoff_at_300ms),
            rate(c.cutoff_at_600ms),
            with_p50(c.latency_at_5pct_ms, c.latency_p50_at_5pct_ms),
            with_p50(c.latency_at_10pct_ms, c.latency_p50_at_10pct_ms),
        ]);
    }
    print!("{}", t.render());
    for p in &report.policies {
        let two_knobs = p.curve.points.iter().any(|pt| pt.delay_ms.is_some());
        let knob = if two_knobs {
            format!("{} @ delay", p.knob)
        } else {
            p.knob.clone()
        };
        let mut t = Table::new(&[
            &knob,
            "cut-off",
            "in a pause (eot-bench)",
            "latency mean",
            "latency p50",
        ]);
        // A grid of two knobs is long: its table keeps the settings no other beats on both
        // figures (the JSON keeps every one).
        let shown: Vec<&voxlat_core::cutoff::Point> = if two_knobs {
            voxlat_core::cutoff::front(&p.curve.points)
        } else {
            p.curve.points.iter().collect()
        };
        let n_shown = shown.len();
        for point in shown {
            let mut setting = match point.delay_ms {
                Some(d) => format!("{} @ {d} ms", point.setting),
                None => format!("{}", point.setting),
            };
            let missed = p
                .turns
                .iter()
                .find(|t| t.setting == point.setting && t.delay_ms == point.delay_ms)
                .map_or(0, |t| t.missed);
            if missed > 0 {
                setting.push_str(&format!(" ({missed} never committed)"));
            }
            t.row(vec![
                setting,
                format!("{:.1}%", point.cutoff * 100.0),
                format!("{:.1}%", point.cutoff_in_pause * 100.0),
                label_ms(point.latency_mean_ms),
                label_ms(point.latency_p50_ms),
            ]);
        }
        if two_knobs {
            print!(
                "\n{} over {} and the delay before its score, the {} of {} settings no other beats on both figures:\n{}",
                p.curve.name,
                p.knob,
                n_shown,
                p.curve.points.len(),
                t.render()
            );
        } else {
            print!("\n{} over {}:\n{}", p.curve.name, p.knob, t.render());
        }
    }
    if let Some(e) = &report.speech_end.abs_ms {
        println!(
            "\nThe endpointer's speech-end estimate (default settings) against the truth, over {} turns not cut off: |error| P50 {:.0} ms, P95 {:.0} ms, worst {:.0} ms. Live, `endpointing` is timed from this estimate.",
            e.n, e.p50, e.p95, e.max
        );
    }
    if report.policies.iter().any(|p| p.curve.name == "smart-turn") {
        println!(
            "\nSmart Turn's probabilities depend on the CPU: its int8 kernels score differently with and without VNNI, so its rows hold for this family only (scored on {}).",
            cpu.describe()
        );
        if let Some(s) = &report.turn_score_ms {
            println!(
                "Each Smart Turn score took P50 {:.0} ms, P95 {:.0} ms here ({} scores): a live decision after a score comes that much later than the latency above.",
                s.p50, s.p95, s.n
            );
        }
    }
}

/// `eval-turns --choose-on`: each policy's settings as chosen on one set, and what they do on
/// the turns reported.
pub fn print_choices(c: &Choices, on: &EvalReport, report: &EvalReport, files: &[PathBuf]) {
    println!(
        "\nSettings chosen on {} turns ({}), the fastest at or under each cut-off rate there, then held fixed on the {} turns above. Cut-off counts a commit inside a pause or before the end; eot-bench's own figure counts the pauses only:",
        on.turns,
        files
            .iter()
            .filter_map(|f| f.file_stem())
            .map(|s| s.to_string_lossy())
            .collect::<Vec<_>>()
            .join(", "),
        report.turns
    );
    let mut t = Table::new(&[
        "policy",
        "chosen at",
        "setting",
        "there: cut-off",
        "latency",
        "here: cut-off",
        "in a pause",
        "latency mean (P50)",
    ]);
    for p in &c.policies {
        for (i, (&target, chosen)) in c.targets.iter().zip(&p.chosen).enumerate() {
            let at = if i < TARGETS.len() {
                format!("{:.0} %", target * 100.0)
            } else {
                format!("{:.0} ms's {:.1} %", c.hangover_ms, target * 100.0)
            };
            let Some(chosen) = chosen else {
                t.row(vec![
                    p.policy.clone(),
                    at,
                    "not reached".into(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]);
                continue;
            };
            let setting = match chosen.chosen.delay_ms {
                Some(d) => format!("{} @ {d} ms", chosen.chosen.setting),
                None => format!("{}", chosen.chosen.setting),
            };
            let pct = |v: f64| format!("{:.1}%", v * 100.0);
            let (here_cut, here_pause, here_latency) = match &chosen.reported {
                Some(r) => (
                    pct(r.cutoff),
                    pct(r.cutoff_in_pause),
                    match (r.latency_mean_ms, r.latency_p50_ms) {
                        (Some(m), Some(p50)) => format!("{m:.0} ms ({p50:.0})"),
                        _ => "every turn cut off".into(),
                    },
                ),
                None => ("not run".into(), String::new(), String::new()),
            };
            t.row(vec![
                p.policy.clone(),
                at,
                setting,
                pct(chosen.chosen.cutoff),
                label_ms(chosen.chosen.latency_mean_ms),
                here_cut,
                here_pause,
                here_latency,
            ]);
        }
    }
    print!("{}", t.render());
}
