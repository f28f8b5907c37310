//! `voxlat check-loopback`: live voice-to-first-audio measured from a recording of the device,
//! against the total `voxlat run` reported for the same turn.
//!
//! `scripts/live-vs-replay.sh` plays clips into a loopback device while `voxlat run` listens,
//! and records the device (`parecord` of the sink's monitor, another process with its own
//! clock). Here each clip is found in that recording by correlation and taken away, and the
//! reply (its saved WAV) is found the same way in what is left: from the clip's annotated end
//! of speech to the reply's first sound is what the listener waited. A noise floor or the
//! clip's own tail near its end does not move it, so every clip is timed. No voxlat stamp enters it, so a late speech-end estimate or a wrong device latency
//! shows up as a difference.

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use voxlat_audio::align::{first_sound, locate, without, Placement};
use voxlat_audio::PIPELINE_RATE;
use voxlat_core::EventKind;
use voxlat_pipeline::TurnRecord;

#[derive(Args, Debug)]
pub struct CheckLoopbackArgs {
    /// The device's recording (any WAV; read at 16 kHz mono).
    #[arg(long, value_name = "WAV")]
    pub recording: PathBuf,
    /// One line per clip, in the order played: `WAV<TAB>LABEL<TAB>SPEECH_END_MS<TAB>TURNS_BEFORE`,
    /// the last being how many lines the live JSON Lines file had when the clip started.
    #[arg(long, value_name = "TSV")]
    pub plan: PathBuf,
    /// The live session's turns (`live-*.jsonl` from `voxlat run --output-dir`).
    #[arg(long, value_name = "JSONL")]
    pub turns: PathBuf,
    /// Where `voxlat run --save-replies` wrote the replies.
    #[arg(long, value_name = "DIR")]
    pub replies: PathBuf,
    /// A sample louder than this (absolute, full scale 1) is sound.
    #[arg(long, default_value_t = 0.05)]
    pub level: f32,
    /// A clip whose normalised correlation with the recording is below this was not found.
    #[arg(long, default_value_t = 0.8)]
    pub min_score: f32,
    /// Write the per-clip figures and the summary here (JSON).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

struct PlannedClip {
    wav: PathBuf,
    label: String,
    speech_end_ms: f64,
    turns_before: usize,
}

#[derive(Serialize)]
struct ClipCheck {
    label: String,
    /// Where the clip starts in the recording, seconds.
    at_s: Option<f64>,
    score: Option<f32>,
    /// How many turns the live session made of the clip.
    turns: usize,
    /// The live turn compared (`turn-n`), the last one with a reply.
    turn: Option<String>,
    heard_total_ms: Option<f64>,
    reported_total_ms: Option<f64>,
    /// reported − heard: below zero, voxlat said the user waited less than they did.
    error_ms: Option<f64>,
    /// How the reply's first sound was found in the recording.
    onset_found_by: Option<OnsetBy>,
    note: Option<String>,
}

/// How the reply's first sound was found in what the recording holds after the clip.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
enum OnsetBy {
    /// The saved reply's first second, placed by correlation: a noise floor, the clip's own
    /// tail or anything else sounding near the end of speech does not move it.
    Correlation,
    /// The first sample over `--level` after the end of speech, when the reply could not be
    /// placed (nothing else sounded in the 100 ms before the end of speech).
    Level,
}

/// Where the reply's first sound is in `left` (the recording from the clip's start, the clip
/// taken away), in samples from the clip's start.
struct Onset {
    at: usize,
    by: OnsetBy,
}

/// The reply as it played is known (its saved WAV, whose first sound is at `reply_onset`), so
/// it is placed in the recording by correlation; a level threshold alone would take a noise
/// floor or the clip's tail for the reply. Only when the reply cannot be placed does the first
/// sound over the level after the end of speech (`end`) count, and only if nothing sounded in
/// the 100 ms before it.
fn reply_onset_in(
    left: &[f32],
    reply: &[f32],
    reply_onset: usize,
    end: usize,
    args: &CheckLoopbackArgs,
) -> Result<Onset, &'static str> {
    let head = &reply[reply_onset..(reply_onset + samples(PLACE_BY_MS)).min(reply.len())];
    let placed =
        locate(left, head, 0, left.len(), args.min_score).filter(|p| p.score >= args.min_score);
    if let Some(p) = placed {
        return Ok(Onset {
            at: p.start,
            by: OnsetBy::Correlation,
        });
    }
    let lead_in = end.saturating_sub(PIPELINE_RATE as usize / 10);
    if first_sound(&left[..end.min(left.len())], lead_in, args.level).is_some() {
        return Err("the reply could not be placed, and other sound was in the 100 ms before the end of speech");
    }
    first_sound(left, end, args.level)
        .map(|at| Onset {
            at,
            by: OnsetBy::Level,
        })
        .ok_or("no reply heard before the next clip")
}

