//! One rule per cause: each reads the run's cells, sweeps and probes and says, with the
//! evidence, what drives TTFT. Every threshold is a named constant in the parent module.

use super::*;

/// Queueing: a heavy or two-humped tail, or the server saying so.
pub(super) fn queueing(cells: &[&CellSummary], requests: &[RequestRecord]) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in cells.iter() {
        let Some(t) = &c.ttft_ms else { continue };
        let samples: Vec<f64> = measured(requests, &c.cell)
            .iter()
            .filter_map(|r| r.ttft_ms())
            .collect();
        let tail = t.tail_ratio().filter(|_| t.n >= MIN_SAMPLES_FOR_TAIL);
        let queue_share = c
            .server_view
            .as_ref()
            .and_then(|v| Some(share(v.queue_ms.as_ref()?.p50, t.p50)));
        let evidence = if let Some((lo, hi, hi_share)) = bimodal(&samples) {
            Some(format!(
                "{}: TTFT is bimodal: {:.0}% of requests near {hi:.0} ms, the rest near {lo:.0} ms",
                c.cell,
                hi_share * 100.0
            ))
        } else if let Some(r) = tail.filter(|&r| r > TAIL_RATIO_QUEUEING) {
            Some(format!(
                "{}: P99/P50 = {r:.1} (> {TAIL_RATIO_QUEUEING}): P50 {:.0} ms, P99 {:.0} ms",
                c.cell, t.p50, t.p99
            ))
        } else {
            queue_share
                .filter(|&s| s >= SERVER_QUEUE_MIN_SHARE)
                .map(|s| {
                    format!(
                        "{}: the server reports {:.0}% of TTFT as queue time",
                        c.cell,
                        s * 100.0
                    )
                })
        };
        if let Some(evidence) = evidence {
            out.push(Finding {
                cause: Cause::Queueing,
                evidence,
                advice: "requests wait for a free slot: lower the concurrency, add replicas or \
                         slots, or enable chunked prefill so long prompts do not block others"
                    .into(),
            });
        }
    }
    out
}

/// Prefill: TTFT at c=1 grows with the prompt, or the server says prefill takes most of it.
pub(super) fn prefill(sweeps: &[SweepResult], cells: &[&CellSummary]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut prefill_found = false;
    for s in sweeps
        .iter()
        .filter(|s| s.param == SweepParam::PromptTokens)
    {
        let Some(fit) = &s.fit else { continue };
        let xmax = s
            .points
            .iter()
            .map(|p| p.prompt_tokens.unwrap_or(f64::from(p.value)))
            .fold(0.0, f64::max);
        let at_max = fit.predict_ms(xmax);
        let prompt_part = fit.slope_ms_per_1k * xmax / 1000.0;
        // A negative intercept means cost grows faster than linearly (attention over long
        // contexts); the prompt then accounts for all of TTFT at the largest point.
        let prompt_share = share(prompt_part, at_max).min(1.0);
        if s.load == "c=1" && fit.r2 >= FIT_MIN_R2 && prompt_share >= PREFILL_MIN_SHARE {
            prefill_found = true;
            let fixed = if fit.intercept_ms < 0.0 {
                format!(
                    "the intercept is below zero ({:.0} ms): prefill grows faster than linearly",
                    fit.intercept_ms
                )
            } else {
                format!("the fixed cost is {:.0} ms", fit.intercept_ms)
            };
            out.push(Finding {
                cause: Cause::Prefill,
                evidence: format!(
                    "{} {}: TTFT grows {:.1} ms per 1k prompt tokens (R² {:.3}); at {xmax:.0} tokens \
                     the prompt-dependent part is {:.0}% of TTFT; {fixed}",
                    s.model,
                    s.load,
                    fit.slope_ms_per_1k,
                    fit.r2,
                    prompt_share * 100.0,
                ),
                advice: "prompt processing dominates: put stable content first and enable prefix \
                         caching, shorten the context, or use a faster prefill (GPU, smaller model)"
                    .into(),
            });
        }
    }
    if !prefill_found {
        for c in cells.iter().filter(|c| c.load == "c=1") {
            let (Some(t), Some(v)) = (&c.ttft_ms, &c.server_view) else {
                continue;
            };
            if let Some(p) = v.prefill_ms.as_ref().map(|s| s.p50) {
                if t.p50 >= SLOW_TTFT_MS && share(p, t.p50) >= SERVER_PREFILL_MIN_SHARE {
                    out.push(Finding {
                        cause: Cause::Prefill,
                        evidence: format!(
                            "{}: the server spends {p:.0} ms of the {:.0} ms TTFT (P50) on prefill",
                            c.cell, t.p50
                        ),
                        advice: "prompt processing dominates: put stable content first and enable \
                                 prefix caching, or shorten the context"
                            .into(),
                    });
                    break;
                }
            }
        }
    }
    out
}

/// TTFT that moves with max_tokens, which should not matter before the first token.
pub(super) fn max_tokens(sweeps: &[SweepResult]) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in sweeps.iter().filter(|s| s.param == SweepParam::MaxTokens) {
        let (Some(spread), Some(lo), Some(hi)) = (
            s.spread,
            s.points.iter().map(|p| p.ttft_p50_ms).reduce(f64::min),
            s.points.iter().map(|p| p.ttft_p50_ms).reduce(f64::max),
        ) else {
            continue;
        };
        if spread > MAX_TOKENS_MAX_SPREAD && hi - lo > MAX_TOKENS_MIN_DELTA_MS {
            out.push(Finding {
                cause: Cause::MaxTokensNotFlat,
                evidence: format!(
                    "{} {}: TTFT P50 ranges {lo:.0}–{hi:.0} ms across max_tokens (+{:.0}%, more than {:.0}%)",
                    s.model,
                    s.load,
                    spread * 100.0,
                    MAX_TOKENS_MAX_SPREAD * 100.0
                ),
                advice: "the server does work proportional to max_tokens before the first token \
                         (pre-allocation or admission by reserved length): ask for no more \
                         max_tokens than replies need"
                    .into(),
            });
        }
    }
    out
}

