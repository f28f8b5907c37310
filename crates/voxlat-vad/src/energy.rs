//! The speech-band energy track that `speech_end` is refined on.
//!
//! webrtc-vad keeps calling frames voiced for 50–300 ms after the last word on real recordings:
//! its own hangover, then breath, lip noise, a microphone thump or room rumble. The endpointer
//! moves its speech end back to the last moment that still looks like speech on this track:
//!
//! - **Speech band only.** Two cascaded 2nd-order Butterworth high-pass sections at 150 Hz
//!   (24 dB/octave) take out rumble, hum and thumps, which sit below 100 Hz, and keep voiced
//!   speech, whose formants and most of whose energy lie above 200 Hz. A block must also keep
//!   most of its energy through that filter ([`MAX_BAND_LOSS_DB`]): a loud thump leaks a little
//!   energy into the band, but almost all of it is below.
//! - **Fine steps.** Energy in 5 ms blocks rather than 20 ms VAD frames, so the estimate is not
//!   quantised to a frame. The end is judged on 10 ms windows that move a block at a time
//!   ([`WINDOW_BLOCKS`]): a lone block is half a pitch period of a low voice, and its level
//!   depends on where the pulses fall. Speech lasts: a window counts only in a run of three,
//!   so a click or the edge of a filtered transient (one block) does not.
//! - **Relative to the noise, not only to the peak.** A block counts as speech when it is
//!   within [`BELOW_PEAK_DB`] of the turn's loudest block *and* at least [`ABOVE_FLOOR_DB`]
//!   above the noise floor. On clean input only the peak rule matters; over a noisy room,
//!   breath and hiss at the noise level no longer count.
//! - **The floor is the room's level, measured where no one speaks.** It is the mean of the
//!   quietest [`FLOOR_WINDOW`] blocks in a row that the endpointer heard between turns
//!   ([`EnergyTrack::note_room`]), remembered through a turn that outlasts the blocks kept,
//!   and forgotten when sound comes back after digital silence (a new stream, a new room).
//!   Until the room has been heard (a recording that starts with speech), the end reported at
//!   the commit is judged against the room heard after the speech
//!   ([`EnergyTrack::speech_end_at_commit`]); before that, and for onsets, the floor is the
//!   quietest single block.

use std::collections::VecDeque;
use voxlat_core::Nanos;

/// Samples per energy block at 16 kHz (5 ms).
pub const BLOCK: usize = 80;
/// A block is speech only within this of the turn's loudest block.
pub const BELOW_PEAK_DB: f32 = 50.0;
/// ... and only this far above the noise floor. 5 ms blocks of white noise vary by about
/// ±1 dB around their mean, but a real room's (hum, rumble, a radio recording's hiss) by
/// ±3–5 dB, so the floor is a mean level ([`FLOOR_WINDOW`]), not the quietest single block:
/// 6 dB above that block let the room's louder blocks count as speech for up to 100 ms after
/// the last word. Set on the 17 bundled clips (docs/benchmarks.md gives the measured error).
pub const ABOVE_FLOOR_DB: f32 = 6.0;
/// Blocks in a row (50 ms) whose mean energy is the noise floor: the quietest such stretch
/// of the room. Not tuned: long enough for a room's swells to average out, short enough to
/// fit in the gaps between turns.
pub const FLOOR_WINDOW: usize = 10;
/// A block whose speech-band energy is this far below its whole energy (DC aside) is rumble
/// or a thump, not speech. Low male vowels lose about 3–6 dB.
pub const MAX_BAND_LOSS_DB: f32 = 10.0;
/// Mean square below this (-100 dBFS) is digital silence.
pub(crate) const DIGITAL_SILENCE: f32 = 1e-10;
/// Where speech ends is judged on windows of this many blocks (10 ms), not on single blocks.
/// A 5 ms block holds half a pitch period of a low voice (100 Hz), so its level swings with
/// where the glottal pulses fall in it: on a fading last word, starting the same audio 1–4 ms
/// later moved the end by up to 56 ms on the turn corpus. Set on the tuning half from 1–4
/// blocks: 2, 3 and 4 all took the spread there down to the blocks' own 4 ms. 3 and 4 erred
/// less against the truth there, but they end a clean step late (four unit tests, with a
/// tone's end, a click and a fade, failed by 10–15 ms), a lateness that happens to offset the
/// endpointer's slight earliness on that half; 2 keeps steps exact (docs/benchmarks.md).
pub const WINDOW_BLOCKS: usize = 2;
/// Blocks of the room after the speech (200 ms) that make its level at the commit: enough
/// that a breath or a click in it is not the median. Not tuned (100 and 300 ms gave the same
/// errors on every set of clips).
pub const ROOM_AFTER_MIN: usize = 40;
/// How far above the floor a sound after the VAD's last voiced frame must be to count as
/// speech the VAD missed: the truth's own margin (`scripts/annotate-reference.py`), well
/// above a word's fading tail and breath (6–10 dB over the room on the test half). 10 and
/// 25 dB gave the same errors on all three sets of clips.
pub const MISSED_ABOVE_FLOOR_DB: f32 = 15.0;
/// Blocks kept: 2.56 s, enough for the refinement window and a noise floor.
const KEPT: usize = 512;

