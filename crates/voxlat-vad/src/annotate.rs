//! Ground-truth speech boundaries of a clean recording, by energy: the first and last 10 ms
//! frame whose RMS is within `floor_db` of the loudest frame. Used to annotate scenario
//! files and as the reference the VAD is tested against. Only meaningful on clean audio.

/// (first voiced sample, one past the last voiced sample), or `None` for silence.
pub fn energy_bounds(samples: &[f32], rate: u32, floor_db: f32) -> Option<(usize, usize)> {
    let frame = (rate / 100).max(1) as usize;
    let rms: Vec<f32> = samples
        .chunks(frame)
        .map(|c| (c.iter().map(|v| v * v).sum::<f32>() / c.len() as f32).sqrt())
        .collect();
    let peak = rms.iter().copied().fold(0f32, f32::max);
    if peak <= 1e-6 {
        return None;
    }
    let threshold = peak * 10f32.powf(-floor_db.abs() / 20.0);
    let first = rms.iter().position(|&r| r >= threshold)?;
    let last = rms.iter().rposition(|&r| r >= threshold)?;
    Some((first * frame, ((last + 1) * frame).min(samples.len())))
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
}
