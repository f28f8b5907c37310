//! Speaker playback. The device callback only moves samples from a lock-free ring buffer to
//! the device (mono to every channel, silence when the ring is empty) and notes, per buffer,
//! the ring index it started at, how much it played and the device's playback timestamp;
//! it never allocates, locks or logs. A stop request is an atomic flag the callback honours
//! by discarding what is queued. [`crate::playout::ReplyPlayout`] turns the stamps into
//! playout times and underruns.

use crate::capture::StreamHealth;
use crate::clockmap::StreamClock;
use crate::device::{device_id, DeviceError, Direction};
use crate::playout::OutStamp;
use cpal::traits::{DeviceTrait, StreamTrait};
use cpal::{FromSample, SizedSample};
use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use voxlat_core::Nanos;

const RING_SECONDS: usize = 30;
const STAMPS: usize = 4096;

pub struct Playback {
    stream: cpal::Stream,
    prod: HeapProd<f32>,
    stamps: HeapCons<OutStamp>,
    flush: Arc<AtomicBool>,
    flags: Arc<StreamHealth>,
    pub device: String,
    pub rate: u32,
    pub channels: u16,
    pub clock: StreamClock,
    pushed: u64,
}

impl Playback {
    /// Opens `device` in its default configuration (with `period` frames per callback, and
    /// two periods of buffer, when given) and starts it playing silence.
    pub fn open(device: &cpal::Device, period: Option<u32>) -> Result<Playback, DeviceError> {
        let name = device_id(device);
        let err = |detail: String| DeviceError::Stream {
            direction: Direction::Output.name(),
            device: name.clone(),
            detail,
        };
        let supported = device
            .default_output_config()
            .map_err(|e| err(format!("no usable output configuration: {e}")))?;
        let mut config = supported.config();
        if let Some(p) = period {
            config.buffer_size = cpal::BufferSize::Fixed(p);
        }
        let (prod, cons) = HeapRb::<f32>::new(config.sample_rate as usize * RING_SECONDS).split();
        let (stamp_prod, stamps) = HeapRb::<OutStamp>::new(STAMPS).split();
        let flush = Arc::new(AtomicBool::new(false));
        let flags = Arc::new(StreamHealth::default());
        let (fl, fg) = (flush.clone(), flags.clone());
        use cpal::SampleFormat as F;
        let stream = match supported.sample_format() {
            F::F32 => build::<f32>(device, &config, cons, stamp_prod, fl, fg),
            F::I16 => build::<i16>(device, &config, cons, stamp_prod, fl, fg),
            F::I32 => build::<i32>(device, &config, cons, stamp_prod, fl, fg),
            F::U16 => build::<u16>(device, &config, cons, stamp_prod, fl, fg),
            F::U8 => build::<u8>(device, &config, cons, stamp_prod, fl, fg),
            F::I8 => build::<i8>(device, &config, cons, stamp_prod, fl, fg),
            F::F64 => build::<f64>(device, &config, cons, stamp_prod, fl, fg),
            other => return Err(err(format!("sample format {other} is not supported"))),
        }
        .map_err(|e| err(e.to_string()))?;
        stream.play().map_err(|e| err(e.to_string()))?;
        let clock = StreamClock::calibrate(|| stream.now().as_nanos());
        Ok(Playback {
            stream,
            prod,
            stamps,
            flush,
            flags,
            device: name,
            rate: config.sample_rate,
            channels: config.channels,
            clock,
            pushed: 0,
        })
    }

    /// What the stream's callbacks reported: started, failed, xruns.
    pub fn health(&self) -> &StreamHealth {
        &self.flags
    }

    /// Queues what fits of `samples` (mono, device rate); returns how many.
    pub fn push(&mut self, samples: &[f32]) -> usize {
        let n = self.prod.push_slice(samples);
        self.pushed += n as u64;
        n
    }

    /// Ring index of the next sample pushed.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Samples queued and not yet played.
    pub fn queued(&self) -> usize {
        self.prod.occupied_len()
    }

    /// Asks the callback to discard everything queued, from its next buffer on.
    pub fn stop(&self) {
        self.flush.store(true, Ordering::Release);
    }

    /// Moves the stamps of the buffers played since the last call into `out`.
    pub fn drain_stamps(&mut self, out: &mut Vec<OutStamp>) {
        out.extend(self.stamps.pop_iter());
    }

    pub fn to_process(&self, stream_ns: u64) -> Nanos {
        self.clock.to_process(u128::from(stream_ns))
    }

    pub fn stream(&self) -> &cpal::Stream {
        &self.stream
    }
}

fn build<T>(
    device: &cpal::Device,
    config: &cpal::StreamConfig,
    mut cons: HeapCons<f32>,
    mut stamps: HeapProd<OutStamp>,
    flush: Arc<AtomicBool>,
    flags: Arc<StreamHealth>,
) -> Result<cpal::Stream, cpal::Error>
where
    T: SizedSample + FromSample<f32>,
{
    let ch = usize::from(config.channels.max(1));
    let mut consumed: u64 = 0;
    let on_error = flags.clone();
    let mut raised = false;
    device.build_output_stream::<T, _, _>(
        *config,
        move |data: &mut [T], info: &cpal::OutputCallbackInfo| {
            if !raised {
                raised = true;
                flags
                    .raised
                    .store(crate::priority::raise_current_thread(), Ordering::Relaxed);
            }
            // Real-time thread: no allocation, no lock, no logging.
            let at_ns = info.timestamp().playback.as_nanos() as u64;
            let flushed = flush.swap(false, Ordering::AcqRel);
            if flushed {
                let n = cons.occupied_len();
                consumed += cons.skip(n) as u64;
            }
            let first = consumed;
            let mut popped = 0u32;
            let frames = data.len() / ch;
            for f in data.chunks_exact_mut(ch) {
                let v = match cons.try_pop() {
                    Some(v) => {
                        popped += 1;
                        v
                    }
                    None => 0.0,
                };
                let s = T::from_sample(v);
                for x in f {
                    *x = s;
                }
            }
            consumed += u64::from(popped);
            let _ = stamps.try_push(OutStamp {
                first,
                popped,
                frames: frames as u32,
                at_ns,
                flushed,
            });
            flags.started.store(true, Ordering::Release);
        },
        move |e| on_error.on_error(&e),
        None,
    )
}
