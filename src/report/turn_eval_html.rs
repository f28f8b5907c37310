//! `eval-turns --html`: each policy's curve, cut-off rate against mean latency, with
//! eot-bench's budgets (300 and 600 ms) and cut-off rates (5 and 10 %) drawn in.

use super::html::{f0, f1, COLORS};
use maud::{html, Markup, DOCTYPE};
use voxlat_core::cpu::CpuInfo;
use voxlat_pipeline::turn_eval::EvalReport;

/// The page: one chart and, per policy, the figures beside it.
pub fn turn_eval_page(report: &EvalReport, cpu: &CpuInfo) -> String {
    let page = html! {
        (DOCTYPE)
        meta charset="utf-8";
        title { "voxlat eval-turns" }
        body style="font-family:sans-serif" {
            h1 { "Turn-taking: cut-offs against latency" }
            p {
                (report.turns) " turns, " (report.pauses) " labelled pauses. A commit inside a \
                 labelled pause (or before the true end) cuts the speaker off; latency is the \
                 mean silence after the true end until the commit, over the turns not cut off \
                 (audio time). Smart Turn's scores depend on the CPU family: "
                (cpu.describe()) "."
            }
            (chart(report))
            (policy_table(report))
        }
    };
    page.into_string()
}

fn chart(report: &EvalReport) -> Markup {
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
    let base = ht + 10.0;
    html! {
        svg width=(w + left + 150.0) height=(ht + bottom + 20.0)
            xmlns="http://www.w3.org/2000/svg" font-size="11" {
            // eot-bench's operating points: the budgets across, the cut-off rates down.
            @for ms in [300.0, 600.0] {
                @if ms <= max_ms {
                    @let y = py(ms);
                    line x1=(left) x2=(left + w) y1=(f1(y)) y2=(f1(y)) stroke="#bbb"
                        stroke-dasharray="4" {}
                    text x=(left + w + 4.0) y=(f1(y + 4.0)) { (ms) " ms" }
                }
            }
            @for cut in [0.05, 0.10] {
                @if cut <= max_cut {
                    @let x = f1(px(cut));
                    line x1=(x) x2=(x) y1="10" y2=(base) stroke="#bbb" stroke-dasharray="4" {}
                    text x=(x) y=(ht + 24.0) text-anchor="middle" { (f0(cut * 100.0)) " %" }
                }
            }
            line x1=(left) x2=(left) y1="10" y2=(base) stroke="#000" {}
            line x1=(left) x2=(left + w) y1=(base) y2=(base) stroke="#000" {}
            text x="4" y="14" { (f0(max_ms)) " ms" }
            text x=(left + w / 2.0) y=(ht + 38.0) text-anchor="middle" {
                "cut-off rate (max " (f0(max_cut * 100.0)) " %)"
            }
            @for (i, p) in report.policies.iter().enumerate() {
                @let color = COLORS[i % COLORS.len()];
                // The line joins the points no other beats on both figures; every point is a dot.
                @let front = voxlat_core::cutoff::front(&p.curve.points)
                    .into_iter()
                    .filter_map(|pt| {
                        pt.latency_mean_ms
                            .map(|ms| format!("{:.1},{:.1}", px(pt.cutoff), py(ms)))
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                polyline fill="none" stroke=(color) stroke-width="2" points=(front) {
                    title { (p.curve.name) }
                }
                @for pt in &p.curve.points {
                    @if let Some(ms) = pt.latency_mean_ms {
                        circle cx=(f1(px(pt.cutoff))) cy=(f1(py(ms))) r="3" fill=(color) {
                            title {
                                (p.curve.name) " " (p.knob) " " (pt.setting)
                                @if let Some(d) = pt.delay_ms {
                                    " at " (d) " ms"
                                }
                                ": cut-off " (f1(pt.cutoff * 100.0)) " %, " (f0(ms)) " ms"
                            }
                        }
                    }
                }
                text x=(left + w + 50.0) y=(30.0 + 16.0 * i as f64) fill=(color) {
                    (p.curve.name)
                }
            }
        }
    }
}

fn policy_table(report: &EvalReport) -> Markup {
    let rate =
        |v: Option<f64>| v.map_or_else(|| "no setting".into(), |r| format!("{:.1} %", r * 100.0));
    let ms = |v: Option<f64>| v.map_or_else(|| "not reached".into(), |l| format!("{l:.0} ms"));
    html! {
        table border="1" cellpadding="4" {
            tr {
                th { "policy" } th { "cut-off within 300 ms" } th { "within 600 ms" }
                th { "latency at 5 %" } th { "at 10 %" }
            }
            @for p in &report.policies {
                tr {
                    td { (p.curve.name) }
                    td { (rate(p.curve.cutoff_at_300ms)) }
                    td { (rate(p.curve.cutoff_at_600ms)) }
                    td { (ms(p.curve.latency_at_5pct_ms)) }
                    td { (ms(p.curve.latency_at_10pct_ms)) }
                }
            }
        }
    }
}
