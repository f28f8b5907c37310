//! What the endpointer says, as the session hears it: a speech start (the user went on), a
//! provisional end (speculation starts), a retraction (it is dropped) and an endpoint (an
//! utterance is committed, or commits the held reply it confirms).

use super::state::Uncommitted;
use super::{Commit, Endpointed, Session, SourceClock};
use crate::asr_prefix::Prefix;
use crate::meter::meter;
use crate::record::{BusySpan, Stage};
use crate::workers::AsrRequest;
use std::time::Instant;
use voxlat_core::{clock, Nanos};
use voxlat_vad::VadEvent;

impl Session<'_> {
    pub(super) fn on_vad(&mut self, ev: VadEvent, received: Nanos) {
        match ev {
            VadEvent::SpeechStart { at } => {
                self.last_activity = Instant::now();
                self.speaking = true;
                self.listening.vad_busy.push((at, received));
                // A new utterance: nothing decoded so far is a start of it.
                self.listening.decoded = None;
                self.listening.kept = None;
                self.user_went_on(at);
            }
            VadEvent::Provisional {
                audio,
                speech_end,
                at,
            } => {
                self.stop_warming();
                self.listening.stop = Some((at, speech_end));
                // The stop waits the base (or the speaker's floor) until its words are known.
                let on_text = self
                    .cues
                    .as_ref()
                    .map(|rule| Box::new(rule.at_stop(at)) as crate::workers::OnText);
                if self.pipeline.cfg.speculative_asr {
                    let (m, spent) = meter();
                    // Unless every decode is of the whole turn, this one's words are kept
                    // for the next, should the user go on.
                    let decoded = (!self.pipeline.cfg.whole_turn_asr)
                        .then(|| Prefix::covering_after(audio.len(), self.listening.kept.clone()));
                    let job = self.pipeline.transcribe(AsrRequest {
                        after: self.listening.kept.clone(),
                        audio,
                        keep: decoded.clone(),
                        meter: Some(m),
                        on_text,
                    });
                    self.listening.decoded = decoded;
                    if self.pipeline.cfg.speculative_reply
                        && self.turn.is_idle()
                        && self.waiting.is_empty()
                    {
                        self.start_held(job, spent);
                    } else {
                        let old = self.listening.speculative.replace((job, spent));
                        self.waste.discard(old.map(|o| o.1));
                        self.listening.decides_early = (self.pipeline.cfg.speculative_reply
                            && self.waiting.is_empty()
                            && self.paused.as_ref().is_some_and(|p| p.deciding.is_none()))
                        .then_some(speech_end);
                    }
                }
            }
            VadEvent::Retracted { at, provisional_at } => {
                self.listening.retractions += 1;
                if let (Some(rule), Some((stop_at, quiet_from))) =
                    (&self.cues, self.listening.stop.take())
                {
                    if stop_at == provisional_at {
                        rule.speaker
                            .heard(clock::ns_to_ms(at.0.saturating_sub(quiet_from.0) as i64));
                    }
                }
                self.listening.decides_early = None;
                self.listening.hold_when_idle = false;
                let dropped = self.listening.speculative.take();
                if let Some(decoded) = self.listening.decoded.take() {
                    // The user paused there: the words up to it stand, and a later
                    // transcription goes on from them, so their decode is no waste.
                    self.listening.kept = Some(decoded);
                    if self.turn.is_held() {
                        if let Some(t) = self.turn.in_flight() {
                            t.asr_spent = None;
                        }
                    }
                } else {
                    self.waste.discard(dropped.map(|d| d.1));
                }
                self.drop_uncommitted(at);
            }
            VadEvent::Endpoint {
                speech_start,
                speech_end,
                at,
                audio,
                confirms_provisional,
                ..
            } => {
                self.last_activity = Instant::now();
                self.last_commit = Some(at);
                self.speaking = false;
                // This utterance's turn carries the words.
                self.ask_again = None;
                let heard = std::mem::take(&mut self.listening);
                // Source times → process clock: identity when paced; anchored at the
                // decision when in audio time.
                let clock_kind = self.opts.clock;
                let map = |t: Nanos| match clock_kind {
                    SourceClock::Process => t,
                    SourceClock::Audio => {
                        Nanos(received.0.saturating_sub(at.0.saturating_sub(t.0)))
                    }
                };
                let held = self.turn.is_held();
                if held && !confirms_provisional {
                    // A forced end: its audio is not what the reply was started on.
                    self.drop_uncommitted(at);
                }
                let spec = match heard.speculative {
                    Some((job, _)) if confirms_provisional => Some(job),
                    dropped => {
                        self.waste.discard(dropped.map(|d| d.1));
                        None
                    }
                };
                let speculative = spec.is_some() || (held && confirms_provisional);
                let end = heard.truth.unwrap_or(speech_end);
                let mut busy: Vec<BusySpan> = heard
                    .vad_busy
                    .iter()
                    .map(|&(from, to)| BusySpan {
                        stage: Stage::Vad,
                        from: map(from),
                        to,
                    })
                    .collect();
                busy.push(BusySpan {
                    stage: Stage::Endpointer,
                    from: map(end),
                    to: received,
                });
                let commit = Commit {
                    speech_start: map(speech_start),
                    speech_end: map(end),
                    received,
                    vad_error_ms: heard
                        .truth
                        .map(|t| clock::ns_to_ms(speech_end.signed_since(t))),
                    cutoff: heard.cutoff,
                    speculative,
                    retractions: heard.retractions,
                    busy,
                };
                if let Some(Uncommitted {
                    facts,
                    release,
                    progress,
                }) = self.turn.commit().filter(|_| confirms_provisional)
                {
                    // The speculative reply stands: same audio, so the same transcript.
                    self.started += 1;
                    progress.commit(self.started);
                    let _ = facts.send(commit);
                    let _ = release.send(Some(received));
                    return;
                }
                let asr = spec.unwrap_or_else(|| {
                    self.pipeline.transcribe(AsrRequest {
                        after: heard.kept,
                        audio,
                        keep: None,
                        meter: None,
                        on_text: None,
                    })
                });
                self.endpointed(Endpointed {
                    commit,
                    asr,
                    superseded: None,
                });
            }
        }
    }
}
