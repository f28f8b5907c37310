//! Microphone capture. The device callback only downmixes into a lock-free ring buffer and
//! notes, per buffer, the ring index and the device's capture timestamp (a second ring); it
//! never allocates, locks or logs. The reading side resamples to the pipeline's rate and
//! times every sample from those stamps, mapped onto the process clock.

use crate::clockmap::StreamClock;
use crate::device::{device_id, DeviceError, Direction};
use crate::resample::StreamResampler;
use cpal::traits::{DeviceTrait, StreamTrait};
use cpal::{FromSample, SizedSample};
use ringbuf::traits::{Consumer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use voxlat_core::Nanos;

/// Seconds of audio the ring holds: the reader may stall this long without losing any.
const RING_SECONDS: usize = 10;
const STAMPS: usize = 4096;

#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct InStamp {
    /// Ring samples pushed before this buffer.
    pub index: u64,
    /// When the buffer's first frame was captured (stream clock, ns).
    pub at_ns: u64,
}

/// What a stream's callbacks tell the reading side: capture and playback share it, so the
/// memory orderings live in one place.
#[derive(Default)]
pub struct StreamHealth {
    pub(crate) started: AtomicBool,
    pub(crate) failed: AtomicBool,
    pub(crate) dropped: AtomicU64,
    /// Buffer under/overruns the driver reported (the callback came too late).
    pub(crate) xruns: AtomicU64,
    /// The callback thread got a higher scheduling weight.
    pub(crate) raised: AtomicBool,
}

impl StreamHealth {
    /// The callback has run at least once.
    pub fn started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// The stream reported an error (device unplugged, server gone).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Whether the callback thread got its higher scheduling weight (privileged processes).
    pub fn raised(&self) -> bool {
        self.raised.load(Ordering::Relaxed)
    }

    /// Under/overruns the driver reported: the callback ran too late, so capture lost audio
    /// or playback played silence (heard as a click or gap), whatever the ring held.
    pub fn xruns(&self) -> u64 {
        self.xruns.load(Ordering::Relaxed)
    }

    /// The stream's error callback: an xrun is counted (the driver recovers from it), any
    /// other error ends the stream for the reader.
    pub fn on_error(&self, e: &cpal::Error) {
        if e.kind() == cpal::ErrorKind::Xrun {
            self.xruns.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.store(true, Ordering::Release);
        }
    }
}

/// Samples of the pipeline's rate, the last of which was captured at `t_end`.
pub struct Frame {
    pub samples: Vec<f32>,
    pub t_end: Nanos,
}

/// What delivers the samples: cpal's stream, or on ALSA our own reading thread
/// (`alsa_capture`, which explains why).
enum Backend {
    Cpal(cpal::Stream),
    #[cfg(target_os = "linux")]
    Alsa(crate::alsa_capture::AlsaCapture),
}

pub struct Capture {
    backend: Backend,
    samples: HeapCons<f32>,
    stamps: HeapCons<InStamp>,
    flags: Arc<StreamHealth>,
    pub device: String,
    pub rate: u32,
    pub channels: u16,
    pub clock: StreamClock,
    out_rate: u32,
    popped: u64,
    known: VecDeque<InStamp>,
    resampler: StreamResampler,
    scratch: Vec<f32>,
    out: VecDeque<f32>,
    /// Output-rate index of `out[0]`.
    out_index: u64,
}

/// A started source and the reading ends of its rings.
struct Opened {
    backend: Backend,
    samples: HeapCons<f32>,
    stamps: HeapCons<InStamp>,
    flags: Arc<StreamHealth>,
    rate: u32,
    channels: u16,
    clock: StreamClock,
}

/// A capture's rings for a device at `rate`: the writing side for whatever delivers the
/// samples, the reading ends for the capture.
struct Rings {
    writer: RingWriter,
    samples: HeapCons<f32>,
    stamps: HeapCons<InStamp>,
    flags: Arc<StreamHealth>,
}

impl Rings {
    fn new(rate: u32) -> Rings {
        let (prod, samples) = HeapRb::<f32>::new(rate as usize * RING_SECONDS).split();
        let (stamp_prod, stamps) = HeapRb::<InStamp>::new(STAMPS).split();
        let flags = Arc::new(StreamHealth::default());
        Rings {
            writer: RingWriter {
                samples: prod,
                stamps: stamp_prod,
                flags: flags.clone(),
            },
            samples,
            stamps,
            flags,
        }
    }
}