/// One biquad section (transposed direct form II).
#[derive(Clone, Copy, Debug)]
struct Biquad {
    b: [f32; 3],
    a: [f32; 2],
    z: [f32; 2],
}

impl Biquad {
    /// RBJ cookbook high-pass, Q = 1/√2 (Butterworth).
    fn high_pass(cutoff_hz: f32, rate: f32) -> Biquad {
        let w0 = 2.0 * std::f32::consts::PI * cutoff_hz / rate;
        let alpha = w0.sin() / std::f32::consts::SQRT_2;
        let cos = w0.cos();
        let a0 = 1.0 + alpha;
        Biquad {
            b: [
                (1.0 + cos) / 2.0 / a0,
                -(1.0 + cos) / a0,
                (1.0 + cos) / 2.0 / a0,
            ],
            a: [-2.0 * cos / a0, (1.0 - alpha) / a0],
            z: [0.0; 2],
        }
    }

    fn run(&mut self, x: f32) -> f32 {
        let y = self.b[0] * x + self.z[0];
        self.z[0] = self.b[1] * x - self.a[0] * y + self.z[1];
        self.z[1] = self.b[2] * x - self.a[1] * y;
        y
    }
}

/// One 5 ms block: its end, its mean square in the speech band and in the whole band, and
/// whether the endpointer heard it between turns.
#[derive(Clone, Copy, Debug)]
struct Block {
    end: Nanos,
    band: f32,
    whole: f32,
    room: bool,
}

/// Speech-band energy of the most recent blocks, with their end times.
pub struct EnergyTrack {
    sections: [Biquad; 2],
    /// Takes out DC only, for the whole-band energy.
    dc: Biquad,
    band: f32,
    whole: f32,
    count: usize,
    blocks: VecDeque<Block>,
    /// Loudest block of the current turn (mean square).
    peak: f32,
    /// The room's noise floor, last measured between turns (mean square).
    room_floor: Option<f32>,
}

impl EnergyTrack {
    pub fn new(rate: u32) -> EnergyTrack {
        let hp = Biquad::high_pass(150.0, rate as f32);
        EnergyTrack {
            sections: [hp, hp],
            dc: Biquad::high_pass(20.0, rate as f32),
            band: 0.0,
            whole: 0.0,
            count: 0,
            blocks: VecDeque::with_capacity(KEPT),
            peak: 0.0,
            room_floor: None,
        }
    }

    /// Adds one sample that entered the pipeline at `at`.
    pub fn push(&mut self, x: f32, at: Nanos) {
        let y = self.sections.iter_mut().fold(x, |v, s| s.run(v));
        let w = self.dc.run(x);
        self.band += y * y;
        self.whole += w * w;
        self.count += 1;
        if self.count == BLOCK {
            if self.blocks.len() == KEPT {
                self.blocks.pop_front();
            }
            self.blocks.push_back(Block {
                end: at,
                band: self.band / BLOCK as f32,
                whole: self.whole / BLOCK as f32,
                room: false,
            });
            self.band = 0.0;
            self.whole = 0.0;
            self.count = 0;
        }
    }

    /// Counts the blocks since `since` (and the block ending at it) towards the turn's peak.
    pub fn note_speech(&mut self, since: Nanos) {
        for b in self.blocks.iter().rev() {
            if b.end < since {
                break;
            }
            self.peak = self.peak.max(b.band);
        }
    }

