//! Recognition: the endpointer's events turned into what the user did, as one closed enum
//! ([`Heard`]), with nothing of what the agent does about it (LiveKit's `AudioRecognition`
//! against its `AgentActivity`). It owns the utterance being heard: its speculative
//! transcription, the words kept from a stop the user spoke past, the cue rule's stops, and
//! the replay's annotations of each end.

use super::annotations::{Annotations, EndKey};
use super::{Commit, SourceClock};
use crate::asr_prefix::Prefix;
use crate::cues::CueRule;
use crate::meter::{meter, Spent};
use crate::record::{BusySpan, Stage};
use crate::respond::Pipeline;
use crate::workers::{AsrRequest, AsrResult};
use tokio::sync::oneshot;
use voxlat_core::{clock, Nanos};
use voxlat_vad::VadEvent;

/// A transcription under way, and the compute its decode reports.
pub(super) type Speculation = (oneshot::Receiver<AsrResult>, Spent);

/// What the user did, as recognition tells the conversation.
pub(super) enum Heard {
    /// Speech started at `at` (source clock).
    Started { at: Nanos },
    /// A provisional end, with its transcription when speculative ASR is on: the moment a
    /// speculative reply may start.
    Provisional {
        speech_end: Nanos,
        job: Option<Speculation>,
    },
    /// The user went on past a provisional end. `dropped` is the discarded transcription's
    /// compute; none when its words stand (a later transcription goes on from them).
    Retracted {
        at: Nanos,
        decode_stands: bool,
        dropped: Option<Spent>,
    },
    /// The end of the user's turn.
    Ended(Box<EndOfTurn>),
}

/// Everything about an utterance the endpointer closed: the commit (with its truth and
/// verdict when already known), the transcription, and the key later annotations are
/// matched by.
pub(super) struct EndOfTurn {
    pub commit: Commit,
    pub key: EndKey,
    pub confirms_provisional: bool,
    /// The provisional end's transcription, when this end confirms it.
    pub speculative: Option<oneshot::Receiver<AsrResult>>,
    /// A speculative transcription this end does not use: its compute is waste.
    pub discarded: Option<Spent>,
    /// The utterance's audio, for a transcription of its own, and the words it goes on from.
    pub audio: Vec<f32>,
    pub after: Option<Prefix>,
}

/// What recognition has heard of the utterance since the last end.
#[derive(Default)]
struct Utterance {
    speculative: Option<Speculation>,
    /// The words of the latest provisional end's transcription, once decoded.
    decoded: Option<Prefix>,
    /// Those of the last provisional end the user spoke past: the next transcription of this
    /// utterance goes on from them.
    kept: Option<Prefix>,
    retractions: u32,
    /// (speech start on the source clock, when the session heard of it).
    vad_busy: Vec<(Nanos, Nanos)>,
    /// The standing provisional end: when it came and where it put the end of speech (source
    /// clock), to time the pause when the speaker goes on.
    stop: Option<(Nanos, Nanos)>,
}

#[derive(Default)]
pub(super) struct Recognition {
    utterance: Utterance,
    pub annotations: Annotations,
    /// The endpointer heard speech start and has not ended it yet.
    pub speaking: bool,
    /// When the last endpoint committed (source clock).
    pub last_commit: Option<Nanos>,
    /// Ends turns by the `cues` rule, on the source's endpointer.
    pub cues: Option<CueRule>,
}

