//! Turns frame-level voice decisions into turn events, with speculative endpointing.
//!
//! webrtc-vad reports gaps of 200–800 ms inside one utterance, so a turn can only be declared
//! over after a hangover of ~500 ms or more, which alone would spend most of a sub-second
//! budget. So after a short silence (`provisional_ms`) the endpointer emits a *provisional*
//! end carrying the utterance audio, which downstream stages may start on; if the user
//! resumes before the full hangover it emits a retraction, and otherwise the final endpoint
//! confirms the provisional one with the very same audio, so the speculative work stands.
//!
//! The VAD keeps calling frames voiced for 50–300 ms after speech ends (its own hangover, then
//! breath, clicks and thumps), so `speech_end` is refined: from the last voiced frame, back at
//! most [`REFINE_MS`], to the last 5 ms block that is still speech on a speech-band energy
//! track (see [`crate::energy`]: high-passed, relative to both the turn's peak and the noise
//! floor). The endpoint's `speech_end` is refined once more at the commit: the room after the
//! speech sets the floor if none was heard before it, and a loud sound the VAD missed just
//! after its last voiced frame (an unvoiced last consonant) still counts. The hangover and the
//! provisional end keep the running estimate, so a floor that settles late cannot pull a
//! commit earlier.
//!
//! The VAD is not trusted alone to start a turn: it calls some rooms' tone voiced (once its
//! noise model has drifted, for seconds), and each endpoint in it was followed at once by a
//! "turn" with no speech. So a voiced run starts a turn only if the energy track also hears
//! speech in it. And sound that comes back after [`RESTART_AFTER_ZEROS_MS`] of digital silence
//! between turns meets a fresh detector, as replay gives every turn.
//!
//! Times: the caller gives, with each slice of samples, the process-clock time at which the
//! slice's last sample entered the pipeline; sample `i` of an `n`-sample slice is then at
//! `t_end − (n−1−i)/16 kHz`. In paced replay and live capture that is real time; unpaced,
//! it is audio time.

use crate::detector::VoiceDetector;
use crate::energy::EnergyTrack;
use crate::stop_hold::StopHold;
use crate::turn::policy::LastScore;
use crate::turn::{Decision, SharedScorer, TurnPolicy};
use crate::{VadError, RATE};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use voxlat_core::Nanos;

/// Digital silence for this long between turns restarts the detector ([`VoiceDetector::restart`]).
pub const RESTART_AFTER_ZEROS_MS: u32 = 200;

/// How far back from the VAD's last voiced frame `speech_end` may be moved: the VAD's lag
/// after the last word measured up to about 300 ms on real recordings.
pub const REFINE_MS: u64 = 500;
/// Between turns, audio this old is the room's, for the energy track's noise floor: a voice
/// begins softly (a breath, a fricative) before the VAD calls it voiced, and Silero's onsets
/// came up to 78 ms late on the bundled clips (`tests/silero_compare.rs`). At the commit the
/// room after the speech likewise starts this long after the VAD's last voiced frame, and a
/// sound the VAD missed may extend the end up to there.
const ROOM_LAG_MS: u64 = 150;

/// With [`EndpointerConfig::early_provisional`], a VAD still calling frames voiced this long
/// after a provisional end's audio is taken to be hearing speech the energy track missed (a
/// soft last word), not its own trail: the provisional end is retracted.
pub const VAD_TRAIL_MS: u32 = 300;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointerConfig {
    /// webrtc-vad aggressiveness, 0..=3.
    pub mode: u8,
    /// 10, 20 or 30.
    pub frame_ms: u32,
    /// A voiced run shorter than this (clicks, a cough) does not start a turn.
    pub min_speech_ms: u32,
    /// Audio kept from before the detected onset, so Whisper hears the first phoneme whole.
    pub pre_roll_ms: u32,
    /// Silence after which a provisional end is emitted; 0 disables speculation.
    pub provisional_ms: u32,
    /// Count the provisional silence from the refined end of speech (the energy track), not
    /// from the VAD's last voiced frame, which lags the last word by 50–300 ms: speculation
    /// starts that much sooner. The provisional audio then ends `tail_ms` after the refined
    /// end, and only speech the energy track hears after that (or a VAD run longer than
    /// [`VAD_TRAIL_MS`]) retracts it.
    pub early_provisional: bool,
    /// Silence after which the turn is over.
    pub hangover_ms: u32,
    /// Silence kept after the last voiced frame (with `early_provisional`, after the refined
    /// end of speech) in the utterance audio (at most `provisional_ms`, so provisional and
    /// final audio are the same).
    pub tail_ms: u32,
    /// A turn longer than this is ended regardless.
    pub max_utterance_ms: u32,
    /// With a turn model attached ([`Endpointer::with_turn_model`]), this replaces the plain
    /// hangover rule.
    pub turn: TurnPolicy,
}

impl Default for EndpointerConfig {
    fn default() -> Self {
        EndpointerConfig {
            mode: 2,
            frame_ms: 20,
            min_speech_ms: 60,
            pre_roll_ms: 300,
            // Early enough that the speculative reply often has its first chunk by the
            // endpoint (docs/benchmarks.md, 2026-12-04): 100 → 50 took first audio from P50
            // 733 to 683 ms on the bundled scenarios and 766 to 702 ms on the turn corpus's
            // test half, with the same WER, for 12 and 41 discarded speculations (9 and 36).
            // On 20 ms frames it fires at the third silent frame.
            provisional_ms: 50,
            early_provisional: true,
            hangover_ms: 600,
            tail_ms: 150,
            max_utterance_ms: 30_000,
            turn: TurnPolicy::default(),
        }
    }
}

