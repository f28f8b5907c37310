//! A self-contained HTML report of one or more runs: per cell a TTFT histogram and CDF, and
//! the sweep curves. Inline SVG and CSS only: no script, no external resource, so the file
//! opens anywhere, offline, and can be attached to a ticket as is.

use super::compare::samples;
use super::config::SweepParam;
use super::record::RequestRecord;
use super::results::BenchResults;
use std::fmt::Write;

const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
const W: f64 = 460.0;
const H: f64 = 220.0;
const PAD_L: f64 = 48.0;
const PAD_B: f64 = 32.0;
const PAD_T: f64 = 12.0;
const PAD_R: f64 = 12.0;
const BINS: usize = 30;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Plot area mapping from data to SVG coordinates.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    fn new(x0: f64, x1: f64, y0: f64, y1: f64) -> Frame {
        let (x1, y1) = (
            if x1 > x0 { x1 } else { x0 + 1.0 },
            if y1 > y0 { y1 } else { y0 + 1.0 },
        );
        Frame { x0, x1, y0, y1 }
    }
    fn x(&self, v: f64) -> f64 {
        PAD_L + (v - self.x0) / (self.x1 - self.x0) * (W - PAD_L - PAD_R)
    }
    fn y(&self, v: f64) -> f64 {
        H - PAD_B - (v - self.y0) / (self.y1 - self.y0) * (H - PAD_B - PAD_T)
    }
    fn axes(&self, out: &mut String, xlabel: &str, ylabel: &str) {
        let _ = write!(
            out,
            r##"<line x1="{l}" y1="{b}" x2="{r}" y2="{b}" stroke="#444"/><line x1="{l}" y1="{t}" x2="{l}" y2="{b}" stroke="#444"/>"##,
            l = PAD_L,
            r = W - PAD_R,
            t = PAD_T,
            b = H - PAD_B
        );
        for i in 0..=4 {
            let f = f64::from(i) / 4.0;
            let xv = self.x0 + f * (self.x1 - self.x0);
            let yv = self.y0 + f * (self.y1 - self.y0);
            let _ = write!(
                out,
                r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
                self.x(xv),
                H - PAD_B + 13.0,
                num(xv),
                PAD_L - 4.0,
                self.y(yv) + 3.0,
                num(yv)
            );
        }
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text><text x="10" y="{:.1}" font-size="11" transform="rotate(-90 10 {:.1})" text-anchor="middle">{}</text>"##,
            (PAD_L + W - PAD_R) / 2.0,
            H - 4.0,
            esc(xlabel),
            H / 2.0,
            H / 2.0,
            esc(ylabel)
        );
    }
}

fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn svg_open(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r##"<figure><svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img"><title>{}</title>"##,
        esc(title)
    );
}

fn svg_close(out: &mut String, caption: &str) {
    let _ = write!(
        out,
        "</svg><figcaption>{}</figcaption></figure>",
        esc(caption)
    );
}

fn histogram(out: &mut String, series: &[(String, Vec<f64>)]) {
    let all: Vec<f64> = series.iter().flat_map(|s| s.1.iter().copied()).collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return;
    }
    let width = ((hi - lo) / BINS as f64).max(1e-9);
    let counts: Vec<Vec<usize>> = series
        .iter()
        .map(|(_, v)| {
            let mut c = vec![0usize; BINS];
            for x in v {
                c[(((x - lo) / width) as usize).min(BINS - 1)] += 1;
            }
            c
        })
        .collect();
    let ymax = counts.iter().flatten().copied().max().unwrap_or(1) as f64;
    let fr = Frame::new(lo, lo + width * BINS as f64, 0.0, ymax);
    svg_open(out, "TTFT histogram");
    fr.axes(out, "TTFT (ms)", "requests");
    for (k, c) in counts.iter().enumerate() {
        for (i, &n) in c.iter().enumerate().filter(|(_, n)| **n > 0) {
            let x = fr.x(lo + i as f64 * width);
            let x2 = fr.x(lo + (i + 1) as f64 * width);
            let _ = write!(
                out,
                r##"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}" fill-opacity="0.5"/>"##,
                fr.y(n as f64),
                (x2 - x - 0.5).max(0.5),
                fr.y(0.0) - fr.y(n as f64),
                COLORS[k % COLORS.len()]
            );
        }
    }
    svg_close(out, "TTFT histogram (30 bins over the common range)");
}