/// A repeated prompt no faster than a new one.
pub(super) fn prefix_cache(cache: &[CacheProbeResult]) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in cache {
        if matches!(
            c.verdict,
            CacheVerdict::NoReuse | CacheVerdict::ExactMatchOnly
        ) {
            let get = |s: CacheStep| {
                c.ttft_p50_ms
                    .iter()
                    .find(|(k, _)| *k == s)
                    .map_or(f64::NAN, |(_, v)| *v)
            };
            out.push(Finding {
                cause: Cause::NoPrefixCache,
                evidence: format!(
                    "{}: repeated prompt {:.0} ms vs new prompt {:.0} ms, change at the end {:.0} ms ({})",
                    c.model,
                    get(CacheStep::Repeat),
                    get(CacheStep::Cold),
                    get(CacheStep::ChangeEnd),
                    if c.verdict == CacheVerdict::NoReuse {
                        "no reuse"
                    } else {
                        "only identical prompts reuse"
                    }
                ),
                advice: "enable prefix caching on the server, and put stable content (system \
                         prompt, tools, documents) first and variable content last"
                    .into(),
            });
        }
    }
    out
}

/// A new connection that costs a noticeable share of TTFT.
pub(super) fn connection_reuse(connections: &[ConnectionResult]) -> Vec<Finding> {
    let mut out = Vec::new();
    for r in connections {
        let (Some(cold), Some(warm)) = (r.cold_ttfb_p50_ms, r.warm_ttfb_p50_ms) else {
            continue;
        };
        let gap = cold - warm;
        let warm_ttft = r.warm_ttft_p50_ms.unwrap_or(warm);
        if gap >= CONN_GAP_MIN_MS && share(gap, warm_ttft) >= CONN_GAP_MIN_SHARE {
            out.push(Finding {
                cause: Cause::ConnectionReuse,
                evidence: format!(
                    "{} {}: a new connection adds {gap:.0} ms to TTFB (cold {cold:.0} ms, warm {warm:.0} ms; DNS {}, connect{} {})",
                    r.model,
                    r.protocol,
                    r.dns_p50_ms.map_or("-".into(), |v| format!("{v:.1} ms")),
                    if r.tls { " + TLS" } else { "" },
                    r.connect_p50_ms.map_or("-".into(), |v| format!("{v:.1} ms"))
                ),
                advice: "reuse connections: one long-lived HTTP client with keep-alive, and \
                         pre-connect before the user stops speaking"
                    .into(),
            });
        }
    }
    out
}

/// Thinking before the first answer token.
pub(super) fn reasoning(cells: &[&CellSummary]) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in cells.iter() {
        let (Some(think), Some(answer)) = (&c.thinking_ms, &c.ttfat_ms) else {
            continue;
        };
        if share(think.p50, answer.p50) >= REASONING_MIN_SHARE {
            out.push(Finding {
                cause: Cause::Reasoning,
                evidence: format!(
                    "{}: {:.0} ms of thinking before the first answer token ({:.0}% of {:.0} ms; {} reasoning tokens)",
                    c.cell,
                    think.p50,
                    share(think.p50, answer.p50) * 100.0,
                    answer.p50,
                    c.reasoning_tokens
                        .as_ref()
                        .map_or("?".into(), |s| format!("{:.0}", s.p50))
                ),
                advice: "the model reasons before answering: for voice, turn reasoning off or \
                         cap its budget, or use a non-reasoning model"
                    .into(),
            });
        }
    }
    out
}

/// Time outside the server's own account.
pub(super) fn network(cells: &[&CellSummary]) -> Vec<Finding> {
    let mut out = Vec::new();
    for c in cells.iter() {
        let (Some(t), Some(v)) = (&c.ttft_ms, &c.server_view) else {
            continue;
        };
        if let Some(outside) = &v.outside_server_ms {
            if share(outside.p50, t.p50) >= OUTSIDE_SERVER_MIN_SHARE {
                out.push(Finding {
                    cause: Cause::Network,
                    evidence: format!(
                        "{}: {:.0} ms of the {:.0} ms TTFT (P50) is outside the server's own account",
                        c.cell, outside.p50, t.p50
                    ),
                    advice: "the time goes to the network, proxies or HTTP handling: move client \
                             and server closer, or remove a gateway hop"
                        .into(),
                });
            }
        }
    }
    out
}

/// The measuring client's own CPU, against the typical TTFT.
pub(super) fn client_overhead(cells: &[CellSummary], client: &ClientCost) -> Vec<Finding> {
    let mut out = Vec::new();
    let ttft_p50 = p50(&cells
        .iter()
        .filter_map(|c| c.ttft_ms.as_ref().map(|s| s.p50))
        .collect::<Vec<_>>());
    if let (Some(cpu), Some(t)) = (client.cpu_ms_per_request, ttft_p50) {
        if share(cpu, t) > CLIENT_OVERHEAD_WARN_SHARE {
            out.push(Finding {
                cause: Cause::ClientOverhead,
                evidence: format!(
                    "the client used {cpu:.2} ms of CPU per request, {:.1}% of the typical TTFT ({t:.0} ms)",
                    share(cpu, t) * 100.0
                ),
                advice: "the measuring client is not negligible: run it on a less loaded machine \
                         or lower the concurrency"
                    .into(),
            });
        }
    }
    out
}