impl EndpointerConfig {
    pub fn validate(&self) -> Result<(), VadError> {
        let bad = |m: &str| Err(VadError::Config(m.into()));
        if self.hangover_ms == 0 {
            return bad("hangover must be positive");
        }
        if self.provisional_ms >= self.hangover_ms {
            return bad("the provisional silence must be shorter than the hangover");
        }
        if self.max_utterance_ms < self.hangover_ms {
            return bad("the maximum utterance must be longer than the hangover");
        }
        Ok(())
    }

    fn samples(ms: u32) -> usize {
        (u64::from(RATE) * u64::from(ms) / 1000) as usize
    }

    /// The tail kept after the end of speech, ms: at most `provisional_ms`, so that a
    /// provisional end already has it.
    fn tail_kept_ms(&self) -> u32 {
        self.tail_ms.min(self.provisional_ms.max(1))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum VadEvent {
    /// The first voiced sample of a turn (start of the first frame of the voiced run).
    SpeechStart { at: Nanos },
    /// Silence reached `provisional_ms`: downstream may start on `audio`.
    Provisional {
        speech_end: Nanos,
        at: Nanos,
        audio: Vec<f32>,
    },
    /// The user resumed after a provisional end; work started on it must be discarded.
    Retracted { at: Nanos, provisional_at: Nanos },
    /// The turn is over. `speech_end` is retro-dated to the last sample that is speech on
    /// the energy track, judged at the commit; `at` is when the decision was made.
    Endpoint {
        speech_start: Nanos,
        speech_end: Nanos,
        at: Nanos,
        audio: Vec<f32>,
        /// The preceding provisional end stands (same audio): speculative work is valid.
        confirms_provisional: bool,
        /// The turn model's last probability that the turn was complete, when one decided.
        turn_probability: Option<f32>,
        /// Ended by `max_utterance_ms` or the end of the input, not by silence.
        forced: bool,
    },
}

enum State {
    Idle {
        voiced_run: usize,
    },
    Speaking {
        speech_start: Nanos,
        last_voiced_end: Nanos,
        /// `utterance` length at the end of the last voiced frame.
        voiced_len: usize,
        silence: usize,
        provisional: Option<Provisional>,
        last_score: LastScore,
    },
}

/// A provisional end not yet retracted.
#[derive(Clone, Copy)]
struct Provisional {
    at: Nanos,
    speech_end: Nanos,
    /// Its audio is `utterance[..cut]`.
    cut: usize,
}

pub struct Endpointer<D: VoiceDetector> {
    cfg: EndpointerConfig,
    detector: D,
    frame: Vec<f32>,
    /// Idle: the last pre-roll (+ candidate run) of audio. Speaking: unused.
    recent: VecDeque<f32>,
    utterance: Vec<f32>,
    state: State,
    period_ns: f64,
    /// From a frame's first sample to its last, ns.
    frame_span_ns: u64,
    /// Speech-band energy, for refining `speech_end`.
    energy: EnergyTrack,
    scorer: Option<SharedScorer>,
    /// A wait for the standing stop set from outside, in place of the hangover.
    hold: Option<StopHold>,
    /// Samples of digital silence in a row, up to the current frame.
    zeros: usize,
    /// Since when, between turns, nothing has been speech: the room, for the noise floor.
    room_from: Option<Nanos>,
}

impl<D: VoiceDetector> Endpointer<D> {
    pub fn new(cfg: EndpointerConfig, detector: D) -> Result<Endpointer<D>, VadError> {
        cfg.validate()?;
        let frame = detector.frame_samples();
        Ok(Endpointer {
            frame: Vec::with_capacity(frame),
            recent: VecDeque::new(),
            utterance: Vec::new(),
            state: State::Idle { voiced_run: 0 },
            period_ns: 1e9 / f64::from(RATE),
            frame_span_ns: (frame.saturating_sub(1) as f64 * 1e9 / f64::from(RATE)) as u64,
            energy: EnergyTrack::new(RATE),
            room_from: None,
            cfg,
            detector,
            scorer: None,
            hold: None,
            zeros: 0,
        })
    }

    /// Ends turns by `cfg.turn` with this end-of-turn model instead of the plain hangover.
    pub fn with_turn_model(mut self, scorer: SharedScorer) -> Result<Endpointer<D>, VadError> {
        self.cfg
            .turn
            .validate(self.cfg.hangover_ms)
            .map_err(VadError::TurnPolicy)?;
        if self.hold.is_some() {
            return Err(VadError::Config(
                "a turn model and a stop hold would both decide the end; attach one".into(),
            ));
        }
        self.scorer = Some(scorer);
        Ok(self)
    }

    /// Ends each stop after the silence set in `hold` for it (while none is set, the
    /// hangover). What sets it (the session, from the speculative transcript) runs on
    /// another thread.
    pub fn with_stop_hold(mut self, hold: StopHold) -> Result<Endpointer<D>, VadError> {
        if self.scorer.is_some() {
            return Err(VadError::Config(
                "a turn model and a stop hold would both decide the end; attach one".into(),
            ));
        }
        self.hold = Some(hold);
        Ok(self)
    }

    pub fn config(&self) -> &EndpointerConfig {
        &self.cfg
    }

    pub fn is_speaking(&self) -> bool {
        matches!(self.state, State::Speaking { .. })
    }

    /// Feeds 16 kHz samples whose last one entered the pipeline at `t_end`.
    pub fn push(&mut self, samples: &[f32], t_end: Nanos) -> Result<Vec<VadEvent>, VadError> {
        let mut events = Vec::new();
        let n = samples.len();
        let fs = self.detector.frame_samples();
        for (i, &s) in samples.iter().enumerate() {
            self.frame.push(s);
            let back = ((n - 1 - i) as f64 * self.period_ns) as u64;
            let at = Nanos(t_end.0.saturating_sub(back));
            self.energy.push(s, at);
            if self.frame.len() == fs {
                let frame_end = at;
                let frame = std::mem::take(&mut self.frame);
                self.on_frame(&frame, frame_end, &mut events)?;
                self.frame = frame;
                self.frame.clear();
            }
        }
        Ok(events)
    }

    /// End of input: a turn still open ends here (forced).
    pub fn finish(&mut self, t_end: Nanos) -> Vec<VadEvent> {
        let mut events = Vec::new();
        if let State::Speaking { .. } = self.state {
            self.end_turn(t_end, true, None, &mut events);
        }
        events
    }

    fn frame_start(&self, frame_end: Nanos) -> Nanos {
        Nanos(frame_end.0.saturating_sub(self.frame_span_ns))
    }

    fn on_frame(
        &mut self,
        frame: &[f32],
        end: Nanos,
        events: &mut Vec<VadEvent>,
    ) -> Result<(), VadError> {
        let fs = frame.len();
        let mean_square = frame.iter().map(|s| s * s).sum::<f32>() / fs as f32;
        if mean_square <= crate::energy::DIGITAL_SILENCE {
            self.zeros += fs;
        } else {
            if self.zeros >= EndpointerConfig::samples(RESTART_AFTER_ZEROS_MS)
                && !self.is_speaking()
            {
                self.detector.restart();
                self.energy.forget_room();
                self.room_from = None;
            }
            self.zeros = 0;
        }
        let voiced = self.detector.is_voice(frame)?;
        if voiced || self.is_speaking() {
            self.energy.note_speech(self.frame_start(end));
        }
        let cfg = &self.cfg;
        let frame_start = self.frame_start(end);
        match &mut self.state {
            State::Idle { voiced_run } => {
                self.recent.extend(frame.iter().copied());
                *voiced_run = if voiced { *voiced_run + fs } else { 0 };
                let room_from = *self.room_from.get_or_insert(frame_start);
                let room_to = Nanos(end.0.saturating_sub(ROOM_LAG_MS * 1_000_000));
                if *voiced_run == 0 {
                    self.energy.reset_peak();
                    self.energy.note_room(room_from, room_to);
                }
                let keep = EndpointerConfig::samples(cfg.pre_roll_ms) + *voiced_run;
                while self.recent.len() > keep {
                    self.recent.pop_front();
                }
                let min_run = EndpointerConfig::samples(cfg.min_speech_ms).max(1);
                if *voiced_run >= min_run {
                    let run_frames = (*voiced_run / fs) as u64;
                    let first_frame_end = Nanos(
                        end.0
                            .saturating_sub((run_frames - 1) * (fs as f64 * self.period_ns) as u64),
                    );
                    let speech_start = Nanos(first_frame_end.0.saturating_sub(self.frame_span_ns));
                    if !self.energy.heard_speech_since(speech_start) {
                        // Voiced to the VAD, not speech to the energy track (hiss or hum the
                        // VAD has adapted to): the room, and the run's start slides on with
                        // the audio.
                        self.energy.note_room(room_from, room_to);
                        *voiced_run = min_run.saturating_sub(fs);
                        return Ok(());
                    }
                    self.room_from = None;
                    self.utterance.clear();
                    self.utterance.extend(self.recent.drain(..));
                    let voiced_len = self.utterance.len();
                    self.state = State::Speaking {
                        speech_start,
                        last_voiced_end: end,
                        voiced_len,
                        silence: 0,
                        provisional: None,
                        last_score: None,
                    };
                    events.push(VadEvent::SpeechStart { at: speech_start });
                }
            }
            State::Speaking {
                last_voiced_end,
                voiced_len,
                silence,
                provisional,
                last_score,
                ..
            } => {
                self.utterance.extend_from_slice(frame);
                if voiced {
                    *last_voiced_end = end;
                    *voiced_len = self.utterance.len();
                    *silence = 0;
                    *last_score = None;
                } else {
                    *silence += fs;
                }
                let silence_now = *silence;
                let mut score = *last_score;
                let voiced_len = *voiced_len;
                let speech_end = refine_end(&self.energy, *last_voiced_end);
                let trail_limit = EndpointerConfig::samples(VAD_TRAIL_MS);
                let tail_ms = cfg.tail_kept_ms();
                if let Some(p) = *provisional {
                    // The refined end moves by a block or two as the energy track's floor
                    // settles; only speech past the provisional audio's end is the speaker
                    // going on.
                    let resumed = if cfg.early_provisional {
                        speech_end.0 > p.speech_end.0 + u64::from(tail_ms) * 1_000_000
                            || voiced_len > p.cut + trail_limit
                    } else {
                        voiced
                    };
                    if resumed {
                        *provisional = None;
                        events.push(VadEvent::Retracted {
                            at: end,
                            provisional_at: p.at,
                        });
                    }
                }
                let tail = EndpointerConfig::samples(tail_ms);
                let quiet_ns = end.0.saturating_sub(speech_end.0);
                let len = self.utterance.len();
                // The sample at `speech_end`, counted back from the frame's last one.
                let back = (quiet_ns as f64 / self.period_ns) as usize;
                let energy_cut = (len.saturating_sub(back) + tail).min(len);
                // A VAD run far past the refined end is speech the energy track missed: the
                // VAD's own silence decides, as without `early_provisional`.
                let (provisional_due, cut) =
                    if cfg.early_provisional && voiced_len <= energy_cut + trail_limit {
                        let due = quiet_ns >= u64::from(cfg.provisional_ms) * 1_000_000;
                        (due, energy_cut)
                    } else {
                        let due = silence_now >= EndpointerConfig::samples(cfg.provisional_ms);
                        (due, (voiced_len + tail).min(len))
                    };
                if cfg.provisional_ms > 0 && provisional.is_none() && provisional_due {
                    *provisional = Some(Provisional {
                        at: end,
                        speech_end,
                        cut,
                    });
                    events.push(VadEvent::Provisional {
                        speech_end,
                        at: end,
                        audio: self.utterance[..cut].to_vec(),
                    });
                }
                // The hangover runs from the refined end of speech, not from the VAD's last
                // voiced frame: the 50–300 ms the VAD keeps calling breath and thumps voiced
                // are silence the user already waited through.
                let hangover_ms = (*provisional)
                    .and_then(|p| self.hold.as_ref().and_then(|h| h.get(p.at)))
                    .unwrap_or(self.cfg.hangover_ms);
                let hangover_ns = u64::from(hangover_ms) * 1_000_000;
                let samples = EndpointerConfig::samples;
                let mut commit = None;
                if let Some(scorer) = &self.scorer {
                    let mut took = std::time::Duration::ZERO;
                    let policy = &self.cfg.turn;
                    loop {
                        let decision = if silence_now >= samples(policy.max_ms) {
                            Decision::Commit
                        } else if silence_now == 0 {
                            Decision::Wait
                        } else {
                            policy.decide(quiet_ns, self.cfg.hangover_ms, score)
                        };
                        match decision {
                            Decision::Wait => break,
                            Decision::Score => {
                                let s = scorer
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .score(&self.utterance)?;
                                took += s.took;
                                score = Some((quiet_ns, s.probability));
                            }
                            Decision::Commit => {
                                // The decision is made once the model has answered.
                                let at = Nanos(end.0 + took.as_nanos() as u64);
                                commit = Some((at, score.map(|(_, p)| p)));
                                break;
                            }
                        }
                    }
                } else if silence_now >= samples(hangover_ms)
                    || (silence_now > 0 && quiet_ns >= hangover_ns)
                {
                    commit = Some((end, None));
                }
                if let State::Speaking { last_score, .. } = &mut self.state {
                    *last_score = score;
                }
                if let Some((at, probability)) = commit {
                    self.end_turn(at, false, probability, events);
                } else if self.utterance.len() >= samples(self.cfg.max_utterance_ms) {
                    self.end_turn(end, true, None, events);
                }
            }
        }
        Ok(())
    }

    fn trimmed_audio(&self, voiced_len: usize) -> Vec<f32> {
        let tail = EndpointerConfig::samples(self.cfg.tail_kept_ms());
        let end = (voiced_len + tail).min(self.utterance.len());
        self.utterance[..end].to_vec()
    }

    fn end_turn(
        &mut self,
        at: Nanos,
        forced: bool,
        turn_probability: Option<f32>,
        events: &mut Vec<VadEvent>,
    ) {
        if let State::Speaking {
            speech_start,
            last_voiced_end,
            voiced_len,
            provisional,
            ..
        } = self.state
        {
            // A provisional end that stands gives its own audio, so the work started on it
            // stands too.
            let standing = provisional.filter(|_| !forced);
            let audio = match standing {
                Some(p) => self.utterance[..p.cut].to_vec(),
                None => self.trimmed_audio(voiced_len),
            };
            events.push(VadEvent::Endpoint {
                speech_start,
                speech_end: self.energy.speech_end_at_commit(
                    last_voiced_end,
                    earliest_end(last_voiced_end),
                    Nanos(last_voiced_end.0 + ROOM_LAG_MS * 1_000_000),
                ),
                at,
                audio,
                confirms_provisional: standing.is_some(),
                turn_probability,
                forced,
            });
        }
        self.utterance.clear();
        self.recent.clear();
        self.energy.reset_peak();
        self.state = State::Idle { voiced_run: 0 };
    }
}

/// The end of the last speech block at or before `vad_end` (and at most [`REFINE_MS`] before
/// it); `vad_end` itself when none is.
fn refine_end(energy: &EnergyTrack, vad_end: Nanos) -> Nanos {
    energy.speech_end(vad_end, earliest_end(vad_end))
}

fn earliest_end(vad_end: Nanos) -> Nanos {
    Nanos(vad_end.0.saturating_sub(REFINE_MS * 1_000_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted detector: voiced where the frame's mean is positive.
    struct Scripted;
    impl VoiceDetector for Scripted {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn frame_samples(&self) -> usize {
            320
        }
        fn is_voice(&mut self, frame: &[f32]) -> Result<bool, VadError> {
            Ok(frame.iter().sum::<f32>() > 0.0)
        }
    }

    const MS: u64 = 1_000_000;

    /// (voiced, ms) runs as samples. Voiced is a 500 Hz tone raised to be never negative, so
    /// the scripted detector calls any frame that holds some of it voiced and the energy track
    /// hears speech in it.
    fn samples_of(pattern: &[(bool, u32)]) -> Vec<f32> {
        let mut samples = Vec::new();
        for &(v, ms) in pattern {
            let n = (ms * 16) as usize;
            if v {
                samples.extend((0..n).map(|i| {
                    0.3 * (1.0 - (i as f32 * 2.0 * std::f32::consts::PI * 500.0 / 16_000.0).cos())
                }));
            } else {
                samples.extend(std::iter::repeat_n(0.0, n));
            }
        }
        samples
    }

    /// `pattern` of (voiced, ms) runs; fed in 20 ms slices at real time from t = 0.
    fn run(cfg: EndpointerConfig, pattern: &[(bool, u32)], slice: usize) -> Vec<VadEvent> {
        let samples = samples_of(pattern);
        let mut ep = Endpointer::new(cfg, Scripted).unwrap();
        let mut events = Vec::new();
        let mut pos = 0;
        while pos < samples.len() {
            let end = (pos + slice).min(samples.len());
            let t_end = Nanos(((end - 1) as u64 * 1_000_000_000) / 16_000);
            events.extend(ep.push(&samples[pos..end], t_end).unwrap());
            pos = end;
        }
        events.extend(ep.finish(Nanos(samples.len() as u64 * 62_500)));
        events
    }

    /// Feeds `samples` in 20 ms frames at real time from t = 0.
    fn feed<D: VoiceDetector>(mut ep: Endpointer<D>, samples: &[f32]) -> Vec<VadEvent> {
        let mut events = Vec::new();
        for (k, frame) in samples.chunks(320).enumerate() {
            let t_end = Nanos((((k + 1) * 320 - 1) as u64 * 1_000_000_000) / 16_000);
            events.extend(ep.push(frame, t_end).unwrap());
        }
        events
    }

    /// Speech ended within 10 ms of `end_ms`, and the default 600 ms hangover after it.
    fn assert_ended(speech_end: Nanos, at: Nanos, end_ms: u64) {
        assert!(
            speech_end.0.abs_diff(end_ms * MS) <= 10 * MS,
            "speech end {} ms, not {end_ms}",
            speech_end.0 / MS
        );
        let hangover = at.0 - speech_end.0;
        assert!(
            (600 * MS..=620 * MS).contains(&hangover),
            "endpoint {} ms after the end of speech, not 600",
            hangover / MS
        );
    }

    fn kinds(ev: &[VadEvent]) -> Vec<&'static str> {
        ev.iter()
            .map(|e| match e {
                VadEvent::SpeechStart { .. } => "start",
                VadEvent::Provisional { .. } => "provisional",
                VadEvent::Retracted { .. } => "retracted",
                VadEvent::Endpoint { .. } => "endpoint",
            })
            .collect()
    }

    /// A 440 Hz tone from 500 to 1500 ms, then `trail_ms` that the scripted detector calls
    /// voiced but that holds no speech-band energy (a DC offset, as the VAD's own trail after
    /// the last word), then silence.
    fn tone_then_vad_trail(trail_ms: usize) -> Vec<f32> {
        let mut samples = vec![0.0f32; 500 * 16];
        samples.extend((0..1000 * 16).map(|i| {
            0.01 + 0.3 * (i as f32 * 2.0 * std::f32::consts::PI * 440.0 / 16_000.0).sin()
        }));
        samples.extend(std::iter::repeat_n(0.01f32, trail_ms * 16));
        samples.extend(std::iter::repeat_n(0.0f32, 1500 * 16));
        samples
    }

    /// Speech, then 300 ms the detector still calls voiced but that holds no speech-band
    /// energy (as a VAD's own trail or a breath would be to the energy track), then silence.
    #[test]
    fn the_hangover_runs_from_the_refined_end_of_speech_not_the_vad_trail() {
        let events = feed(
            Endpointer::new(EndpointerConfig::default(), Scripted).unwrap(),
            &tone_then_vad_trail(300),
        );
        let Some(VadEvent::Endpoint { speech_end, at, .. }) = events.last() else {
            panic!("no endpoint: {:?}", kinds(&events));
        };
        // The tone ends at 1500 ms; the VAD's last voiced frame at 1800 ms (the old rule
        // ended the turn about 900 ms after the tone).
        assert_ended(*speech_end, *at, 1500);
    }

    /// `endpoint` confirms a provisional end whose audio was `audio`, and hands over the same,
    /// so the speculative work on it stands.
    fn confirms_with(endpoint: &VadEvent, audio: &[f32]) {
        let VadEvent::Endpoint {
            audio: final_audio,
            confirms_provisional,
            ..
        } = endpoint
        else {
            panic!("not an endpoint")
        };
        assert!(*confirms_provisional);
        assert_eq!(final_audio.as_slice(), audio);
    }

    fn provisional_and_endpoint(events: &[VadEvent]) -> (&VadEvent, &VadEvent) {
        match events {
            [VadEvent::SpeechStart { .. }, p @ VadEvent::Provisional { .. }, e @ VadEvent::Endpoint { .. }] => {
                (p, e)
            }
            _ => panic!("{:?}", kinds(events)),
        }
    }

    /// The provisional end comes `provisional_ms` after the refined end of speech, while the
    /// VAD still calls its trail voiced, and its audio, confirmed at the endpoint, ends
    /// `tail` after the speech.
    #[test]
    fn an_early_provisional_end_does_not_wait_for_the_vad_trail() {
        let cfg = EndpointerConfig::default();
        let events = feed(
            Endpointer::new(cfg.clone(), Scripted).unwrap(),
            &tone_then_vad_trail(200),
        );
        let (p, e) = provisional_and_endpoint(&events);
        let VadEvent::Provisional {
            speech_end,
            at,
            audio,
        } = p
        else {
            unreachable!()
        };
        assert!(
            speech_end.0.abs_diff(1500 * MS) <= 10 * MS,
            "{} ms",
            speech_end.0 / MS
        );
        let after = at.0 - speech_end.0;
        assert!(
            (50 * MS..70 * MS).contains(&after),
            "provisional {} ms after the speech, inside the 200 ms trail",
            after / MS
        );
        let kept_ms = (audio.len() / 16) as u64;
        assert!(
            (1300 + 50..=1300 + 60).contains(&kept_ms),
            "pre-roll, speech and a 50 ms tail, not the trail: {kept_ms} ms"
        );
        confirms_with(e, audio);
        let late = Endpointer::new(
            EndpointerConfig {
                early_provisional: false,
                ..cfg
            },
            Scripted,
        )
        .unwrap();
        let events = feed(late, &tone_then_vad_trail(200));
        let (VadEvent::Provisional { at: late_at, .. }, _) = provisional_and_endpoint(&events)
        else {
            unreachable!()
        };
        assert!(
            late_at.0 >= 1700 * MS + 50 * MS,
            "counted from the trail: {} ms",
            late_at.0 / MS
        );
    }

    /// A VAD run that goes on far past the refined end is not a trail: whatever the energy
    /// track missed in it stays in the audio, and the VAD's own silence sets the provisional
    /// end.
    #[test]
    fn a_vad_run_longer_than_a_trail_keeps_its_audio() {
        let trail = VAD_TRAIL_MS as usize + 200;
        let events = feed(
            Endpointer::new(EndpointerConfig::default(), Scripted).unwrap(),
            &tone_then_vad_trail(trail),
        );
        let (p, e) = match &events[..] {
            // Taken early, then retracted once the run outlasted a trail.
            [_, _, VadEvent::Retracted { .. }, p, e] => (p, e),
            _ => panic!("{:?}", kinds(&events)),
        };
        let VadEvent::Provisional { audio, .. } = p else {
            unreachable!()
        };
        assert!(
            audio.len() >= (300 + 1000 + trail) * 16,
            "{} ms",
            audio.len() / 16
        );
        confirms_with(e, audio);
    }

    /// Room hiss at about -50 dBFS with a 440 Hz "word" over it from 1200 to 2000 ms. The
    /// detector calls the hiss silence for its first 500 ms and voiced from then on (a drifted
    /// noise model), except for 600 ms after the word, so that the turn can end.
    #[test]
    fn hiss_the_vad_calls_voiced_starts_no_turn() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut samples: Vec<f32> = (0..4600 * 16)
            .map(|i| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let hiss = ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.01;
                let vad_silent = i < 500 * 16 || (2100 * 16..2700 * 16).contains(&i);
                hiss + if vad_silent { -0.002 } else { 0.002 }
            })
            .collect();
        for i in 0..800 * 16 {
            samples[1200 * 16 + i] +=
                0.2 * (i as f32 * 2.0 * std::f32::consts::PI * 440.0 / 16_000.0).sin();
        }
        let events = feed(
            Endpointer::new(EndpointerConfig::default(), Scripted).unwrap(),
            &samples,
        );
        let starts: Vec<u64> = events
            .iter()
            .filter_map(|e| match e {
                VadEvent::SpeechStart { at } => Some(at.0 / MS),
                _ => None,
            })
            .collect();
        assert_eq!(starts.len(), 1, "turns started at {starts:?} ms");
        assert!(
            (1140..=1220).contains(&starts[0]),
            "the turn started at {} ms, not with the word at 1200",
            starts[0]
        );
        let Some(VadEvent::Endpoint {
            speech_end,
            at,
            audio,
            forced: false,
            ..
        }) = events.last()
        else {
            panic!("no endpoint by silence: {:?}", kinds(&events));
        };
        assert_ended(*speech_end, *at, 2000);
        assert!(audio.len() < 1300 * 16, "{} ms of audio", audio.len() / 16);
    }

    #[test]
    fn one_utterance_provisional_then_confirmed_with_the_same_audio() {
        let cfg = EndpointerConfig {
            provisional_ms: 200,
            ..EndpointerConfig::default()
        };
        let ev = run(cfg, &[(false, 500), (true, 1000), (false, 1000)], 320);
        assert_eq!(kinds(&ev), ["start", "provisional", "endpoint"]);
        let VadEvent::SpeechStart { at } = ev[0] else {
            unreachable!()
        };
        assert_eq!(
            at,
            Nanos(500 * MS),
            "retro-dated to the first voiced frame's first sample"
        );
        let VadEvent::Provisional {
            speech_end,
            at: p_at,
            audio: p_audio,
        } = &ev[1]
        else {
            unreachable!()
        };
        let VadEvent::Endpoint {
            speech_end: e_end,
            at: e_at,
            audio,
            confirms_provisional,
            forced,
            ..
        } = &ev[2]
        else {
            unreachable!()
        };
        // Last voiced sample is at 1500 ms − 1 sample.
        assert_eq!(speech_end.0, 1_499_937_500);
        assert_eq!(e_end, speech_end);
        assert_eq!(p_at.signed_since(*speech_end), 200 * MS as i64);
        assert_eq!(e_at.signed_since(*speech_end), 600 * MS as i64);
        assert!(*confirms_provisional && !*forced);
        assert_eq!(
            audio, p_audio,
            "speculative work on the provisional audio stands"
        );
        // pre-roll 300 ms + 1000 ms speech + 150 ms tail.
        assert_eq!(audio.len(), (300 + 1000 + 150) * 16);
    }

    #[test]
    fn the_default_provisional_end_keeps_as_much_tail_as_its_own_silence() {
        let cfg = EndpointerConfig::default();
        let ev = run(
            cfg.clone(),
            &[(false, 500), (true, 1000), (false, 1000)],
            320,
        );
        let VadEvent::Provisional {
            speech_end,
            at,
            audio,
            ..
        } = &ev[1]
        else {
            panic!("{:?}", kinds(&ev))
        };
        // At the first frame boundary with that much silence.
        let frames = cfg.provisional_ms.div_ceil(cfg.frame_ms);
        assert_eq!(
            at.signed_since(*speech_end),
            i64::from(frames * cfg.frame_ms) * MS as i64
        );
        let tail = cfg.tail_ms.min(cfg.provisional_ms) as usize;
        assert_eq!(audio.len(), (300 + 1000 + tail) * 16);
    }

    /// Speech, a pause of `pause_ms` (longer than the provisional silence, shorter than the
    /// hangover), speech again: the provisional end is retracted and the turn's audio, which
    /// the next provisional end's confirmed, holds both parts and `tail_ms` more.
    fn retracted_then_confirmed(provisional_ms: u32, pause_ms: u32) {
        let cfg = EndpointerConfig {
            provisional_ms,
            ..EndpointerConfig::default()
        };
        let tail = cfg.tail_ms.min(provisional_ms);
        let pattern = [
            (false, 200),
            (true, 600),
            (false, pause_ms),
            (true, 600),
            (false, 800),
        ];
        let ev = run(cfg, &pattern, 320);
        assert_eq!(
            kinds(&ev),
            [
                "start",
                "provisional",
                "retracted",
                "provisional",
                "endpoint"
            ]
        );
        let VadEvent::Endpoint {
            audio,
            confirms_provisional,
            ..
        } = &ev[4]
        else {
            unreachable!()
        };
        assert!(confirms_provisional);
        assert_eq!(
            audio.len() as u32,
            (200 + 600 + pause_ms + 600 + tail) * 16,
            "both parts in one turn"
        );
    }

    /// 600 ms of speech then silence, with the stop's wait set as a session would set it on
    /// hearing the provisional end (for another stop's time when `stale`): how long after the
    /// end of speech the endpoint came, ms.
    fn held_for(hold_ms: Option<u32>, stale: bool) -> u64 {
        let hold = StopHold::default();
        let mut ep = Endpointer::new(EndpointerConfig::default(), Scripted)
            .unwrap()
            .with_stop_hold(hold.clone())
            .unwrap();
        let samples = samples_of(&[(false, 200), (true, 600), (false, 2000)]);
        for (k, frame) in samples.chunks(320).enumerate() {
            let t_end = Nanos((((k + 1) * 320 - 1) as u64 * 1_000_000_000) / 16_000);
            for ev in ep.push(frame, t_end).unwrap() {
                match ev {
                    VadEvent::Provisional { at, .. } => {
                        if let Some(ms) = hold_ms {
                            hold.set(if stale { Nanos(at.0 + 1) } else { at }, ms);
                        }
                    }
                    VadEvent::Endpoint { speech_end, at, .. } => return (at.0 - speech_end.0) / MS,
                    _ => {}
                }
            }
        }
        panic!("no endpoint");
    }

    #[test]
    fn a_stop_ends_after_the_wait_set_for_it_and_not_after_one_set_for_another() {
        assert!((600..=620).contains(&held_for(None, false)), "the hangover");
        assert!((1200..=1220).contains(&held_for(Some(1200), false)));
        assert!((250..=270).contains(&held_for(Some(250), false)));
        assert!((600..=620).contains(&held_for(Some(1200), true)), "stale");
        let both = Endpointer::new(EndpointerConfig::default(), Scripted)
            .unwrap()
            .with_stop_hold(StopHold::default())
            .unwrap()
            .with_turn_model(std::sync::Arc::new(std::sync::Mutex::new(
                crate::turn::ScriptedScorer(|_: &[f32]| 0.5),
            )));
        assert!(both.is_err());
    }

    #[test]
    fn a_pause_longer_than_provisional_but_shorter_than_hangover_is_retracted() {
        retracted_then_confirmed(200, 400);
    }

    /// The default provisional end comes 50 ms into the pause, so a 120 ms pause retracts it.
    #[test]
    fn a_short_pause_retracts_an_early_provisional_end() {
        retracted_then_confirmed(EndpointerConfig::default().provisional_ms, 120);
    }

    #[test]
    fn speculation_can_be_disabled() {
        let cfg = EndpointerConfig {
            provisional_ms: 0,
            ..EndpointerConfig::default()
        };
        let ev = run(cfg, &[(true, 400), (false, 700)], 320);
        assert_eq!(kinds(&ev), ["start", "endpoint"]);
        let VadEvent::Endpoint {
            confirms_provisional,
            ..
        } = &ev[1]
        else {
            unreachable!()
        };
        assert!(!confirms_provisional);
    }

    #[test]
    fn short_blips_and_silence_start_nothing() {
        assert!(run(
            EndpointerConfig::default(),
            &[(false, 300), (true, 40), (false, 900)],
            320
        )
        .is_empty());
        assert!(run(EndpointerConfig::default(), &[(false, 2000)], 320).is_empty());
    }

    #[test]
    fn input_ending_mid_speech_is_a_forced_endpoint() {
        let ev = run(EndpointerConfig::default(), &[(true, 500)], 320);
        assert_eq!(kinds(&ev), ["start", "endpoint"]);
        assert!(matches!(
            ev[1],
            VadEvent::Endpoint {
                forced: true,
                confirms_provisional: false,
                ..
            }
        ));
    }

    #[test]
    fn max_utterance_forces_an_end() {
        let cfg = EndpointerConfig {
            max_utterance_ms: 1000,
            ..EndpointerConfig::default()
        };
        let ev = run(cfg, &[(true, 2500)], 320);
        assert_eq!(kinds(&ev)[..2], ["start", "endpoint"]);
        assert!(matches!(ev[1], VadEvent::Endpoint { forced: true, .. }));
    }

    #[test]
    fn slice_size_does_not_change_the_events() {
        let pattern = [
            (false, 300),
            (true, 700),
            (false, 350),
            (true, 300),
            (false, 900),
        ];
        let reference = run(EndpointerConfig::default(), &pattern, 320);
        for slice in [1, 7, 160, 333, 1000, 4096] {
            assert_eq!(
                run(EndpointerConfig::default(), &pattern, slice),
                reference,
                "slice {slice}"
            );
        }
    }

    /// Runs `pattern` with a scripted turn model whose probability is `p(utterance samples)`.
    fn run_with_model(
        pattern: &[(bool, u32)],
        p: impl FnMut(&[f32]) -> f32 + Send + 'static,
    ) -> Vec<VadEvent> {
        let samples = samples_of(pattern);
        let scorer: SharedScorer =
            std::sync::Arc::new(std::sync::Mutex::new(crate::turn::ScriptedScorer(p)));
        let ep = Endpointer::new(EndpointerConfig::default(), Scripted)
            .unwrap()
            .with_turn_model(scorer)
            .unwrap();
        feed(ep, &samples)
    }

    fn endpoint_delay_ms(ev: &[VadEvent]) -> Vec<(u64, Option<f32>)> {
        ev.iter()
            .filter_map(|e| match e {
                VadEvent::Endpoint {
                    speech_end,
                    at,
                    turn_probability,
                    ..
                } => Some((at.0.saturating_sub(speech_end.0) / MS, *turn_probability)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_confident_turn_model_ends_the_turn_at_the_first_score() {
        let ev = run_with_model(&[(false, 300), (true, 800), (false, 1000)], |_| 0.97);
        assert_eq!(kinds(&ev), ["start", "provisional", "endpoint"]);
        let d = endpoint_delay_ms(&ev);
        assert!((200..=220).contains(&d[0].0), "{d:?}");
        assert_eq!(d[0].1, Some(0.97));
    }

    #[test]
    fn an_unsure_turn_model_holds_through_a_pause_the_hangover_would_cut() {
        let pattern = [
            (false, 300),
            (true, 800),
            (false, 800),
            (true, 600),
            (false, 2000),
        ];
        // The plain 600 ms rule splits this turn in two.
        let plain = run(EndpointerConfig::default(), &pattern, 320);
        assert_eq!(
            kinds(&plain).iter().filter(|k| **k == "endpoint").count(),
            2
        );
        // A model that hears the first part as unfinished (P = 0.2) and the whole as done.
        let first_part = (300 + 800 + 800) * 16;
        let ev = run_with_model(
            &pattern,
            move |a| if a.len() <= first_part { 0.2 } else { 0.8 },
        );
        assert_eq!(
            kinds(&ev),
            [
                "start",
                "provisional",
                "retracted",
                "provisional",
                "endpoint"
            ],
            "one turn"
        );
        // 0.8 is below the high threshold: committed at the hangover's fresh score.
        let d = endpoint_delay_ms(&ev);
        assert!((600..=620).contains(&d[0].0), "{d:?}");
    }

    #[test]
    fn a_turn_model_that_never_agrees_is_capped_at_the_longest_hold() {
        let ev = run_with_model(&[(false, 300), (true, 800), (false, 2500)], |_| 0.05);
        let d = endpoint_delay_ms(&ev);
        let cap = u64::from(TurnPolicy::default().max_ms);
        assert!((cap..=cap + 20).contains(&d[0].0), "{d:?}");
    }

    #[test]
    fn inconsistent_settings_are_rejected() {
        let cfg = EndpointerConfig {
            provisional_ms: 700,
            ..EndpointerConfig::default()
        };
        assert!(Endpointer::new(cfg, Scripted).is_err());
    }
}
