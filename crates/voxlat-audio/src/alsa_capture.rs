//! ALSA capture on a thread of our own, used instead of cpal's for ALSA input devices.
//!
//! cpal's ALSA input loop polls again at once when poll() reports the device readable but fewer
//! than a period's frames are available. Through ALSA's PulseAudio plugin, the default device
//! on most desktops, that is the normal case: the plugin calls the stream readable once the
//! server's queue holds a period, counting the part of a block already read, while the frames it
//! reports leave that part out. The loop then spins until the next block arrives. Measured
//! through a PulseAudio null sink (`scripts/live-vs-replay.sh`): cpal's capture thread used
//! 38 s of CPU in 21 live turns, at the raised weight the device threads get, and Whisper
//! took twice as long live as in replay. This loop reads whatever whole periods are there and
//! otherwise sleeps until the missing frames can have arrived; it never busy-waits.

use crate::capture::{InStamp, RingWriter, StreamHealth};
use alsa::pcm::{Access, HwParams, IoFormat, PCM};
use alsa::{Direction, ValueOr};
use cpal::FromSample;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use voxlat_core::clock;

/// Periods the device buffer holds: room for the thread to wake late without an overrun.
const PERIODS: i64 = 4;

/// A running capture; dropping it stops the thread and closes the device.
pub(crate) struct AlsaCapture {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub rate: u32,
    pub channels: u16,
    pub period: u32,
}

/// What the reading thread owns: the device and where its frames go.
struct Reader {
    pcm: PCM,
    rate: u32,
    channels: u16,
    period: u32,
    writer: RingWriter,
    stop: Arc<AtomicBool>,
}

impl AlsaCapture {
    /// Opens the ALSA PCM `name` (e.g. `default`, `pulse`, `hw:CARD=USB,DEV=0`) at about `rate`
    /// and `channels`, `period` frames per read, and starts reading into `writer`. The stamps
    /// are on the process clock.
    pub(crate) fn start(
        name: &str,
        rate: u32,
        channels: u16,
        period: u32,
        writer: RingWriter,
    ) -> Result<AlsaCapture, alsa::Error> {
        let pcm = PCM::new(name, Direction::Capture, true)?;
        let (rate, channels, period, float) = {
            let hw = HwParams::any(&pcm)?;
            hw.set_access(Access::RWInterleaved)?;
            let float = hw.set_format(<f32 as IoFormat>::FORMAT).is_ok();
            if !float {
                hw.set_format(<i16 as IoFormat>::FORMAT)?;
            }
            hw.set_channels(u32::from(channels.max(1)))?;
            hw.set_rate(rate, ValueOr::Nearest)?;
            let period = hw.set_period_size_near(i64::from(period.max(16)), ValueOr::Nearest)?;
            hw.set_buffer_size_near(period * PERIODS)?;
            pcm.hw_params(&hw)?;
            let rate = hw.get_rate()?;
            let channels = hw.get_channels()? as u16;
            let period = hw.get_period_size()?.max(1) as u32;
            (rate, channels, period, float)
        };
        pcm.prepare()?;
        pcm.start()?;
        let stop = Arc::new(AtomicBool::new(false));
        let reader = Reader {
            pcm,
            rate,
            channels,
            period,
            writer,
            stop: stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("alsa_in".into())
            .spawn(move || {
                if float {
                    reader.run::<f32>()
                } else {
                    reader.run::<i16>()
                }
            })
            .map_err(|e| alsa::Error::new("spawn", e.raw_os_error().unwrap_or(libc::EAGAIN)))?;
        Ok(AlsaCapture {
            stop,
            thread: Some(thread),
            rate,
            channels,
            period,
        })
    }
}

impl Drop for AlsaCapture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Reader {
    /// Reads whole periods of `S` samples until stopped. Per read: one `avail_delay`, one
    /// clock read and one `readi` into a buffer made once; no allocation, lock or log.
    fn run<S>(mut self)
    where
        S: IoFormat + cpal::Sample,
        f32: FromSample<S>,
    {
        // The writer is borrowed mutably below; the flags are shared.
        let flags = Arc::clone(&self.writer.flags);
        flags
            .raised
            .store(crate::priority::raise_current_thread(), Ordering::Relaxed);
        let Ok(io) = self.pcm.io_checked::<S>() else {
            fail(&flags);
            return;
        };
        let frame_ns = 1e9 / f64::from(self.rate);
        let ch = usize::from(self.channels);
        let period = i64::from(self.period);
        // Up to the whole device buffer at once, after a late wake-up.
        let mut buf = vec![S::EQUILIBRIUM; self.period as usize * PERIODS as usize * ch];
        let mut pushed = 0u64;
        while !self.stop.load(Ordering::Acquire) {
            let (avail, delay) = match self.pcm.avail_delay() {
                Ok(ad) => ad,
                Err(e) if recover(&self.pcm, &e, &flags) => continue,
                Err(_) => return,
            };
            if avail < period {
                let missing = (period - avail.max(0)) as f64 * frame_ns;
                std::thread::sleep(Duration::from_nanos(missing.max(1e6) as u64));
                continue;
            }
            // The oldest frame still queued, the first one this read returns, was captured
            // `delay` frames ago.
            let first_ns = clock::now().0 as f64 - delay.max(0) as f64 * frame_ns;
            let n = match io.readi(&mut buf) {
                Ok(0) => continue,
                Ok(n) => n,
                Err(e) if recover(&self.pcm, &e, &flags) => continue,
                Err(_) => return,
            };
            let stamp = InStamp {
                index: pushed,
                at_ns: first_ns.max(0.0) as u64,
            };
            pushed += self.writer.push(&buf[..n * ch], ch, stamp);
        }
    }
}

/// An overrun (EPIPE) is counted and the stream restarted; a suspend is resumed; a device
/// that is gone ends the capture for the reader. Returns whether to go on.
fn recover(pcm: &PCM, e: &alsa::Error, flags: &StreamHealth) -> bool {
    match e.errno() {
        libc::EAGAIN => {
            std::thread::sleep(Duration::from_millis(1));
            true
        }
        libc::EPIPE => {
            flags.xruns.fetch_add(1, Ordering::Relaxed);
            pcm.prepare().and_then(|()| pcm.start()).is_ok() || fail(flags)
        }
        libc::ESTRPIPE => pcm.try_recover(*e, true).is_ok() || fail(flags),
        _ => fail(flags),
    }
}

fn fail(flags: &StreamHealth) -> bool {
    flags.failed.store(true, Ordering::Release);
    false
}
