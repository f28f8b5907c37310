//! "Why is my first token slow?": sweeps, probes and cells turned into evidence and a
//! diagnosis in words. Every threshold is a named constant here, and the README repeats them.
//!
//! TTFT ≈ network + queueing + prefill (+ reasoning). Each finding names one of those
//! causes, the numbers that point at it, and what usually helps.

mod findings;

use crate::config::SweepParam;
use crate::fit::LinearFit;
use crate::record::{CacheStep, RequestRecord, Variant};
use crate::results::ClientCost;
use crate::summary::CellSummary;
use serde::{Deserialize, Serialize};
use voxlat_core::stats::percentile_sorted;

/// P99/P50 of TTFT above this is a heavy tail: requests wait behind others.
pub const TAIL_RATIO_QUEUEING: f64 = 3.0;
/// Cells with fewer samples are not judged for tails or bimodality: one slow request in ten
/// is not a distribution.
pub const MIN_SAMPLES_FOR_TAIL: usize = 20;
/// Bimodal: the largest gap between consecutive sorted samples splits them into two groups
/// of at least this share each…
pub const BIMODAL_MIN_SHARE: f64 = 0.1;
/// …and the gap is at least this fraction of the lower group's median, and wider than the
/// P10–P90 spread of either group.
pub const BIMODAL_MIN_GAP_OF_LOW_MEDIAN: f64 = 0.5;
/// A prompt sweep's fit is trusted from this R² up.
pub const FIT_MIN_R2: f64 = 0.8;
/// Prefill dominates when the prompt-dependent part of the fitted TTFT at the largest swept
/// prompt is at least this share of it…
pub const PREFILL_MIN_SHARE: f64 = 0.5;
/// …or, without a sweep, when the server's prefill is this share of the client's TTFT at
/// concurrency 1.
pub const SERVER_PREFILL_MIN_SHARE: f64 = 0.5;
/// Below this P50 TTFT at concurrency 1 nothing is slow, so the server view blames no stage
/// for it (people notice gaps above ~200 ms in conversation; docs/latency-model.md).
pub const SLOW_TTFT_MS: f64 = 200.0;
/// The server's queue time at this share of TTFT or more is queueing, whatever the tail.
pub const SERVER_QUEUE_MIN_SHARE: f64 = 0.3;
/// max_tokens sweep: TTFT is "not flat" when the slowest point's P50 exceeds the fastest's
/// by more than this fraction and by more than [`MAX_TOKENS_MIN_DELTA_MS`].
pub const MAX_TOKENS_MAX_SPREAD: f64 = 0.25;
pub const MAX_TOKENS_MIN_DELTA_MS: f64 = 10.0;
/// Prefix cache works when a repeated prompt's P50 TTFT is at most this fraction of a cold
/// one's, and the saving is at least [`CACHE_MIN_SAVING_MS`] (below that the prompt is too
/// short for prefill to show).
pub const CACHE_HIT_MAX_RATIO: f64 = 0.7;
pub const CACHE_MIN_SAVING_MS: f64 = 5.0;
/// A new connection costs enough to mention when cold − warm TTFB (P50) is at least this…
pub const CONN_GAP_MIN_MS: f64 = 5.0;
/// …and this share of the warm TTFT.
pub const CONN_GAP_MIN_SHARE: f64 = 0.1;
/// The client's CPU per request above this share of P50 TTFT is not negligible.
pub const CLIENT_OVERHEAD_WARN_SHARE: f64 = 0.05;
/// Reasoning dominates when thinking is at least this share of time to first answer.
pub const REASONING_MIN_SHARE: f64 = 0.5;
/// Time outside the server (network, HTTP, SSE) is reported as a cause from this share of
/// TTFT.
pub const OUTSIDE_SERVER_MIN_SHARE: f64 = 0.5;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    Queueing,
    Prefill,
    NoPrefixCache,
    ConnectionReuse,
    MaxTokensNotFlat,
    Reasoning,
    Network,
    ClientOverhead,
    PromptCache,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::Queueing => "queueing",
            Cause::Prefill => "prefill",
            Cause::NoPrefixCache => "no prefix-cache reuse",
            Cause::ConnectionReuse => "connection reuse",
            Cause::MaxTokensNotFlat => "max_tokens moves TTFT",
            Cause::Reasoning => "reasoning",
            Cause::Network => "network and HTTP",
            Cause::ClientOverhead => "client overhead",
            Cause::PromptCache => "prompt cache flatters TTFT",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub cause: Cause,
    /// The evidence, with numbers.
    pub evidence: String,
    /// What usually helps.
    pub advice: String,
}