    /// Marks the blocks that end from `from` to `to` as the room between turns, and measures
    /// the noise floor again: the mean of the quietest [`FLOOR_WINDOW`] such
    /// blocks in a row among those kept, none of them digital silence (replay's padding, a
    /// muted input), which is not the room's noise. Summed afresh per stretch: a running sum
    /// would carry the rounding of speech blocks (1e-2) into a floor of 1e-8.
    pub fn note_room(&mut self, from: Nanos, to: Nanos) {
        for b in self.blocks.iter_mut().rev() {
            if b.end < from {
                break;
            }
            b.room |= b.end <= to;
        }
        let mut quietest = f32::INFINITY;
        let mut run = 0usize;
        for (i, b) in self.blocks.iter().enumerate() {
            run = if b.room && b.band > DIGITAL_SILENCE {
                run + 1
            } else {
                0
            };
            if run >= FLOOR_WINDOW {
                let sum: f32 = self
                    .blocks
                    .range(i + 1 - FLOOR_WINDOW..=i)
                    .map(|b| b.band)
                    .sum();
                quietest = quietest.min(sum / FLOOR_WINDOW as f32);
            }
        }
        if quietest.is_finite() {
            self.room_floor = Some(quietest);
        }
    }

    /// A new turn: the peak starts again; the noise floor is kept.
    pub fn reset_peak(&mut self) {
        self.peak = 0.0;
    }

    /// The end of the last block at or before `vad_end`, and no earlier than `earliest`, that
    /// is speech by the rules above; `vad_end` when none is.
    pub fn speech_end(&self, vad_end: Nanos, earliest: Nanos) -> Nanos {
        self.last_speech(self.noise_floor(None), vad_end, earliest)
            .unwrap_or(vad_end)
    }

    /// [`speech_end`](Self::speech_end) once the turn has ended, when the audio from the VAD's
    /// last voiced frame to `room_from` and the room after it can be judged too.
    ///
    /// - **The floor.** Until the room has been heard between turns (a recording that starts
    ///   with speech, or a new room after digital silence), it is the room heard after the
    ///   speech: the median block from `room_from` on, when there are at least
    ///   [`ROOM_AFTER_MIN`] of them. The quietest single block is far below a live room's
    ///   usual level, and the room's swells after the last word counted as speech (70–100 ms
    ///   late on studio and radio recordings).
    /// - **A sound the VAD missed.** webrtc-vad calls an unvoiced last consonant ("words")
    ///   silence, and the end came 120 ms early. Where the room's level is known (not digital
    ///   silence), 10 ms or more of sound up to `room_from` that is [`MISSED_ABOVE_FLOOR_DB`]
    ///   above it is still speech. Over digital silence there is no such margin to judge by,
    ///   and the filters' ringing after a stream stops would count.
    pub fn speech_end_at_commit(&self, vad_end: Nanos, earliest: Nanos, room_from: Nanos) -> Nanos {
        let room = self.room_floor.or_else(|| {
            let mut after: Vec<f32> = self
                .blocks
                .iter()
                .rev()
                .take_while(|b| b.end > room_from)
                .map(|b| b.band)
                .filter(|&e| e > DIGITAL_SILENCE)
                .collect();
            let mid = after.len() / 2;
            (after.len() >= ROOM_AFTER_MIN)
                .then(|| *after.select_nth_unstable_by(mid, f32::total_cmp).1)
        });
        let missed = room.and_then(|floor| {
            let loud = floor * db_to_power(MISSED_ABOVE_FLOOR_DB - ABOVE_FLOOR_DB);
            self.last_speech(loud, room_from, Nanos(vad_end.0 + 1))
        });
        let floor = room.unwrap_or_else(|| self.noise_floor(None));
        missed
            .or_else(|| self.last_speech(floor, vad_end, earliest))
            .unwrap_or(vad_end)
    }

    /// A new room (sound after digital silence): what was heard of the last one no longer
    /// sets the floor.
    pub fn forget_room(&mut self) {
        self.room_floor = None;
        self.blocks.iter_mut().for_each(|b| b.room = false);
    }

