//! How fast a reply was made against how fast it is played: the LLM's time per output token
//! and inter-token gaps, Piper's real-time factor, and the playback margin — how far ahead of
//! the listener generation and synthesis stayed. A negative margin is a stutter: a chunk was
//! due to play before its audio was ready. It is the figure that says whether a slower model
//! or a longer first chunk will make the reply stutter.

use super::TurnRecord;
use serde::{Deserialize, Serialize};
use voxlat_core::{clock, EventKind};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplyPace {
    /// (llm_done − llm_first_token) / (output tokens − 1), ms; output tokens from the
    /// server's usage when sent, else the content deltas.
    pub tpot_ms: Option<f64>,
    /// Gaps between consecutive answer deltas, ms. Left out of the copy a long run keeps in
    /// memory (`results::summary_view`), which keeps their P95.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub itl_ms: Vec<f64>,
    /// The P95 of `itl_ms`.
    pub itl_p95_ms: Option<f64>,
    /// Piper's synthesis time over the audio it made, over the chunks that played.
    pub tts_rtf: Option<f64>,
    /// The least, over every chunk after the first, of (when it was due to play, if playback
    /// ran on from the first sample without a gap) − (when its audio was ready), ms.
    pub playback_margin_ms: Option<f64>,
}

impl ReplyPace {
    /// The pace of a finished turn's reply; `None` when it had no LLM stream.
    pub fn of(rec: &TurnRecord) -> Option<ReplyPace> {
        let llm = rec.llm.as_ref()?;
        let answer: Vec<_> = llm.deltas.iter().filter(|d| !d.reasoning).collect();
        let tokens = llm.output_tokens.unwrap_or(llm.deltas.len() as u64);
        let span = |from: EventKind, to: EventKind| {
            Some(clock::ns_to_ms(
                rec.events.get(&to)?.signed_since(*rec.events.get(&from)?),
            ))
        };
        let tpot_ms = (tokens >= 2)
            .then(|| span(EventKind::LlmFirstToken, EventKind::LlmDone))
            .flatten()
            .map(|ms| ms / (tokens - 1) as f64);
        let itl_ms: Vec<f64> = answer
            .windows(2)
            .map(|w| clock::ns_to_ms(w[1].t.signed_since(w[0].t)))
            .collect();
        let itl_p95_ms = voxlat_core::stats::Summary::from_samples(&itl_ms, 0).map(|s| s.p95);
        let played: Vec<_> = rec
            .chunks
            .iter()
            .filter(|c| c.skipped.is_none() && c.audio_s > 0.0)
            .collect();
        let (synth_ms, audio_s) =
            played
                .iter()
                .fold((0.0, 0.0), |(ms, s), c| match c.first_audio {
                    Some(ready) => (
                        ms + clock::ns_to_ms(ready.signed_since(c.started)),
                        s + c.audio_s,
                    ),
                    None => (ms, s),
                });
        let tts_rtf = (audio_s > 0.0).then(|| synth_ms / 1e3 / audio_s);
        let playback_margin_ms = rec.events.get(&EventKind::PlayoutStart).and_then(|&start| {
            let mut due_ms = 0.0;
            let mut least: Option<f64> = None;
            for (k, c) in played.iter().enumerate() {
                if k > 0 {
                    let ready_ms = clock::ns_to_ms(c.first_audio?.signed_since(start));
                    let margin = due_ms - ready_ms;
                    least = Some(least.map_or(margin, |l: f64| l.min(margin)));
                }
                due_ms += c.audio_s * 1e3;
            }
            least
        });
        Some(ReplyPace {
            tpot_ms,
            itl_ms,
            itl_p95_ms,
            tts_rtf,
            playback_margin_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ChunkRecord;
    use voxlat_core::Nanos;
    use voxlat_llm::record::DeltaStamp;
    use voxlat_llm::StreamOutcome;

    fn chunk(started: u64, ready: u64, audio_s: f64) -> ChunkRecord {
        ChunkRecord {
            chars: 10,
            submitted: Nanos::from_ms(started),
            started: Nanos::from_ms(started),
            first_audio: Some(Nanos::from_ms(ready)),
            audio_s,
            skipped: None,
            remote: None,
            lead_trimmed_ms: None,
            voice_at_ms: None,
        }
    }

    /// Five tokens 20, 30, 40 and 50 ms apart; two chunks of 1 s of audio each, made in 250
    /// and 300 ms, the second ready 400 ms after playback began: 600 ms ahead of its turn.
    #[test]
    fn pace_from_known_token_gaps_and_chunk_timings() {
        let mut rec = TurnRecord::blank("s", "t", "r", "");
        let times = [1000, 1020, 1050, 1090, 1140];
        rec.llm = Some(StreamOutcome {
            deltas: times
                .iter()
                .map(|&t| DeltaStamp {
                    t: Nanos::from_ms(t),
                    chars: 3,
                    reasoning: false,
                })
                .collect(),
            ..StreamOutcome::default()
        });
        rec.events
            .insert(EventKind::LlmFirstToken, Nanos::from_ms(1000));
        rec.events.insert(EventKind::LlmDone, Nanos::from_ms(1140));
        rec.events
            .insert(EventKind::PlayoutStart, Nanos::from_ms(1400));
        rec.chunks = vec![chunk(1100, 1350, 1.0), chunk(1500, 1800, 1.0)];
        let p = ReplyPace::of(&rec).unwrap();
        assert_eq!(p.tpot_ms, Some(35.0));
        assert_eq!(p.itl_ms, vec![20.0, 30.0, 40.0, 50.0]);
        assert_eq!(p.itl_p95_ms, Some(50.0));
        assert_eq!(p.tts_rtf, Some(0.275));
        assert_eq!(p.playback_margin_ms, Some(600.0));
        // Ready 1.2 s after playback began, 200 ms after it was due: a stutter.
        rec.chunks[1] = chunk(1500, 2600, 1.0);
        assert_eq!(
            ReplyPace::of(&rec).unwrap().playback_margin_ms,
            Some(-200.0)
        );
        // One chunk: nothing was due after the first sample.
        rec.chunks.truncate(1);
        assert_eq!(ReplyPace::of(&rec).unwrap().playback_margin_ms, None);
        rec.llm = None;
        assert_eq!(ReplyPace::of(&rec), None);
    }
}
