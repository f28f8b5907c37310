//! Ground-truth speech boundaries of a clean recording, by energy: the first and last 10 ms
//! frame whose RMS is within `floor_db` of the loudest frame. Used to annotate scenario
//! files and as the reference the VAD is tested against. Only meaningful on clean audio.
//!
//! [`energy_bounds`] is relative to the loudest frame, so on its own it calls anything that
//! is not digital silence "speech" (white noise, −90 dBFS dither: the whole file).
//! [`speech_bounds`] adds what speech has and those do not: a level someone could hear, a
//! length a word takes, and the rise and fall of syllables.

/// (first voiced sample, one past the last voiced sample), or `None` for silence.
pub fn energy_bounds(samples: &[f32], rate: u32, floor_db: f32) -> Option<(usize, usize)> {
    let frame = (rate / 100).max(1) as usize;
    let rms = frame_rms(samples, frame);
    let peak = rms.iter().copied().fold(0f32, f32::max);
    if peak <= 1e-6 {
        return None;
    }
    let threshold = peak * 10f32.powf(-floor_db.abs() / 20.0);
    let first = rms.iter().position(|&r| r >= threshold)?;
    let last = rms.iter().rposition(|&r| r >= threshold)?;
    Some((first * frame, ((last + 1) * frame).min(samples.len())))
}

fn frame_rms(samples: &[f32], frame: usize) -> Vec<f32> {
    samples
        .chunks(frame)
        .map(|c| (c.iter().map(|v| v * v).sum::<f32>() / c.len() as f32).sqrt())
        .collect()
}

/// The quietest loudest-frame that can be speech, in dBFS. Recorded speech peaks around
/// −30 to −6 dBFS; −50 leaves room for quiet recordings and is far above dither (−90).
pub const MIN_PEAK_DBFS: f32 = -50.0;
/// The shortest span of speech, in ms: shorter than any word, longer than a click.
pub const MIN_SPEECH_MS: u32 = 100;
/// How much louder the loud frames (95th percentile) of the span must be than its quiet
/// ones (10th percentile), in dB. Syllables make speech vary by 20 dB or more, even with no
/// pause (the bundled recordings: 21–78 dB); steady noise varies by 1–2 dB.
pub const MIN_MODULATION_DB: f32 = 10.0;
/// The span is where 10 ms frames are within this many dB of the loudest.
pub const FLOOR_DB: f32 = 40.0;

/// Why [`speech_bounds`] found no speech; each carries the measured value and the bound.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NoSpeech {
    #[error("no audio")]
    Empty,
    #[error("too quiet: the loudest 10 ms is at {peak_dbfs:.1} dBFS, speech needs at least {min_dbfs:.0} dBFS")]
    TooQuiet { peak_dbfs: f32, min_dbfs: f32 },
    #[error("too short: {ms:.0} ms of sound, speech needs at least {min_ms} ms")]
    TooShort { ms: f64, min_ms: u32 },
    #[error("steady noise: its loud and quiet frames differ by {range_db:.1} dB, speech varies by at least {min_db:.0} dB")]
    Steady { range_db: f32, min_db: f32 },
}

