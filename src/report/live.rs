//! The live session's line per turn.

use std::io::Write;
use voxlat_pipeline::{Progress, TurnRecord};

/// The turn's number, its transcript and the reply as it streams, on one line.
pub fn print_progress(p: Progress<'_>) {
    let mut out = std::io::stdout();
    let _ = match p {
        Progress::Started(n) => write!(out, "[{n}] "),
        Progress::Transcript(t) => write!(out, "{:?} → ", t.trim()),
        Progress::Reply(t) => write!(out, "{t}"),
    };
    let _ = out.flush();
}

/// The rest of a turn's line: the breakdown, dominant stage starred, or what went wrong.
pub fn turn_line(rec: &TurnRecord) -> String {
    if let Some(i) = &rec.interrupted {
        return format!(
            " [interrupted during {}{}{}]",
            i.during,
            i.reaction_ms
                .map(|r| format!(": playback stopped {r:.0} ms after you spoke"))
                .unwrap_or_default(),
            if i.llm_aborted {
                ", LLM request aborted"
            } else {
                ""
            }
        );
    }
    if let Some(e) = &rec.error {
        return format!(" [error: {e}]");
    }
    let Some(b) = &rec.breakdown else {
        return format!(" [{:?}]", rec.outcome).to_lowercase();
    };
    let dominant = b.dominant().map(|d| d.name);
    let parts: Vec<String> = b
        .segments
        .iter()
        .filter(|s| s.name != "llm_thinking" || s.ns != 0)
        .map(|s| {
            format!(
                "{} {:.0}{}",
                s.name,
                voxlat_core::clock::ns_to_ms(s.ns),
                if Some(&s.name) == dominant.as_ref() {
                    "*"
                } else {
                    ""
                }
            )
        })
        .collect();
    let pace = rec
        .pace
        .as_ref()
        .map(|p| {
            let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.0} ms"));
            format!(
                "  |  tpot {} · itl p95 {} · tts rtf {} · margin {}",
                ms(p.tpot_ms),
                ms(p.itl_p95_ms),
                p.tts_rtf.map_or_else(|| "-".into(), |r| format!("{r:.2}")),
                ms(p.playback_margin_ms)
            )
        })
        .unwrap_or_default();
    format!(
        "  |  {} = {:.0} ms{pace}{}",
        parts.join(" · "),
        voxlat_core::clock::ns_to_ms(b.total_ns),
        match (rec.underruns, rec.device_xruns) {
            (0, 0) => String::new(),
            (u, x) => format!(
                " ({u} underruns between chunks, {:.0} ms; {x} device xruns)",
                rec.underrun_ms
            ),
        }
    )
}
