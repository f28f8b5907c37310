//! The replay report's charts: each turn's segments end to end, each segment's spread over
//! the turns, and the median turn as a waterfall from the end of speech.

use super::{f0, f1, COLORS};
use maud::{html, Markup};
use voxlat_core::clock::ns_to_ms;
use voxlat_core::segments::{Breakdown, VOICE_TO_VOICE};
use voxlat_core::{EventKind, Nanos};
use voxlat_pipeline::record::{Stage, TurnOutcome, TurnRecord};
use voxlat_pipeline::results::ReplayResults;

const SVG_NS: &str = "http://www.w3.org/2000/svg";

pub(super) fn stacked_bars(r: &ReplayResults) -> Markup {
    let turns: Vec<(&TurnRecord, &Breakdown)> = r
        .turns
        .iter()
        .filter(|t| !t.warmup)
        .filter_map(|t| Some((t, t.breakdown.as_ref()?)))
        .collect();
    if turns.is_empty() {
        return html! {};
    }
    let max = turns
        .iter()
        .map(|(_, b)| ns_to_ms(b.total_ns))
        .fold(1.0, f64::max);
    let (w, row, left) = (900.0, 18.0, 200.0);
    let height = turns.len() as f64 * row + 30.0;
    html! {
        h2 { "Per turn" }
        svg width=(w + left + 60.0) height=(height) xmlns=(SVG_NS) font-size="11" {
            @for (i, (t, b)) in turns.iter().enumerate() {
                @let y = i as f64 * row;
                @let bars = end_to_end(b, left, max, w);
                text x="0" y=(y + 12.0) { (t.turn) " #" (t.repeat) }
                @for (k, (s, (x, bw))) in b.segments.iter().zip(&bars).enumerate() {
                    rect x=(f1(*x)) y=(y) width=(f1(*bw)) height=(row - 4.0)
                        fill=(COLORS[k % COLORS.len()]) {
                        title { (s.name) ": " (f0(ns_to_ms(s.ns))) " ms" }
                    }
                }
                @let end = bars.last().map_or(left, |(x, bw)| x + bw);
                text x=(f1(end + 4.0)) y=(y + 12.0) { (f0(ns_to_ms(b.total_ns))) " ms" }
            }
            text x=(left) y=(height - 6.0) { "0" }
            text x=(left + w) y=(height - 6.0) text-anchor="end" { (f0(max)) " ms" }
        }
    }
}

/// Each segment's bar as (x, width), laid end to end from `left`; `max` ms span `w` pixels.
fn end_to_end(b: &Breakdown, left: f64, max: f64, w: f64) -> Vec<(f64, f64)> {
    let mut x = left;
    b.segments
        .iter()
        .map(|s| {
            let bw = ns_to_ms(s.ns).max(0.0) / max * w;
            let at = x;
            x += bw;
            (at, bw)
        })
        .collect()
}

pub(super) fn distributions(r: &ReplayResults) -> Markup {
    let turns: Vec<&Breakdown> = r
        .turns
        .iter()
        .filter(|t| !t.warmup)
        .filter_map(|t| t.breakdown.as_ref())
        .collect();
    if turns.is_empty() {
        return html! {};
    }
    let (w, row, left) = (700.0, 28.0, 160.0);
    let steps: Vec<&str> = VOICE_TO_VOICE
        .steps
        .iter()
        .map(|s| s.name.name())
        .chain(["total"])
        .collect();
    let max = turns
        .iter()
        .flat_map(|b| steps.iter().filter_map(|n| value(b, n)))
        .map(ns_to_ms)
        .fold(1.0, f64::max);
    let px = |v: f64| f1(left + v.max(0.0) / max * w);
    let bottom = steps.len() as f64 * row + 20.0;
    html! {
        h2 { "Distribution of each segment" }
        svg width=(w + left + 40.0) height=(steps.len() as f64 * row + 24.0) xmlns=(SVG_NS)
            font-size="11" {
            @for (i, name) in steps.iter().enumerate() {
                @let y = i as f64 * row + 14.0;
                @let color = COLORS.get(i).copied().unwrap_or("#333");
                @let vals: Vec<f64> = turns.iter().filter_map(|b| value(b, name)).map(ns_to_ms).collect();
                text x="0" y=(y + 4.0) { (name) }
                line x1=(left) x2=(left + w) y1=(y) y2=(y) stroke="#eee" {}
                @for v in &vals {
                    circle cx=(px(*v)) cy=(y) r="3" fill=(color) fill-opacity="0.6" {}
                }
                @if let Some(p50) = lower_median(&vals) {
                    line x1=(px(p50)) x2=(px(p50)) y1=(y - 8.0) y2=(y + 8.0) stroke="#000" {
                        title { "P50 " (f0(p50)) " ms" }
                    }
                }
            }
            text x=(left) y=(bottom) { "0" }
            text x=(left + w) y=(bottom) text-anchor="end" { (f0(max)) " ms" }
        }
        p { small { "Dots: turns; bar: median." } }
    }
}

