//! Prompt caches that flatter a run. A server that keeps earlier prompts (llama-server holds
//! them in host memory across requests and runs) answers a repeated prompt without prefill:
//! TTFT then measures a cache hit, 25× faster than the prefill it was meant to measure.
//! Synthetic prompts are new per request and per run, so on them any substantial cached
//! share is a warning sign; with a fixed prompt, hits are expected and nothing is said.

use super::analysis::{Cause, Finding};
use super::record::{CacheStep, RequestRecord, Variant};
use super::results::BenchResults;
use super::server_view::server_times;

/// A request counts as served from cache when at least this share of its prompt was cached.
/// Well above the few template tokens (the chat template's opening) that every prompt
/// shares with the one before.
pub const CACHED_MIN_SHARE: f64 = 0.5;
/// `compare` warns when the two runs' cache hit rates differ by this much (absolute).
pub const HIT_RATE_WARN_DIFF: f64 = 0.2;

/// (cached tokens, prompt tokens) as the server reported them: `usage` (OpenAI, vLLM) or
/// llama.cpp's `timings` (`cache_n` cached, `prompt_n` prefilled).
pub fn cached_and_prompt(r: &RequestRecord) -> Option<(f64, f64)> {
    let cached = server_times(r).and_then(|t| t.cached_tokens).or_else(|| {
        let u = r.outcome.usage.as_ref()?;
        u.prompt_tokens_details
            .as_ref()?
            .cached_tokens
            .map(|n| n as f64)
    })?;
    let from_timings = || {
        let t = r.outcome.server_timings.as_ref()?;
        Some(t.get("prompt_n")?.as_f64()? + t.get("cache_n")?.as_f64()?)
    };
    let prompt =
        from_timings().or_else(|| r.outcome.usage.as_ref()?.prompt_tokens.map(|n| n as f64))?;
    (prompt > 0.0).then_some((cached, prompt))
}

/// Requests whose prompt the server should never have seen: synthetic prompts of measured
/// cells, and the cache probe's cold step (its other steps repeat a prompt on purpose).
fn should_be_cold(r: &RequestRecord, synthetic: bool) -> bool {
    if r.warmup || !r.ok() {
        return false;
    }
    match r.variant {
        Some(Variant::Cache { step }) => step == CacheStep::Cold,
        Some(Variant::PromptTokens { .. }) => true,
        _ => synthetic,
    }
}

/// The diagnosis line when prompts that should be cold were served from the server's cache.
pub fn cold_cache_finding(requests: &[RequestRecord], synthetic: bool) -> Option<Finding> {
    let shares: Vec<f64> = requests
        .iter()
        .filter(|r| should_be_cold(r, synthetic))
        .filter_map(cached_and_prompt)
        .map(|(c, p)| c / p)
        .collect();
    let hits = shares.iter().filter(|&&s| s >= CACHED_MIN_SHARE).count();
    if hits == 0 {
        return None;
    }
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    Some(Finding {
        cause: Cause::PromptCache,
        evidence: format!(
            "{hits} of {} requests whose prompts should be new to the server were served mostly from its prompt cache ({:.0}% of prompt tokens cached on average): TTFT is flattered by the server's cache and does not measure prefill",
            shares.len(),
            mean * 100.0
        ),
        advice: "the prompts were sent before: a run repeated with the same prompt seed, or a server that caches across clients. A run without a fixed seed draws new prompts; restarting the server or turning its prompt cache off also clears it".into(),
    })
}

/// Share of prompt tokens served from cache over a run's measured requests, where the server
/// reports it.
pub fn hit_rate(r: &BenchResults) -> Option<f64> {
    let (cached, prompt) = r
        .requests
        .iter()
        .filter(|q| !q.warmup && q.ok())
        .filter_map(cached_and_prompt)
        .fold((0.0, 0.0), |(c, p), (qc, qp)| (c + qc, p + qp));
    (prompt > 0.0).then(|| cached / prompt)
}

/// `compare`'s warning when one run was served from cache much more than the other.
pub fn hit_rate_warning(a: &BenchResults, b: &BenchResults) -> Option<String> {
    let (ha, hb) = (hit_rate(a)?, hit_rate(b)?);
    ((ha - hb).abs() >= HIT_RATE_WARN_DIFF).then(|| {
        format!(
            "warning: the server's prompt cache served {:.0}% of prompt tokens in A and {:.0}% in B, so TTFT differences include cache hits, not only the server's speed. Compare runs with fresh prompts (no fixed seed) or with the cache off",
            ha * 100.0,
            hb * 100.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlat_llm::chunk::Usage;
    use voxlat_llm::record::StreamOutcome;

    fn rec(usage: Option<(u64, u64)>, timings: Option<(f64, f64)>) -> RequestRecord {
        let usage = usage.map(|(prompt, cached)| {
            serde_json::from_value::<Usage>(serde_json::json!({
                "prompt_tokens": prompt,
                "completion_tokens": 4,
                "prompt_tokens_details": {"cached_tokens": cached}
            }))
            .unwrap()
        });
        RequestRecord::for_test(
            "r",
            StreamOutcome {
                usage,
                server_timings: timings.map(|(prompt_n, cache_n)| {
                    serde_json::json!({"prompt_n": prompt_n, "cache_n": cache_n, "prompt_ms": 5.0})
                }),
                ..StreamOutcome::default()
            },
        )
    }

    #[test]
    fn cached_synthetic_prompts_are_called_out() {
        // llama-server's second run: 515 of 520 prompt tokens from cache.
        let hot = vec![rec(None, Some((5.0, 515.0))); 4];
        let f = cold_cache_finding(&hot, true).expect("a warning");
        assert_eq!(f.cause, Cause::PromptCache);
        assert!(
            f.evidence.contains("4 of 4") && f.evidence.contains("99%"),
            "{}",
            f.evidence
        );
        assert!(f.evidence.contains("flattered"), "{}", f.evidence);
        // A fixed prompt is expected to hit: nothing said.
        assert!(cold_cache_finding(&hot, false).is_none());
        // A cold run: only the template's few tokens are shared.
        let cold = vec![rec(Some((520, 4)), None); 4];
        assert!(cold_cache_finding(&cold, true).is_none());
        // The cache probe's repeat step hits on purpose; its cold step must not.
        let mut repeat = rec(Some((520, 510)), None);
        repeat.variant = Some(Variant::Cache {
            step: CacheStep::Repeat,
        });
        assert!(cold_cache_finding(std::slice::from_ref(&repeat), false).is_none());
        repeat.variant = Some(Variant::Cache {
            step: CacheStep::Cold,
        });
        assert!(cold_cache_finding(&[repeat], false).is_some());
    }

    #[test]
    fn compare_warns_when_hit_rates_differ() {
        let results = BenchResults::for_test;
        let a = results(vec![rec(None, Some((517.0, 3.0))); 3]);
        let b = results(vec![rec(None, Some((5.0, 515.0))); 3]);
        let w = hit_rate_warning(&a, &b).expect("a warning");
        assert!(w.contains("1% of prompt tokens in A and 99% in B"), "{w}");
        assert!(hit_rate_warning(&a, &a).is_none());
    }
}
