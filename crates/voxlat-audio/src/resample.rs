//! Whole-buffer resampling with rubato's FFT resampler (band-limited, so 44.1/48 kHz speech
//! does not alias into the 16 kHz band the VAD and Whisper see).

use rubato::{FftFixedIn, Resampler};
use std::ops::RangeInclusive;

const CHUNK: usize = 1024;

/// The rates `resample` accepts, in Hz: telephony to the highest studio rate. The FFT
/// resampler sizes its buffers from the rates (their ratio reduced by the GCD), so a rate
/// from a corrupt header such as 4,294,967,291 Hz asks for gigabytes, 0 Hz divides by zero,
/// and 1 Hz turns a few bytes into minutes of audio. Inside this range the buffers stay
/// within a few megabytes and the output is at most 48 times the input.
pub const RATE_RANGE: RangeInclusive<u32> = 8_000..=384_000;

/// A rate outside [`RATE_RANGE`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{which} rate {value} Hz is outside the supported range {}–{} Hz", RATE_RANGE.start(), RATE_RANGE.end())]
pub struct RateError {
    /// `"input"` or `"output"`.
    pub which: &'static str,
    pub value: u32,
}

/// Checks a rate against [`RATE_RANGE`]; `which` names it in the error.
pub fn check_rate(which: &'static str, value: u32) -> Result<u32, RateError> {
    if RATE_RANGE.contains(&value) {
        Ok(value)
    } else {
        Err(RateError { which, value })
    }
}

/// Resamples mono `input` from `from` Hz to `to` Hz. The output has
/// round(len × to / from) samples, aligned with the input (the resampler's delay removed).
/// Both rates must lie in [`RATE_RANGE`], even when they are equal, so that a bad rate is
/// caught wherever it enters rather than only when a conversion happens to be needed.
pub fn resample(input: &[f32], from: u32, to: u32) -> Result<Vec<f32>, RateError> {
    check_rate("input", from)?;
    check_rate("output", to)?;
    if from == to || input.is_empty() {
        return Ok(input.to_vec());
    }
    let want =
        ((input.len() as u64 * u64::from(to) + u64::from(from) / 2) / u64::from(from)) as usize;
    let mut r = match FftFixedIn::<f32>::new(from as usize, to as usize, CHUNK, 2, 1) {
        Ok(r) => r,
        Err(_) => return Ok(linear(input, from, to)),
    };
    let delay = r.output_delay();
    let mut out: Vec<f32> = Vec::with_capacity(want + delay + CHUNK);
    let mut pos = 0;
    while pos + CHUNK <= input.len() {
        match r.process(&[&input[pos..pos + CHUNK]], None) {
            Ok(o) => out.extend_from_slice(&o[0]),
            Err(_) => return Ok(linear(input, from, to)),
        }
        pos += CHUNK;
    }
    // The tail, then silence to flush the delay line.
    let tail = &input[pos..];
    if let Ok(o) = r.process_partial(Some(&[tail]), None) {
        out.extend_from_slice(&o[0]);
    }
    while out.len() < want + delay {
        match r.process_partial::<&[f32]>(None, None) {
            Ok(o) if !o[0].is_empty() => out.extend_from_slice(&o[0]),
            _ => break,
        }
    }
    let mut out: Vec<f32> = out.into_iter().skip(delay).take(want).collect();
    out.resize(want, 0.0);
    Ok(out)
}

/// Streaming resampling of mono audio that arrives in pieces (a capture stream). Output
/// sample `j` lines up with input sample `j × from / to`: the resampler's delay is dropped
/// from the front, so callers can time output samples from the input's timestamps.
pub struct StreamResampler {
    inner: Option<FftFixedIn<f32>>,
    pending: Vec<f32>,
    skip: usize,
    out: Vec<Vec<f32>>,
}

impl StreamResampler {
    pub fn new(from: u32, to: u32) -> StreamResampler {
        let inner = (from != to)
            .then(|| FftFixedIn::<f32>::new(from as usize, to as usize, CHUNK / 4, 1, 1).ok())
            .flatten();
        let skip = inner.as_ref().map_or(0, |r| r.output_delay());
        let out = inner
            .as_ref()
            .map_or_else(Vec::new, |r| vec![vec![0.0; r.output_frames_max()]]);
        StreamResampler {
            inner,
            pending: Vec::new(),
            skip,
            out,
        }
    }

