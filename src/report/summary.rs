//! Replay's and the live session's text report: per turn, then the aggregate.

use voxlat_core::table::{fmt_num, Table};
use voxlat_pipeline::results::ReplayResults;

/// The per-turn table, the segment statistics and what the run noticed, on stdout.
pub fn print_report(r: &ReplayResults) {
    let mut t = Table::new(&[
        "turn",
        "transcript",
        "WER",
        "reply starts",
        "checks",
        "endpt",
        "asr",
        "ttft",
        "think",
        "1st chunk",
        "tts",
        "playout",
        "device",
        "lead",
        "total",
        "tpot",
        "itl p95",
        "tts rtf",
        "margin",
    ]);
    for rec in r.turns.iter().filter(|t| !t.warmup) {
        let mut row = vec![
            format!("{} #{}", rec.turn, rec.repeat),
            rec.transcript.chars().take(38).collect(),
            rec.wer
                .map(|w| format!("{:.0}%", w * 100.0))
                .unwrap_or_default(),
            rec.error
                .as_deref()
                .map(|e| format!("error: {e}"))
                .unwrap_or_else(|| rec.reply_text.clone())
                .chars()
                .take(28)
                .collect(),
            rec.quality
                .as_ref()
                .map(|q| match q.failures() {
                    f if f.is_empty() => "ok".to_string(),
                    f => f.join(","),
                })
                .unwrap_or_else(|| "-".into()),
        ];
        match &rec.breakdown {
            Some(b) => {
                row.extend(b.segments.iter().map(|s| fmt_num(s.ns as f64 / 1e6)));
                row.push(fmt_num(b.total_ns as f64 / 1e6));
            }
            None => {
                row.extend(std::iter::repeat_n("-".to_string(), 9));
                row.push(format!("{:?}", rec.outcome).to_lowercase());
            }
        }
        let pace = rec.pace.clone().unwrap_or_default();
        let opt = |v: Option<f64>, f: fn(f64) -> String| v.map(f).unwrap_or_else(|| "-".into());
        row.push(opt(pace.tpot_ms, fmt_num));
        row.push(opt(pace.itl_p95_ms, fmt_num));
        row.push(opt(pace.tts_rtf, |r| format!("{r:.2}")));
        row.push(opt(pace.playback_margin_ms, fmt_num));
        t.row(row);
    }
    print!("\nPer turn (ms):\n{}", t.render());
    let a = &r.aggregate;
    let mut t = Table::new(&["ms", "n", "mean", "p50", "p95", "p99", "max"]);
    for (name, s) in &a.segments {
        let mark = if a.dominant_p50 == Some(*name) {
            " *"
        } else {
            ""
        };
        t.summary_row(&format!("{name}{mark}"), Some(s));
    }
    t.summary_row("total", a.total.as_ref());
    t.summary_row("overhead", a.overhead.as_ref());
    let cut_off = if a.cut_off > 0 {
        format!(
            "; {} cut the speaker off and are left out of the figures",
            a.cut_off
        )
    } else {
        String::new()
    };
    print!(
        "\nUser stopped speaking → first audio ({} turns: {} ok, {} no speech, {} errors{cut_off}):\n{}",
        a.turns,
        a.ok,
        a.no_speech,
        a.errors,
        t.render()
    );
    println!(
        "Dominant stage (*): {} at P50{}. Segments sum exactly to the total: {}. Playout underruns: {}. Mean WER {} (per utterance).",
        a.dominant_p50.map_or("-", |d| d.name()),
        match (&a.dominant_p95, &a.dominant_p50) {
            (Some(p95), Some(p50)) if p95 != p50 => format!(", {p95} at P95"),
            _ => String::new(),
        },
        if a.sums_exact { "yes" } else { "NO" },
        a.underruns,
        a.wer_mean.map(|w| format!("{:.1}%", w * 100.0)).unwrap_or_else(|| "-".into())
    );
    if let Some(e) = &a.speech_end_error {
        println!(
            "Endpointer speech end vs the annotation ({} turns): |error| P50 {:.0} ms, P95 {:.0} ms, worst {:.0} ms.",
            e.n, e.p50, e.p95, e.max
        );
    }
    if let Some(p) = &a.pace {
        let p50 = |s: &Option<voxlat_core::stats::Summary>, unit: &str| {
            let digits = if unit.is_empty() { 2 } else { 0 };
            s.as_ref().map_or_else(
                || "-".into(),
                |s| format!("P50 {:.digits$}{unit}, P95 {:.digits$}{unit}", s.p50, s.p95),
            )
        };
        println!(
            "Reply pace: TPOT {}; ITL P95 per reply {}; TTS real-time factor {}; playback margin {} (the least is {}: how far ahead of the listener generation and synthesis stayed; below 0 the reply stutters).",
            p50(&p.tpot_ms, " ms"),
            p50(&p.itl_p95_ms, " ms"),
            p50(&p.tts_rtf, ""),
            p50(&p.playback_margin_ms, " ms"),
            p.playback_margin_ms
                .as_ref()
                .map_or_else(|| "-".into(), |s| format!("{:.0} ms", s.min))
        );
    }
    if a.turns > 0 {
        println!(
            "First audio ready before the commit: {} of {} turns (a speculative reply that had its first chunk when the endpoint came).",
            a.ready_at_commit, a.turns
        );
    }
    if let Some(c) = &a.cutoffs {
        println!(
            "Cut off (committed inside a labelled pause or before the annotated end, audio time): {} of {} judged utterances ({:.1}%), counted once however many turns the session made of one; `voxlat eval-turns` gives the trade-off per policy.",
            c.cut_off,
            c.judged,
            c.rate * 100.0
        );
    }
    if a.resumed > 0 {
        println!(
            "The user spoke again within 2 s of the commit after {} of {} turns (committed too early?).",
            a.resumed, a.turns
        );
    }
    if a.merged + a.played_on > 0 {
        println!(
            "Recovered commits: {} turns carried the words of an early commit the user went on from; {} replies paused for a sound with no words and played on.",
            a.merged, a.played_on
        );
    }
    let q = &a.quality;
    if q.replies > 0 {
        use voxlat_pipeline::quality::QualityCounts as Q;
        println!(
            "Reply quality ({} spoken replies; checks in crates/voxlat-pipeline/src/quality.rs): not an echo {}, clean end {}, no foreign-script token {}, length {}, keywords {}; echo+end+foreign together {}. Stray tails withheld from TTS: {}.",
            q.replies,
            Q::pct(q.not_echo, q.replies),
            Q::pct(q.clean_end, q.replies),
            Q::pct(q.no_foreign, q.replies),
            Q::pct(q.length_ok, q.replies),
            if q.keywords_checked == 0 {
                "-".to_string()
            } else {
                format!("{}/{}", q.keywords_ok, q.keywords_checked)
            },
            Q::pct(q.core_pass, q.replies),
            q.tails_dropped
        );
        // The spoken figures are graded after the tail filter withheld what would fail them;
        // the model's own rate is the one before it.
        if let Some(b) = &q.before_filter {
            println!(
                "Before the tail filter ({} replies as the LLM wrote them): clean end {}, no foreign-script token {}, length {}; echo+end+foreign together {} (after it: {}).",
                b.replies,
                Q::pct(b.clean_end, b.replies),
                Q::pct(b.no_foreign, b.replies),
                Q::pct(b.length_ok, b.replies),
                Q::pct(b.core_pass, b.replies),
                Q::pct(q.core_pass, q.replies)
            );
        }
    }
    for (stage, r) in [("ASR", &a.asr_remote), ("TTS", &a.tts_remote)] {
        if let Some(r) = r {
            println!("{}", remote_line(stage, r));
        }
    }
    if let (Some(c), None) = (&a.asr_compute, &a.asr_remote) {
        println!(
            "Whisper: {} of {} decodes ran away and were decoded again, {} of them on the critical path (transcript after the commit); compute P50 {:.0} ms, P95 {:.0} ms, worst {:.0} ms.",
            a.asr_fallbacks, c.n, a.asr_fallbacks_after_commit, c.p50, c.p95, c.max
        );
    }
    let measured = r.turns.iter().filter(|t| !t.warmup);
    let (mut hits, mut misses, mut wasted, mut early) = (0, 0, 0.0, Vec::new());
    for t in measured {
        misses += t.speculation_misses;
        wasted += t.speculation_wasted_ms;
        if let Some(s) = t.speculative_reply.as_ref().filter(|s| s.committed) {
            hits += 1;
            if let Some(ms) = s
                .before_commit_ms
                .get(&voxlat_core::EventKind::TtsFirstAudio)
            {
                early.push(*ms);
            }
        }
    }
    if hits + misses > 0 || wasted > 0.0 {
        let early = voxlat_core::stats::Summary::from_samples(&early, 0);
        println!(
            "Speculative replies: {hits} committed, {misses} discarded (the user resumed); {wasted:.0} ms of compute thrown away, replies dropped for merged words included; first audio was ready before the endpoint in {} of them{}.",
            early.as_ref().map_or(0, |s| s.n),
            early.map_or(String::new(), |s| format!(", by P50 {:.0} ms", s.p50))
        );
    }
    println!("{}", r.timing_note);
    if !r.skipped.is_empty() {
        println!("\nSkipped ({}), not measured:", r.skipped.len());
        for s in &r.skipped {
            println!("  {s}");
        }
    }
}

