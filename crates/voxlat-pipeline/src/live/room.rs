//! How loud the microphone is when nobody speaks to it: the level the barge-in gate must hear
//! the user above, besides the reply's echo.
//!
//! A fixed floor cannot know the room. Recordings of other speakers carry their room's hiss
//! (−42 dBFS after LibriSpeech 61-70968 and the JFK clip, above the −45 dBFS floor): with the
//! reply paused or between two words, the gate heard that hiss as the user, held the reply
//! silent until the recording stopped, and the listener heard it 2.7 s after the question. The
//! frames the microphone heard just before the gate closed are the turn's trailing silence,
//! which the endpointer judged not speech: their loudest is what the room does on its own.

use std::collections::VecDeque;

/// Ungated frames remembered: 400 ms of 20 ms frames, about the endpointer's hangover, so
/// they hold the silence that ended the turn.
pub const ROOM_FRAMES: usize = 20;

/// The microphone's recent levels while the gate was open.
pub struct Room {
    levels: VecDeque<f32>,
}

impl Default for Room {
    fn default() -> Self {
        Room {
            levels: VecDeque::with_capacity(ROOM_FRAMES),
        }
    }
}

impl Room {
    /// A frame the gate let through, at RMS `level`.
    pub fn heard(&mut self, level: f32) {
        if self.levels.len() == ROOM_FRAMES {
            self.levels.pop_front();
        }
        self.levels.push_back(level);
    }

    /// The loudest of the last [`ROOM_FRAMES`] frames heard; 0 before any.
    pub fn level(&self) -> f32 {
        self.levels.iter().copied().fold(0.0, f32::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(x: f32) -> f32 {
        10f32.powf(x / 20.0)
    }

    #[test]
    fn the_room_is_the_loudest_of_the_last_silence_heard() {
        let mut r = Room::default();
        assert_eq!(r.level(), 0.0, "nothing heard yet");
        // Speech, then a hangover of hiss between −44 and −41 dBFS.
        for _ in 0..30 {
            r.heard(db(-20.0));
        }
        for i in 0..ROOM_FRAMES {
            r.heard(db(-44.0 + (i % 4) as f32));
        }
        assert!((r.level() - db(-41.0)).abs() < 1e-6, "{}", r.level());
    }
}
