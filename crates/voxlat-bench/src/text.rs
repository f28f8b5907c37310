//! bench-llm's text report: a table per cell, then the run's analysis in words. The HTML
//! report ([`crate::html`]) shows the same figures as charts.

use crate::{BenchResults, CellSummary};
use voxlat_core::table::Table;

pub fn render_cell(c: &CellSummary) -> String {
    let mut out = String::new();
    let rps = c
        .throughput_rps
        .map(|r| format!(", {r:.2} req/s"))
        .unwrap_or_default();
    let tokens = if c.tokens_from_delta_count > 0 {
        format!(
            ", output tokens counted from deltas for {} requests (no usage sent)",
            c.tokens_from_delta_count
        )
    } else {
        String::new()
    };
    // Said every time, zero included: whether measured requests rode ready connections is
    // what tells TTFT from TTFT-plus-connect.
    let retried = if c.retried > 0 {
        format!(
            ", {} retried on a new connection after a stale one",
            c.retried
        )
    } else {
        String::new()
    };
    out.push_str(&format!(
        "\n{}: {} ok, {} errors{rps}, {} opened a connection{retried}{tokens}\n",
        c.cell, c.ok, c.errors, c.new_connections
    ));
    let mut t = Table::new(&["ms", "n", "mean", "p50", "p95", "p99", "max"]);
    t.summary_row("TTFT", c.ttft_ms.as_ref());
    if c.new_connections > 0 {
        t.summary_row("TTFT+connect", c.ttft_with_connect_ms.as_ref());
    }
    if c.ttfat_ms != c.ttft_ms {
        t.summary_row("first answer", c.ttfat_ms.as_ref());
    }
    t.summary_row("TTFB", c.ttfb_ms.as_ref());
    t.summary_row("first event", c.first_event_ms.as_ref());
    t.summary_row("TPOT", c.tpot_ms.as_ref());
    t.summary_row("ITL", c.itl_ms.as_ref());
    t.summary_row("E2E", c.e2e_ms.as_ref());
    if c.send_lag_ms.is_some() {
        t.summary_row("send lag", c.send_lag_ms.as_ref());
        t.summary_row("TTFT from due", c.ttft_from_schedule_ms.as_ref());
    }
    if c.thinking_ms.is_some() {
        t.summary_row("thinking", c.thinking_ms.as_ref());
        t.summary_row("reasoning tok", c.reasoning_tokens.as_ref());
    }
    if c.dns_ms.is_some() {
        t.summary_row("DNS", c.dns_ms.as_ref());
    }
    if c.connect_ms.is_some() {
        t.summary_row("connect", c.connect_ms.as_ref());
    }
    for (name, s) in &c.server_timings {
        t.summary_row(&format!("server {name}"), Some(s));
    }
    if let Some(v) = &c.server_view {
        t.summary_row("outside server", v.outside_server_ms.as_ref());
    }
    out.push_str(&t.render());
    for (class, e) in &c.errors_by_class {
        out.push_str(&format!("  error {class} x{}: {}\n", e.count, e.example));
    }
    out
}

