//! How loud the microphone is when nobody speaks to it: the level the barge-in gate must hear
//! the user above, besides the reply's echo.
//!
//! A fixed floor cannot know the room. Recordings of other speakers carry their room's hiss
//! (−42 dBFS after LibriSpeech 61-70968 and the JFK clip, above the −45 dBFS floor): with the
//! reply paused or between two words, the gate heard that hiss as the user, held the reply
//! silent until the recording stopped, and the listener heard it 2.7 s after the question. The
//! frames the microphone heard after the user's last word, before the gate closed, are what
//! the room does on its own. Only those count: a commit soon after the last word leaves the
//! word in the last 400 ms, and the user's own level would make the gate deaf to them.

use std::collections::VecDeque;
use voxlat_core::Nanos;

/// Ungated frames remembered: 400 ms of 20 ms frames, the end of the silence that ended the
/// turn.
pub const ROOM_FRAMES: usize = 20;

/// The microphone's recent levels while the gate was open.
pub struct Room {
    /// (frame start, RMS).
    levels: VecDeque<(Nanos, f32)>,
}

impl Default for Room {
    fn default() -> Self {
        Room {
            levels: VecDeque::with_capacity(ROOM_FRAMES),
        }
    }
}

impl Room {
    /// A frame the gate let through, from `start`, at RMS `level`.
    pub fn heard(&mut self, start: Nanos, level: f32) {
        if self.levels.len() == ROOM_FRAMES {
            self.levels.pop_front();
        }
        self.levels.push_back((start, level));
    }

    /// The loudest of the last [`ROOM_FRAMES`] frames heard that start at or after
    /// `silence_from`, the end of the last speech; 0 when there are none, or while the user
    /// speaks (`None`).
    pub fn level(&self, silence_from: Option<Nanos>) -> f32 {
        let Some(from) = silence_from else {
            return 0.0;
        };
        self.levels
            .iter()
            .filter(|(t, _)| *t >= from)
            .map(|&(_, l)| l)
            .fold(0.0, f32::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(x: f32) -> f32 {
        10f32.powf(x / 20.0)
    }

    #[test]
    fn the_room_is_the_loudest_of_the_silence_after_the_last_word() {
        let mut r = Room::default();
        assert_eq!(r.level(Some(Nanos::from_ms(0))), 0.0, "nothing heard yet");
        // Speech until 600 ms, then hiss between −44 and −41 dBFS.
        for i in 0..30 {
            r.heard(Nanos::from_ms(i * 20), db(-20.0));
        }
        for i in 0..10 {
            r.heard(Nanos::from_ms(600 + i * 20), db(-44.0 + (i % 4) as f32));
        }
        let after = |t: u64| r.level(Some(Nanos::from_ms(t)));
        assert!((after(600) - db(-41.0)).abs() < 1e-6, "{}", after(600));
        // A commit 200 ms after the word: the word is still in the last 400 ms, and is not
        // the room.
        assert!(after(600) < db(-40.0));
        assert!(
            after(500) > db(-21.0),
            "the speech before the end counts only if asked"
        );
        assert_eq!(after(900), 0.0, "no silence heard after that end");
        assert_eq!(r.level(None), 0.0, "the user is speaking");
    }
}
