//! `eval-turns --html`: each policy's curve, cut-off rate against mean latency, with
//! eot-bench's budgets (300 and 600 ms) and cut-off rates (5 and 10 %) drawn in.

use super::html::{esc, COLORS};
use std::fmt::Write;
use voxlat_core::cpu::CpuInfo;
use voxlat_pipeline::turn_eval::EvalReport;

/// The page: one chart and, per policy, the figures beside it.
pub fn turn_eval_page(report: &EvalReport, cpu: &CpuInfo) -> String {
    let (w, ht, left, bottom) = (640.0, 320.0, 60.0, 40.0);
    let max_ms = report
        .policies
        .iter()
        .flat_map(|p| p.curve.points.iter().filter_map(|pt| pt.latency_mean_ms))
        .fold(700.0, f64::max);
    let max_cut = report
        .policies
        .iter()
        .flat_map(|p| p.curve.points.iter().map(|pt| pt.cutoff))
        .fold(0.2, f64::max);
    let px = |cut: f64| left + cut / max_cut * w;
    let py = |ms: f64| 10.0 + ht - ms / max_ms * ht;
    let mut h = String::from(
        "<!doctype html><meta charset=\"utf-8\"><title>voxlat eval-turns</title><body style=\"font-family:sans-serif\">",
    );
    let _ = write!(
        h,
        "<h1>Turn-taking: cut-offs against latency</h1><p>{} turns, {} labelled pauses. A commit inside a labelled pause (or before the true end) cuts the speaker off; latency is the mean silence after the true end until the commit, over the turns not cut off (audio time). Smart Turn's scores depend on the CPU family: {}.</p>",
        report.turns,
        report.pauses,
        esc(&cpu.describe())
    );
    let _ = write!(
        h,
        "<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">",
        w + left + 150.0,
        ht + bottom + 20.0
    );
    // eot-bench's operating points: the budgets across, the cut-off rates down.
    for ms in [300.0, 600.0] {
        if ms <= max_ms {
            let y = py(ms);
            let _ = write!(h, "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#bbb\" stroke-dasharray=\"4\"/><text x=\"{}\" y=\"{:.1}\">{ms} ms</text>", left + w, left + w + 4.0, y + 4.0);
        }
    }
    for cut in [0.05, 0.10] {
        if cut <= max_cut {
            let _ = write!(h, "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"10\" y2=\"{}\" stroke=\"#bbb\" stroke-dasharray=\"4\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{:.0} %</text>", ht + 10.0, ht + 24.0, cut * 100.0, x = px(cut));
        }
    }
    let _ = write!(h, "<line x1=\"{left}\" x2=\"{left}\" y1=\"10\" y2=\"{b}\" stroke=\"#000\"/><line x1=\"{left}\" x2=\"{}\" y1=\"{b}\" y2=\"{b}\" stroke=\"#000\"/><text x=\"4\" y=\"14\">{max_ms:.0} ms</text><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">cut-off rate (max {:.0} %)</text>", left + w, left + w / 2.0, ht + 38.0, max_cut * 100.0, b = ht + 10.0);
    for (i, p) in report.policies.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        // The line joins the points no other beats on both figures; every point is a dot.
        let pts: Vec<String> = voxlat_core::cutoff::front(&p.curve.points)
            .into_iter()
            .filter_map(|pt| {
                pt.latency_mean_ms
                    .map(|ms| format!("{:.1},{:.1}", px(pt.cutoff), py(ms)))
            })
            .collect();
        let _ = write!(h, "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"><title>{}</title></polyline>", pts.join(" "), esc(&p.curve.name));
        for pt in &p.curve.points {
            if let Some(ms) = pt.latency_mean_ms {
                let _ = write!(h, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"><title>{} {} {}{}: cut-off {:.1} %, {ms:.0} ms</title></circle>", px(pt.cutoff), py(ms), esc(&p.curve.name), esc(&p.knob), pt.setting, pt.delay_ms.map_or(String::new(), |d| format!(" at {d} ms")), pt.cutoff * 100.0);
            }
        }
        let _ = write!(
            h,
            "<text x=\"{}\" y=\"{}\" fill=\"{color}\">{}</text>",
            left + w + 50.0,
            30.0 + 16.0 * i as f64,
            esc(&p.curve.name)
        );
    }
    h.push_str("</svg><table border=\"1\" cellpadding=\"4\"><tr><th>policy</th><th>cut-off within 300 ms</th><th>within 600 ms</th><th>latency at 5 %</th><th>at 10 %</th></tr>");
    let rate =
        |v: Option<f64>| v.map_or_else(|| "no setting".into(), |r| format!("{:.1} %", r * 100.0));
    let ms = |v: Option<f64>| v.map_or_else(|| "not reached".into(), |l| format!("{l:.0} ms"));
    for p in &report.policies {
        let c = &p.curve;
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.name),
            rate(c.cutoff_at_300ms),
            rate(c.cutoff_at_600ms),
            ms(c.latency_at_5pct_ms),
            ms(c.latency_at_10pct_ms)
        );
    }
    h.push_str("</table></body>");
    h
}