#[derive(Serialize)]
struct Summary {
    clips: usize,
    measured: usize,
    error_p50_ms: Option<f64>,
    abs_error_p50_ms: Option<f64>,
    abs_error_p95_ms: Option<f64>,
    abs_error_max_ms: Option<f64>,
}

fn read_plan(path: &Path) -> Result<Vec<PlannedClip>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || {
            format!(
                "{}:{}: expected WAV, LABEL, SPEECH_END_MS and TURNS_BEFORE separated by tabs, got {line:?}",
                path.display(),
                i + 1
            )
        };
        if f.len() != 4 {
            bail!(bad());
        }
        out.push(PlannedClip {
            wav: PathBuf::from(f[0]),
            label: f[1].to_string(),
            speech_end_ms: f[2].trim().parse().with_context(bad)?,
            turns_before: f[3].trim().parse().with_context(bad)?,
        });
    }
    Ok(out)
}

fn read16(path: &Path) -> Result<Vec<f32>> {
    voxlat_audio::wav::read_at(path, PIPELINE_RATE)
        .map(|d| d.audio.samples)
        .with_context(|| format!("reading {}", path.display()))
}

/// How much of a clip's start is matched against the recording to place it.
const PLACE_BY_MS: f64 = 1000.0;

fn ms_of(samples: usize) -> f64 {
    voxlat_core::clock::samples_to_ms(samples, PIPELINE_RATE)
}

fn samples(ms: f64) -> usize {
    (ms.max(0.0) * f64::from(PIPELINE_RATE) / 1000.0) as usize
}

/// The reported total of a live turn with a reply, in ms.
fn reported(turn: &TurnRecord) -> Option<f64> {
    turn.events.get(&EventKind::PlayoutStart)?;
    Some(turn.breakdown.as_ref()?.total_ns as f64 / 1e6)
}

