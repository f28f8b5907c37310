//! Finding a known clip inside a recording, and the first sound left when it is taken away.
//!
//! The loopback check (`voxlat check-loopback`) times what a listener heard from a recording
//! of the device alone: where the played question sits in it and where the reply's first
//! sound comes. No voxlat stamp is involved, so it can tell when the stamps are wrong.
//!
//! Brute-force correlation rather than an FFT crate: a coarse pass on 10 ms envelopes and a
//! fine pass over a few hundred sample lags cost well under a second per clip in a release
//! build, which a check run once per live session can afford.

/// Samples per block of the coarse envelope (10 ms at 16 kHz).
const BLOCK: usize = 160;
/// The fine pass tries this many samples either side of a coarse lag.
const FINE: usize = BLOCK;
/// Coarse lags refined on the waveform.
const CANDIDATES: usize = 8;

/// Where a clip lies in a recording.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// The recording's sample index of the clip's first sample.
    pub start: usize,
    /// Least-squares gain of the clip in the recording.
    pub gain: f32,
    /// Normalised correlation of the clip with the recording there, in [-1, 1]; a clip that
    /// was played and recorded cleanly scores above 0.9.
    pub score: f32,
}

fn envelope(x: &[f32]) -> Vec<f32> {
    x.chunks(BLOCK)
        .map(|b| b.iter().map(|v| v.abs()).sum::<f32>() / b.len() as f32)
        .collect()
}

