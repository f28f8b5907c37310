//! One recorded utterance through a session: the scenario source, the real stages, replay's
//! virtual sink.

use crate::cues::{CueRule, SpeakerPauses};
use crate::output::{Output, RealTimeSink, VirtualSink};
use crate::record::{TurnOutcome, TurnRecord};
use crate::respond::Pipeline;
use crate::scenario::LoadedTurn;
use crate::session::{Session, SessionOptions, SourceClock, TurnMeta};
use crate::source::spawn_scenario_source;
use voxlat_core::RequestId;
use voxlat_llm::Message;
use voxlat_vad::StopHold;

impl Pipeline {
    /// Replays one utterance and returns its records: one, or, when a commit came inside
    /// one of its pauses and the rest of it followed, each turn the session made of it (the
    /// reply that gave way, then the turn with the merged words). `history` is the
    /// conversation so far (user/assistant messages); the exchange is appended when it
    /// succeeds.
    pub async fn replay_turn(
        &self,
        turn: &LoadedTurn,
        history: &mut Vec<Message>,
        repeat: u32,
        warmup: bool,
        system_prompt: Option<&str>,
    ) -> Vec<TurnRecord> {
        let speaker = SpeakerPauses::default();
        self.replay_turn_of(turn, history, &speaker, repeat, warmup, system_prompt)
            .await
    }

    /// [`Pipeline::replay_turn`] for one of `speaker`'s utterances: the `cues` rule
    /// (`turn_cues`) counts the pauses they made in the utterances before it.
    pub async fn replay_turn_of(
        &self,
        turn: &LoadedTurn,
        history: &mut Vec<Message>,
        speaker: &SpeakerPauses,
        repeat: u32,
        warmup: bool,
        system_prompt: Option<&str>,
    ) -> Vec<TurnRecord> {
        let meta = TurnMeta {
            scenario: turn.scenario.clone(),
            turn: turn.spec.id.clone(),
            repeat,
            warmup,
            reference: Some(turn.spec.transcript.clone()),
            expect_keywords: turn.spec.expect_keywords.clone(),
            speech_end_annotated: turn.speech_end_annotated,
            system_prompt: system_prompt.map(str::to_string),
        };
        let failed = |e: &dyn std::fmt::Display| TurnRecord {
            repeat,
            warmup,
            speech_end_annotated: turn.speech_end_annotated,
            outcome: TurnOutcome::Error,
            error: Some(e.to_string()),
            ..TurnRecord::blank(
                &turn.scenario,
                &turn.spec.id,
                &RequestId::new().to_string(),
                &turn.spec.transcript,
            )
        };
        let cues = self.cfg.turn_cues.then(|| CueRule {
            base_ms: f64::from(self.cfg.endpointer.hangover_ms),
            hold: StopHold::default(),
            speaker: speaker.clone(),
        });
        let hold = cues.as_ref().map(|c| c.hold.clone());
        let (events, source) =
            match spawn_scenario_source(turn, &self.cfg, self.turn_model().cloned(), hold) {
                Ok(s) => s,
                Err(e) => return vec![failed(&e)],
            };
        let opts = SessionOptions {
            clock: if self.cfg.fast {
                SourceClock::Audio
            } else {
                SourceClock::Process
            },
            idle_timeout: None,
            record_empty_source: true,
            source_hears_output: false,
        };
        // Paced, the reply plays in real time, as it would live: a turn committed inside a
        // pause (labelled or not: a user's own recordings have no pauses_ms) still has its
        // reply playing when the rest comes, so the session pauses it and merges the words
        // instead of answering half an utterance. Unpaced, audio time runs ahead of the
        // clock the pause is timed on, and playback is computed.
        let sink: &dyn Output = if self.cfg.fast {
            &VirtualSink
        } else {
            &RealTimeSink
        };
        let mut session = Session::new(self, sink, events, opts, move |_| meta.clone())
            .with_history(std::mem::take(history));
        if let Some(rule) = cues {
            session = session.with_cues(rule);
        }
        let mut recs = Vec::new();
        loop {
            match session.next_turn().await {
                Ok(Some(rec)) => recs.push(rec),
                Ok(None) => break,
                Err(e) => {
                    recs.push(failed(&e));
                    break;
                }
            }
        }
        if recs.is_empty() {
            recs.push(failed(&crate::error::TurnError::NoEndpoint));
        }
        *history = session.into_history();
        // Off the runtime's threads: other sessions' turns may be running on them.
        let _ = tokio::task::spawn_blocking(move || source.join()).await;
        recs
    }
}
