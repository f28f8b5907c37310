//! The HTML report's concurrency gradient (`--sessions`): a curve per segment of its P50
//! across the levels, and the levels as a table.

use super::html::{esc, COLORS};
use std::fmt::Write;
use voxlat_core::segments::VOICE_TO_VOICE;
use voxlat_pipeline::levels::growth;
use voxlat_pipeline::results::ReplayResults;

pub fn levels(h: &mut String, r: &ReplayResults) {
    if r.levels.is_empty() {
        return;
    }
    let (w, ht, left, bottom) = (600.0, 260.0, 50.0, 30.0);
    let xs: Vec<f64> = r.levels.iter().map(|l| f64::from(l.sessions)).collect();
    let (x0, x1) = (xs[0], xs[xs.len() - 1].max(xs[0] + 1.0));
    let p50 = |name: &str, l: &voxlat_pipeline::levels::Level| {
        if name == "total" {
            l.aggregate.total.as_ref().map(|s| s.p50)
        } else {
            l.aggregate
                .segments
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.p50)
        }
    };
    let names: Vec<&str> = VOICE_TO_VOICE
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
    let _ = write!(
        h,
        "<h2>Concurrency gradient: P50 of each segment by callers at once</h2><svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">",
        w + left + 140.0,
        ht + bottom + 20.0
    );
    for (i, name) in names.iter().enumerate() {
        let color = if *name == "total" {
            "#000"
        } else {
            COLORS[i % COLORS.len()]
        };
        let pts: Vec<String> = r
            .levels
            .iter()
            .filter_map(|l| {
                p50(name, l).map(|v| format!("{:.1},{:.1}", px(f64::from(l.sessions)), py(v)))
            })
            .collect();
        if pts.is_empty() {
            continue;
        }
        let _ = write!(h, "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"><title>{name}</title></polyline>", pts.join(" "));
        if let Some(last) = r.levels.last().and_then(|l| p50(name, l)) {
            let _ = write!(
                h,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\">{name}</text>",
                px(x1) + 6.0,
                py(last) + 4.0
            );
        }
    }
    for &x in &xs {
        let _ = write!(
            h,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{x}</text>",
            px(x),
            ht + bottom
        );
    }
    let _ = write!(
        h,
        "<text x=\"0\" y=\"14\">{max:.0} ms</text><text x=\"0\" y=\"{}\">0</text></svg>",
        ht + 10.0
    );
    h.push_str("<table><tr><th>callers</th><th>turns</th><th>errors</th><th>turns/min</th><th>total P50</th><th>total P95</th><th>total P99</th></tr>");
    for l in &r.levels {
        let a = &l.aggregate;
        let t = |f: fn(&voxlat_core::stats::Summary) -> f64| {
            a.total
                .as_ref()
                .map_or("-".into(), |s| format!("{:.0}", f(s)))
        };
        let _ = write!(h, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td></tr>", l.sessions, a.turns, a.errors, l.turns_per_min, t(|s| s.p50), t(|s| s.p95), t(|s| s.p99));
    }
    h.push_str("</table>");
    if let (_, Some(g)) = growth(&r.levels) {
        let _ = write!(
            h,
            "<p>Saturates first: <b>{}</b> (P50 {:.0} ms with {} caller(s), {:.0} ms with {}).</p>",
            esc(g.segment.name()),
            g.p50_from_ms,
            g.from,
            g.p50_to_ms,
            g.to
        );
    }
}
