//! The self-contained HTML report of a replay: inline SVG and CSS, no scripts, no CDN.

mod charts;

use maud::{html, Markup, PreEscaped, DOCTYPE};
use voxlat_core::clock::ns_to_ms;
use voxlat_core::segments::VOICE_TO_VOICE;
use voxlat_pipeline::pace::ReplyPace;
use voxlat_pipeline::results::ReplayResults;
use voxlat_pipeline::Aggregate;

pub(super) const COLORS: &[&str] = &[
    "#4e79a7", "#f28e2b", "#e15759", "#b07aa1", "#76b7b2", "#59a14f", "#edc948", "#ff9da7",
    "#9c755f",
];

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
    table{border-collapse:collapse}\
    td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}\
    td:first-child,th:first-child{text-align:left}\
    .legend span{display:inline-block;margin-right:1em}\
    .sw{display:inline-block;width:10px;height:10px;margin-right:4px}\
    small{color:#666}";

/// Milliseconds as the tables show them, whole.
pub(super) fn f0(v: f64) -> String {
    format!("{v:.0}")
}

/// SVG coordinates: a tenth of a pixel is as fine as a screen shows.
pub(super) fn f1(v: f64) -> String {
    format!("{v:.1}")
}

/// Writes the report of `r` beside its results file `json` (same name, `.html`), atomically;
/// returns where.
pub fn write_beside(
    r: &ReplayResults,
    json: &std::path::Path,
) -> anyhow::Result<std::path::PathBuf> {
    let html = json.with_extension("html");
    voxlat_core::fsio::write_atomic(&html, render(r).as_bytes())?;
    Ok(html)
}

pub fn render(r: &ReplayResults) -> String {
    let page = html! {
        (DOCTYPE)
        html {
            head {
                meta charset="utf-8";
                title { "voxlat replay " (r.header.started_utc) }
                style { (PreEscaped(CSS)) }
            }
            body {
                (header(r))
                (latency_table(&r.aggregate))
                (pace(&r.aggregate))
                (legend())
                (super::html_levels::levels(r))
                (charts::stacked_bars(r))
                (charts::distributions(r))
                (charts::waterfall(r))
                (turn_table(r))
            }
        }
    };
    let mut page = page.into_string();
    page.push('\n');
    page
}

fn header(r: &ReplayResults) -> Markup {
    let a = &r.aggregate;
    html! {
        h1 { "voxlat replay" }
        p {
            (r.header.started_utc) " · voxlat " (r.header.tool_version) " · "
            (a.turns) " measured turns (" (a.ok) " ok, " (a.no_speech) " no speech, "
            (a.errors) " errors, " (a.cut_off)
            " cut the speaker off and are left out of the latency)"
            @if r.header.interrupted {
                " · " b { "interrupted" }
            }
        }
        p { small { (r.timing_note) } }
        // What a directory replay left out, so a short report is not mistaken for a full one.
        @if !r.skipped.is_empty() {
            p { b { "Skipped (" (r.skipped.len()) "), not measured:" } }
            ul {
                @for s in &r.skipped {
                    li { (s) }
                }
            }
        }
    }
}

/// Each segment's percentiles, then the total and the time no stage was working.
fn latency_table(a: &Aggregate) -> Markup {
    let rows = a.segments.iter().map(|(n, s)| (n.name(), Some(s))).chain([
        ("total", a.total.as_ref()),
        ("overhead (no stage working)", a.overhead.as_ref()),
    ]);
    let dominant = a.dominant_p50.map(|d| d.name());
    html! {
        h2 { "User stopped speaking → first audio" }
        table {
            tr {
                th { "ms" } th { "n" } th { "mean" } th { "P50" } th { "P95" } th { "P99" }
                th { "max" }
            }
            @for (name, s) in rows {
                @if let Some(s) = s {
                    tr {
                        td {
                            (name)
                            @if dominant == Some(name) {
                                " ◀ dominant (P50)"
                            }
                        }
                        td { (s.n) }
                        td { (f0(s.mean)) }
                        td { (f0(s.p50)) }
                        td { (f0(s.p95)) }
                        td { (f0(s.p99)) }
                        td { (f0(s.max)) }
                    }
                }
            }
        }
        p {
            "Dominant stage: " b { (dominant.unwrap_or("-")) } " at P50"
            @if let (Some(p95), Some(p50)) = (a.dominant_p95, a.dominant_p50) {
                @if p95 != p50 {
                    ", " b { (p95.name()) } " at P95"
                }
            }
            ". Segments sum exactly to the total: "
            @if a.sums_exact {
                "yes"
            } @else {
                b { "NO" }
            }
            "."
        }
    }
}

/// TPOT, ITL, TTS real-time factor and the playback margin (voxlat_pipeline::pace).
fn pace(a: &Aggregate) -> Markup {
    let Some(p) = &a.pace else {
        return html! {};
    };
    let rows = [
        ("TPOT (ms)", &p.tpot_ms),
        ("ITL P95 per reply (ms)", &p.itl_p95_ms),
        ("TTS real-time factor", &p.tts_rtf),
        (
            "playback margin (ms; below 0 stutters)",
            &p.playback_margin_ms,
        ),
    ];
    let f2 = |v: f64| format!("{v:.2}");
    html! {
        h2 { "Reply pace" }
        table {
            tr { th {} th { "n" } th { "min" } th { "P50" } th { "P95" } th { "max" } }
            @for (name, s) in rows {
                @if let Some(s) = s {
                    tr {
                        td { (name) }
                        td { (s.n) }
                        td { (f2(s.min)) }
                        td { (f2(s.p50)) }
                        td { (f2(s.p95)) }
                        td { (f2(s.max)) }
                    }
                }
            }
        }
    }
}

/// The segments' colours, shared by the charts below.
fn legend() -> Markup {
    html! {
        p.legend {
            @for (k, s) in VOICE_TO_VOICE.steps.iter().enumerate() {
                span {
                    i.sw style=(format!("background:{}", COLORS[k % COLORS.len()])) {}
                    (s.name)
                }
            }
        }
    }
}

fn turn_table(r: &ReplayResults) -> Markup {
    html! {
        h2 { "Turns" }
        table {
            tr {
                th { "turn" } th { "outcome" } th { "transcript" } th { "WER" } th { "reply" }
                th { "total ms" } th { "TPOT ms" } th { "ITL P95 ms" } th { "TTS RTF" }
                th { "margin ms" }
            }
            @for t in &r.turns {
                tr {
                    td {
                        @if t.warmup {
                            "(warm-up) "
                        }
                        (t.turn) " #" (t.repeat)
                    }
                    td { (format!("{:?}", t.outcome)) }
                    td style="text-align:left" { (t.transcript) }
                    td { (t.wer.map(|w| format!("{:.0}%", w * 100.0)).unwrap_or_default()) }
                    td style="text-align:left" {
                        (t.error.as_deref().unwrap_or(t.reply_text.as_str()))
                    }
                    td { (t.breakdown.as_ref().map(|b| f0(ns_to_ms(b.total_ns))).unwrap_or_default()) }
                    (pace_cells(t.pace.as_ref()))
                }
            }
        }
    }
}

/// The turn's pace figures, empty cells where it has none, so the columns stay aligned.
fn pace_cells(p: Option<&ReplyPace>) -> Markup {
    let cell =
        |v: Option<f64>, digits: usize| v.map(|v| format!("{v:.digits$}")).unwrap_or_default();
    let cells: [String; 4] = match p {
        Some(p) => [
            cell(p.tpot_ms, 0),
            cell(p.itl_p95_ms, 0),
            cell(p.tts_rtf, 2),
            cell(p.playback_margin_ms, 0),
        ],
        None => Default::default(),
    };
    html! {
        @for c in &cells {
            td { (c) }
        }
    }
}

#[cfg(test)]
mod tests {
    use voxlat_core::segments::VOICE_TO_VOICE;
    use voxlat_core::Nanos;
    use voxlat_pipeline::results::ReplayResults;
    use voxlat_pipeline::{Aggregate, TurnOutcome, TurnRecord};

    fn results() -> ReplayResults {
        ReplayResults::new(
            voxlat_pipeline::PipelineConfig::default(),
            voxlat_core::threads::ThreadBudget::detect(),
            voxlat_pipeline::setup::Stages::default(),
        )
    }

    /// An answered turn of a `--sessions` level, each segment `step_ms` long, with a pace.
    fn turn(sessions: u32, start_ms: u64, step_ms: u64) -> TurnRecord {
        let mut t = TurnRecord::blank("s", "t<1>", &format!("r{sessions}-{start_ms}"), "x");
        t.sessions = sessions;
        t.outcome = TurnOutcome::Ok;
        t.transcript = "hello".into();
        let mut at = start_ms;
        t.events.insert(VOICE_TO_VOICE.start, Nanos(at * 1_000_000));
        for step in VOICE_TO_VOICE.steps {
            at += step_ms;
            t.events.insert(step.to, Nanos(at * 1_000_000));
        }
        t.compute_breakdown();
        // Set after the breakdown, which derives the pace from an LLM stream this turn lacks.
        t.pace = Some(voxlat_pipeline::pace::ReplyPace {
            tpot_ms: Some(20.0),
            itl_p95_ms: Some(30.0),
            tts_rtf: Some(0.3),
            playback_margin_ms: Some(150.0),
            ..Default::default()
        });
        t
    }

    #[test]
    fn skipped_scenarios_are_listed_escaped() {
        let mut r = results();
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

    #[test]
    fn the_report_renders_every_section() {
        let mut r = results();
        r.turns = vec![
            turn(1, 0, 50),
            turn(1, 10_000, 60),
            turn(2, 20_000, 80),
            turn(2, 30_000, 90),
        ];
        r.aggregate = Aggregate::from_turns(&r.turns);
        r.levels = voxlat_pipeline::levels::levels(&r.turns, &r.threads);
        let html = super::render(&r);
        // The headings the hand-written report wrote, in its order.
        let sections = [
            "<h1>voxlat replay</h1>",
            "<h2>User stopped speaking → first audio</h2>",
            "<h2>Reply pace</h2>",
            "<h2>Concurrency gradient: P50 of each segment by callers at once</h2>",
            "<h2>Per turn</h2>",
            "<h2>Distribution of each segment</h2>",
            "<h2>One turn as a waterfall</h2>",
            "<h2>Turns</h2>",
        ];
        let mut from = 0;
        for s in sections {
            let at = html[from..]
                .find(s)
                .unwrap_or_else(|| panic!("{s} missing or out of order:\n{html}"));
            from += at + s.len();
        }
        assert_eq!(html.matches("<h2>").count(), sections.len() - 1, "{html}");
        // The gradient, the stacked bars, the distributions and the waterfall.
        assert_eq!(html.matches("<svg").count(), 4, "{html}");
        assert!(
            html.contains("t&lt;1&gt; #0") && !html.contains("t<1>"),
            "{html}"
        );
    }
}