    /// Where speech last ended from `earliest` to `latest`: the middle of the last window of
    /// [`WINDOW_BLOCKS`] blocks that is speech over `floor` and that ends a run of
    /// `WINDOW_BLOCKS + 1` such windows (windows move one block at a time). A click of one
    /// block is in only `WINDOW_BLOCKS` windows, so it does not count; two blocks do.
    fn last_speech(&self, floor: f32, latest: Nanos, earliest: Nanos) -> Option<Nanos> {
        let speech = self.speech_rule(floor);
        let w = WINDOW_BLOCKS;
        let n = self.blocks.len();
        let mut run = 0usize;
        let mut end = None;
        for last in (w - 1..n).rev() {
            let window = self.blocks.range(last + 1 - w..=last);
            let middle = self.blocks[last - w / 2].end;
            if middle > latest {
                continue;
            }
            if middle < earliest {
                break;
            }
            let (band, whole) = window.fold((0.0, 0.0), |(b, h), x| (b + x.band, h + x.whole));
            let is = speech(&Block {
                end: middle,
                band: band / w as f32,
                whole: whole / w as f32,
                room: false,
            });
            if !is {
                run = 0;
                continue;
            }
            if run == 0 {
                end = Some(middle);
            }
            run += 1;
            if run > w {
                return end;
            }
        }
        // Speech that runs on past `earliest` (or past what is kept) ended here too.
        end.filter(|_| run > 0)
    }
}

impl EnergyTrack {
    /// Whether two blocks in a row that end at or after `since` are speech by the rules above.
    ///
    /// An onset needs this as well as the VAD: once webrtc-vad's noise model has drifted, it
    /// calls a recording's steady hiss or hum voiced for seconds, and every endpoint in it was
    /// followed at once by a new "turn" that held no speech (a live reply then waited for it).
    ///
    /// Until the room has been heard, the floor here is the quietest block before `since`: a
    /// steady sound that starts out of digital silence is above no floor, not at its own.
    pub fn heard_speech_since(&self, since: Nanos) -> bool {
        let speech = self.speech_rule(self.noise_floor(Some(since)));
        let mut previous = false;
        for b in self.blocks.iter().rev().take_while(|b| b.end >= since) {
            let is = speech(b);
            if is && previous {
                return true;
            }
            previous = is;
        }
        false
    }

    /// Whether one block is speech: near enough the turn's peak, [`ABOVE_FLOOR_DB`] above
    /// `floor`, and mostly in the speech band.
    fn speech_rule(&self, floor: f32) -> impl Fn(&Block) -> bool {
        let threshold =
            (self.peak * db_to_power(-BELOW_PEAK_DB)).max(floor * db_to_power(ABOVE_FLOOR_DB));
        let in_band = db_to_power(-MAX_BAND_LOSS_DB);
        move |b: &Block| b.band > 0.0 && b.band >= threshold && b.band >= b.whole * in_band
    }

    /// The room's floor, or until it has been heard the quietest block (kept, or ending
    /// before `before`); 0 when nothing but digital silence has been heard.
    fn noise_floor(&self, before: Option<Nanos>) -> f32 {
        if let Some(floor) = self.room_floor {
            return floor;
        }
        let quietest = self
            .blocks
            .iter()
            .take_while(|b| before.is_none_or(|t| b.end < t))
            .map(|b| b.band)
            .filter(|&e| e > DIGITAL_SILENCE)
            .fold(f32::INFINITY, f32::min);
        if quietest.is_finite() {
            quietest
        } else {
            0.0
        }
    }
}

