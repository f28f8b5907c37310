//! A self-contained HTML report of one or more runs: per cell a TTFT histogram and CDF, and
//! the sweep curves. Inline SVG and CSS only: no script, no external resource, so the file
//! opens anywhere, offline, and can be attached to a ticket as is.

mod plot;

use super::analysis::{SweepPoint, SweepResult};
use super::compare::samples;
use super::config::SweepParam;
use super::record::RequestRecord;
use super::results::BenchResults;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use plot::{cdf, f1, figure, histogram, Frame, COLORS};

const CSS: &str = "body{font-family:sans-serif;max-width:1000px;margin:1em auto;padding:0 1em}\
    figure{display:inline-block;margin:0 1em 1em 0}figcaption{font-size:12px;color:#555}\
    .legend{font-size:14px}li{margin:.3em 0}";

/// The report of `runs` (label, results), overlaid in one colour each.
pub fn render(runs: &[(String, &BenchResults)]) -> String {
    let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
    let mut cells: Vec<&str> = Vec::new();
    for (_, r) in runs {
        for c in &r.cells {
            if !cells.contains(&c.cell.as_str()) {
                cells.push(&c.cell);
            }
        }
    }
    let page = html! {
        (DOCTYPE)
        html {
            head {
                meta charset="utf-8";
                title { "voxlat bench-llm report" }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { "voxlat bench-llm report" }
                (legend(&labels))
                @for (label, r) in runs {
                    (diagnosis(label, r))
                }
                @for param in [SweepParam::PromptTokens, SweepParam::MaxTokens] {
                    (sweep(runs, param))
                }
                @for cell in &cells {
                    (cell_section(runs, cell))
                }
                p {
                    "TTFT = request sent → first non-empty content delta, one monotonic clock; \
                     warm-up excluded."
                }
            }
        }
    };
    let mut page = page.into_string();
    page.push('\n');
    page
}

fn legend(labels: &[&str]) -> Markup {
    html! {
        p.legend {
            @for (k, l) in labels.iter().enumerate() {
                span style=(format!("color:{}", COLORS[k % COLORS.len()])) { "■" }
                " " (l) " "
            }
        }
    }
}

fn diagnosis(label: &str, r: &BenchResults) -> Markup {
    html! {
        h3 { (label) ": diagnosis" }
        ul {
            @if r.analysis.findings.is_empty() {
                li { "nothing stands out" }
            }
            @for f in &r.analysis.findings {
                li { b { (f.cause.name()) } ": " (f.evidence) " → " (f.advice) }
            }
        }
    }
}

/// TTFT P50 against what the sweep varied, every run's curves on one chart, and each fit.
fn sweep(runs: &[(String, &BenchResults)], param: SweepParam) -> Markup {
    let curves: Vec<(usize, &SweepResult)> = runs
        .iter()
        .enumerate()
        .flat_map(|(k, (_, r))| {
            r.analysis
                .sweeps
                .iter()
                .filter(move |s| s.param == param)
                .map(move |s| (k, s))
        })
        .collect();
    if curves.is_empty() {
        return html! {};
    }
    let x = |p: &SweepPoint| match param {
        SweepParam::PromptTokens => p.prompt_tokens.unwrap_or(f64::from(p.value)),
        SweepParam::MaxTokens => f64::from(p.value),
    };
    let pts = curves.iter().flat_map(|(_, s)| s.points.iter());
    let xmax = pts.clone().map(x).fold(0.0, f64::max);
    let ymax = pts.map(|p| p.ttft_p50_ms).fold(0.0, f64::max);
    let fr = Frame::new(0.0, xmax * 1.05, 0.0, ymax * 1.1);
    let chart = html! {
        (fr.axes(param.name(), "TTFT P50 (ms)"))
        @for (k, s) in &curves {
            @let color = COLORS[k % COLORS.len()];
            @let trace = s
                .points
                .iter()
                .map(|p| format!("{:.1},{:.1}", fr.x(x(p)), fr.y(p.ttft_p50_ms)))
                .collect::<Vec<_>>()
                .join(" ");
            polyline points=(trace) fill="none" stroke=(color) stroke-width="1.5" {}
            @for p in &s.points {
                circle cx=(f1(fr.x(x(p)))) cy=(f1(fr.y(p.ttft_p50_ms))) r="3" fill=(color) {}
            }
            @if let Some(f) = &s.fit {
                line x1=(f1(fr.x(0.0))) y1=(f1(fr.y(f.predict_ms(0.0).max(0.0))))
                    x2=(f1(fr.x(xmax))) y2=(f1(fr.y(f.predict_ms(xmax)))) stroke=(color)
                    stroke-dasharray="4 3" {}
            }
        }
    };
    html! {
        h2 { "Sweep: " (param.name()) }
        (figure(
            &format!("TTFT P50 vs {}", param.name()),
            "points: P50 TTFT per sweep point; dashed: least-squares fit",
            chart,
        ))
        @for (k, s) in &curves {
            @if let Some(f) = &s.fit {
                p {
                    (runs[*k].0) " (" (s.model) " " (s.load) "): " (f1(f.intercept_ms))
                    " ms + " (format!("{:.2}", f.slope_ms_per_1k))
                    " ms per 1k prompt tokens, R² " (format!("{:.3}", f.r2))
                }
            }
        }
    }
}

