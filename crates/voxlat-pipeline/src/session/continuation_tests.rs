//! How an interrupted turn's words go on: remembered as heard, or carried.

use super::*;
use crate::record::{Interruption, Stage};

/// Its reply began playing, but the user spoke before a whole word of it was heard: the
/// history has no exchange, so the words must go on into the next message.
#[test]
fn words_interrupted_before_a_whole_word_was_heard_carry_into_the_next_message() {
    let mut rec = TurnRecord::blank("s", "t", "r", "");
    rec.transcript = "Please enter the conference".into();
    rec.outcome = TurnOutcome::Interrupted;
    rec.events
        .insert(EventKind::PlayoutStart, Nanos::from_ms(100));
    let mut cut = Interruption {
        onset: Nanos::from_ms(120),
        during: Stage::Playout,
        playback_stopped: Some(Nanos::from_ms(130)),
        reaction_ms: Some(10.0),
        llm_aborted: false,
        heard: None,
    };
    rec.interrupted = Some(cut.clone());
    assert_eq!(
        carried_words(&rec, false).as_deref(),
        Some("Please enter the conference")
    );
    assert_eq!(heard_words(&rec, false), None);

    cut.heard = Some("Sure,".into());
    rec.interrupted = Some(cut);
    assert_eq!(carried_words(&rec, false), None, "remembered as heard");
    assert!(heard_words(&rec, false).is_some());
}