fn db_to_power(db: f32) -> f32 {
    10f32.powf(db / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Feeds `x` at 16 kHz from t = 0; returns the track.
    fn track(x: &[f32]) -> EnergyTrack {
        track_with_room(x, 0)
    }

    /// As [`track`], with its first `room` samples heard as the room between turns.
    fn track_with_room(x: &[f32], room: usize) -> EnergyTrack {
        let mut t = EnergyTrack::new(16_000);
        for (i, &v) in x.iter().enumerate() {
            let at = Nanos(((i + 1) as u64 * 1_000_000_000) / 16_000);
            t.push(v, at);
            if i + 1 == room {
                t.note_room(Nanos(0), at);
            }
        }
        t
    }

    fn tone(hz: f32, amp: f32, n: usize) -> impl Iterator<Item = f32> {
        (0..n).map(move |i| amp * (2.0 * std::f32::consts::PI * hz * i as f32 / 16_000.0).sin())
    }

    fn noise(amp: f32, n: usize, seed: &mut u64) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                ((*seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * amp
            })
            .collect()
    }

    #[test]
    fn a_low_thump_and_a_click_after_the_word_do_not_count_as_speech() {
        // 500 ms of a 300 Hz "vowel", 100 ms silence, a loud 60 Hz thump for 80 ms (a Hann
        // window, as a membrane moves), 40 ms silence, a 2 ms click.
        let mut x: Vec<f32> = tone(300.0, 0.3, 8000).collect();
        x.extend(std::iter::repeat_n(0.0, 1600));
        let n = 1280;
        x.extend(
            tone(60.0, 0.5, n)
                .enumerate()
                .map(|(i, v)| v * (std::f32::consts::PI * i as f32 / n as f32).sin().powi(2)),
        );
        x.extend(std::iter::repeat_n(0.0, 640));
        x.extend(std::iter::repeat_n(0.4, 32));
        x.extend(std::iter::repeat_n(0.0, 800));
        let mut t = track(&x);
        t.note_speech(Nanos(0));
        let vad_end = Nanos(700 * MS);
        let end = t.speech_end(vad_end, Nanos(0));
        assert!(
            (495 * MS..=510 * MS).contains(&end.0),
            "speech end {} ms",
            end.0 / MS
        );
    }

    #[test]
    fn hiss_at_the_noise_floor_does_not_count_but_speech_over_it_does() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        // Room noise throughout at about -50 dBFS; speech-like tone from 200 to 700 ms.
        let mut x = noise(0.005, 16_000, &mut seed);
        for (i, v) in tone(440.0, 0.2, 8000).enumerate() {
            x[3200 + i] += v;
        }
        let mut t = track(&x);
        t.note_speech(Nanos(0));
        let end = t.speech_end(Nanos(950 * MS), Nanos(0));
        assert!(
            (695 * MS..=710 * MS).contains(&end.0),
            "speech end {} ms",
            end.0 / MS
        );
    }

    #[test]
    fn a_room_whose_noise_swells_and_fades_is_not_speech_after_the_word() {
        // Noise at about -50 dBFS whose level swells and fades by ±4 dB every 60 ms, as a real
        // room's hum and rumble do; the room alone for 200 ms, then a tone to 700 ms. 6 dB
        // above the quietest single block, each swell would count as speech, and the end
        // would be the last swell's, up to 300 ms late.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut x = noise(0.005, 16_000, &mut seed);
        for (k, block) in x.chunks_mut(BLOCK).enumerate() {
            let db = 4.0 * (2.0 * std::f32::consts::PI * k as f32 / 12.0).sin();
            block.iter_mut().for_each(|v| *v *= 10f32.powf(db / 20.0));
        }
        for (i, v) in tone(440.0, 0.2, 8000).enumerate() {
            x[3200 + i] += v;
        }
        let mut t = track_with_room(&x, 3200);
        t.note_speech(Nanos(200 * MS));
        let end = t.speech_end(Nanos(1000 * MS), Nanos(500 * MS));
        assert!(
            (695 * MS..=710 * MS).contains(&end.0),
            "speech end {} ms",
            end.0 / MS
        );
    }

    #[test]
    fn a_room_heard_only_after_the_speech_sets_the_floor_at_the_commit() {
        // The recording starts with the word, so no room is heard before it: a tone to
        // 500 ms, then a room that swells and fades by ±4 dB every 60 ms, as in the test
        // above, for 700 ms. Against the quietest single block the swells count as speech
        // and the end is the last swell's; against the room's median they do not.
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut x: Vec<f32> = tone(440.0, 0.2, 8000).collect();
        let mut room = noise(0.005, 11_200, &mut seed);
        for (k, block) in room.chunks_mut(BLOCK).enumerate() {
            let db = 4.0 * (2.0 * std::f32::consts::PI * k as f32 / 12.0).sin();
            block.iter_mut().for_each(|v| *v *= 10f32.powf(db / 20.0));
        }
        x.extend(room);
        let mut t = track(&x);
        t.note_speech(Nanos(0));
        let vad_end = Nanos(760 * MS);
        let earliest = Nanos(260 * MS);
        let before = t.speech_end(vad_end, earliest);
        let at_commit = t.speech_end_at_commit(vad_end, earliest, Nanos(910 * MS));
        assert!(
            before.0 > 560 * MS,
            "the quietest block lets a swell count: {} ms",
            before.0 / MS
        );
        assert!(
            (495 * MS..=510 * MS).contains(&at_commit.0),
            "speech end at the commit {} ms",
            at_commit.0 / MS
        );
        // With too little room heard after the speech, the quietest block stands.
        let early = t.speech_end_at_commit(vad_end, earliest, Nanos(1100 * MS));
        assert_eq!(early, before);
    }

    #[test]
    fn a_loud_sound_the_vad_missed_counts_and_a_fading_tail_does_not() {
        // A tone to 500 ms (the VAD's last voiced frame), then 60 ms of noise 20 dB over the
        // room (an unvoiced "s" the VAD calls silence), then the room alone to 1.2 s.
        // `fade` instead puts 8 dB over the room there: a word's fading tail or breath.
        let at_commit = |over_room_db: f32| {
            let mut seed = 0x9E37_79B9_7F4A_7C15u64;
            let mut x: Vec<f32> = tone(440.0, 0.2, 8000).collect();
            x.extend(noise(
                0.003 * 10f32.powf(over_room_db / 20.0),
                960,
                &mut seed,
            ));
            x.extend(noise(0.003, 10_240, &mut seed));
            let mut t = track(&x);
            t.note_speech(Nanos(0));
            t.speech_end_at_commit(Nanos(500 * MS), Nanos(0), Nanos(650 * MS))
        };
        let s = at_commit(20.0);
        assert!((555 * MS..=565 * MS).contains(&s.0), "s: {} ms", s.0 / MS);
        let fade = at_commit(8.0);
        assert!(
            (495 * MS..=505 * MS).contains(&fade.0),
            "fade: {} ms",
            fade.0 / MS
        );
    }

    #[test]
    fn where_the_pitch_pulses_fall_in_the_blocks_does_not_move_the_end() {
        // A low voice (pulses every 10 ms: 2 ms of 1 kHz) fading out over a room, started
        // 0–4 ms later each time. A 5 ms block holds a pulse or none, so single blocks swing
        // by the pulse's position and the last pair above the floor jumped with it.
        let end_after_onset = |shift_ms: usize| {
            let mut seed = 0x9E37_79B9_7F4A_7C15u64;
            let mut x = noise(0.002, 19_200, &mut seed);
            let onset = (300 + shift_ms) * 16;
            for i in 0..9600 {
                let t_ms = i as f32 / 16.0;
                if (i % 160) >= 32 {
                    continue;
                }
                // Steady for 400 ms, then 0.25 dB/ms down.
                let db = -0.25 * (t_ms - 400.0).max(0.0);
                let amp = 0.1 * 10f32.powf(db / 20.0);
                x[onset + i] += amp * (2.0 * std::f32::consts::PI * 1000.0 * t_ms / 1000.0).sin();
            }
            let mut t = track_with_room(&x, 4800);
            t.note_speech(Nanos(300 * MS));
            let end = t.speech_end_at_commit(Nanos(900 * MS), Nanos(400 * MS), Nanos(1000 * MS));
            end.0 / MS - (300 + shift_ms) as u64
        };
        let ends: Vec<u64> = (0..5).map(end_after_onset).collect();
        let spread = ends.iter().max().unwrap() - ends.iter().min().unwrap();
        assert!(
            spread <= 5,
            "speech end after the onset, per shift: {ends:?} ms"
        );
    }

    #[test]
    fn on_digital_silence_only_the_peak_rule_applies() {
        // A quiet tail 30 dB under the peak is still speech (a soft final consonant).
        let mut x: Vec<f32> = tone(500.0, 0.3, 4800).collect();
        x.extend(tone(3000.0, 0.3 * 10f32.powf(-30.0 / 20.0), 1600));
        x.extend(std::iter::repeat_n(0.0, 3200));
        let mut t = track(&x);
        t.note_speech(Nanos(0));
        let end = t.speech_end(Nanos(560 * MS), Nanos(0));
        assert!(
            (395 * MS..=405 * MS).contains(&end.0),
            "speech end {} ms",
            end.0 / MS
        );
    }

    #[test]
    fn nothing_loud_enough_keeps_the_vad_end() {
        let t = track(&[0.0; 4000]);
        assert_eq!(t.speech_end(Nanos(200 * MS), Nanos(0)), Nanos(200 * MS));
    }
}
