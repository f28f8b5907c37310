//! The Slaney mel filterbank, computed exactly as librosa's `filters.mel(sr, n_fft, n_mels)`
//! (Slaney mel scale, Slaney area normalisation). Two stages need it and may not share code
//! but through this crate: Whisper's model file carries it (CTranslate2 checkpoints do not,
//! so the converter writes this one), and Smart Turn's features are Whisper's.

const F_SP: f64 = 200.0 / 3.0;
const MIN_LOG_HZ: f64 = 1000.0;
const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;

fn log_step() -> f64 {
    6.4f64.ln() / 27.0
}

fn hz_to_mel(hz: f64) -> f64 {
    if hz >= MIN_LOG_HZ {
        MIN_LOG_MEL + (hz / MIN_LOG_HZ).ln() / log_step()
    } else {
        hz / F_SP
    }
}

fn mel_to_hz(mel: f64) -> f64 {
    if mel >= MIN_LOG_MEL {
        MIN_LOG_HZ * (log_step() * (mel - MIN_LOG_MEL)).exp()
    } else {
        F_SP * mel
    }
}

/// numpy's `linspace(start, stop, n)` (endpoint included), computed the way numpy does so the
/// result is bit-identical: `start + i * step`, with the last point pinned to `stop`.
fn linspace(start: f64, stop: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![start];
    }
    let step = (stop - start) / (n - 1) as f64;
    let mut v: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
    v[n - 1] = stop;
    v
}

/// Returns `n_mels` rows of `n_fft / 2 + 1` weights, row-major.
///
/// librosa fills a float32 matrix from float64 ramps and then scales it in place by a float64
/// norm, so each weight is rounded to f32 twice; that is reproduced so the output matches
/// librosa's bit for bit rather than merely closely.
pub fn slaney_mel_filters(sample_rate: u32, n_fft: usize, n_mels: usize) -> Vec<f32> {
    let n_bins = n_fft / 2 + 1;
    let fft_freqs = linspace(0.0, sample_rate as f64 / 2.0, n_bins);
    let mels = linspace(
        hz_to_mel(0.0),
        hz_to_mel(sample_rate as f64 / 2.0),
        n_mels + 2,
    );
    let mel_f: Vec<f64> = mels.into_iter().map(mel_to_hz).collect();
    let mut weights = vec![0f32; n_mels * n_bins];
    for i in 0..n_mels {
        let fdiff_lo = mel_f[i + 1] - mel_f[i];
        let fdiff_hi = mel_f[i + 2] - mel_f[i + 1];
        let enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
        for (j, &f) in fft_freqs.iter().enumerate() {
            let lower = -(mel_f[i] - f) / fdiff_lo;
            let upper = (mel_f[i + 2] - f) / fdiff_hi;
            // numpy's `maximum(0, minimum(lower, upper))`, spelled out with comparisons:
            // `f64::max` may return either zero when given -0.0 and 0.0, and did differ
            // between debug and release builds, which changed the output file's checksum.
            // Like numpy, a -0.0 stays -0.0.
            let m = if upper < lower { upper } else { lower };
            let w = if m < 0.0 { 0.0 } else { m } as f32;
            weights[i * n_bins + j] = (w as f64 * enorm) as f32;
        }
    }
    weights
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_round_trips_and_switches_to_log_at_1khz() {
        for hz in [0.0, 100.0, 999.0, 1000.0, 4321.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9, "{hz}");
        }
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-12);
        assert!((hz_to_mel(6400.0) - 42.0).abs() < 1e-9);
    }

    #[test]
    fn whisper_filterbank_shape_and_known_values() {
        let w = slaney_mel_filters(16000, 400, 80);
        assert_eq!(w.len(), 80 * 201);
        // Reference values from librosa 0.11 `filters.mel(sr=16000, n_fft=400, n_mels=80)`;
        // the whole matrix was checked bit-identical against it.
        assert_eq!(
            w[0].to_bits(),
            (-0.0f32).to_bits(),
            "librosa yields -0.0 here"
        );
        assert_eq!(w[1], 0.024_862_595_f32);
        assert_eq!(w[201 + 2], 0.022_871_772_f32);
        assert_eq!(w[40 * 201 + 43], 0.014_735_566_f32);
        assert_eq!(w[79 * 201 + 195], 0.002_243_795_2_f32);
        let sum: f64 = w.iter().map(|&x| x as f64).sum();
        let sum_sq: f64 = w.iter().map(|&x| (x as f64) * (x as f64)).sum();
        assert!((sum - 1.999_024_092_387_117).abs() < 1e-12, "{sum}");
        assert!((sum_sq - 0.021_185_515_307_317_2).abs() < 1e-15, "{sum_sq}");
        // Every filter is a non-negative triangle with some mass.
        for row in w.chunks(201) {
            assert!(row.iter().all(|&x| x >= 0.0));
            assert!(row.iter().any(|&x| x > 0.0));
        }
        // Slaney normalisation makes higher (wider) filters lower in height.
        let peak = |r: usize| {
            w[r * 201..(r + 1) * 201]
                .iter()
                .cloned()
                .fold(0f32, f32::max)
        };
        assert!(peak(79) < peak(40));
    }
}
