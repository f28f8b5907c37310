//! Summary statistics, computed exactly from every sample.
//!
//! Percentiles use the nearest-rank method on the sorted samples: P*p* is the smallest sample
//! with at least *p* % of the samples at or below it, so every reported percentile is a value
//! that was actually observed. Runs here hold thousands of samples at most, so keeping them all
//! costs nothing and avoids a histogram's bucket error. With fewer than 100 samples P99 is the
//! maximum; [`Summary::n`] is always shown next to it so readers can tell.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Successful samples.
    pub n: usize,
    /// Failed attempts (not in the samples).
    pub errors: usize,
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

/// Nearest-rank percentile of sorted, non-empty samples.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

impl Summary {
    /// `None` when there are no (finite) samples. NaNs and infinities are dropped rather than
    /// poisoning every figure.
    pub fn from_samples(samples: &[f64], errors: usize) -> Option<Summary> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(Summary {
            n,
            errors,
            mean: v.iter().sum::<f64>() / n as f64,
            min: v[0],
            p50: percentile_sorted(&v, 50.0),
            p95: percentile_sorted(&v, 95.0),
            p99: percentile_sorted(&v, 99.0),
            max: v[n - 1],
        })
    }

    /// P99 / P50, the tail-heaviness ratio used to diagnose queueing.
    pub fn tail_ratio(&self) -> Option<f64> {
        (self.p50 > 0.0).then(|| self.p99 / self.p50)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_1_to_100() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::from_samples(&v, 2).unwrap();
        assert_eq!((s.n, s.errors), (100, 2));
        assert_eq!(
            (s.p50, s.p95, s.p99, s.max, s.min),
            (50.0, 95.0, 99.0, 100.0, 1.0)
        );
        assert!((s.mean - 50.5).abs() < 1e-12);
    }

    #[test]
    fn small_samples_report_observed_values() {
        let s = Summary::from_samples(&[3.0, 1.0, 2.0], 0).unwrap();
        assert_eq!((s.p50, s.p95, s.p99), (2.0, 3.0, 3.0));
        let one = Summary::from_samples(&[7.0], 0).unwrap();
        assert_eq!((one.p50, one.p99, one.mean), (7.0, 7.0, 7.0));
    }

    #[test]
    fn empty_and_non_finite_input() {
        assert!(Summary::from_samples(&[], 3).is_none());
        assert!(Summary::from_samples(&[f64::NAN], 0).is_none());
        let s = Summary::from_samples(&[1.0, f64::NAN, f64::INFINITY, 3.0], 0).unwrap();
        assert_eq!(s.n, 2);
        assert_eq!(s.max, 3.0);
    }

    #[test]
    fn tail_ratio_flags_heavy_tails() {
        let mut v = vec![10.0; 98];
        v.extend([100.0, 100.0]);
        let s = Summary::from_samples(&v, 0).unwrap();
        assert_eq!(s.tail_ratio(), Some(10.0));
    }
}