/// The writing side of a capture's rings, owned by what delivers the samples (cpal's callback
/// or the ALSA thread).
pub(crate) struct RingWriter {
    samples: HeapProd<f32>,
    stamps: HeapProd<InStamp>,
    pub flags: Arc<StreamHealth>,
}

impl Capture {
    /// Opens `device` in its default configuration (with `period` frames per callback when
    /// given) and starts it; frames come out at `out_rate`.
    pub fn open(
        device: &cpal::Device,
        out_rate: u32,
        period: Option<u32>,
    ) -> Result<Capture, DeviceError> {
        let name = device_id(device);
        let err = |detail: String| DeviceError::Stream {
            direction: Direction::Input.name(),
            device: name.clone(),
            detail,
        };
        let supported = device
            .default_input_config()
            .map_err(|e| err(format!("no usable input configuration: {e}")))?;
        let mut config = supported.config();
        if let Some(p) = period {
            config.buffer_size = cpal::BufferSize::Fixed(p);
        }
        let alsa = name
            .strip_prefix("alsa:")
            .and_then(|pcm| open_alsa(pcm, &config, period));
        let o = match alsa {
            Some(o) => o,
            None => open_cpal(device, &supported, &config).map_err(|e| err(e.to_string()))?,
        };
        Ok(Capture {
            backend: o.backend,
            samples: o.samples,
            stamps: o.stamps,
            flags: o.flags,
            device: name,
            rate: o.rate,
            channels: o.channels,
            clock: o.clock,
            out_rate,
            popped: 0,
            known: VecDeque::new(),
            resampler: StreamResampler::new(o.rate, out_rate),
            scratch: Vec::new(),
            out: VecDeque::new(),
            out_index: 0,
        })
    }

    /// What the stream's callbacks reported: started, failed, xruns.
    pub fn health(&self) -> &StreamHealth {
        &self.flags
    }

    /// Samples lost because the reader fell more than the ring's length behind.
    pub fn dropped(&self) -> u64 {
        self.flags.dropped.load(Ordering::Relaxed)
    }

    /// Discards everything captured so far (e.g. audio from before the pipeline was ready),
    /// and forgets samples the ring dropped meanwhile.
    pub fn discard(&mut self) {
        self.pull();
        self.flags.dropped.store(0, Ordering::Relaxed);
        let n = self.out.len();
        self.out.clear();
        self.out_index += n as u64;
    }

    fn pull(&mut self) {
        while let Some(s) = self.stamps.try_pop() {
            self.known.push_back(s);
        }
        self.scratch.clear();
        self.scratch.extend(self.samples.pop_iter());
        self.popped += self.scratch.len() as u64;
        let mut resampled = Vec::with_capacity(self.scratch.len());
        self.resampler.push(&self.scratch, &mut resampled);
        self.out.extend(resampled);
    }

    /// The next `n` samples at the output rate, if captured yet.
    pub fn next_frame(&mut self, n: usize) -> Option<Frame> {
        if self.out.len() < n {
            self.pull();
            if self.out.len() < n {
                return None;
            }
        }
        let samples: Vec<f32> = self.out.drain(..n).collect();
        self.out_index += n as u64;
        let t_end = self.time_of(self.out_index - 1);
        Some(Frame { samples, t_end })
    }

    /// When output sample `j` was captured, from the latest device stamp at or before it.
    fn time_of(&mut self, j: u64) -> Nanos {
        let k = j as f64 * f64::from(self.rate) / f64::from(self.out_rate);
        while self.known.len() > 1 && (self.known[1].index as f64) <= k {
            self.known.pop_front();
        }
        let Some(s) = self.known.front() else {
            return voxlat_core::clock::now();
        };
        let stream_ns = s.at_ns as f64 + (k - s.index as f64) * 1e9 / f64::from(self.rate);
        self.clock.to_process(stream_ns.max(0.0) as u128)
    }

    /// Frames the device delivers at a time, when known.
    pub fn period(&self) -> Option<u32> {
        match &self.backend {
            Backend::Cpal(s) => {
                use cpal::traits::StreamTrait;
                s.buffer_size().ok()
            }
            #[cfg(target_os = "linux")]
            Backend::Alsa(a) => Some(a.period),
        }
    }
}

