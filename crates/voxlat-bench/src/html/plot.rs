//! The report's SVG charts: a frame with its axes, the TTFT histogram and the TTFT CDF.

use maud::{html, Markup};
use std::fmt::Write;

pub(super) const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
const W: f64 = 460.0;
const H: f64 = 220.0;
const PAD_L: f64 = 48.0;
const PAD_B: f64 = 32.0;
const PAD_T: f64 = 12.0;
const PAD_R: f64 = 12.0;
const BINS: usize = 30;

/// SVG coordinates: a tenth of a pixel is as fine as a screen shows.
pub(super) fn f1(v: f64) -> String {
    format!("{v:.1}")
}

/// Plot area mapping from data to SVG coordinates.
pub(super) struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    pub(super) fn new(x0: f64, x1: f64, y0: f64, y1: f64) -> Frame {
        let (x1, y1) = (
            if x1 > x0 { x1 } else { x0 + 1.0 },
            if y1 > y0 { y1 } else { y0 + 1.0 },
        );
        Frame { x0, x1, y0, y1 }
    }

    pub(super) fn x(&self, v: f64) -> f64 {
        PAD_L + (v - self.x0) / (self.x1 - self.x0) * (W - PAD_L - PAD_R)
    }

    pub(super) fn y(&self, v: f64) -> f64 {
        H - PAD_B - (v - self.y0) / (self.y1 - self.y0) * (H - PAD_B - PAD_T)
    }

    pub(super) fn axes(&self, xlabel: &str, ylabel: &str) -> Markup {
        let (l, r, t, b) = (PAD_L, W - PAD_R, PAD_T, H - PAD_B);
        html! {
            line x1=(l) y1=(b) x2=(r) y2=(b) stroke="#444" {}
            line x1=(l) y1=(t) x2=(l) y2=(b) stroke="#444" {}
            @for i in 0..=4 {
                @let f = f64::from(i) / 4.0;
                @let xv = self.x0 + f * (self.x1 - self.x0);
                @let yv = self.y0 + f * (self.y1 - self.y0);
                text x=(f1(self.x(xv))) y=(f1(H - PAD_B + 13.0)) font-size="10"
                    text-anchor="middle" { (num(xv)) }
                text x=(f1(PAD_L - 4.0)) y=(f1(self.y(yv) + 3.0)) font-size="10"
                    text-anchor="end" { (num(yv)) }
            }
            text x=(f1((PAD_L + W - PAD_R) / 2.0)) y=(f1(H - 4.0)) font-size="11"
                text-anchor="middle" { (xlabel) }
            text x="10" y=(f1(H / 2.0)) font-size="11"
                transform=(format!("rotate(-90 10 {:.1})", H / 2.0)) text-anchor="middle" {
                (ylabel)
            }
        }
    }
}

/// An axis label: fewer decimals the larger the value.
fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A chart in its figure: `title` for screen readers, `caption` under it.
pub(super) fn figure(title: &str, caption: &str, chart: Markup) -> Markup {
    html! {
        figure {
            svg xmlns="http://www.w3.org/2000/svg" width=(W) height=(H)
                viewBox=(format!("0 0 {W} {H}")) role="img" {
                title { (title) }
                (chart)
            }
            figcaption { (caption) }
        }
    }
}

/// The lowest and highest sample over every series; `None` without samples.
fn range(series: &[(String, Vec<f64>)]) -> Option<(f64, f64)> {
    let all = series.iter().flat_map(|s| s.1.iter().copied());
    let lo = all.clone().fold(f64::INFINITY, f64::min);
    let hi = all.fold(f64::NEG_INFINITY, f64::max);
    lo.is_finite().then_some((lo, hi))
}

pub(super) fn histogram(series: &[(String, Vec<f64>)]) -> Markup {
    let Some((lo, hi)) = range(series) else {
        return html! {};
    };
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
    let chart = html! {
        (fr.axes("TTFT (ms)", "requests"))
        @for (k, c) in counts.iter().enumerate() {
            @for (i, &n) in c.iter().enumerate().filter(|(_, n)| **n > 0) {
                @let x = fr.x(lo + i as f64 * width);
                @let x2 = fr.x(lo + (i + 1) as f64 * width);
                rect x=(f1(x)) y=(f1(fr.y(n as f64))) width=(f1((x2 - x - 0.5).max(0.5)))
                    height=(f1(fr.y(0.0) - fr.y(n as f64))) fill=(COLORS[k % COLORS.len()])
                    fill-opacity="0.5" {}
            }
        }
    };
    figure(
        "TTFT histogram",
        "TTFT histogram (30 bins over the common range)",
        chart,
    )
}

pub(super) fn cdf(series: &[(String, Vec<f64>)]) -> Markup {
    let Some((lo, hi)) = range(series) else {
        return html! {};
    };
    let fr = Frame::new(lo, hi, 0.0, 1.0);
    let chart = html! {
        (fr.axes("TTFT (ms)", "fraction ≤ x"))
        @for (k, (_, v)) in series.iter().enumerate() {
            path d=(steps(&fr, v)) fill="none" stroke=(COLORS[k % COLORS.len()])
                stroke-width="1.5" {}
        }
    };
    figure("TTFT CDF", "TTFT empirical CDF", chart)
}

/// The empirical CDF of `v` as SVG path data: a step up of 1/n at each sample.
fn steps(fr: &Frame, v: &[f64]) -> String {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let Some(&first) = v.first() else {
        return String::new();
    };
    let n = v.len() as f64;
    let mut d = format!("M{:.1},{:.1}", fr.x(first), fr.y(0.0));
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
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_helpers_escape_and_scale() {
        let labels = html! { (Frame::new(0.0, 1.0, 0.0, 1.0).axes("<a&\"b>", "y")) };
        assert!(
            labels.into_string().contains("&lt;a&amp;&quot;b&gt;"),
            "labels are escaped"
        );
        let f = Frame::new(0.0, 10.0, 0.0, 1.0);
        assert!((f.x(0.0) - PAD_L).abs() < 1e-9 && (f.x(10.0) - (W - PAD_R)).abs() < 1e-9);
        assert!(f.y(1.0) < f.y(0.0), "up is up");
        let degenerate = Frame::new(5.0, 5.0, 2.0, 2.0);
        assert!(degenerate.x(5.0).is_finite() && degenerate.y(2.0).is_finite());
        let series = [("a".to_string(), vec![1.0, 2.0, 2.0, 9.0])];
        let s = html! { (histogram(&series)) (cdf(&series)) }.into_string();
        assert_eq!(s.matches("<svg").count(), 2);
        assert!(s.contains("<rect") && s.contains("<path"));
    }
}