fn cdf(out: &mut String, series: &[(String, Vec<f64>)]) {
    let all: Vec<f64> = series.iter().flat_map(|s| s.1.iter().copied()).collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return;
    }
    let fr = Frame::new(lo, hi, 0.0, 1.0);
    svg_open(out, "TTFT CDF");
    fr.axes(out, "TTFT (ms)", "fraction ≤ x");
    for (k, (_, v)) in series.iter().enumerate() {
        let mut v = v.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mut d = format!("M{:.1},{:.1}", fr.x(v[0]), fr.y(0.0));
        for (i, x) in v.iter().enumerate() {
            let _ = write!(
                d,
                " L{:.1},{:.1} L{:.1},{:.1}",
                fr.x(*x),
                fr.y(i as f64 / n),
                fr.x(*x),
                fr.y((i + 1) as f64 / n)
            );
        }
        let _ = write!(
            out,
            r##"<path d="{d}" fill="none" stroke="{}" stroke-width="1.5"/>"##,
            COLORS[k % COLORS.len()]
        );
    }
    svg_close(out, "TTFT empirical CDF");
}

fn legend(out: &mut String, labels: &[&str]) {
    out.push_str("<p class=legend>");
    for (k, l) in labels.iter().enumerate() {
        let _ = write!(
            out,
            r#"<span style="color:{}">&#9632;</span> {} "#,
            COLORS[k % COLORS.len()],
            esc(l)
        );
    }
    out.push_str("</p>");
}

fn sweep_curves(out: &mut String, runs: &[(String, &BenchResults)]) {
    for param in [SweepParam::PromptTokens, SweepParam::MaxTokens] {
        let curves: Vec<(usize, &super::analysis::SweepResult)> = runs
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
            continue;
        }
        let x = |p: &super::analysis::SweepPoint| match param {
            SweepParam::PromptTokens => p.prompt_tokens.unwrap_or(f64::from(p.value)),
            SweepParam::MaxTokens => f64::from(p.value),
        };
        let pts = curves.iter().flat_map(|(_, s)| s.points.iter());
        let xmax = pts.clone().map(x).fold(0.0, f64::max);
        let ymax = pts.map(|p| p.ttft_p50_ms).fold(0.0, f64::max);
        let fr = Frame::new(0.0, xmax * 1.05, 0.0, ymax * 1.1);
        let _ = write!(out, "<h2>Sweep: {}</h2>", param.name());
        svg_open(out, &format!("TTFT P50 vs {}", param.name()));
        fr.axes(out, param.name(), "TTFT P50 (ms)");
        for (k, s) in &curves {
            let color = COLORS[k % COLORS.len()];
            let d: Vec<String> = s
                .points
                .iter()
                .map(|p| format!("{:.1},{:.1}", fr.x(x(p)), fr.y(p.ttft_p50_ms)))
                .collect();
            let _ = write!(
                out,
                r##"<polyline points="{}" fill="none" stroke="{color}" stroke-width="1.5"/>"##,
                d.join(" ")
            );
            for p in &s.points {
                let _ = write!(
                    out,
                    r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"##,
                    fr.x(x(p)),
                    fr.y(p.ttft_p50_ms)
                );
            }
            if let Some(f) = &s.fit {
                let _ = write!(
                    out,
                    r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-dasharray="4 3"/>"##,
                    fr.x(0.0),
                    fr.y(f.predict_ms(0.0).max(0.0)),
                    fr.x(xmax),
                    fr.y(f.predict_ms(xmax))
                );
            }
        }
        svg_close(
            out,
            "points: P50 TTFT per sweep point; dashed: least-squares fit",
        );
        for (k, s) in &curves {
            if let Some(f) = &s.fit {
                let _ = write!(
                    out,
                    "<p>{} ({} {}): {:.1} ms + {:.2} ms per 1k prompt tokens, R² {:.3}</p>",
                    esc(&runs[*k].0),
                    esc(&s.model),
                    esc(&s.load),
                    f.intercept_ms,
                    f.slope_ms_per_1k,
                    f.r2
                );
            }
        }
    }
}

