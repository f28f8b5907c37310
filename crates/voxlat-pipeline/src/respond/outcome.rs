//! What the turn's record says once the reply has played: where its time went, whether a
//! barge-in ended it, and how good the spoken reply was.

use super::interrupt;
use crate::config::PipelineConfig;
use crate::control::Steer;
use crate::output::Played;
use crate::quality::{self, Bounds};
use crate::record::{ChunkRecord, Stage, TurnRecord};
use std::time::Duration;
use voxlat_core::{clock, EventKind, Timeline};

/// The output's spans and counts; the chunks move into the record.
pub(super) fn record_output(
    rec: &mut TurnRecord,
    tl: &Timeline,
    played: &mut Played,
    rate: u32,
    cfg: &PipelineConfig,
) {
    for c in &played.chunks {
        rec.push_span(Stage::Tts, Some(c.started), c.first_audio);
    }
    let queued = tl.get(EventKind::PlayoutQueued);
    rec.push_span(Stage::Sink, played.first_arrival, queued);
    rec.push_span(Stage::Device, queued, tl.get(EventKind::PlayoutStart));
    stamp_first_voice(tl, &played.chunks);
    rec.underruns = played.underruns;
    rec.underrun_ms = played.underrun_ms;
    rec.device_xruns = played.xruns;
    rec.reply_pauses = std::mem::take(&mut played.pauses);
    rec.reply_audio_s = played.samples.len() as f64 / f64::from(rate.max(1));
    // A reply that never played (a held reply dropped before its commit) has nothing to
    // save, and its name may be the turn's that follows.
    if let Some(dir) = cfg
        .save_replies
        .as_ref()
        .filter(|_| !played.samples.is_empty())
    {
        let path = dir.join(rec.reply_wav_name());
        if let Err(e) = voxlat_audio::wav::write(&path, &played.samples, rate) {
            tracing::warn!("{e}");
        }
    }
    rec.chunks = std::mem::take(&mut played.chunks);
}

/// `first_voice`: the first sample played is the first audible chunk's first, so its voice
/// leaves the output the chunk's voice offset later. Every output (the virtual sink, a
/// device, whatever comes next) gets the stamp from here, after the fact.
fn stamp_first_voice(tl: &Timeline, chunks: &[ChunkRecord]) {
    let Some(start) = tl.get(EventKind::PlayoutStart) else {
        return;
    };
    let voice_at_ms = chunks
        .iter()
        .find(|c| c.audio_s > 0.0)
        .and_then(|c| c.voice_at_ms)
        .unwrap_or(0.0);
    tl.mark_at(
        EventKind::FirstVoice,
        start.saturating_add(Duration::from_secs_f64(voice_at_ms / 1000.0)),
    );
}

/// The expected keywords the reply text lacks.
pub(super) fn record_keywords(rec: &mut TurnRecord, expect_keywords: &[String]) {
    let lower = rec.reply_text.to_lowercase();
    rec.missing_keywords = expect_keywords
        .iter()
        .filter(|k| !lower.contains(&k.to_lowercase()))
        .cloned()
        .collect();
}

/// Marks the turn interrupted if a barge-in cut the reply short. Cancelled with nothing
/// heard (a speculative reply whose user resumed) is an interruption too, not a reply
/// without audio.
pub(super) fn ended_by_cancel(
    rec: &mut TurnRecord,
    tl: &Timeline,
    steer: &Steer,
    aborted: bool,
    played: &Played,
) -> bool {
    let onset = steer.cancelled_at();
    let cut = aborted || played.stopped_at.is_some() || played.samples.is_empty();
    let Some(onset) = onset.filter(|_| cut) else {
        return false;
    };
    let during = if tl.get(EventKind::PlayoutStart).is_some() {
        Stage::Playout
    } else if aborted {
        Stage::Llm
    } else {
        Stage::Tts
    };
    interrupt(rec, during, onset);
    if let Some(i) = rec.interrupted.as_mut() {
        i.llm_aborted = aborted;
        i.playback_stopped = played.stopped_at;
        i.reaction_ms = played
            .stopped_at
            .map(|t| clock::ns_to_ms(t.signed_since(onset)));
    }
    true
}

/// The reply as the user heard it before a barge-in stopped it: `None` unless it was audible
/// at the interruption. Heard time is from the first sample to the stop, less the pauses it
/// played on from; `spoken` is the chunks' text in the order TTS made them.
pub(super) fn heard_reply(rec: &TurnRecord, tl: &Timeline, spoken: &[String]) -> Option<String> {
    let start = tl.get(EventKind::PlayoutStart)?;
    let i = rec.interrupted.as_ref()?;
    let stop = i.playback_stopped?;
    if start > i.onset {
        return None;
    }
    let paused_ns: u64 = rec
        .reply_pauses
        .iter()
        .filter_map(|p| Some(p.resumed?.0.min(stop.0).saturating_sub(p.silent.0)))
        .sum();
    let heard_s = stop.0.saturating_sub(start.0).saturating_sub(paused_ns) as f64 / 1e9;
    let chunks: Vec<(String, f64)> = spoken
        .iter()
        .cloned()
        .zip(rec.chunks.iter().map(|c| c.audio_s))
        .collect();
    Some(crate::history::as_heard(&chunks, heard_s)).filter(|h| !h.is_empty())
}

/// The spoken reply's quality, and the same graded as the LLM wrote it: the filter withholds
/// what would fail, so the spoken verdict alone would flatter the model.
pub(super) fn grade(
    rec: &mut TurnRecord,
    spoken: &str,
    user_text: &str,
    system_prompt: &str,
    expect_keywords: &[String],
) {
    let bounds = Bounds::default();
    rec.quality = Some(quality::check(
        spoken,
        user_text,
        system_prompt,
        expect_keywords,
        &bounds,
    ));
    rec.quality_before_filter = Some(quality::check(
        &quality::before_filter(spoken, rec.dropped_tail.as_deref()),
        user_text,
        system_prompt,
        expect_keywords,
        &bounds,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlat_core::RequestId;

    #[test]
    fn a_reply_that_never_played_writes_no_wav_and_sessions_keep_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = PipelineConfig {
            save_replies: Some(dir.path().to_path_buf()),
            ..PipelineConfig::default()
        };
        let tl = Timeline::new(RequestId::new());
        let mut rec = TurnRecord::blank("s", "t", "r", "x");
        record_output(&mut rec, &tl, &mut Played::default(), 16_000, &cfg);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let mut played = Played {
            samples: vec![0.1; 160],
            ..Played::default()
        };
        record_output(&mut rec, &tl, &mut played, 16_000, &cfg);
        assert!(dir.path().join("s-t-0.wav").exists());
        let names: std::collections::BTreeSet<String> = (1..=2)
            .map(|session| {
                let mut r = TurnRecord::blank("s", "t", "r", "x");
                r.sessions = 2;
                r.session = session;
                r.reply_wav_name()
            })
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