pub fn run(args: CheckLoopbackArgs) -> Result<ExitCode> {
    let plan = read_plan(&args.plan)?;
    let turns = voxlat_pipeline::results::read_jsonl(&args.turns)?;
    let rec = read16(&args.recording)?;
    let mut clips = Vec::with_capacity(plan.len());
    for p in &plan {
        clips.push(read16(&p.wav)?);
    }

    // Clips are found in playing order, each after the one before.
    let mut placed: Vec<Option<Placement>> = Vec::with_capacity(plan.len());
    let mut cursor = 0;
    for (clip, p) in clips.iter().zip(&plan) {
        // Only the clip's first second, and never past its end of speech, places it: after
        // that a reply may be playing over it, to a part of it that the live session took for
        // a whole turn, or after its end. The whole of its speech is checked below.
        let head = samples(p.speech_end_ms.min(PLACE_BY_MS));
        let speech = &clip[..head.clamp(1, clip.len().max(1))];
        let at = locate(&rec, speech, cursor, rec.len(), args.min_score)
            .filter(|p| p.score >= args.min_score);
        if let Some(p) = at {
            cursor = p.start + clip.len();
        }
        placed.push(at);
    }

    let mut checks = Vec::with_capacity(plan.len());
    for (k, p) in plan.iter().enumerate() {
        let next_turns = plan.get(k + 1).map_or(turns.len(), |n| n.turns_before);
        let mine = turns
            .get(p.turns_before..next_turns.max(p.turns_before).min(turns.len()))
            .unwrap_or(&[]);
        let mut check = ClipCheck {
            label: p.label.clone(),
            at_s: None,
            score: None,
            turns: mine.len(),
            turn: None,
            heard_total_ms: None,
            reported_total_ms: None,
            error_ms: None,
            onset_found_by: None,
            note: None,
        };
        let Some(at) = placed[k] else {
            check.note = Some("clip not found in the recording".into());
            checks.push(check);
            continue;
        };
        check.at_s = Some(ms_of(at.start) / 1000.0);
        check.score = Some(at.score);
        // Placed again on all of its speech, for the gain and the fine offset; a clip that no
        // longer matches there had something else sounding over it, and what follows its end
        // cannot be told from what was left of that.
        let speech = &clips[k][..samples(p.speech_end_ms).clamp(1, clips[k].len().max(1))];
        let whole = locate(&rec, speech, at.start, at.start + 1, args.min_score);
        let Some(at) = whole.filter(|w| w.score >= args.min_score) else {
            let score = whole.map_or(0.0, |w| w.score);
            check.note = Some(format!(
                "other sound over the clip before its end of speech (score {score:.2}): a reply to a part of it?"
            ));
            checks.push(check);
            continue;
        };
        let Some((turn, total)) = mine
            .iter()
            .rev()
            .find_map(|t| reported(t).map(|total| (t, total)))
        else {
            check.note = Some("no live turn with a reply".into());
            checks.push(check);
            continue;
        };
        check.turn = Some(turn.turn.clone());
        check.reported_total_ms = Some(total);
        // What the recording holds until the next clip starts, the clip taken away.
        let until = placed[k + 1..]
            .iter()
            .flatten()
            .next()
            .map_or(rec.len(), |n| n.start);
        // Indices below are from the clip's start.
        let left = without(
            &rec[at.start..until.max(at.start)],
            &clips[k],
            Placement { start: 0, ..at },
        );
        let end = samples(p.speech_end_ms);
        let reply = args.replies.join(turn.reply_wav_name());
        let reply_audio = match read16(&reply) {
            Ok(r) => r,
            Err(e) => {
                check.note = Some(format!("{e:#}"));
                checks.push(check);
                continue;
            }
        };
        let Some(reply_onset) = first_sound(&reply_audio, 0, args.level) else {
            check.note = Some(format!("{} is silent", reply.display()));
            checks.push(check);
            continue;
        };
        let onset = match reply_onset_in(&left, &reply_audio, reply_onset, end, &args) {
            Ok(onset) => onset,
            Err(why) => {
                check.note = Some(why.into());
                checks.push(check);
                continue;
            }
        };
        check.onset_found_by = Some(onset.by);
        let heard = onset.at;
        let heard_total = ms_of(heard) - ms_of(end);
        check.heard_total_ms = Some(heard_total);
        check.error_ms = Some(total - heard_total);
        if mine.len() > 1 {
            check.note = Some(format!("the live session made {} turns of it", mine.len()));
        }
        checks.push(check);
    }

    let errors: Vec<f64> = checks.iter().filter_map(|c| c.error_ms).collect();
    let abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
    let signed = voxlat_core::stats::Summary::from_samples(&errors, 0);
    let abs = voxlat_core::stats::Summary::from_samples(&abs, 0);
    let summary = Summary {
        clips: checks.len(),
        measured: errors.len(),
        error_p50_ms: signed.as_ref().map(|s| s.p50),
        abs_error_p50_ms: abs.as_ref().map(|s| s.p50),
        abs_error_p95_ms: abs.as_ref().map(|s| s.p95),
        abs_error_max_ms: abs.as_ref().map(|s| s.max),
    };

    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    println!(
        "{:32} {:>8} {:>6} {:>9} {:>9} {:>7} {:>11}  note",
        "clip", "at s", "score", "heard ms", "voxlat", "error", "onset by"
    );
    for c in &checks {
        println!(
            "{:32} {:>8} {:>6} {:>9} {:>9} {:>7} {:>11}  {}",
            c.label,
            c.at_s.map_or("-".into(), |v| format!("{v:.2}")),
            c.score.map_or("-".into(), |v| format!("{v:.2}")),
            f(c.heard_total_ms),
            f(c.reported_total_ms),
            f(c.error_ms),
            match c.onset_found_by {
                Some(OnsetBy::Correlation) => "correlation",
                Some(OnsetBy::Level) => "level",
                None => "-",
            },
            c.note.as_deref().unwrap_or("")
        );
    }
    println!(
        "Live total − heard total ({} of {} clips measured): signed P50 {} ms; |error| P50 {} ms, P95 {} ms, worst {} ms",
        summary.measured,
        summary.clips,
        f(summary.error_p50_ms),
        f(summary.abs_error_p50_ms),
        f(summary.abs_error_p95_ms),
        f(summary.abs_error_max_ms)
    );
    if let Some(path) = &args.json {
        let doc = serde_json::json!({ "summary": summary, "clips": checks });
        voxlat_core::fsio::write_atomic(path, serde_json::to_string_pretty(&doc)?.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        println!("Results: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
