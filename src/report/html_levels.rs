//! The HTML report's concurrency gradient (`--sessions`): a curve per segment of its P50
//! across the levels, and the levels as a table.

use super::html::{f0, f1, COLORS};
use maud::{html, Markup};
use voxlat_core::segments::VOICE_TO_VOICE;
use voxlat_core::stats::Summary;
use voxlat_pipeline::levels::{growth, Level};
use voxlat_pipeline::results::ReplayResults;

/// One segment's curve: its name, colour, polyline points and P50 at the last level.
struct Curve {
    name: &'static str,
    color: &'static str,
    points: String,
    last: Option<f64>,
}

pub fn levels(r: &ReplayResults) -> Markup {
    let (Some(first), Some(last_level)) = (r.levels.first(), r.levels.last()) else {
        return html! {};
    };
    let (w, ht, left, bottom) = (600.0, 260.0, 50.0, 30.0);
    let xs: Vec<f64> = r.levels.iter().map(|l| f64::from(l.sessions)).collect();
    let x0 = f64::from(first.sessions);
    let x1 = f64::from(last_level.sessions).max(x0 + 1.0);
    let names: Vec<&'static str> = VOICE_TO_VOICE
        .steps
        .iter()
        .map(|s| s.name.name())
        .chain(["total"])
        .collect();
    let max = r
        .levels
        .iter()
        .flat_map(|l| names.iter().filter_map(move |n| p50(n, l)))
        .fold(1.0, f64::max);
    let px = |x: f64| left + (x - x0) / (x1 - x0) * w;
    let py = |v: f64| ht - v.max(0.0) / max * ht + 10.0;
    let curves: Vec<Curve> = names
        .iter()
        .enumerate()
        .map(|(i, &name)| Curve {
            name,
            color: if name == "total" {
                "#000"
            } else {
                COLORS[i % COLORS.len()]
            },
            points: r
                .levels
                .iter()
                .filter_map(|l| {
                    p50(name, l).map(|v| format!("{:.1},{:.1}", px(f64::from(l.sessions)), py(v)))
                })
                .collect::<Vec<_>>()
                .join(" "),
            last: p50(name, last_level),
        })
        .filter(|c| !c.points.is_empty())
        .collect();
    html! {
        h2 { "Concurrency gradient: P50 of each segment by callers at once" }
        svg width=(w + left + 140.0) height=(ht + bottom + 20.0)
            xmlns="http://www.w3.org/2000/svg" font-size="11" {
            @for c in &curves {
                polyline fill="none" stroke=(c.color) stroke-width="2" points=(c.points) {
                    title { (c.name) }
                }
                @if let Some(last) = c.last {
                    text x=(f1(px(x1) + 6.0)) y=(f1(py(last) + 4.0)) fill=(c.color) { (c.name) }
                }
            }
            @for &x in &xs {
                text x=(f1(px(x))) y=(ht + bottom) text-anchor="middle" { (x) }
            }
            text x="0" y="14" { (f0(max)) " ms" }
            text x="0" y=(ht + 10.0) { "0" }
        }
        table {
            tr {
                th { "callers" } th { "turns" } th { "errors" } th { "turns/min" }
                th { "total P50" } th { "total P95" } th { "total P99" }
            }
            @for l in &r.levels {
                tr {
                    td { (l.sessions) }
                    td { (l.aggregate.turns) }
                    td { (l.aggregate.errors) }
                    td { (f1(l.turns_per_min)) }
                    td { (total(l, |s| s.p50)) }
                    td { (total(l, |s| s.p95)) }
                    td { (total(l, |s| s.p99)) }
                }
            }
        }
        @if let (_, Some(g)) = growth(&r.levels) {
            p {
                "Saturates first: " b { (g.segment.name()) } " (P50 " (f0(g.p50_from_ms))
                " ms with " (g.from) " caller(s), " (f0(g.p50_to_ms)) " ms with " (g.to) ")."
            }
        }
    }
}

/// A segment's P50 at a level, or the total's for the curve named so.
fn p50(name: &str, l: &Level) -> Option<f64> {
    if name == "total" {
        l.aggregate.total.as_ref().map(|s| s.p50)
    } else {
        l.aggregate
            .segments
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.p50)
    }
}

/// A percentile of the level's total, "-" where it has none.
fn total(l: &Level, f: fn(&Summary) -> f64) -> String {
    l.aggregate
        .total
        .as_ref()
        .map_or_else(|| "-".to_string(), |s| f0(f(s)))
}
