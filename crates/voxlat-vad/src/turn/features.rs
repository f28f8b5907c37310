//! Smart Turn v3's input: Whisper's log-mel front end over the last 8 s of the turn.
//!
//! It must be exactly what the model was trained on, which is Hugging Face's
//! `WhisperFeatureExtractor(chunk_length=8)` called with `do_normalize=True`:
//! 1. the last 8 s at 16 kHz, zero-padded at the front;
//! 2. that whole buffer normalised to zero mean and unit variance (skipping this, as one
//!    published Rust port does, shifts the probabilities);
//! 3. a 400-point STFT, hop 160, periodic Hann window, centred with reflect padding; the
//!    last of the 801 frames is dropped, leaving 800;
//! 4. power spectrum through 80 Slaney-normalised mel filters (Slaney mel scale, 0–8 kHz);
//! 5. log10 with a floor of 1e-10, clamped from below at the maximum − 8, then (x + 4) / 4.
//!
//! The arithmetic is f64 and the output f32. `tests/smart_turn.rs` checks it against values
//! computed by `scripts/smart-turn-reference.py` with the Python library itself.

use realfft::{RealFftPlanner, RealToComplex};
use std::sync::Arc;

pub const RATE: usize = 16_000;
/// Seconds of audio the model sees.
pub const SECONDS: usize = 8;
pub const WINDOW_SAMPLES: usize = SECONDS * RATE;
pub const N_FFT: usize = 400;
pub const HOP: usize = 160;
pub const MELS: usize = 80;
pub const FRAMES: usize = WINDOW_SAMPLES / HOP;
const BINS: usize = N_FFT / 2 + 1;

/// Reusable buffers and plans: one per scorer, so scoring allocates nothing after the first.
pub struct FeatureExtractor {
    fft: Arc<dyn RealToComplex<f64>>,
    window: Vec<f64>,
    /// `[MELS][BINS]`, row-major.
    filters: Vec<f64>,
    padded: Vec<f64>,
    frame: Vec<f64>,
    spectrum: Vec<realfft::num_complex::Complex<f64>>,
    scratch: Vec<realfft::num_complex::Complex<f64>>,
    power: Vec<f64>,
    log_mel: Vec<f64>,
}

impl Default for FeatureExtractor {
    fn default() -> Self {
        Self::new()
    }
}

impl FeatureExtractor {
    pub fn new() -> FeatureExtractor {
        let fft = RealFftPlanner::<f64>::new().plan_fft_forward(N_FFT);
        let spectrum = fft.make_output_vec();
        let scratch = fft.make_scratch_vec();
        // Periodic Hann: the denominator is N, not N − 1.
        let window = (0..N_FFT)
            .map(|n| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / N_FFT as f64).cos())
            .collect();
        FeatureExtractor {
            fft,
            window,
            filters: slaney_mel_filters(),
            padded: Vec::with_capacity(WINDOW_SAMPLES + N_FFT),
            frame: vec![0.0; N_FFT],
            spectrum,
            scratch,
            power: vec![0.0; BINS * FRAMES],
            log_mel: vec![0.0; MELS * FRAMES],
        }
    }

    /// Writes the `[MELS, FRAMES]` features (mel-major) of the last 8 s of `audio` into `out`.
    pub fn compute(&mut self, audio: &[f32], out: &mut Vec<f32>) {
        let tail = &audio[audio.len().saturating_sub(WINDOW_SAMPLES)..];
        let front = WINDOW_SAMPLES - tail.len();
        // Normalise over the whole 8 s, padding included, as the Python code does. Its
        // epsilon is 1e-7 on the variance.
        let sum: f64 = tail.iter().map(|&s| f64::from(s)).sum();
        let mean = sum / WINDOW_SAMPLES as f64;
        let var = (tail
            .iter()
            .map(|&s| (f64::from(s) - mean).powi(2))
            .sum::<f64>()
            + front as f64 * mean * mean)
            / WINDOW_SAMPLES as f64;
        let scale = 1.0 / (var + 1e-7).sqrt();
        let half = N_FFT / 2;
        let norm = |s: f64| (s - mean) * scale;
        // The normalised signal x[0..WINDOW_SAMPLES], reflect-padded by `half` on each side.
        let x = |i: usize| -> f64 {
            if i < front {
                norm(0.0)
            } else {
                norm(f64::from(tail[i - front]))
            }
        };
        self.padded.clear();
        for k in (1..=half).rev() {
            self.padded.push(x(k));
        }
        for i in 0..WINDOW_SAMPLES {
            self.padded.push(x(i));
        }
        for k in 1..=half {
            self.padded.push(x(WINDOW_SAMPLES - 1 - k));
        }
        for f in 0..FRAMES {
            let start = f * HOP;
            for (n, v) in self.frame.iter_mut().enumerate() {
                *v = self.padded[start + n] * self.window[n];
            }
            // Lengths are fixed at construction, so this cannot fail.
            let _ = self.fft.process_with_scratch(
                &mut self.frame,
                &mut self.spectrum,
                &mut self.scratch,
            );
            for (b, c) in self.spectrum.iter().enumerate() {
                self.power[f * BINS + b] = c.norm_sqr();
            }
        }
        let mut max = f64::NEG_INFINITY;
        for m in 0..MELS {
            let filter = &self.filters[m * BINS..(m + 1) * BINS];
            for f in 0..FRAMES {
                let power = &self.power[f * BINS..(f + 1) * BINS];
                let e: f64 = filter.iter().zip(power).map(|(w, p)| w * p).sum();
                let l = e.max(1e-10).log10();
                max = max.max(l);
                self.log_mel[m * FRAMES + f] = l;
            }
        }
        out.clear();
        out.extend(
            self.log_mel
                .iter()
                .map(|&l| ((l.max(max - 8.0) + 4.0) / 4.0) as f32),
        );
    }
}

/// Whisper's filterbank, the one the converter writes into Whisper's model file.
fn slaney_mel_filters() -> Vec<f64> {
    voxlat_core::mel::slaney_mel_filters(RATE as u32, N_FFT, MELS)
        .into_iter()
        .map(f64::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_filter_peaks_between_its_neighbours_and_covers_the_band() {
        let f = slaney_mel_filters();
        let peak = |m: usize| {
            (0..BINS)
                .max_by(|&a, &b| f[m * BINS + a].total_cmp(&f[m * BINS + b]))
                .unwrap_or(0)
        };
        for m in 1..MELS {
            assert!(
                peak(m) >= peak(m - 1),
                "filter {m} peaks below filter {}",
                m - 1
            );
        }
        assert!(peak(MELS - 1) > BINS * 3 / 4);
    }

    #[test]
    fn silence_is_the_floor_everywhere_and_output_has_the_model_shape() {
        let mut fe = FeatureExtractor::new();
        let mut out = Vec::new();
        fe.compute(&[0.0; 1600], &mut out);
        assert_eq!(out.len(), MELS * FRAMES);
        // log10(1e-10) = −10 everywhere, so (−10 + 4) / 4.
        assert!(out.iter().all(|&v| (v - -1.5).abs() < 1e-6));
    }
}
