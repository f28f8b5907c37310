//! One recorded utterance through a session: the scenario source, the real stages, replay's
//! virtual sink.

use crate::output::VirtualSink;
use crate::record::{TurnOutcome, TurnRecord};
use crate::respond::Pipeline;
use crate::scenario::LoadedTurn;
use crate::session::{Session, SessionOptions, SourceClock, TurnMeta};
use crate::source::spawn_scenario_source;
use voxlat_core::RequestId;
use voxlat_llm::Message;

impl Pipeline {
    /// Replays one utterance and returns its record. `history` is the conversation so far
    /// (user/assistant messages); the turn's exchange is appended when it succeeds.
    pub async fn replay_turn(
        &self,
        turn: &LoadedTurn,
        history: &mut Vec<Message>,
        repeat: u32,
        warmup: bool,
        system_prompt: Option<&str>,
    ) -> TurnRecord {
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
        let (events, source) =
            match spawn_scenario_source(turn, &self.cfg, self.turn_model().cloned()) {
                Ok(s) => s,
                Err(e) => return failed(&e),
            };
        let opts = SessionOptions {
            clock: if self.cfg.fast {
                SourceClock::Audio
            } else {
                SourceClock::Process
            },
            idle_timeout: None,
            record_empty_source: true,
        };
        let sink = VirtualSink;
        let mut session = Session::new(self, &sink, events, opts, move |_| meta.clone())
            .with_history(std::mem::take(history));
        let rec = match session.next_turn().await {
            Ok(Some(rec)) => rec,
            Ok(None) => failed(&crate::error::TurnError::NoEndpoint),
            Err(e) => failed(&e),
        };
        *history = session.into_history();
        // Off the runtime's threads: other sessions' turns may be running on them.
        let _ = tokio::task::spawn_blocking(move || source.join()).await;
        rec
    }
}
