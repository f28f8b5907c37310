//! Live audio around the pipeline: the listener (microphone → endpointer, with feedback
//! suppression and barge-in detection) and the speaker (replies → output device, with
//! device-timed playout). Both run on threads of their own; the device callbacks behind them
//! (voxlat-audio) only move samples through ring buffers.
//!
//! Feedback suppression is a gate, the simplest thing that holds: while a reply is playing
//! (and for `echo_tail_ms` after), the microphone is not fed to the endpointer, so the
//! assistant's own voice cannot start a turn. The speaker publishes the level of what it
//! played and when the device played it (device timestamps, process clock); a microphone
//! frame whose level exceeds `barge_in_ratio` × the loudest reply level around the same
//! moment, and `barge_in_ratio` × the room's own level (the loudest frame of the silence
//! after the user's last word, before the gate closed), in `BARGE_IN_HITS` of the last
//! `BARGE_IN_WINDOW` frames, is the user talking over the reply: a barge-in. Its limits: it
//! compares levels, not signals (no echo cancellation), so speakers much louder at the
//! microphone than the user need a higher ratio (or a headset), and a user who talks softly
//! over a loud reply is not heard until the reply ends.

mod echo;
mod listener;
mod room;
mod speaker;
mod speaker_thread;

pub use echo::{rms, EchoRef};
pub use listener::{spawn_listener, ListenerConfig, BARGE_IN_HITS, BARGE_IN_WINDOW};
pub use speaker::{OutputInfo, Speaker};

/// How long the listener and the speaker sleep when there is nothing to do.
const POLL: std::time::Duration = std::time::Duration::from_millis(5);
