//! How much echo a canceller took out, measured from outside it: the echo alone (known in a
//! simulation) against what the canceller left, in windows, as the field measures output
//! ERLE. AEC3 removes most of the echo in its non-linear suppressor, not its linear filter,
//! so the output is what is measured.

/// Per-window output ERLE over a run.
#[derive(Clone, Debug, PartialEq)]
pub struct ErleWindows {
    /// dB per window whose echo is loud enough to judge, in order: (window start in seconds,
    /// ERLE).
    pub windows: Vec<(f64, f64)>,
}

impl ErleWindows {
    /// The median ERLE of the windows that start at or after `from_s`.
    pub fn median_from(&self, from_s: f64) -> Option<f64> {
        let mut v: Vec<f64> = self
            .windows
            .iter()
            .filter(|(t, _)| *t >= from_s)
            .map(|w| w.1)
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }
}

/// Output ERLE, `10 log10(P_echo / P_out)`, in windows of `window` samples at `rate`, where the
/// microphone held `echo` alone (no near-end speech) and the canceller gave `out`. Windows
/// whose echo is more than 40 dB under the loudest window are left out: silence between the
/// reply's words says nothing of the canceller.
pub fn erle_db(echo: &[f32], out: &[f32], window: usize, rate: u32) -> ErleWindows {
    let power = |x: &[f32]| x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>();
    let n = echo.len().min(out.len());
    let spans: Vec<(usize, f64, f64)> = (0..n / window.max(1))
        .map(|k| {
            let r = k * window..(k + 1) * window;
            (k * window, power(&echo[r.clone()]), power(&out[r]))
        })
        .collect();
    let loudest = spans.iter().map(|s| s.1).fold(0.0, f64::max);
    let windows = spans
        .into_iter()
        .filter(|&(_, e, _)| e > 0.0 && e >= loudest * 1e-4)
        .map(|(at, e, o)| {
            let left = o.max(e * 1e-9);
            (at as f64 / f64::from(rate), 10.0 * (e / left).log10())
        })
        .collect();
    ErleWindows { windows }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erle_is_the_echo_over_what_is_left_in_each_loud_window() {
        let echo: Vec<f32> = (0..4000).map(|i| (i as f32 * 0.1).sin()).collect();
        // 20 dB down: a tenth of the amplitude.
        let out: Vec<f32> = echo.iter().map(|v| v * 0.1).collect();
        let w = erle_db(&echo, &out, 1000, 16_000);
        assert_eq!(w.windows.len(), 4);
        for (_, db) in &w.windows {
            assert!((db - 20.0).abs() < 1e-6, "{db}");
        }
        assert!((w.median_from(0.1).unwrap() - 20.0).abs() < 1e-6);
        assert_eq!(w.median_from(1.0), None);
    }
}
