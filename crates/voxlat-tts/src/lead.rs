//! The silence a voice puts before a reply's first word.
//!
//! Piper renders each chunk whole and starts it with 30–215 ms of near-silence. Played as it
//! comes, that silence sits between the moment the reply "starts" and the moment the listener
//! hears a voice, and the breakdown, ending at the first sample, would call it heard. So a
//! turn's first audible chunk is trimmed to a few milliseconds before its first voiced sample
//! ([`trim`]), and the offset of that sample in what is left is kept ([`Lead::voice_at`]) so
//! that the output can stamp `first_voice`.
//!
//! A sample is voiced when its magnitude is within [`VOICED_BELOW_PEAK_DB`] of the chunk's
//! peak: a level relative to the chunk, since voices and servers differ in gain. Later chunks
//! keep their silence: between sentences it is the voice's own pause.

/// A sample this far under the chunk's peak magnitude, or closer, is voice. 40 dB is below a
/// soft onset consonant ("s", "f": 25–35 dB under the vowels of a sentence) and far above a
/// vocoder's idle output.
pub const VOICED_BELOW_PEAK_DB: f32 = 40.0;

/// Silence kept before the first voiced sample: the rise of a word starts under the
/// threshold, and cutting into it clicks.
pub const KEEP_MS: u32 = 5;

/// What [`trim`] did to one chunk, in samples at the chunk's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lead {
    /// Samples removed from the start.
    pub trimmed: usize,
    /// Offset of the first voiced sample in the trimmed chunk (at most [`KEEP_MS`]).
    pub voice_at: usize,
}

/// Removes the silence before the first voiced sample of `samples`, keeping [`KEEP_MS`].
/// A chunk with no sound at all is left as it is (nothing in it is voiced).
pub fn trim(samples: &mut Vec<f32>, rate: u32) -> Lead {
    let Some(first) = first_voiced(samples) else {
        return Lead::default();
    };
    let keep = (rate as usize * KEEP_MS as usize / 1000).min(first);
    let trimmed = first - keep;
    samples.drain(..trimmed);
    Lead {
        trimmed,
        voice_at: keep,
    }
}

/// The index of the first sample within [`VOICED_BELOW_PEAK_DB`] of the peak magnitude.
pub fn first_voiced(samples: &[f32]) -> Option<usize> {
    let peak = samples.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if peak <= 0.0 || !peak.is_finite() {
        return None;
    }
    let level = peak * 10f32.powf(-VOICED_BELOW_PEAK_DB / 20.0);
    samples.iter().position(|x| x.abs() >= level)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voice_after(silence: usize, hiss: f32) -> Vec<f32> {
        let mut x: Vec<f32> = (0..silence)
            .map(|i| if i % 2 == 0 { hiss } else { -hiss })
            .collect();
        x.extend((0..1600).map(|i| 0.5 * (i as f32 * 0.08).sin()));
        x
    }

    #[test]
    fn the_silence_before_the_voice_goes_and_a_few_ms_stay() {
        // 120 ms of a vocoder's idle hiss 60 dB under the voice, then the voice.
        let mut x = voice_after(1920, 0.0005);
        let first = first_voiced(&x).unwrap();
        let lead = trim(&mut x, 16_000);
        assert_eq!(lead.voice_at, 80, "5 ms kept");
        assert_eq!(lead.trimmed, first - 80);
        assert!((1920..1925).contains(&first), "first voiced sample {first}");
        assert!(x[lead.voice_at].abs() >= 0.5 * 0.01);
        assert!(x[..lead.voice_at].iter().all(|v| v.abs() < 0.005));
    }

    #[test]
    fn a_chunk_that_starts_with_its_voice_or_has_none_is_left_alone() {
        // The tone starts at sin(0) = 0: its voice is the second sample.
        let mut x = voice_after(0, 0.0);
        let n = x.len();
        let lead = trim(&mut x, 16_000);
        assert_eq!((lead.trimmed, lead.voice_at), (0, 1));
        assert_eq!(x.len(), n);
        let mut quiet = vec![0.0f32; 800];
        assert_eq!(trim(&mut quiet, 16_000), Lead::default());
        assert_eq!(quiet.len(), 800);
        // Less silence than the margin: nothing to trim, the voice is where it was.
        let mut short = voice_after(40, 0.0);
        let lead = trim(&mut short, 16_000);
        assert_eq!(lead.trimmed, 0);
        assert!((40..42).contains(&lead.voice_at));
    }
}
