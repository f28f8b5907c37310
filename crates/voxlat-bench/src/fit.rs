//! Ordinary least squares of TTFT against prompt length: the slope is the prefill cost per
//! token, the intercept what TTFT costs with no prompt at all (network, queue, templating).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinearFit {
    /// Milliseconds per 1000 prompt tokens.
    pub slope_ms_per_1k: f64,
    /// Milliseconds at zero prompt tokens.
    pub intercept_ms: f64,
    /// Coefficient of determination; 1 with two points, whatever they are.
    pub r2: f64,
    pub points: usize,
}

impl LinearFit {
    /// `points` are (prompt tokens, TTFT ms). `None` with fewer than two distinct x values.
    pub fn fit(points: &[(f64, f64)]) -> Option<LinearFit> {
        let pts: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        let n = pts.len() as f64;
        if pts.len() < 2 {
            return None;
        }
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let syy: f64 = pts.iter().map(|p| (p.1 - my).powi(2)).sum();
        if sxx <= 0.0 {
            return None;
        }
        let slope = sxy / sxx;
        let intercept = my - slope * mx;
        let sse: f64 = pts
            .iter()
            .map(|p| (p.1 - intercept - slope * p.0).powi(2))
            .sum();
        let r2 = if syy > 0.0 { 1.0 - sse / syy } else { 1.0 };
        Some(LinearFit {
            slope_ms_per_1k: slope * 1000.0,
            intercept_ms: intercept,
            r2,
            points: pts.len(),
        })
    }

    pub fn predict_ms(&self, tokens: f64) -> f64 {
        self.intercept_ms + self.slope_ms_per_1k * tokens / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_known_line_and_scores_noise() {
        let pts: Vec<(f64, f64)> = [100.0, 1000.0, 4000.0]
            .iter()
            .map(|&x| (x, 20.0 + 0.05 * x))
            .collect();
        let f = LinearFit::fit(&pts).unwrap();
        assert!((f.slope_ms_per_1k - 50.0).abs() < 1e-9);
        assert!((f.intercept_ms - 20.0).abs() < 1e-9);
        assert!((f.r2 - 1.0).abs() < 1e-12);
        assert!((f.predict_ms(2000.0) - 120.0).abs() < 1e-9);

        let flat_noise = [
            (100.0, 30.0),
            (1000.0, 10.0),
            (4000.0, 25.0),
            (2000.0, 12.0),
        ];
        assert!(LinearFit::fit(&flat_noise).unwrap().r2 < 0.5);
        assert!(LinearFit::fit(&[(5.0, 1.0), (5.0, 2.0)]).is_none());
        assert!(LinearFit::fit(&[(5.0, 1.0)]).is_none());
    }
}
