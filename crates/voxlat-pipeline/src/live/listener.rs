//! The microphone thread: capture → gate → endpointer, with barge-in detection while a reply
//! plays.

use super::echo::{rms, EchoRef};
use super::room::Room;
use super::POLL;
use crate::error::SourceError;
use crate::session::SourceEvent;
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use voxlat_audio::capture::Capture;
use voxlat_core::{clock, Nanos};
use voxlat_vad::{Endpointer, EndpointerConfig, VadEvent, WebRtcDetector};

/// Frames (20 ms) looked at for barge-in, and how many of them must exceed the echo.
pub const BARGE_IN_WINDOW: usize = 10;
pub const BARGE_IN_HITS: usize = 4;
/// Of the same window, the frames that are a first sign of the user: enough to pause a reply
/// soon after its commit (a pause plays on again if nothing follows), 40 ms sooner than a
/// barge-in.
pub const OVERHEARD_HITS: usize = 2;
const FRAME: usize = 320;

#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct ListenerConfig {
    pub endpointer: EndpointerConfig,
    /// Ends turns with `endpointer.turn` and this model instead of the plain hangover.
    #[serde(skip)]
    pub turn_model: Option<voxlat_vad::SharedScorer>,
    /// Ends each stop after the wait the session sets here (`--turn-model cues`).
    #[serde(skip)]
    pub stop_hold: Option<voxlat_vad::StopHold>,
    pub barge_in: bool,
    /// Microphone level over reply level that counts as the user speaking.
    pub barge_in_ratio: f32,
    /// Below this microphone level (dBFS) nothing is a barge-in.
    pub barge_in_floor_db: f32,
    /// The gate stays closed this long after the reply's last sample left the device.
    pub echo_tail_ms: u32,
}

// By hand: the turn model is a shared handle with nothing to show.
impl std::fmt::Debug for ListenerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerConfig")
            .field("endpointer", &self.endpointer)
            .field("turn_model", &self.turn_model.is_some())
            .field("stop_hold", &self.stop_hold.is_some())
            .field("barge_in", &self.barge_in)
            .field("barge_in_ratio", &self.barge_in_ratio)
            .field("barge_in_floor_db", &self.barge_in_floor_db)
            .field("echo_tail_ms", &self.echo_tail_ms)
            .finish()
    }
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            endpointer: EndpointerConfig::default(),
            turn_model: None,
            stop_hold: None,
            barge_in: true,
            barge_in_ratio: 2.0,
            barge_in_floor_db: -45.0,
            echo_tail_ms: 150,
        }
    }
}

/// The microphone thread: capture → gate → endpointer. Stops when `stop` is raised or the
/// receiver goes away; returns the capture's dropped samples and driver overruns.
pub fn spawn_listener(
    mut capture: Capture,
    cfg: ListenerConfig,
    echo: Arc<EchoRef>,
    tx: mpsc::Sender<SourceEvent>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<(u64, u64)>> {
    std::thread::Builder::new()
        .name("mic+vad".into())
        .spawn(move || {
            let send = |h: SourceEvent| tx.blocking_send(h).is_ok();
            let ep = crate::source::endpointer(
                &cfg.endpointer,
                cfg.turn_model.clone(),
                cfg.stop_hold.clone(),
            );
            let mut ep = match ep {
                Ok(e) => e,
                Err(e) => {
                    send(SourceEvent::Failed(e.into()));
                    return (capture.dropped(), capture.health().xruns());
                }
            };
            let floor = 10f32.powf(cfg.barge_in_floor_db / 20.0);
            let pre_roll = (cfg.endpointer.pre_roll_ms as usize / 20).max(1);
            let mut recent: VecDeque<voxlat_audio::capture::Frame> = VecDeque::new();
            let mut hits: VecDeque<Option<Nanos>> = VecDeque::new();
            let mut room = Room::default();
            // Where the user's last word ended, as the endpointer found it; `None` while
            // they speak.
            let silence_from: Cell<Option<Nanos>> = Cell::new(None);
            let mut barged = false;
            let mut overheard = false;
            let feed =
                |ep: &mut Endpointer<WebRtcDetector>, f: &voxlat_audio::capture::Frame| match ep
                    .push(&f.samples, f.t_end)
                {
                    Ok(events) => events.into_iter().all(|ev| {
                        match &ev {
                            VadEvent::SpeechStart { .. } | VadEvent::Retracted { .. } => {
                                silence_from.set(None)
                            }
                            VadEvent::Provisional { speech_end, .. }
                            | VadEvent::Endpoint { speech_end, .. } => {
                                silence_from.set(Some(*speech_end))
                            }
                        }
                        send(SourceEvent::Vad {
                            ev,
                            received: clock::now(),
                        })
                    }),
                    Err(e) => send(SourceEvent::Failed(e.into())),
                };
            while !stop.load(Ordering::Acquire) {
                if capture.health().failed() {
                    send(SourceEvent::Failed(SourceError::DeviceStopped {
                        device: capture.device.clone(),
                    }));
                    break;
                }
                let Some(f) = capture.next_frame(FRAME) else {
                    std::thread::sleep(POLL);
                    continue;
                };
                let start = Nanos(f.t_end.0.saturating_sub(20_000_000));
                let level = rms(&f.samples);
                if !echo.active(f.t_end) {
                    room.heard(start, level);
                    barged = false;
                    hits.clear();
                    // The reply fell silent for a first sign of the user (a pause): what the
                    // gate held back since may be the start of their words.
                    let held: Vec<_> = recent.drain(..).filter(|_| overheard).collect();
                    overheard = false;
                    for f in held.iter().chain(std::iter::once(&f)) {
                        if !feed(&mut ep, f) {
                            return (capture.dropped(), capture.health().xruns());
                        }
                    }
                    continue;
                }
                if barged {
                    if !feed(&mut ep, &f) {
                        break;
                    }
                    continue;
                }
                // Gated: the reply may be what the microphone hears, and the room always is;
                // the user must be louder than both.
                let hit = cfg.barge_in
                    && level > floor
                    && level > cfg.barge_in_ratio * room.level(silence_from.get())
                    && level > cfg.barge_in_ratio * echo.level(start, f.t_end);
                hits.push_back(hit.then_some(start));
                if hits.len() > BARGE_IN_WINDOW {
                    hits.pop_front();
                }
                recent.push_back(f);
                if recent.len() > pre_roll {
                    recent.pop_front();
                }
                let heard = hits.iter().flatten().count();
                let first = hits.iter().flatten().next().copied().unwrap_or(start);
                if (OVERHEARD_HITS..BARGE_IN_HITS).contains(&heard) && !overheard {
                    overheard = true;
                    if !send(SourceEvent::Overheard { onset: Some(first) }) {
                        break;
                    }
                } else if heard == 0 && overheard {
                    overheard = false;
                    if !send(SourceEvent::Overheard { onset: None }) {
                        break;
                    }
                }
                if heard >= BARGE_IN_HITS {
                    let onset = first;
                    barged = true;
                    overheard = false;
                    hits.clear();
                    if !send(SourceEvent::BargeIn { onset }) {
                        break;
                    }
                    // The endpointer hears the new utterance from before its onset.
                    for f in recent.drain(..) {
                        if !feed(&mut ep, &f) {
                            return (capture.dropped(), capture.health().xruns());
                        }
                    }
                }
            }
            (capture.dropped(), capture.health().xruns())
        })
}
