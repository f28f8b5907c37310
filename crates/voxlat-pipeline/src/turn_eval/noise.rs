//! Turns heard in a noisy room (`eval-turns --noise FILE --snr DB`): a recording of a room
//! added under each turn at a set signal-to-noise ratio. The truth stays the clean clip's, so
//! how far the endpointer moves from it is what the room costs.
//!
//! The speech level is the active level: the mean power of the 10 ms frames within
//! [`ACTIVE_BELOW_PEAK_DB`] of the loudest, up to the true end (as ITU-T P.56 measures speech
//! without its pauses, more simply). The noise is scaled so that speech level over its own
//! mean power is the SNR asked for, and it runs under the whole clip, the room tone before the
//! speech included, from an offset that differs by turn so that turns hear different noise.

use crate::scenario::LoadedTurn;

/// Frames within this of the loudest count towards the speech level.
pub const ACTIVE_BELOW_PEAK_DB: f64 = 30.0;

/// Samples per frame of the level measure (10 ms at 16 kHz).
const FRAME: usize = 160;

/// The active level of `samples[..end]`, as a mean square; `None` for silence.
pub fn active_level(samples: &[f32], end: usize) -> Option<f64> {
    let powers: Vec<f64> = samples[..end.min(samples.len())]
        .chunks(FRAME)
        .map(|f| f.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>() / f.len() as f64)
        .collect();
    let peak = powers.iter().copied().fold(0.0, f64::max);
    if peak <= 0.0 {
        return None;
    }
    let floor = peak * 10f64.powf(-ACTIVE_BELOW_PEAK_DB / 10.0);
    let active: Vec<f64> = powers.into_iter().filter(|&p| p >= floor).collect();
    Some(active.iter().sum::<f64>() / active.len() as f64)
}

/// Cross-fade at a loop's seam, samples (20 ms).
const SEAM: usize = 320;

/// `noise` made to loop without a click: its last [`SEAM`] samples fade into its first ones,
/// which are then dropped, so that the end runs on into the start as the recording itself
/// ran on. A jump at the seam is a click the endpointer would hear as a consonant.
pub fn looped(noise: &[f32]) -> Vec<f32> {
    if noise.len() <= 2 * SEAM {
        return noise.to_vec();
    }
    let mut out = noise[SEAM..].to_vec();
    let n = out.len();
    for k in 0..SEAM {
        let a = k as f32 / SEAM as f32;
        out[n - SEAM + k] = out[n - SEAM + k] * (1.0 - a) + noise[k] * a;
    }
    out
}

/// `turn` with `noise` added at `snr_db` under its active speech level, the noise read from
/// `offset` on and wrapped around (give it [`looped`]). The truth (end, pauses) is kept.
pub fn mix(turn: &LoadedTurn, noise: &[f32], snr_db: f64, offset: usize) -> Option<LoadedTurn> {
    let speech = active_level(&turn.audio.samples, turn.speech_end_sample)?;
    let n = turn.audio.samples.len();
    if noise.is_empty() {
        return None;
    }
    let under: Vec<f32> = (0..n).map(|i| noise[(offset + i) % noise.len()]).collect();
    let power = under
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        / n as f64;
    if power <= 0.0 {
        return None;
    }
    let gain = (speech / power / 10f64.powf(snr_db / 10.0)).sqrt() as f32;
    let mut out = turn.clone();
    for (s, v) in out.audio.samples.iter_mut().zip(under) {
        *s += gain * v;
    }
    Some(out)
}

/// Where turn `index` starts reading the noise: far enough apart that neighbours hear
/// different stretches of it, the same on every run.
pub fn offset_for(index: usize, noise_len: usize) -> usize {
    // A prime stride of 1.37 s.
    (index * 21_911) % noise_len.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::TurnSpec;
    use voxlat_audio::Audio;

    fn turn_of(samples: Vec<f32>) -> LoadedTurn {
        let end = samples.len();
        LoadedTurn {
            scenario: "s".into(),
            spec: TurnSpec {
                id: "t".into(),
                wav: "x.wav".into(),
                transcript: String::new(),
                speech_end_ms: Some(end as f64 / 16.0),
                pauses_ms: Vec::new(),
                source: None,
                expect_keywords: Vec::new(),
            },
            audio: Audio {
                samples,
                rate: voxlat_audio::PIPELINE_RATE,
            },
            speech_end_sample: end,
            speech_end_annotated: true,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn the_active_level_skips_the_pauses_and_the_mix_has_the_snr_asked_for() {
        // 0.5 s of a tone at amplitude 0.1 (power 0.005), 0.5 s of silence, 0.5 s more tone.
        let tone = |n: usize| (0..n).map(|i| 0.1 * (i as f32 * 0.2).sin());
        let mut x: Vec<f32> = tone(8000).collect();
        x.extend(std::iter::repeat_n(0.0, 8000));
        x.extend(tone(8000));
        let level = active_level(&x, x.len()).unwrap();
        assert!((level - 0.005).abs() < 0.0002, "{level}");
        assert_eq!(active_level(&[0.0; 800], 800), None);
        // White-ish noise mixed at 30 dB: its power under the clip is the level / 1000.
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let noise: Vec<f32> = (0..32_000)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let turn = turn_of(x.clone());
        let noisy = mix(&turn, &noise, 30.0, offset_for(3, noise.len())).unwrap();
        let added: f64 = noisy
            .audio
            .samples
            .iter()
            .zip(&x)
            .map(|(a, b)| f64::from(a - b).powi(2))
            .sum::<f64>()
            / x.len() as f64;
        let snr = 10.0 * (level / added).log10();
        assert!((snr - 30.0).abs() < 0.1, "{snr} dB");
        assert_eq!(noisy.speech_end_sample, turn.speech_end_sample);
    }

    #[test]
    fn a_looped_noise_runs_from_its_end_into_its_start_without_a_jump() {
        // A ramp jumps from 1 back to 0 when it wraps; looped, the wrap is a step of one
        // sample's slope.
        let ramp: Vec<f32> = (0..4000).map(|i| i as f32 / 4000.0).collect();
        let l = looped(&ramp);
        let seam = (l[l.len() - 1] - l[0]).abs();
        assert!(seam < 0.01, "jump at the seam {seam}");
        assert_eq!(l.len(), 4000 - SEAM);
    }
}
