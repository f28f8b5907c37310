//! Two runs side by side: per cell and metric, the percentiles of each and their deltas,
//! with a Mann–Whitney U test (two-sided, normal approximation with tie correction and
//! continuity correction) on the per-request samples saying whether the distributions differ.
//!
//! Mann–Whitney rather than a t-test because latency is skewed and heavy-tailed; it asks
//! whether a request from one run tends to be slower than one from the other, which is the
//! question a before/after comparison asks.

use super::record::RequestRecord;
use super::results::BenchResults;
use serde::Serialize;
use voxlat_core::stats::Summary;

/// A difference is called significant below this two-sided p-value.
pub const SIGNIFICANCE_ALPHA: f64 = 0.05;
/// Fewer samples per side than this: no test (the normal approximation would mislead).
pub const MIN_SAMPLES_FOR_TEST: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MannWhitney {
    /// U of the first sample.
    pub u: f64,
    pub z: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Standard normal CDF through erf (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7).
fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    let a: Vec<f64> = a.iter().copied().filter(|x| x.is_finite()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|x| x.is_finite()).collect();
    if a.len() < MIN_SAMPLES_FOR_TEST || b.len() < MIN_SAMPLES_FOR_TEST {
        return None;
    }
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        // Tied values share the mean of the ranks they span (ranks are 1-based).
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        rank_sum_a += rank * all[i..=j].iter().filter(|x| x.1).count() as f64;
        i = j + 1;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let nf = n as f64;
    let var = n1 * n2 / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if var <= 0.0 {
        // Every value equal: no evidence of any difference.
        return Some(MannWhitney { u, z: 0.0, p: 1.0 });
    }
    let diff = u - mean;
    let z = (diff - 0.5 * diff.signum()) / var.sqrt();
    let p = (2.0 * (1.0 - normal_cdf(z.abs()))).clamp(0.0, 1.0);
    Some(MannWhitney { u, z, p })
}

/// A per-request figure, e.g. [`RequestRecord::ttft_ms`].
pub type Figure = fn(&RequestRecord) -> Option<f64>;

/// The metrics compared, with the per-request figure each is made of.
pub const METRICS: [(&str, Figure); 5] = [
    ("TTFT", RequestRecord::ttft_ms),
    ("first answer", RequestRecord::ttfat_ms),
    ("TTFB", RequestRecord::ttfb_ms),
    ("TPOT", RequestRecord::tpot_ms),
    ("E2E", RequestRecord::e2e_ms),
];

#[derive(Clone, Debug, Serialize)]
pub struct MetricDelta {
    pub metric: String,
    pub a: Summary,
    pub b: Summary,
    pub test: Option<MannWhitney>,
}

impl MetricDelta {
    pub fn significant(&self) -> Option<bool> {
        self.test.map(|t| t.p < SIGNIFICANCE_ALPHA)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct CellComparison {
    pub cell_a: String,
    pub cell_b: String,
    pub metrics: Vec<MetricDelta>,
}

/// Measured, successful samples of one metric in one cell.
pub fn samples(r: &BenchResults, cell: &str, f: Figure) -> Vec<f64> {
    r.requests
        .iter()
        .filter(|q| q.cell == cell && !q.warmup && q.ok())
        .filter_map(f)
        .collect()
}

/// Cells are matched by name; when no name matches (another model, say) and both runs have
/// the same number of cells, by position.
pub fn compare(a: &BenchResults, b: &BenchResults) -> Vec<CellComparison> {
    let names_a: Vec<&str> = a.cells.iter().map(|c| c.cell.as_str()).collect();
    let names_b: Vec<&str> = b.cells.iter().map(|c| c.cell.as_str()).collect();
    let mut pairs: Vec<(&str, &str)> = names_a
        .iter()
        .filter(|n| names_b.contains(n))
        .map(|n| (*n, *n))
        .collect();
    if pairs.is_empty() && names_a.len() == names_b.len() {
        pairs = names_a
            .iter()
            .copied()
            .zip(names_b.iter().copied())
            .collect();
    }
    pairs
        .into_iter()
        .map(|(ca, cb)| CellComparison {
            cell_a: ca.into(),
            cell_b: cb.into(),
            metrics: METRICS
                .iter()
                .filter_map(|(name, f)| {
                    let sa = samples(a, ca, *f);
                    let sb = samples(b, cb, *f);
                    // Without reasoning the first answer is the first token: one row is enough.
                    if *name == "first answer"
                        && sa == samples(a, ca, RequestRecord::ttft_ms)
                        && sb == samples(b, cb, RequestRecord::ttft_ms)
                    {
                        return None;
                    }
                    Some(MetricDelta {
                        metric: name.to_string(),
                        a: Summary::from_samples(&sa, 0)?,
                        b: Summary::from_samples(&sb, 0)?,
                        test: mann_whitney(&sa, &sb),
                    })
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_cdf_matches_known_values() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158_655_25).abs() < 1e-6);
    }

    #[test]
    fn mann_whitney_separates_shifted_samples_and_not_equal_ones() {
        let a: Vec<f64> = (0..30).map(|i| 100.0 + f64::from(i % 10)).collect();
        let b: Vec<f64> = (0..30).map(|i| 120.0 + f64::from(i % 10)).collect();
        let t = mann_whitney(&a, &b).unwrap();
        assert!(t.p < 1e-6 && t.u == 0.0, "{t:?}");
        let same = mann_whitney(&a, &a).unwrap();
        assert!(same.p > 0.9, "{same:?}");
        // Overlapping samples: 1..=10 vs 2..=11 is not a significant difference.
        let x: Vec<f64> = (1..=10).map(f64::from).collect();
        let y: Vec<f64> = (2..=11).map(f64::from).collect();
        assert!(mann_whitney(&x, &y).unwrap().p > 0.3);
        assert!(mann_whitney(&x[..3], &y).is_none());
        let flat = vec![5.0; 8];
        assert_eq!(mann_whitney(&flat, &flat).unwrap().p, 1.0);
    }

    #[test]
    fn u_of_a_small_textbook_case() {
        // a = {1, 3, 5}, b = {2, 4, 6, 7, 8}: pairs with a > b are (3,2), (5,2), (5,4) → U = 3.
        let a = [1.0, 3.0, 5.0, 1.0, 3.0];
        let b = [2.0, 4.0, 6.0, 7.0, 8.0];
        // With a's values doubled: pairs a > b: 3>2 twice, 5>2, 5>4 → U = 4.
        assert_eq!(mann_whitney(&a, &b).unwrap().u, 4.0);
    }
}