/// (first voiced sample, one past the last voiced sample) of speech, as [`energy_bounds`]
/// with [`FLOOR_DB`], or why what is there is not speech.
pub fn speech_bounds(samples: &[f32], rate: u32) -> Result<(usize, usize), NoSpeech> {
    let frame = (rate / 100).max(1) as usize;
    let rms = frame_rms(samples, frame);
    let peak = rms.iter().copied().fold(0f32, f32::max);
    if rms.is_empty() {
        return Err(NoSpeech::Empty);
    }
    let peak_dbfs = 20.0 * peak.max(1e-10).log10();
    if peak_dbfs < MIN_PEAK_DBFS {
        return Err(NoSpeech::TooQuiet {
            peak_dbfs,
            min_dbfs: MIN_PEAK_DBFS,
        });
    }
    let (start, end) = energy_bounds(samples, rate, FLOOR_DB).ok_or(NoSpeech::TooQuiet {
        peak_dbfs,
        min_dbfs: MIN_PEAK_DBFS,
    })?;
    let ms = (end - start) as f64 * 1000.0 / f64::from(rate.max(1));
    if ms < f64::from(MIN_SPEECH_MS) {
        return Err(NoSpeech::TooShort {
            ms,
            min_ms: MIN_SPEECH_MS,
        });
    }
    let mut span: Vec<f32> = rms[start / frame..end.div_ceil(frame)].to_vec();
    span.sort_by(f32::total_cmp);
    let at = |q: f64| span[((q * span.len() as f64) as usize).min(span.len() - 1)];
    let range_db = 20.0 * (at(0.95).max(1e-10) / at(0.10).max(1e-10)).log10();
    if range_db < MIN_MODULATION_DB {
        return Err(NoSpeech::Steady {
            range_db,
            min_db: MIN_MODULATION_DB,
        });
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_burst_inside_silence() {
        let mut x = vec![0.0f32; 16000];
        for (i, s) in x[4000..9000].iter_mut().enumerate() {
            *s = (i as f32 * 0.2).sin() * 0.5;
        }
        let (a, b) = energy_bounds(&x, 16000, 40.0).unwrap();
        assert_eq!((a, b), (4000, 9120));
        assert_eq!(energy_bounds(&[0.0; 500], 16000, 40.0), None);
    }

    /// Deterministic uniform noise in [-amp, amp] (xorshift), so the tests need no RNG crate.
    fn noise(n: usize, amp: f32) -> Vec<f32> {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * amp
            })
            .collect()
    }

    /// A vowel-like 150 Hz buzz under a 4 Hz syllable envelope, between half-seconds of
    /// silence.
    fn syllables(rate: u32) -> Vec<f32> {
        let r = rate as f32;
        let mut x = vec![0.0f32; rate as usize / 2];
        x.extend((0..rate as usize).map(|i| {
            let t = i as f32 / r;
            (2.0 * std::f32::consts::PI * 4.0 * t).sin().abs()
                * (2.0 * std::f32::consts::PI * 150.0 * t).sin()
                * 0.5
        }));
        x.extend(vec![0.0; rate as usize / 2]);
        x
    }

    #[test]
    fn white_noise_is_steady_not_speech() {
        // Loud or soft, noise is the same few dB from frame to frame.
        for amp in [0.9, 0.1, 0.01] {
            match speech_bounds(&noise(32_000, amp), 16_000) {
                Err(NoSpeech::Steady { range_db, .. }) => assert!(range_db < 3.0, "{range_db}"),
                other => panic!("noise at {amp}: {other:?}"),
            }
        }
    }

    #[test]
    fn dither_at_minus_90_dbfs_is_too_quiet() {
        let amp = 10f32.powf(-90.0 / 20.0);
        match speech_bounds(&noise(32_000, amp), 16_000) {
            Err(NoSpeech::TooQuiet { peak_dbfs, .. }) => assert!(peak_dbfs < -90.0, "{peak_dbfs}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            speech_bounds(&[0.0; 16_000], 16_000),
            Err(NoSpeech::TooQuiet { .. })
        ));
    }

    #[test]
    fn a_click_or_a_single_sample_is_too_short() {
        assert!(matches!(
            speech_bounds(&[0.5], 16_000),
            Err(NoSpeech::TooShort { .. })
        ));
        let mut x = vec![0.0; 16_000];
        x[8_000..8_400].copy_from_slice(&noise(400, 0.5));
        assert!(matches!(
            speech_bounds(&x, 16_000),
            Err(NoSpeech::TooShort { .. })
        ));
        assert_eq!(speech_bounds(&[], 16_000), Err(NoSpeech::Empty));
    }

    #[test]
    fn syllables_are_speech_with_the_energy_bounds() {
        for rate in [8_000, 16_000] {
            let x = syllables(rate);
            let got = speech_bounds(&x, rate).unwrap();
            assert_eq!(Some(got), energy_bounds(&x, rate, FLOOR_DB));
            let half = rate as usize / 2;
            assert!(got.0 >= half - rate as usize / 50 && got.0 <= half + rate as usize / 20);
        }
    }
}
