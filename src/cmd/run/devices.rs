//! The live session's ends: the listener's settings from the flags and the config file, the
//! microphone and the speaker opened before any model loads, what the results record of them,
//! and the listener thread started once the microphone delivers.

use super::{FileConfig, RunArgs};
use anyhow::Result;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use voxlat_audio::capture::Capture;
use voxlat_audio::device::{self, Direction};
use voxlat_audio::playback::Playback;
use voxlat_pipeline::live::{self, ListenerConfig, Speaker};
use voxlat_pipeline::setup::{ClockOffset, InputInfo, LiveSetup};
use voxlat_pipeline::SourceEvent;
use voxlat_vad::EndpointerConfig;

/// The endpointer and the listener, from the config file with the flags over it.
pub(super) fn listener_config(
    args: &RunArgs,
    file: &FileConfig,
) -> Result<(EndpointerConfig, ListenerConfig)> {
    let mut endpointer = file.endpointer.clone().unwrap_or_default();
    if let Some(h) = args.hangover {
        endpointer.hangover_ms = h;
    }
    if let Some(p) = args.provisional {
        endpointer.provisional_ms = p;
        endpointer.tail_ms = endpointer.tail_ms.min(p.max(1));
    }
    if let Some(m) = args.vad_mode {
        endpointer.mode = m;
    }
    endpointer.validate()?;
    args.turn
        .apply(&mut endpointer.turn, endpointer.hangover_ms)?;
    let listener = ListenerConfig {
        endpointer: endpointer.clone(),
        barge_in: !args.no_barge_in && file.barge_in.unwrap_or(true),
        barge_in_ratio: args
            .barge_in_ratio
            .or(file.barge_in_ratio)
            .unwrap_or(ListenerConfig::default().barge_in_ratio),
        echo_tail_ms: file
            .echo_tail_ms
            .unwrap_or(ListenerConfig::default().echo_tail_ms),
        ..ListenerConfig::default()
    };
    anyhow::ensure!(
        listener.barge_in_ratio.is_finite() && listener.barge_in_ratio > 0.0,
        "--barge-in-ratio must be a positive number (2 = the user must be twice as loud as the reply's echo)"
    );
    Ok((endpointer, listener))
}

/// The microphone and the speaker, both open.
pub(super) struct Devices {
    host: String,
    input: String,
    capture: Capture,
    speaker: Speaker,
}

impl Devices {
    /// Opens both streams now: a wrong name fails before the models load, and what the
    /// microphone hears meanwhile is discarded before listening.
    pub fn open(args: &RunArgs, echo_tail_ms: u32) -> Result<Devices> {
        let host = device::host(args.host.as_deref())?;
        let input = device::pick(&host, Direction::Input, args.input.as_deref())?;
        let output = device::pick(&host, Direction::Output, args.output.as_deref())?;
        let period =
            |rate: u32| (args.period_ms > 0).then(|| (rate * args.period_ms / 1000).max(16));
        let out_rate = device::default_rate(&output, Direction::Output).unwrap_or(48_000);
        let in_rate = device::default_rate(&input, Direction::Input).unwrap_or(48_000);
        // A device that refuses the period still works with its own.
        let playback = Playback::open(&output, period(out_rate)).or_else(|e| {
            eprintln!("warning: {e}; using the device's default period");
            Playback::open(&output, None)
        })?;
        let speaker = Speaker::start(playback, echo_tail_ms)?;
        let capture =
            Capture::open(&input, voxlat_audio::PIPELINE_RATE, period(in_rate)).or_else(|e| {
                eprintln!("warning: {e}; using the device's default period");
                Capture::open(&input, voxlat_audio::PIPELINE_RATE, None)
            })?;
        Ok(Devices {
            host: host.id().name().to_string(),
            input: device::device_id(&input),
            capture,
            speaker,
        })
    }

    /// What the results record of the devices, the clocks and the listener.
    pub fn live_setup(&self, listener: &ListenerConfig) -> LiveSetup {
        let (monotonic_minus_process_ns, error_ns) = voxlat_audio::clockmap::monotonic_offset();
        let capture = &self.capture;
        LiveSetup {
            clock: ClockOffset {
                monotonic_minus_process_ns: i64::try_from(monotonic_minus_process_ns)
                    .unwrap_or(i64::MIN),
                error_ns,
            },
            host: self.host.clone(),
            input: InputInfo {
                device: capture.device.clone(),
                rate: capture.rate,
                channels: capture.channels,
                clock_error_ns: capture.clock.error_ns,
                raised: capture.health().raised(),
            },
            output: self.speaker.info.clone(),
            listener: listener.clone(),
            input_dropped_samples: None,
            input_xruns: None,
        }
    }

    /// Starts listening once the microphone delivers (what it heard so far is dropped): the
    /// listener thread, which sends to `tx` until `stop`, and the speaker.
    pub fn listen(
        self,
        listener: ListenerConfig,
        tx: mpsc::Sender<SourceEvent>,
        stop: Arc<AtomicBool>,
    ) -> Result<(JoinHandle<(u64, u64)>, Speaker)> {
        let Devices {
            input,
            mut capture,
            speaker,
            ..
        } = self;
        let started = Instant::now();
        while !capture.health().started() && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        anyhow::ensure!(
            capture.health().started(),
            "the input device {} delivered no audio within 5 s",
            capture.device
        );
        capture.discard();
        let thread = live::spawn_listener(capture, listener, speaker.echo.clone(), tx, stop)?;
        eprintln!(
            "listening on {input} → {} (Ctrl-C to stop)",
            speaker.info.device
        );
        Ok((thread, speaker))
    }
}