/// The report of `runs` (label, results), overlaid in one colour each.
pub fn render(runs: &[(String, &BenchResults)]) -> String {
    let mut out = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>voxlat bench-llm report</title>\
         <style>body{font-family:sans-serif;max-width:1000px;margin:1em auto;padding:0 1em}\
         figure{display:inline-block;margin:0 1em 1em 0}figcaption{font-size:12px;color:#555}\
         .legend{font-size:14px}li{margin:.3em 0}</style></head><body><h1>voxlat bench-llm report</h1>",
    );
    let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
    legend(&mut out, &labels);
    for (label, r) in runs {
        let _ = write!(out, "<h3>{}: diagnosis</h3><ul>", esc(label));
        if r.analysis.findings.is_empty() {
            out.push_str("<li>nothing stands out</li>");
        }
        for f in &r.analysis.findings {
            let _ = write!(
                out,
                "<li><b>{}</b>: {} &rarr; {}</li>",
                esc(f.cause.name()),
                esc(&f.evidence),
                esc(&f.advice)
            );
        }
        out.push_str("</ul>");
    }
    sweep_curves(&mut out, runs);
    let mut cells: Vec<&str> = Vec::new();
    for (_, r) in runs {
        for c in &r.cells {
            if !cells.contains(&c.cell.as_str()) {
                cells.push(&c.cell);
            }
        }
    }
    let ttft: fn(&RequestRecord) -> Option<f64> = RequestRecord::ttft_ms;
    for cell in cells {
        let series: Vec<(String, Vec<f64>)> = runs
            .iter()
            .map(|(l, r)| (l.clone(), samples(r, cell, ttft)))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        let counts: Vec<String> = series
            .iter()
            .map(|(l, v)| format!("{} n={}", l, v.len()))
            .collect();
        let _ = write!(
            out,
            "<h2>{}</h2><p>{}</p>",
            esc(cell),
            esc(&counts.join(", "))
        );
        histogram(&mut out, &series);
        cdf(&mut out, &series);
    }
    out.push_str("<p>TTFT = request sent &rarr; first non-empty content delta, one monotonic clock; warm-up excluded.</p></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_helpers_escape_and_scale() {
        assert_eq!(esc("<a&\"b>"), "&lt;a&amp;&quot;b&gt;");
        let f = Frame::new(0.0, 10.0, 0.0, 1.0);
        assert!((f.x(0.0) - PAD_L).abs() < 1e-9 && (f.x(10.0) - (W - PAD_R)).abs() < 1e-9);
        assert!(f.y(1.0) < f.y(0.0), "up is up");
        let degenerate = Frame::new(5.0, 5.0, 2.0, 2.0);
        assert!(degenerate.x(5.0).is_finite() && degenerate.y(2.0).is_finite());
        let mut s = String::new();
        histogram(&mut s, &[("a".into(), vec![1.0, 2.0, 2.0, 9.0])]);
        cdf(&mut s, &[("a".into(), vec![1.0, 2.0, 2.0, 9.0])]);
        assert_eq!(s.matches("<svg").count(), 2);
        assert!(s.contains("<rect") && s.contains("<path"));
    }
}