/// One remote stage's calls in a sentence: the wait, and how much of it the server claims.
fn remote_line(stage: &str, r: &voxlat_pipeline::remote_summary::RemoteSummary) -> String {
    let p50 = |s: &Option<voxlat_core::stats::Summary>| {
        s.as_ref()
            .map_or("-".to_string(), |s| format!("{:.1}", s.p50))
    };
    let mut line = format!(
        "Remote {stage} ({} calls): sent → headers P50 {} ms, P95 {} ms",
        r.calls,
        p50(&r.wait),
        r.wait
            .as_ref()
            .map_or("-".into(), |s| format!("{:.1}", s.p95)),
    );
    if stage == "TTS" {
        line.push_str(&format!("; → first audio P50 {} ms", p50(&r.first_byte)));
    }
    if r.server_compute.is_some() {
        line.push_str(&format!(
            "; the server's own queue P50 {} ms and compute P50 {} ms, leaving P50 {} ms to the network and upload",
            p50(&r.server_queue),
            p50(&r.server_compute),
            p50(&r.network)
        ));
    } else {
        line.push_str(
            "; the server sent no Server-Timing, so its compute cannot be told from the network",
        );
    }
    line.push_str(&format!(". Upload P50 {} kB.", p50(&r.upload_kb)));
    line
}
