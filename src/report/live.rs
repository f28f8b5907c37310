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
    let dominant = b.dominant().map(|d| d.name.clone());
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
    format!(
        "  |  {} = {:.0} ms{}",
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