    /// Appends to `out` the resampled audio `input` completes.
    pub fn push(&mut self, input: &[f32], out: &mut Vec<f32>) {
        let Some(r) = self.inner.as_mut() else {
            out.extend_from_slice(input);
            return;
        };
        self.pending.extend_from_slice(input);
        let mut used = 0;
        loop {
            let need = r.input_frames_next();
            if self.pending.len() - used < need {
                break;
            }
            let Ok((_, n)) =
                r.process_into_buffer(&[&self.pending[used..used + need]], &mut self.out, None)
            else {
                break;
            };
            used += need;
            let drop = self.skip.min(n);
            self.skip -= drop;
            out.extend_from_slice(&self.out[0][drop..n]);
        }
        self.pending.drain(..used);
    }
}

/// Linear interpolation: only a fallback should the FFT resampler refuse a ratio.
fn linear(input: &[f32], from: u32, to: u32) -> Vec<f32> {
    let n = (input.len() as u64 * u64::from(to) / u64::from(from)) as usize;
    (0..n)
        .map(|i| {
            let x = i as f64 * f64::from(from) / f64::from(to);
            let j = x.floor() as usize;
            let f = (x - j as f64) as f32;
            let a = input[j.min(input.len() - 1)];
            let b = input[(j + 1).min(input.len() - 1)];
            a + (b - a) * f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(freq: f32, rate: u32, n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (2.0 * std::f32::consts::PI * freq * i as f32 / rate as f32).sin())
            .collect()
    }

    #[test]
    fn length_and_phase_are_preserved() {
        for (from, to) in [
            (44100, 16000),
            (48000, 16000),
            (8000, 16000),
            (22050, 16000),
            (16000, 22050),
        ] {
            let x = sine(440.0, from, from as usize);
            let y = resample(&x, from, to).unwrap();
            assert_eq!(y.len(), to as usize, "{from}->{to}");
            let reference = sine(440.0, to, to as usize);
            // Skip the edges, where the filter sees zero padding.
            let err = y[200..y.len() - 200]
                .iter()
                .zip(&reference[200..reference.len() - 200])
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            // The delay is removed in whole output samples, so up to half a sample of
            // misalignment remains: 2π·440 Hz·(0.5/16 kHz) ≈ 0.086 at worst.
            assert!(err < 0.09, "{from}->{to}: max error {err}");
        }
    }

    #[test]
    fn content_above_the_new_nyquist_is_removed() {
        // 7 kHz at 48 kHz would alias to 7 kHz... but 10 kHz must vanish at 16 kHz.
        let y = resample(&sine(10_000.0, 48000, 48000), 48000, 16000).unwrap();
        let rms = (y[500..15500].iter().map(|v| v * v).sum::<f32>() / 15000.0).sqrt();
        assert!(rms < 0.01, "aliasing: rms {rms}");
    }

    #[test]
    fn streaming_matches_the_input_timing() {
        // A click at a known input time must come out at the same time, whatever the pieces.
        let from = 48_000;
        let mut x = vec![0.0f32; from as usize];
        x[24_000] = 1.0;
        let mut r = StreamResampler::new(from, 16_000);
        let mut y = Vec::new();
        for piece in x.chunks(441) {
            r.push(piece, &mut y);
        }
        let peak = y
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .unwrap()
            .0;
        assert!(
            (peak as i64 - 8000).abs() <= 1,
            "click at {peak}, want 8000"
        );
        let mut same = StreamResampler::new(16_000, 16_000);
        let mut z = Vec::new();
        same.push(&[0.5; 7], &mut z);
        assert_eq!(z, vec![0.5; 7]);
    }

    #[test]
    fn short_and_empty_inputs() {
        assert!(resample(&[], 8000, 16000).unwrap().is_empty());
        assert_eq!(resample(&[0.5; 10], 8000, 16000).unwrap().len(), 20);
        assert_eq!(resample(&[0.5; 10], 16000, 16000).unwrap(), vec![0.5; 10]);
    }

    #[test]
    fn rates_outside_the_range_are_refused_not_divided_by_or_allocated_for() {
        // 0 Hz divided by zero and 4,294,967,291 Hz asked for 17 GB before the range check.
        for bad in [0, 1, 7_999, 384_001, 4_294_967_291] {
            assert_eq!(
                resample(&[0.5; 10], bad, 16_000),
                Err(RateError {
                    which: "input",
                    value: bad
                })
            );
            let e = resample(&[0.5; 10], 16_000, bad).unwrap_err();
            assert_eq!((e.which, e.value), ("output", bad));
            assert!(e.to_string().contains("8000–384000 Hz"), "{e}");
        }
        // The edges are in range, and the output length follows the ratio.
        assert_eq!(resample(&[0.5; 480], 384_000, 8_000).unwrap().len(), 10);
        assert_eq!(resample(&[0.5; 10], 8_000, 384_000).unwrap().len(), 480);
    }
}