/// On ALSA, our own reading thread; `None` for a setting it does not handle (a raw `hw:`
/// device that takes only 24- or 32-bit samples), which cpal's reader then opens.
#[cfg(target_os = "linux")]
fn open_alsa(pcm: &str, config: &cpal::StreamConfig, period: Option<u32>) -> Option<Opened> {
    let r = Rings::new(config.sample_rate);
    // cpal's default for a period is the device's; 20 ms keeps the same pace.
    let period = period.unwrap_or(config.sample_rate / 50);
    let alsa = crate::alsa_capture::AlsaCapture::start(
        pcm,
        config.sample_rate,
        config.channels,
        period,
        r.writer,
    )
    .ok()?;
    Some(Opened {
        rate: alsa.rate,
        channels: alsa.channels,
        backend: Backend::Alsa(alsa),
        samples: r.samples,
        stamps: r.stamps,
        flags: r.flags,
        // The thread stamps on the process clock already.
        clock: StreamClock {
            offset_ns: 0,
            error_ns: 0,
        },
    })
}

#[cfg(not(target_os = "linux"))]
fn open_alsa(_: &str, _: &cpal::StreamConfig, _: Option<u32>) -> Option<Opened> {
    None
}

/// Why cpal's stream did not open; the caller names the device.
#[derive(Debug, thiserror::Error)]
enum OpenError {
    #[error("sample format {0} is not supported")]
    Format(cpal::SampleFormat),
    #[error(transparent)]
    Cpal(#[from] cpal::Error),
}

/// cpal's stream, in the device's sample format.
fn open_cpal(
    device: &cpal::Device,
    supported: &cpal::SupportedStreamConfig,
    config: &cpal::StreamConfig,
) -> Result<Opened, OpenError> {
    let r = Rings::new(config.sample_rate);
    let w = r.writer;
    use cpal::SampleFormat as F;
    let stream = match supported.sample_format() {
        F::F32 => build::<f32>(device, config, w),
        F::I16 => build::<i16>(device, config, w),
        F::I32 => build::<i32>(device, config, w),
        F::U16 => build::<u16>(device, config, w),
        F::U8 => build::<u8>(device, config, w),
        F::I8 => build::<i8>(device, config, w),
        F::F64 => build::<f64>(device, config, w),
        other => return Err(OpenError::Format(other)),
    }?;
    stream.play()?;
    let clock = StreamClock::calibrate(|| stream.now().as_nanos());
    Ok(Opened {
        backend: Backend::Cpal(stream),
        samples: r.samples,
        stamps: r.stamps,
        flags: r.flags,
        rate: config.sample_rate,
        channels: config.channels.max(1),
        clock,
    })
}

fn build<T>(
    device: &cpal::Device,
    config: &cpal::StreamConfig,
    mut w: RingWriter,
) -> Result<cpal::Stream, cpal::Error>
where
    T: SizedSample,
    f32: FromSample<T>,
{
    let ch = usize::from(config.channels.max(1));
    let mut pushed: u64 = 0;
    let on_error = w.flags.clone();
    let mut raised = false;
    device.build_input_stream::<T, _, _>(
        *config,
        move |data: &[T], info: &cpal::InputCallbackInfo| {
            if !raised {
                raised = true;
                w.flags
                    .raised
                    .store(crate::priority::raise_current_thread(), Ordering::Relaxed);
            }
            let at_ns = info.timestamp().capture.as_nanos() as u64;
            let stamp = InStamp {
                index: pushed,
                at_ns,
            };
            pushed += w.push(data, ch, stamp);
        },
        move |e| on_error.on_error(&e),
        None,
    )
}

impl RingWriter {
    /// One device buffer of `ch`-channel frames into the ring, downmixed, with its stamp;
    /// returns the samples pushed. Real-time path: no allocation, no lock, no logging; a full
    /// ring drops samples and counts them.
    pub(crate) fn push<T>(&mut self, data: &[T], ch: usize, stamp: InStamp) -> u64
    where
        T: cpal::Sample,
        f32: FromSample<T>,
    {
        let scale = 1.0 / ch.max(1) as f32;
        let _ = self.stamps.try_push(stamp);
        let (mut pushed, mut lost) = (0u64, 0u64);
        for f in data.chunks_exact(ch.max(1)) {
            let mut sum = 0.0f32;
            for &s in f {
                sum += s.to_sample::<f32>();
            }
            if self.samples.try_push(sum * scale).is_ok() {
                pushed += 1;
            } else {
                lost += 1;
            }
        }
        if lost > 0 {
            self.flags.dropped.fetch_add(lost, Ordering::Relaxed);
        }
        self.flags.started.store(true, Ordering::Release);
        pushed
    }
}