/// A prompt-length sweep: TTFT P50 per point and the fitted line, per model and load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    pub model: String,
    pub load: String,
    pub param: SweepParam,
    /// (swept value, prompt tokens used as x, P50 TTFT ms, n).
    pub points: Vec<SweepPoint>,
    pub fit: Option<LinearFit>,
    /// max_tokens sweeps: (slowest − fastest P50) / fastest.
    pub spread: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub value: u32,
    pub prompt_tokens: Option<f64>,
    pub ttft_p50_ms: f64,
    pub n: usize,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheVerdict {
    /// Repeat and change-at-end fast, change-at-start slow: a prefix cache.
    PrefixCache,
    /// Only an identical prompt is fast.
    ExactMatchOnly,
    /// Repeats are as slow as a cold prompt.
    NoReuse,
    /// Cold prefill too short to tell a hit from a miss.
    Inconclusive,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheProbeResult {
    pub model: String,
    /// P50 TTFT per step, in probe order.
    pub ttft_p50_ms: Vec<(CacheStep, f64)>,
    /// Mean `cached_tokens` (usage or `cache_n`) per step, where the server reports it.
    pub cached_tokens: Vec<(CacheStep, f64)>,
    pub verdict: CacheVerdict,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionResult {
    pub model: String,
    pub protocol: String,
    pub cold_ttfb_p50_ms: Option<f64>,
    pub warm_ttfb_p50_ms: Option<f64>,
    pub cold_ttft_p50_ms: Option<f64>,
    pub warm_ttft_p50_ms: Option<f64>,
    pub dns_p50_ms: Option<f64>,
    pub connect_p50_ms: Option<f64>,
    pub tls: bool,
    pub errors: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub sweeps: Vec<SweepResult>,
    pub cache: Vec<CacheProbeResult>,
    pub connections: Vec<ConnectionResult>,
    pub findings: Vec<Finding>,
}

/// The largest gap between sorted samples, if it splits them into two clearly separate
/// groups (see the `BIMODAL_*` constants). Returns (low P50, high P50, share of high).
pub fn bimodal(samples: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < MIN_SAMPLES_FOR_TAIL {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let min_group = ((n as f64) * BIMODAL_MIN_SHARE).ceil().max(2.0) as usize;
    let split = (min_group..=n - min_group)
        .max_by(|&a, &b| (v[a] - v[a - 1]).total_cmp(&(v[b] - v[b - 1])))?;
    let (low, high) = v.split_at(split);
    let gap = high[0] - low[low.len() - 1];
    let spread = |g: &[f64]| percentile_sorted(g, 90.0) - percentile_sorted(g, 10.0);
    let low_med = percentile_sorted(low, 50.0);
    (gap >= BIMODAL_MIN_GAP_OF_LOW_MEDIAN * low_med && gap > spread(low) && gap > spread(high))
        .then(|| {
            (
                low_med,
                percentile_sorted(high, 50.0),
                high.len() as f64 / n as f64,
            )
        })
}

fn measured<'a>(requests: &'a [RequestRecord], cell: &str) -> Vec<&'a RequestRecord> {
    requests
        .iter()
        .filter(|r| r.cell == cell && !r.warmup && r.ok())
        .collect()
}

fn p50(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(percentile_sorted(&v, 50.0))
}

fn sweeps(cells: &[CellSummary], requests: &[RequestRecord]) -> Vec<SweepResult> {
    let mut groups: Vec<SweepResult> = Vec::new();
    for c in cells {
        let (param, value) = match c.variant {
            Some(Variant::PromptTokens { value }) => (SweepParam::PromptTokens, value),
            Some(Variant::MaxTokens { value }) => (SweepParam::MaxTokens, value),
            _ => continue,
        };
        let Some(ttft) = &c.ttft_ms else { continue };
        let recs = measured(requests, &c.cell);
        let tokens: Vec<f64> = recs.iter().filter_map(|r| r.prompt_tokens()).collect();
        let point = SweepPoint {
            value,
            prompt_tokens: p50(&tokens),
            ttft_p50_ms: ttft.p50,
            n: ttft.n,
        };
        match groups
            .iter_mut()
            .find(|g| g.model == c.model && g.load == c.load && g.param == param)
        {
            Some(g) => g.points.push(point),
            None => groups.push(SweepResult {
                model: c.model.clone(),
                load: c.load.clone(),
                param,
                points: vec![point],
                fit: None,
                spread: None,
            }),
        }
    }
    for g in &mut groups {
        g.points.sort_by_key(|p| p.value);
        match g.param {
            SweepParam::PromptTokens => {
                // Cell medians, not every request: one queued request must not tilt the line.
                let pts: Vec<(f64, f64)> = g
                    .points
                    .iter()
                    .map(|p| (p.prompt_tokens.unwrap_or(f64::from(p.value)), p.ttft_p50_ms))
                    .collect();
                g.fit = LinearFit::fit(&pts);
            }
            SweepParam::MaxTokens => {
                let lo = g
                    .points
                    .iter()
                    .map(|p| p.ttft_p50_ms)
                    .fold(f64::INFINITY, f64::min);
                let hi = g.points.iter().map(|p| p.ttft_p50_ms).fold(0.0, f64::max);
                g.spread = (lo > 0.0 && g.points.len() > 1).then(|| (hi - lo) / lo);
            }
        }
    }
    groups
}

fn cache_probes(cells: &[CellSummary], requests: &[RequestRecord]) -> Vec<CacheProbeResult> {
    let mut models: Vec<&str> = Vec::new();
    for c in cells {
        if matches!(c.variant, Some(Variant::Cache { .. })) && !models.contains(&c.model.as_str()) {
            models.push(&c.model);
        }
    }
    models
        .into_iter()
        .map(|model| {
            let mut ttft = Vec::new();
            let mut cached = Vec::new();
            for c in cells.iter().filter(|c| c.model == model) {
                let Some(Variant::Cache { step }) = c.variant else {
                    continue;
                };
                if let Some(t) = &c.ttft_ms {
                    ttft.push((step, t.p50));
                }
                let v: Vec<f64> = measured(requests, &c.cell)
                    .iter()
                    .filter_map(|r| super::server_view::server_times(r)?.cached_tokens)
                    .chain(measured(requests, &c.cell).iter().filter_map(|r| {
                        r.outcome.server_timings.is_none().then_some(())?;
                        r.outcome
                            .usage
                            .as_ref()?
                            .prompt_tokens_details
                            .as_ref()?
                            .cached_tokens
                            .map(|n| n as f64)
                    }))
                    .collect();
                if !v.is_empty() {
                    cached.push((step, v.iter().sum::<f64>() / v.len() as f64));
                }
            }
            let verdict = cache_verdict(&ttft);
            CacheProbeResult {
                model: model.to_string(),
                ttft_p50_ms: ttft,
                cached_tokens: cached,
                verdict,
            }
        })
        .collect()
}

/// The verdict from the P50 TTFT of each probe step.
pub fn cache_verdict(ttft: &[(CacheStep, f64)]) -> CacheVerdict {
    let get = |s: CacheStep| ttft.iter().find(|(k, _)| *k == s).map(|(_, v)| *v);
    let (Some(cold), Some(repeat)) = (get(CacheStep::Cold), get(CacheStep::Repeat)) else {
        return CacheVerdict::Inconclusive;
    };
    let hit = |t: f64| t <= CACHE_HIT_MAX_RATIO * cold && cold - t >= CACHE_MIN_SAVING_MS;
    if cold < 2.0 * CACHE_MIN_SAVING_MS {
        // The whole TTFT is too short for a cache to save anything measurable.
        return CacheVerdict::Inconclusive;
    }
    if !hit(repeat) {
        return CacheVerdict::NoReuse;
    }
    match get(CacheStep::ChangeEnd) {
        Some(end) if hit(end) => CacheVerdict::PrefixCache,
        Some(_) => CacheVerdict::ExactMatchOnly,
        None => CacheVerdict::PrefixCache,
    }
}

fn connections(cells: &[CellSummary]) -> Vec<ConnectionResult> {
    let mut out: Vec<ConnectionResult> = Vec::new();
    for c in cells {
        let Some(Variant::Connection { http2, cold }) = c.variant else {
            continue;
        };
        let protocol = if http2 { "HTTP/2" } else { "HTTP/1.1" }.to_string();
        let idx = match out
            .iter()
            .position(|r| r.model == c.model && r.protocol == protocol)
        {
            Some(i) => i,
            None => {
                out.push(ConnectionResult {
                    model: c.model.clone(),
                    protocol,
                    cold_ttfb_p50_ms: None,
                    warm_ttfb_p50_ms: None,
                    cold_ttft_p50_ms: None,
                    warm_ttft_p50_ms: None,
                    dns_p50_ms: None,
                    connect_p50_ms: None,
                    tls: false,
                    errors: 0,
                });
                out.len() - 1
            }
        };
        let r = &mut out[idx];
        r.errors += c.errors;
        // The probe measures what a new connection costs, so its figures include the setup
        // (older results files have only the plain ones, which then did too).
        let ttfb = c
            .ttfb_with_connect_ms
            .as_ref()
            .or(c.ttfb_ms.as_ref())
            .map(|s| s.p50);
        let ttft = c
            .ttft_with_connect_ms
            .as_ref()
            .or(c.ttft_ms.as_ref())
            .map(|s| s.p50);
        if cold {
            r.cold_ttfb_p50_ms = ttfb;
            r.cold_ttft_p50_ms = ttft;
            r.dns_p50_ms = c.dns_ms.as_ref().map(|s| s.p50);
            r.connect_p50_ms = c.connect_ms.as_ref().map(|s| s.p50);
        } else {
            r.warm_ttfb_p50_ms = ttfb;
            r.warm_ttft_p50_ms = ttft;
        }
    }
    out
}

fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

/// Everything the run shows about what drives TTFT.
pub fn analyze(cells: &[CellSummary], requests: &[RequestRecord], client: &ClientCost) -> Analysis {
    let sweeps = sweeps(cells, requests);
    let cache = cache_probes(cells, requests);
    let connections = connections(cells);
    // Probe cells answer their own questions; the rest are the run's ordinary cells.
    let plain: Vec<&CellSummary> = cells
        .iter()
        .filter(|c| {
            !matches!(
                c.variant,
                Some(Variant::Cache { .. } | Variant::Connection { .. })
            )
        })
        .collect();
    let mut findings = findings::queueing(&plain, requests);
    findings.extend(findings::prefill(&sweeps, &plain));
    findings.extend(findings::max_tokens(&sweeps));
    findings.extend(findings::prefix_cache(&cache));
    findings.extend(findings::connection_reuse(&connections));
    findings.extend(findings::reasoning(&plain));
    findings.extend(findings::network(&plain));
    findings.extend(findings::client_overhead(cells, client));
    Analysis {
        sweeps,
        cache,
        connections,
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bimodal_needs_two_separate_groups() {
        let mut v: Vec<f64> = (0..30).map(|i| 20.0 + f64::from(i % 5)).collect();
        assert!(bimodal(&v).is_none(), "one group");
        for x in v.iter_mut().step_by(3) {
            *x += 150.0;
        }
        let (lo, hi, share) = bimodal(&v).unwrap();
        assert!(lo < 25.0 && hi > 170.0 && (share - 1.0 / 3.0).abs() < 0.01);
        let uniform: Vec<f64> = (0..40).map(|i| 100.0 + f64::from(i) * 3.0).collect();
        assert!(bimodal(&uniform).is_none(), "evenly spread");
        let mut outlier = vec![20.0; 30];
        outlier[0] = 500.0;
        assert!(bimodal(&outlier).is_none(), "one outlier is not a mode");
    }

    #[test]
    fn cache_verdicts() {
        use CacheStep::*;
        let v =
            |c, r, e, s| cache_verdict(&[(Cold, c), (Repeat, r), (ChangeEnd, e), (ChangeStart, s)]);
        assert_eq!(v(200.0, 20.0, 25.0, 200.0), CacheVerdict::PrefixCache);
        assert_eq!(v(200.0, 20.0, 200.0, 200.0), CacheVerdict::ExactMatchOnly);
        assert_eq!(v(200.0, 195.0, 200.0, 200.0), CacheVerdict::NoReuse);
        assert_eq!(v(3.0, 2.9, 3.0, 3.0), CacheVerdict::Inconclusive);
    }
}
