//! A `--sessions` replay in words: one table per level, then the stage that saturates first.

use voxlat_core::table::Table;
use voxlat_pipeline::levels::growth;
use voxlat_pipeline::results::ReplayResults;

pub fn print_levels(r: &ReplayResults) {
    for l in &r.levels {
        let a = &l.aggregate;
        let mut t = Table::new(&["ms", "n", "mean", "p50", "p95", "p99", "max"]);
        for (name, s) in &a.segments {
            t.summary_row(name.name(), Some(s));
        }
        t.summary_row("total", a.total.as_ref());
        print!(
            "\n{} session(s) at once: {} turns ({} ok, {} no speech, {} errors) in {:.1} s, {:.1} turns/min:\n{}",
            l.sessions,
            a.turns,
            a.ok,
            a.no_speech,
            a.errors,
            l.wall_s,
            l.turns_per_min,
            t.render()
        );
    }
    let (steps, first) = growth(&r.levels);
    for g in &steps {
        println!(
            "{} → {} sessions: {} grew most, P50 {:.0} → {:.0} ms (+{:.0} ms).",
            g.from,
            g.to,
            g.segment,
            g.p50_from_ms,
            g.p50_to_ms,
            g.grew_ms()
        );
    }
    match first {
        Some(g) => println!(
            "Saturates first: {} (P50 {:.0} ms with {} session(s), {:.0} ms with {}).",
            g.segment, g.p50_from_ms, g.from, g.p50_to_ms, g.to
        ),
        None if r.levels.len() > 1 => println!(
            "No step added {:.0}% of the total P50 to one segment: nothing saturated.",
            voxlat_pipeline::levels::SATURATION_SHARE * 100.0
        ),
        None => {}
    }
    println!(
        "Segments sum exactly to the total: {}.",
        if r.levels.iter().all(|l| l.aggregate.sums_exact) {
            "yes"
        } else {
            "NO"
        }
    );
}