fn cell_ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// Sweeps, probes, the server view and the diagnosis, after the cell tables.
pub fn render_analysis(r: &BenchResults) -> String {
    use crate::analysis::{CacheVerdict, *};
    use crate::config::SweepParam;
    let a = &r.analysis;
    let mut out = String::new();
    for s in &a.sweeps {
        out.push_str(&format!(
            "\nSweep {} ({} {}):\n",
            s.param.name(),
            s.model,
            s.load
        ));
        let mut t = Table::new(&[s.param.name(), "prompt tok", "n", "TTFT p50 ms"]);
        for p in &s.points {
            t.row(vec![
                p.value.to_string(),
                p.prompt_tokens.map_or("-".into(), |v| format!("{v:.0}")),
                p.n.to_string(),
                format!("{:.1}", p.ttft_p50_ms),
            ]);
        }
        out.push_str(&t.render());
        match (s.param, &s.fit, s.spread) {
            (SweepParam::PromptTokens, Some(f), _) => out.push_str(&format!(
                "  fit (least squares over the points' P50): TTFT = {:.1} ms + {:.2} ms per 1k prompt tokens; R² {:.3} over {} points{}\n",
                f.intercept_ms,
                f.slope_ms_per_1k,
                f.r2,
                f.points,
                if f.points < 3 { " (two points always fit exactly)" } else { "" }
            )),
            (SweepParam::PromptTokens, None, _) => {
                out.push_str("  fit: needs at least two points with different prompt sizes\n")
            }
            (SweepParam::MaxTokens, _, Some(sp)) => out.push_str(&format!(
                "  spread of TTFT P50 across max_tokens: {:.0}% ({} above {:.0}% and {:.0} ms)\n",
                sp * 100.0,
                if sp > MAX_TOKENS_MAX_SPREAD { "flagged when" } else { "flat: flagged only" },
                MAX_TOKENS_MAX_SPREAD * 100.0,
                MAX_TOKENS_MIN_DELTA_MS
            )),
            _ => {}
        }
    }
    for c in &a.cache {
        out.push_str(&format!("\nPrefix-cache probe ({}):\n", c.model));
        let mut t = Table::new(&["step", "TTFT p50 ms", "cached tokens"]);
        for (step, v) in &c.ttft_p50_ms {
            let cached = c
                .cached_tokens
                .iter()
                .find(|(k, _)| k == step)
                .map_or("-".into(), |(_, n)| format!("{n:.0}"));
            t.row(vec![step.name().into(), format!("{v:.1}"), cached]);
        }
        out.push_str(&t.render());
        out.push_str(&format!(
            "  verdict: {}\n",
            match c.verdict {
                CacheVerdict::PrefixCache => "the server caches prefixes (a repeat and a change at the end are fast, a change at the start is not)",
                CacheVerdict::ExactMatchOnly => "only an identical prompt is fast: the cache does not reuse a shared prefix",
                CacheVerdict::NoReuse => "no reuse: a repeated prompt costs a full prefill",
                CacheVerdict::Inconclusive => "inconclusive: prefill of this prompt is too short to tell; a longer prompt can",
            }
        ));
    }
    if !a.connections.is_empty() {
        out.push_str("\nConnections (P50, ms; cold = new connection, warm = pooled):\n");
        let mut t = Table::new(&[
            "protocol",
            "DNS",
            "connect",
            "cold TTFB",
            "warm TTFB",
            "cold TTFT",
            "warm TTFT",
            "errors",
        ]);
        for c in &a.connections {
            t.row(vec![
                format!("{} {}", c.model, c.protocol),
                cell_ms(c.dns_p50_ms),
                cell_ms(c.connect_p50_ms),
                cell_ms(c.cold_ttfb_p50_ms),
                cell_ms(c.warm_ttfb_p50_ms),
                cell_ms(c.cold_ttft_p50_ms),
                cell_ms(c.warm_ttft_p50_ms),
                c.errors.to_string(),
            ]);
        }
        out.push_str(&t.render());
        for c in r
            .cells
            .iter()
            .filter(|c| c.errors > 0 && c.cell.contains("HTTP/2"))
        {
            if let Some((class, e)) = c.errors_by_class.iter().next() {
                out.push_str(&format!("  {}: {class}: {}\n", c.cell, e.example));
            }
        }
    }
    let views: Vec<_> = r
        .cells
        .iter()
        .filter_map(|c| Some((c, c.server_view.as_ref()?)))
        .collect();
    if !views.is_empty() {
        out.push_str(
            "\nServer view (P50, ms; outside = client TTFT - server TTFT, per request):\n",
        );
        let mut t = Table::new(&[
            "cell",
            "client TTFT",
            "server TTFT",
            "queue",
            "prefill",
            "decode",
            "outside",
            "joined by id",
        ]);
        for (c, v) in views {
            let p = |s: &Option<voxlat_core::stats::Summary>| cell_ms(s.as_ref().map(|s| s.p50));
            t.row(vec![
                c.cell.clone(),
                p(&c.ttft_ms),
                p(&v.server_ttft_ms),
                p(&v.queue_ms),
                p(&v.prefill_ms),
                p(&v.decode_ms),
                p(&v.outside_server_ms),
                format!("{}/{}", v.joined_by_request_id, v.requests),
            ]);
        }
        out.push_str(&t.render());
        out.push_str("  (server times as reported: llama.cpp timings, Ollama durations or the embedded server's fields)\n");
        let by_response: usize = r
            .cells
            .iter()
            .filter_map(|c| c.server_view.as_ref())
            .map(|v| v.joined_by_response)
            .sum();
        if by_response > 0 {
            out.push_str(&format!("  ({by_response} requests' server times were joined by the response that carried them, in their own stream: the server did not echo X-Request-Id)\n"));
        }
    }
    out.push_str("\nDiagnosis:\n");
    if a.findings.is_empty() {
        out.push_str("  nothing stands out: no heavy tail, no prompt-driven prefill, cache and connections fine (within the thresholds in docs/guide.md)\n");
    }
    for f in &a.findings {
        out.push_str(&format!(
            "  - {}: {}\n    -> {}\n",
            f.cause.name(),
            f.evidence,
            f.advice
        ));
    }
    if let Some(cpu) = r.client.cpu_ms_per_request {
        out.push_str(&format!(
            "  client overhead: {cpu:.2} ms CPU per request (warned above {:.0}% of TTFT)\n",
            CLIENT_OVERHEAD_WARN_SHARE * 100.0
        ));
    }
    out
}