/// Normalised correlation of `a` with `b` (equal lengths), each with its mean removed.
fn ncc(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    if n == 0 {
        return 0.0;
    }
    let (ma, mb) = (
        a[..n].iter().sum::<f32>() / n as f32,
        b[..n].iter().sum::<f32>() / n as f32,
    );
    let (mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (x, y) in a[..n].iter().zip(&b[..n]) {
        let (x, y) = (f64::from(x - ma), f64::from(y - mb));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa <= 0.0 || bb <= 0.0 {
        0.0
    } else {
        (ab / (aa * bb).sqrt()) as f32
    }
}

/// Finds `clip` in `rec` at or after sample `from` and before `until` (its start), both at
/// the same rate. A clip played more than once is found where it was first played: of the
/// placements scoring at least `accept`, the best that overlaps the earliest one. Without
/// such a placement, the best found. `None` when the clip does not fit or has no sound.
pub fn locate(
    rec: &[f32],
    clip: &[f32],
    from: usize,
    until: usize,
    accept: f32,
) -> Option<Placement> {
    let (re, ce) = (envelope(rec), envelope(clip));
    if ce.is_empty() || re.len() < ce.len() {
        return None;
    }
    let first = from / BLOCK;
    let last = (until / BLOCK).min(re.len() - ce.len());
    if first > last {
        return None;
    }
    // A short clip's envelope also resembles other sounds (a reply, another speaker), so the
    // best few coarse lags are each refined on the waveform, where only the clip matches.
    let coarse: Vec<f32> = (first..=last)
        .map(|l| ncc(&re[l..l + ce.len()], &ce))
        .collect();
    let mut peaks: Vec<(usize, f32)> = (0..coarse.len())
        .filter(|&i| {
            (i == 0 || coarse[i] >= coarse[i - 1])
                && (i + 1 == coarse.len() || coarse[i] >= coarse[i + 1])
        })
        .map(|i| (first + i, coarse[i]))
        .collect();
    peaks.sort_by(|a, b| b.1.total_cmp(&a.1));
    peaks.truncate(CANDIDATES);
    let refined: Vec<(usize, f32)> = peaks
        .iter()
        .filter_map(|&(l, _)| {
            let centre = l * BLOCK;
            let lo = centre.saturating_sub(FINE).max(from);
            let hi = (centre + FINE).min(rec.len().saturating_sub(clip.len()));
            (lo..=hi)
                .map(|s| (s, ncc(&rec[s..s + clip.len()], clip)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
        })
        .collect();
    let by_score = |a: &&(usize, f32), b: &&(usize, f32)| a.1.total_cmp(&b.1);
    // The best score alone would take a later, cleaner repetition of the clip (a question
    // asked twice in one session) for this one.
    let accepted = refined.iter().filter(|c| c.1 >= accept);
    let (start, score) = *match accepted.clone().map(|c| c.0).min() {
        Some(earliest) => accepted
            .filter(|c| c.0 < earliest + clip.len())
            .max_by(by_score),
        None => refined.iter().max_by(by_score),
    }?;
    let seg = &rec[start..start + clip.len()];
    let cc: f64 = clip.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    if cc <= 0.0 {
        return None;
    }
    let rc: f64 = seg
        .iter()
        .zip(clip)
        .map(|(&r, &c)| f64::from(r) * f64::from(c))
        .sum();
    Some(Placement {
        start,
        gain: (rc / cc) as f32,
        score,
    })
}

/// `rec` with the placed clip subtracted (a copy; samples outside the clip are unchanged).
pub fn without(rec: &[f32], clip: &[f32], at: Placement) -> Vec<f32> {
    let mut out = rec.to_vec();
    for (o, &c) in out[at.start..].iter_mut().zip(clip) {
        *o -= at.gain * c;
    }
    out
}

/// Index of the first sample at or after `from` louder than `level` (absolute value).
pub fn first_sound(x: &[f32], from: usize, level: f32) -> Option<usize> {
    x.get(from..)?
        .iter()
        .position(|v| v.abs() > level)
        .map(|i| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic noise burst shaped like a word: pseudo-random samples under an
    /// envelope that rises and falls, so neither its envelope nor its waveform repeats.
    fn word(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|i| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let noise = (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
                let env = (std::f32::consts::PI * i as f32 / n as f32).sin();
                0.6 * noise * env * (1.0 + 0.5 * (i as f32 / 900.0).sin())
            })
            .collect()
    }

    #[test]
    fn a_clip_is_found_to_the_sample_at_its_gain_among_other_sounds() {
        let clip: Vec<f32> = [word(4_000, 1), vec![0.0; 3_000], word(6_000, 2)].concat();
        let mut rec = vec![0.0f32; 60_000];
        // Another sound before it, of the same kind, which must not be taken for it.
        for (r, w) in rec[1_000..].iter_mut().zip(word(9_000, 7)) {
            *r += w;
        }
        let at = 23_457;
        for (r, c) in rec[at..].iter_mut().zip(&clip) {
            *r += 0.7 * c;
        }
        // Low noise over everything, as a recording has.
        for (i, r) in rec.iter_mut().enumerate() {
            *r += 0.002 * ((i * 7919) % 101) as f32 / 101.0;
        }
        let p = locate(&rec, &clip, 0, rec.len(), 0.8).expect("found");
        assert_eq!(p.start, at);
        assert!((p.gain - 0.7).abs() < 0.02, "gain {}", p.gain);
        assert!(p.score > 0.95, "score {}", p.score);
        let left = without(&rec, &clip, p);
        let peak = left[at..at + clip.len()]
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()));
        assert!(peak < 0.02, "what is left of the clip peaks at {peak}");
    }

    #[test]
    fn the_search_starts_where_it_is_told() {
        let clip = word(5_000, 3);
        let mut rec = vec![0.0f32; 40_000];
        for at in [2_000, 20_000] {
            for (r, c) in rec[at..].iter_mut().zip(&clip) {
                *r += c;
            }
        }
        assert_eq!(
            locate(&rec, &clip, 0, 10_000, 0.8).map(|p| p.start),
            Some(2_000)
        );
        assert_eq!(
            locate(&rec, &clip, 10_000, rec.len(), 0.8).map(|p| p.start),
            Some(20_000)
        );
        assert_eq!(locate(&rec, &clip, 36_000, rec.len(), 0.8), None);
    }

    /// The same question played twice, the second time more cleanly (the first under another
    /// sound): searched from the start, the first is found; searched after it, the second.
    #[test]
    fn a_repeated_clip_is_found_where_it_was_first_played() {
        let clip = word(6_000, 4);
        let mut rec = vec![0.0f32; 50_000];
        for (r, w) in rec[3_000..].iter_mut().zip(word(8_000, 9)) {
            *r += 0.3 * w;
        }
        for at in [5_000, 30_000] {
            for (r, c) in rec[at..].iter_mut().zip(&clip) {
                *r += c;
            }
        }
        let whole = locate(&rec, &clip, 0, rec.len(), 0.8).expect("found");
        assert_eq!(whole.start, 5_000);
        assert!(
            whole.score < 0.99,
            "the first copy is the noisier one: {}",
            whole.score
        );
        // Without an acceptable score, the best placement is returned for the caller to judge.
        assert_eq!(
            locate(&rec, &clip, 0, rec.len(), 1.1).map(|p| p.start),
            Some(30_000)
        );
        assert_eq!(
            locate(&rec, &clip, 5_001, rec.len(), 0.8).map(|p| p.start),
            Some(30_000)
        );
    }

    #[test]
    fn the_first_sound_is_the_first_sample_over_the_level() {
        let mut x = vec![0.01f32; 100];
        x[40] = -0.2;
        x[70] = 0.3;
        assert_eq!(first_sound(&x, 0, 0.05), Some(40));
        assert_eq!(first_sound(&x, 41, 0.05), Some(70));
        assert_eq!(first_sound(&x, 71, 0.05), None);
        assert_eq!(first_sound(&x, 500, 0.05), None);
    }
}
