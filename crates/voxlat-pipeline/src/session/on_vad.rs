//! What the session does about what recognition heard: a speech start (the user went on),
//! a provisional end (speculation starts), a retraction (it is dropped) and an end of turn
//! (an utterance is committed, or commits the held reply it confirms).

use super::recognition::{EndOfTurn, Heard};
use super::{Endpointed, Session};
use crate::workers::AsrRequest;
use std::time::Instant;
use voxlat_core::Nanos;
use voxlat_vad::VadEvent;

impl Session<'_> {
    pub(super) fn on_vad(&mut self, ev: VadEvent, received: Nanos) {
        let heard = self
            .recognition
            .hear(ev, received, self.ctx.pipeline, self.ctx.opts.clock);
        match heard {
            Heard::Started { at } => {
                self.last_activity = Instant::now();
                let since_commit = self.since_commit(at);
                self.conversation.user_went_on(at, since_commit);
            }
            Heard::Provisional { speech_end, job } => {
                self.conversation.stop_warming();
                let Some((job, spent)) = job else {
                    return;
                };
                let speculative_reply = self.ctx.pipeline.cfg.speculative_reply;
                if speculative_reply && self.conversation.free() {
                    self.start_held(job, spent);
                } else {
                    let old = self.recognition.keep_speculation((job, spent));
                    self.waste.discard(old);
                    let c = &mut self.conversation;
                    c.early.decides =
                        (speculative_reply && c.waiting.is_empty() && c.pause_undecided())
                            .then_some(speech_end);
                }
            }
            Heard::Retracted {
                at,
                decode_stands,
                dropped,
            } => {
                let c = &mut self.conversation;
                c.early = Default::default();
                if decode_stands && c.turn.is_held() {
                    // The held reply's transcription goes on in the next: no waste.
                    if let Some(t) = c.turn.in_flight() {
                        t.asr_spent = None;
                    }
                }
                self.waste.discard(dropped);
                c.drop_uncommitted(at);
            }
            Heard::Ended(end) => self.ended(*end),
        }
    }

    /// The user's turn ended: it commits the held reply it confirms, or its utterance is
    /// transcribed (or its speculative transcription used) and waits for its turn.
    fn ended(&mut self, end: EndOfTurn) {
        self.last_activity = Instant::now();
        let c = &mut self.conversation;
        // This utterance's turn carries the words.
        c.words.ask_again = None;
        c.early = Default::default();
        self.waste.discard(end.discarded);
        let held = c.turn.is_held();
        if held && !end.confirms_provisional {
            // A forced end: its audio is not what the reply was started on.
            c.drop_uncommitted(end.key.at);
        }
        let mut commit = end.commit;
        commit.speculative |= held && end.confirms_provisional;
        if let Some(progress) = c.turn.commit().filter(|_| end.confirms_provisional) {
            // The speculative reply stands: same audio, so the same transcript.
            c.started += 1;
            progress.commit(c.started);
            if let Some(t) = c.turn.in_flight() {
                t.control.commit();
                t.commit = Some(commit);
            }
            return;
        }
        let asr = end.speculative.unwrap_or_else(|| {
            self.ctx.pipeline.transcribe(AsrRequest {
                after: end.after,
                audio: end.audio,
                keep: None,
                meter: None,
                on_text: None,
            })
        });
        self.conversation.endpointed(Endpointed {
            commit,
            asr,
            superseded: None,
        });
    }
}
