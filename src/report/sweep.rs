//! The endpointing sweep's table: delay against cut-offs, one row per rule.

use voxlat_core::table::{fmt_num, Table};
use voxlat_pipeline::sweep::SweepReport;

pub fn print_sweep(report: &SweepReport) {
    let mut t = Table::new(&[
        "rule",
        "utterances",
        "split",
        "truncated",
        "cut-off",
        "delay p50",
        "delay p95",
    ]);
    let ms = |v: Option<f64>| v.map(fmt_num).unwrap_or_else(|| "-".into());
    for r in &report.rows {
        t.row(vec![
            r.policy.label(),
            r.utterances.to_string(),
            r.split.to_string(),
            r.truncated.to_string(),
            format!("{:.0}%", r.cut_off_rate * 100.0),
            ms(r.delay_ms.as_ref().map(|s| s.p50)),
            ms(r.delay_ms.as_ref().map(|s| s.p95)),
        ]);
    }
    print!(
        "Endpointing delay (decision − true end of speech, audio time) against cut-offs:\n{}",
        t.render()
    );
    if report.rows.iter().any(|r| r.policy.turn.is_some()) {
        println!(
            "The turn model's rows hold for this CPU family only ({}): its int8 scores differ with and without VNNI, so sweep again on another.",
            voxlat_core::cpu::CpuInfo::detect().int8_family
        );
    }
    for c in &report.curves {
        let rate = |v: Option<f64>| v.map_or_else(|| "-".into(), |r| format!("{:.1}%", r * 100.0));
        let ms = |v: Option<f64>| v.map_or_else(|| "not reached".into(), |l| format!("{l:.0} ms"));
        println!(
            "eot-bench figures, {} ({} settings): cut-off {} within 300 ms, {} within 600 ms; latency {} at 5 % cut-offs, {} at 10 %.",
            c.name,
            c.points.len(),
            rate(c.cutoff_at_300ms),
            rate(c.cutoff_at_600ms),
            ms(c.latency_at_5pct_ms),
            ms(c.latency_at_10pct_ms)
        );
    }
    if let Some(s) = &report.score_ms {
        println!(
            "Each turn-model score also took P50 {} ms, P95 {} ms ({} scores, 1 thread); a decision after a score comes that much later.",
            fmt_num(s.p50),
            fmt_num(s.p95),
            s.n
        );
    }
}