/// A segment of `b` by name, or its total for the row named so.
fn value(b: &Breakdown, name: &str) -> Option<i64> {
    if name == "total" {
        Some(b.total_ns)
    } else {
        b.segments.iter().find(|s| s.name == name).map(|s| s.ns)
    }
}

/// The median, the lower of the two middle values for an even count.
fn lower_median(vals: &[f64]) -> Option<f64> {
    let mut sorted = vals.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len().saturating_sub(1) / 2).copied()
}

pub(super) fn waterfall(r: &ReplayResults) -> Markup {
    // The turn with the median total, drawn from speech end.
    let mut ok: Vec<&TurnRecord> = r
        .turns
        .iter()
        .filter(|t| !t.warmup && t.outcome == TurnOutcome::Ok && t.breakdown.is_some())
        .collect();
    if ok.is_empty() {
        return html! {};
    }
    ok.sort_by_key(|t| t.breakdown.as_ref().map_or(0, |b| b.total_ns));
    let t = ok[ok.len() / 2];
    let Some(&origin) = t.events.get(&EventKind::SpeechEnd) else {
        return html! {};
    };
    let end = t
        .events
        .get(&EventKind::PlayoutDone)
        .or(t.events.get(&EventKind::LlmDone))
        .copied()
        .unwrap_or(origin);
    let span = ns_to_ms(end.signed_since(origin)).max(1.0);
    let (w, row, left) = (760.0, 20.0, 190.0);
    let rel = |n: Nanos| left + ns_to_ms(n.signed_since(origin)).max(0.0) / span * w;
    let rows = waterfall_rows(t);
    let bottom = rows.len() as f64 * row + 36.0;
    html! {
        h2 { "One turn as a waterfall" }
        p {
            (t.turn) " #" (t.repeat) " (median total): “" (t.transcript) "” → “"
            (t.reply_text) "”"
        }
        svg width=(w + left + 20.0) height=(rows.len() as f64 * row + 40.0) xmlns=(SVG_NS)
            font-size="11" {
            @for (i, (name, a, b)) in rows.iter().enumerate() {
                @let y = i as f64 * row;
                @let x = rel(*a);
                text x="0" y=(y + 13.0) { (name) }
                rect x=(f1(x)) y=(y) width=(f1((rel(*b) - x).max(1.0))) height=(row - 6.0)
                    fill=(COLORS[i % COLORS.len()]) {
                    title {
                        (f0(ns_to_ms(a.signed_since(origin)))) "–" (f0(ns_to_ms(b.signed_since(origin))))
                        " ms"
                    }
                }
            }
            @if let Some(llm) = &t.llm {
                @let y = rows.len() as f64 * row;
                text x="0" y=(y + 13.0) { "tokens" }
                @for d in &llm.deltas {
                    @let x = f1(rel(d.t));
                    line x1=(x) x2=(x) y1=(y + 2.0) y2=(y + 14.0) stroke="#333" {}
                }
            }
            text x=(left) y=(bottom) { "speech end" }
            text x=(left + w) y=(bottom) text-anchor="end" { "+" (f0(span)) " ms" }
        }
    }
}

/// The waterfall's bars, (label, from, to); a span missing either end is left out.
fn waterfall_rows(t: &TurnRecord) -> Vec<(String, Nanos, Nanos)> {
    let ev = |k: EventKind| t.events.get(&k).copied();
    let mut rows: Vec<(String, Nanos, Nanos)> = Vec::new();
    let mut push = |name: String, a: Option<Nanos>, b: Option<Nanos>| {
        if let (Some(a), Some(b)) = (a, b) {
            rows.push((name, a, b));
        }
    };
    push(
        "endpointing".into(),
        ev(EventKind::SpeechEnd),
        ev(EventKind::Endpoint),
    );
    for s in t.busy.iter().filter(|s| s.stage == Stage::Asr) {
        push("asr (compute)".into(), Some(s.from), Some(s.to));
    }
    push(
        "llm request → first token".into(),
        ev(EventKind::LlmSent),
        ev(EventKind::LlmFirstToken),
    );
    push(
        "llm generation".into(),
        ev(EventKind::LlmFirstToken),
        ev(EventKind::LlmDone),
    );
    for (i, c) in t.chunks.iter().enumerate() {
        push(
            format!("tts chunk {i} ({} chars)", c.chars),
            Some(c.started),
            c.first_audio,
        );
    }
    push(
        "playout".into(),
        ev(EventKind::PlayoutStart),
        ev(EventKind::PlayoutDone),
    );
    rows
}
