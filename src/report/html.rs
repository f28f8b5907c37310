//! The self-contained HTML report of a replay: inline SVG and CSS, no scripts, no CDN.

use std::fmt::Write;
use voxlat_core::segments::VOICE_TO_VOICE;
use voxlat_core::EventKind;
use voxlat_pipeline::record::TurnOutcome;
use voxlat_pipeline::results::ReplayResults;

pub(super) const COLORS: &[&str] = &[
    "#4e79a7", "#f28e2b", "#e15759", "#b07aa1", "#76b7b2", "#59a14f", "#edc948", "#ff9da7",
    "#9c755f",
];

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

pub fn render(r: &ReplayResults) -> String {
    let mut h = String::new();
    let a = &r.aggregate;
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>voxlat replay {}</title><style>\
         body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}\
         td,th{{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
         .legend span{{display:inline-block;margin-right:1em}}.sw{{display:inline-block;width:10px;height:10px;margin-right:4px}}\
         small{{color:#666}}</style></head><body>",
        esc(&r.header.started_utc)
    );
    let _ = write!(
        h,
        "<h1>voxlat replay</h1><p>{} · voxlat {} · {} measured turns ({} ok, {} no speech, {} errors, {} cut the speaker off and are left out of the latency){}</p><p><small>{}</small></p>",
        esc(&r.header.started_utc),
        esc(&r.header.tool_version),
        a.turns,
        a.ok,
        a.no_speech,
        a.errors,
        a.cut_off,
        if r.header.interrupted { " · <b>interrupted</b>" } else { "" },
        esc(&r.timing_note)
    );
    // What a directory replay left out, so a short report is not mistaken for a full one.
    if !r.skipped.is_empty() {
        let _ = write!(
            h,
            "<p><b>Skipped ({}), not measured:</b></p><ul>",
            r.skipped.len()
        );
        for s in &r.skipped {
            let _ = write!(h, "<li>{}</li>", esc(s));
        }
        h.push_str("</ul>");
    }
    // Aggregate table.
    h.push_str("<h2>User stopped speaking → first audio</h2><table><tr><th>ms</th><th>n</th><th>mean</th><th>P50</th><th>P95</th><th>P99</th><th>max</th></tr>");
    for (name, s) in a.segments.iter().map(|(n, s)| (n.name(), Some(s))).chain([
        ("total", a.total.as_ref()),
        ("overhead (no stage working)", a.overhead.as_ref()),
    ]) {
        if let Some(s) = s {
            let mark = if a.dominant_p50.map(|d| d.name()) == Some(name) {
                " ◀ dominant (P50)"
            } else {
                ""
            };
            let _ = write!(h, "<tr><td>{}{}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td></tr>", esc(name), mark, s.n, s.mean, s.p50, s.p95, s.p99, s.max);
        }
    }
    let _ = write!(
        h,
        "</table><p>Dominant stage: <b>{}</b> at P50{}. Segments sum exactly to the total: {}.</p>",
        esc(a.dominant_p50.map_or("-", |d| d.name())),
        match (&a.dominant_p95, &a.dominant_p50) {
            (Some(p95), Some(p50)) if p95 != p50 => format!(", <b>{}</b> at P95", esc(p95.name())),
            _ => String::new(),
        },
        if a.sums_exact { "yes" } else { "<b>NO</b>" }
    );
    pace(&mut h, a);
    // Legend.
    h.push_str("<p class=\"legend\">");
    for (i, s) in VOICE_TO_VOICE.steps.iter().enumerate() {
        let _ = write!(
            h,
            "<span><i class=\"sw\" style=\"background:{}\"></i>{}</span>",
            COLORS[i % COLORS.len()],
            s.name
        );
    }
    h.push_str("</p>");
    super::html_levels::levels(&mut h, r);
    stacked_bars(&mut h, r);
    distributions(&mut h, r);
    waterfall(&mut h, r);
    turn_table(&mut h, r);
    h.push_str("</body></html>\n");
    h
}

fn stacked_bars(h: &mut String, r: &ReplayResults) {
    let turns: Vec<_> = r
        .turns
        .iter()
        .filter(|t| !t.warmup && t.breakdown.is_some())
        .collect();
    if turns.is_empty() {
        return;
    }
    let max = turns
        .iter()
        .filter_map(|t| t.breakdown.as_ref())
        .map(|b| ms(b.total_ns))
        .fold(1.0, f64::max);
    let (w, row, left) = (900.0, 18.0, 200.0);
    let height = turns.len() as f64 * row + 30.0;
    let _ = write!(h, "<h2>Per turn</h2><svg width=\"{}\" height=\"{height}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">", w + left + 60.0);
    for (i, t) in turns.iter().enumerate() {
        let y = i as f64 * row;
        let _ = write!(
            h,
            "<text x=\"0\" y=\"{}\">{}</text>",
            y + 12.0,
            esc(&format!("{} #{}", t.turn, t.repeat))
        );
        let mut x = left;
        let b = t.breakdown.as_ref().expect("filtered");
        for (k, s) in b.segments.iter().enumerate() {
            let bw = (ms(s.ns).max(0.0) / max) * w;
            let _ = write!(h, "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{bw:.1}\" height=\"{}\" fill=\"{}\"><title>{}: {:.0} ms</title></rect>", row - 4.0, COLORS[k % COLORS.len()], s.name, ms(s.ns));
            x += bw;
        }
        let _ = write!(
            h,
            "<text x=\"{:.1}\" y=\"{}\">{:.0} ms</text>",
            x + 4.0,
            y + 12.0,
            ms(b.total_ns)
        );
    }
    let _ = write!(h, "<text x=\"{left}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max:.0} ms</text></svg>", height - 6.0, left + w, height - 6.0);
}

fn distributions(h: &mut String, r: &ReplayResults) {
    let turns: Vec<_> = r
        .turns
        .iter()
        .filter(|t| !t.warmup)
        .filter_map(|t| t.breakdown.as_ref())
        .collect();
    if turns.is_empty() {
        return;
    }
    let (w, row, left) = (700.0, 28.0, 160.0);
    let steps: Vec<&str> = VOICE_TO_VOICE
        .steps
        .iter()
        .map(|s| s.name.name())
        .chain(["total"])
        .collect();
    let value = |b: &voxlat_core::segments::Breakdown, name: &str| {
        if name == "total" {
            Some(b.total_ns)
        } else {
            b.segments.iter().find(|s| s.name == name).map(|s| s.ns)
        }
    };
    let max = turns
        .iter()
        .flat_map(|b| steps.iter().filter_map(|n| value(b, n)))
        .map(ms)
        .fold(1.0, f64::max);
    let _ = write!(h, "<h2>Distribution of each segment</h2><svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">", w + left + 40.0, steps.len() as f64 * row + 24.0);
    for (i, name) in steps.iter().enumerate() {
        let y = i as f64 * row + 14.0;
        let _ = write!(h, "<text x=\"0\" y=\"{}\">{name}</text><line x1=\"{left}\" x2=\"{}\" y1=\"{y}\" y2=\"{y}\" stroke=\"#eee\"/>", y + 4.0, left + w);
        let color = COLORS.get(i).copied().unwrap_or("#333");
        let mut vals: Vec<f64> = turns
            .iter()
            .filter_map(|b| value(b, name))
            .map(ms)
            .collect();
        for v in &vals {
            let _ = write!(
                h,
                "<circle cx=\"{:.1}\" cy=\"{y}\" r=\"3\" fill=\"{color}\" fill-opacity=\"0.6\"/>",
                left + v.max(0.0) / max * w
            );
        }
        vals.sort_by(f64::total_cmp);
        if let Some(p50) = vals.get(vals.len().saturating_sub(1) / 2) {
            let _ = write!(h, "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#000\"><title>P50 {3:.0} ms</title></line>", left + p50.max(0.0) / max * w, y - 8.0, y + 8.0, p50);
        }
    }
    let _ = write!(h, "<text x=\"{left}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{max:.0} ms</text></svg><p><small>Dots: turns; bar: median.</small></p>", steps.len() as f64 * row + 20.0, left + w, steps.len() as f64 * row + 20.0);
}

fn waterfall(h: &mut String, r: &ReplayResults) {
    // The turn with the median total, drawn from speech end.
    let mut ok: Vec<_> = r
        .turns
        .iter()
        .filter(|t| !t.warmup && t.outcome == TurnOutcome::Ok && t.breakdown.is_some())
        .collect();
    if ok.is_empty() {
        return;
    }
    ok.sort_by_key(|t| t.breakdown.as_ref().map_or(0, |b| b.total_ns));
    let t = ok[ok.len() / 2];
    let Some(&origin) = t.events.get(&EventKind::SpeechEnd) else {
        return;
    };
    let end = t
        .events
        .get(&EventKind::PlayoutDone)
        .or(t.events.get(&EventKind::LlmDone))
        .copied()
        .unwrap_or(origin);
    let span = ms(end.signed_since(origin)).max(1.0);
    let (w, row, left) = (760.0, 20.0, 190.0);
    let rel = |n: voxlat_core::Nanos| left + ms(n.signed_since(origin)).max(0.0) / span * w;
    let _ = write!(
        h,
        "<h2>One turn as a waterfall</h2><p>{} #{} (median total): “{}” → “{}”</p>",
        esc(&t.turn),
        t.repeat,
        esc(&t.transcript),
        esc(&t.reply_text)
    );
    let mut rows: Vec<(String, voxlat_core::Nanos, voxlat_core::Nanos)> = Vec::new();
    let ev = |k: EventKind| t.events.get(&k).copied();
    let mut push = |name: &str, a: Option<voxlat_core::Nanos>, b: Option<voxlat_core::Nanos>| {
        if let (Some(a), Some(b)) = (a, b) {
            rows.push((name.to_string(), a, b));
        }
    };
    push(
        "endpointing",
        ev(EventKind::SpeechEnd),
        ev(EventKind::Endpoint),
    );
    for s in t
        .busy
        .iter()
        .filter(|s| s.stage == voxlat_pipeline::record::Stage::Asr)
    {
        push("asr (compute)", Some(s.from), Some(s.to));
    }
    push(
        "llm request → first token",
        ev(EventKind::LlmSent),
        ev(EventKind::LlmFirstToken),
    );
    push(
        "llm generation",
        ev(EventKind::LlmFirstToken),
        ev(EventKind::LlmDone),
    );
    for (i, c) in t.chunks.iter().enumerate() {
        push(
            &format!("tts chunk {i} ({} chars)", c.chars),
            Some(c.started),
            c.first_audio,
        );
    }
    push(
        "playout",
        ev(EventKind::PlayoutStart),
        ev(EventKind::PlayoutDone),
    );
    let _ = write!(
        h,
        "<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">",
        w + left + 20.0,
        rows.len() as f64 * row + 40.0
    );
    for (i, (name, a, b)) in rows.iter().enumerate() {
        let y = i as f64 * row;
        let x = rel(*a);
        let _ = write!(h, "<text x=\"0\" y=\"{}\">{}</text><rect x=\"{x:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"{}\" fill=\"{}\"><title>{:.0}–{:.0} ms</title></rect>", y + 13.0, esc(name), (rel(*b) - x).max(1.0), row - 6.0, COLORS[i % COLORS.len()], ms(a.signed_since(origin)), ms(b.signed_since(origin)));
    }
    if let Some(llm) = &t.llm {
        let y = rows.len() as f64 * row;
        let _ = write!(h, "<text x=\"0\" y=\"{}\">tokens</text>", y + 13.0);
        for d in &llm.deltas {
            let _ = write!(
                h,
                "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/>",
                rel(d.t),
                y + 2.0,
                y + 14.0
            );
        }
    }
    let _ = write!(h, "<text x=\"{left}\" y=\"{}\">speech end</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">+{span:.0} ms</text></svg>", rows.len() as f64 * row + 36.0, left + w, rows.len() as f64 * row + 36.0);
}

/// TPOT, ITL, TTS real-time factor and the playback margin (voxlat_pipeline::pace).
fn pace(h: &mut String, a: &voxlat_pipeline::Aggregate) {
    let Some(p) = &a.pace else { return };
    h.push_str("<h2>Reply pace</h2><table><tr><th></th><th>n</th><th>min</th><th>P50</th><th>P95</th><th>max</th></tr>");
    for (name, s) in [
        ("TPOT (ms)", &p.tpot_ms),
        ("ITL P95 per reply (ms)", &p.itl_p95_ms),
        ("TTS real-time factor", &p.tts_rtf),
        (
            "playback margin (ms; below 0 stutters)",
            &p.playback_margin_ms,
        ),
    ] {
        if let Some(s) = s {
            let _ = write!(h, "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>", esc(name), s.n, s.min, s.p50, s.p95, s.max);
        }
    }
    h.push_str("</table>");
}

fn turn_table(h: &mut String, r: &ReplayResults) {
    h.push_str("<h2>Turns</h2><table><tr><th>turn</th><th>outcome</th><th>transcript</th><th>WER</th><th>reply</th><th>total ms</th><th>TPOT ms</th><th>ITL P95 ms</th><th>TTS RTF</th><th>margin ms</th></tr>");
    for t in &r.turns {
        let _ = write!(
            h,
            "<tr><td>{}{} #{}</td><td>{:?}</td><td style=\"text-align:left\">{}</td><td>{}</td><td style=\"text-align:left\">{}</td><td>{}</td>{}</tr>",
            if t.warmup { "(warm-up) " } else { "" },
            esc(&t.turn),
            t.repeat,
            t.outcome,
            esc(&t.transcript),
            t.wer.map(|w| format!("{:.0}%", w * 100.0)).unwrap_or_default(),
            esc(&t.error.clone().unwrap_or_else(|| t.reply_text.clone())),
            t.breakdown.as_ref().map(|b| format!("{:.0}", ms(b.total_ns))).unwrap_or_default(),
            pace_cells(t.pace.as_ref())
        );
    }
    h.push_str("</table>");
}

fn pace_cells(p: Option<&voxlat_pipeline::pace::ReplyPace>) -> String {
    let cell = |v: Option<f64>, digits: usize| {
        format!(
            "<td>{}</td>",
            v.map(|v| format!("{v:.digits$}")).unwrap_or_default()
        )
    };
    match p {
        Some(p) => [
            cell(p.tpot_ms, 0),
            cell(p.itl_p95_ms, 0),
            cell(p.tts_rtf, 2),
            cell(p.playback_margin_ms, 0),
        ]
        .concat(),
        None => "<td></td>".repeat(4),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn skipped_scenarios_are_listed_escaped() {
        let mut r = voxlat_pipeline::results::ReplayResults::new(
            voxlat_pipeline::PipelineConfig::default(),
            voxlat_core::threads::ThreadBudget::detect(),
            voxlat_pipeline::setup::Stages::default(),
        );
        let html = super::render(&r);
        assert!(!html.contains("Skipped"));
        r.skipped = vec!["a.toml: turn `<x>`: zero.wav: sample_rate = 0 Hz".into()];
        let html = super::render(&r);
        assert!(html.contains("Skipped (1)"), "{html}");
        assert!(
            html.contains("&lt;x&gt;") && html.contains("zero.wav"),
            "{html}"
        );
    }
}