impl Recognition {
    /// The endpointer's event `ev`, which reached the session at `received`.
    pub fn hear(
        &mut self,
        ev: VadEvent,
        received: Nanos,
        pipeline: &Pipeline,
        clock_kind: SourceClock,
    ) -> Heard {
        match ev {
            VadEvent::SpeechStart { at } => {
                self.speaking = true;
                self.utterance.vad_busy.push((at, received));
                // A new utterance: nothing decoded so far is a start of it.
                self.utterance.decoded = None;
                self.utterance.kept = None;
                Heard::Started { at }
            }
            VadEvent::Provisional {
                audio,
                speech_end,
                at,
            } => {
                self.utterance.stop = Some((at, speech_end));
                let job = pipeline
                    .cfg
                    .speculative_asr
                    .then(|| self.transcribe_provisional(audio, at, pipeline));
                Heard::Provisional { speech_end, job }
            }
            VadEvent::Retracted { at, provisional_at } => {
                let u = &mut self.utterance;
                u.retractions += 1;
                if let (Some(rule), Some((stop_at, quiet_from))) = (&self.cues, u.stop.take()) {
                    if stop_at == provisional_at {
                        rule.speaker
                            .heard(clock::ns_to_ms(at.0.saturating_sub(quiet_from.0) as i64));
                    }
                }
                let dropped = u.speculative.take();
                match u.decoded.take() {
                    // The user paused there: the words up to it stand, and a later
                    // transcription goes on from them, so their decode is no waste.
                    Some(decoded) => {
                        u.kept = Some(decoded);
                        Heard::Retracted {
                            at,
                            decode_stands: true,
                            dropped: None,
                        }
                    }
                    None => Heard::Retracted {
                        at,
                        decode_stands: false,
                        dropped: dropped.map(|d| d.1),
                    },
                }
            }
            VadEvent::Endpoint {
                speech_start,
                speech_end,
                at,
                audio,
                confirms_provisional,
                ..
            } => {
                self.last_commit = Some(at);
                self.speaking = false;
                let heard = std::mem::take(&mut self.utterance);
                let key = EndKey {
                    at,
                    speech_end,
                    received,
                    clock: clock_kind,
                };
                let annotation = self.annotations.at_endpoint(at);
                let (speculative, discarded) = match heard.speculative {
                    Some((job, _)) if confirms_provisional => (Some(job), None),
                    dropped => (None, dropped.map(|d| d.1)),
                };
                let end = annotation.truth.unwrap_or(speech_end);
                let mut busy: Vec<BusySpan> = heard
                    .vad_busy
                    .iter()
                    .map(|&(from, to)| BusySpan {
                        stage: Stage::Vad,
                        from: key.map(from),
                        to,
                    })
                    .collect();
                busy.push(BusySpan {
                    stage: Stage::Endpointer,
                    from: key.map(end),
                    to: received,
                });
                let commit = Commit {
                    speech_start: key.map(speech_start),
                    speech_end: key.map(end),
                    received,
                    vad_error_ms: annotation.truth.map(|t| key.error_ms(t)),
                    cutoff: annotation.verdict,
                    speculative: speculative.is_some(),
                    retractions: heard.retractions,
                    busy,
                    key: Some(key),
                };
                Heard::Ended(Box::new(EndOfTurn {
                    commit,
                    key,
                    confirms_provisional,
                    speculative,
                    discarded,
                    audio,
                    after: heard.kept,
                }))
            }
        }
    }

    /// The provisional end's transcription, whose words are kept for the next should the
    /// user go on (unless every decode is of the whole turn).
    fn transcribe_provisional(
        &mut self,
        audio: Vec<f32>,
        at: Nanos,
        pipeline: &Pipeline,
    ) -> Speculation {
        // The stop waits the base (or the speaker's floor) until its words are known.
        let on_text = self
            .cues
            .as_ref()
            .map(|rule| Box::new(rule.at_stop(at)) as crate::workers::OnText);
        let (m, spent) = meter();
        let decoded = (!pipeline.cfg.whole_turn_asr)
            .then(|| Prefix::covering_after(audio.len(), self.utterance.kept.clone()));
        let job = pipeline.transcribe(AsrRequest {
            after: self.utterance.kept.clone(),
            audio,
            keep: decoded.clone(),
            meter: Some(m),
            on_text,
        });
        self.utterance.decoded = decoded;
        (job, spent)
    }

    /// Keeps the provisional end's transcription for the endpoint; returns the compute of the
    /// one it replaces.
    pub fn keep_speculation(&mut self, s: Speculation) -> Option<Spent> {
        self.utterance.speculative.replace(s).map(|old| old.1)
    }

    /// The kept speculative transcription, to await (or to hand to a held reply).
    pub fn speculation(&mut self) -> Option<&mut oneshot::Receiver<AsrResult>> {
        self.utterance.speculative.as_mut().map(|s| &mut s.0)
    }

    pub fn take_speculation(&mut self) -> Option<Speculation> {
        self.utterance.speculative.take()
    }

    pub fn has_speculation(&self) -> bool {
        self.utterance.speculative.is_some()
    }

    /// Provisional ends the user spoke past in the utterance being heard.
    pub fn retractions(&self) -> u32 {
        self.utterance.retractions
    }

    /// Ms since the last commit, if within `within_ms`.
    pub fn since_commit(&self, at: Nanos, within_ms: f64) -> Option<f64> {
        self.last_commit
            .map(|c| clock::ns_to_ms(at.signed_since(c)))
            .filter(|ms| (0.0..=within_ms).contains(ms))
    }
}