/// One cell: how many requests each run had in it, then their TTFT histogram and CDF.
fn cell_section(runs: &[(String, &BenchResults)], cell: &str) -> Markup {
    let ttft: fn(&RequestRecord) -> Option<f64> = RequestRecord::ttft_ms;
    let series: Vec<(String, Vec<f64>)> = runs
        .iter()
        .map(|(l, r)| (l.clone(), samples(r, cell, ttft)))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    if series.is_empty() {
        return html! {};
    }
    let counts: Vec<String> = series
        .iter()
        .map(|(l, v)| format!("{} n={}", l, v.len()))
        .collect();
    html! {
        h2 { (cell) }
        p { (counts.join(", ")) }
        (histogram(&series))
        (cdf(&series))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{Cause, Finding};
    use crate::fit::LinearFit;
    use crate::summary::CellSummary;
    use voxlat_core::{EventKind, Nanos};
    use voxlat_llm::record::StreamOutcome;

    /// A request of cell `c` whose first token came `ttft_ms` after it was sent.
    fn request(i: u64, ttft_ms: u64) -> RequestRecord {
        let mut q = RequestRecord::for_test(&format!("r{i}"), StreamOutcome::default());
        let sent = i * 1_000_000_000;
        q.events.insert(EventKind::LlmSent, Nanos(sent));
        q.events
            .insert(EventKind::LlmFirstToken, Nanos(sent + ttft_ms * 1_000_000));
        q
    }

    #[test]
    fn the_report_renders_every_section() {
        let mut r = BenchResults::for_test((0..5).map(|i| request(i, 100 + i * 7)).collect());
        r.cells = vec![CellSummary::from_records("c", "m", "1", &r.requests)];
        r.analysis.findings = vec![Finding {
            cause: Cause::Prefill,
            evidence: "TTFT grows <fast>".into(),
            advice: "shorten the prompt".into(),
        }];
        let point = |value: u32, ttft_p50_ms: f64| SweepPoint {
            value,
            prompt_tokens: Some(f64::from(value)),
            ttft_p50_ms,
            n: 3,
        };
        r.analysis.sweeps = vec![SweepResult {
            model: "m".into(),
            load: "1".into(),
            param: SweepParam::PromptTokens,
            points: vec![point(100, 50.0), point(1000, 140.0)],
            fit: LinearFit::fit(&[(100.0, 50.0), (1000.0, 140.0)]),
            spread: None,
        }];
        let html = render(&[("run <a>".to_string(), &r)]);
        // The headings the hand-written report wrote, in its order.
        let sections = [
            "<h1>voxlat bench-llm report</h1>",
            "<h3>run &lt;a&gt;: diagnosis</h3>",
            "<h2>Sweep: prompt-tokens</h2>",
            "<h2>c</h2>",
        ];
        let mut from = 0;
        for s in sections {
            let at = html[from..]
                .find(s)
                .unwrap_or_else(|| panic!("{s} missing or out of order:\n{html}"));
            from += at + s.len();
        }
        assert_eq!(html.matches("<h2>").count(), 2, "{html}");
        // The sweep, then the cell's histogram and CDF.
        assert_eq!(html.matches("<svg").count(), 3, "{html}");
        assert!(html.contains("TTFT grows &lt;fast&gt;"), "{html}");
        assert!(
            html.contains("run &lt;a&gt; n=5") && html.contains("R² "),
            "{html}"
        );
    }
}
