//! A simulated echo path, for tests and the harness: what a microphone in a room hears of a
//! loudspeaker. The loudspeaker's mild non-linearity (a soft clip), a bulk delay (device
//! buffers), a room's impulse response (the direct path, then a decaying tail of reflections)
//! and the echo's level. Deterministic: a seed fixes the reflections, so a test holds on every
//! machine. A synthetic linear path alone is the easy case; the non-linearity and the tail are
//! what a canceller must live with.

/// One echo path.
#[derive(Clone, Debug)]
pub struct EchoPath {
    /// Device buffers and air before the direct sound, ms.
    pub delay_ms: f32,
    /// Time for the reflections to fall by 60 dB, s.
    pub rt60_s: f32,
    /// The echo's level against the far end (the direct path's gain).
    pub gain: f32,
    /// The loudspeaker's soft clip: `tanh(d·x)/d`; 0 is linear.
    pub drive: f32,
    pub seed: u64,
}

impl Default for EchoPath {
    fn default() -> Self {
        EchoPath {
            delay_ms: 60.0,
            rt60_s: 0.3,
            gain: 0.5,
            drive: 1.5,
            seed: 1,
        }
    }
}

impl EchoPath {
    /// The room's impulse response at `rate`: the direct path at `delay_ms`, then reflections
    /// of random sign whose envelope decays by 60 dB over `rt60_s` (up to 250 ms of tail).
    pub fn impulse_response(&self, rate: u32) -> Vec<f32> {
        let delay = (self.delay_ms * rate as f32 / 1000.0) as usize;
        let tail = (rate as f32 * self.rt60_s.min(0.25)) as usize;
        let mut ir = vec![0.0f32; delay + 1 + tail];
        ir[delay] = 1.0;
        let mut state = self.seed.max(1);
        // 60 dB over rt60: amplitude 10^(-3 t / rt60).
        let decay = |t: f32| 10f32.powf(-3.0 * t / self.rt60_s.max(1e-3));
        for k in 1..=tail {
            // xorshift: small, seeded, the same everywhere.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let r = (state >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0;
            // Sparse early reflections, then a dense tail, all under the direct sound.
            ir[delay + k] = 0.3 * r * decay(k as f32 / rate as f32);
        }
        ir
    }

    /// The echo of `far` (at `rate`) in the microphone: clipped, through the room.
    pub fn echo(&self, far: &[f32], rate: u32) -> Vec<f32> {
        let ir = self.impulse_response(rate);
        let driven: Vec<f32> = far
            .iter()
            .map(|&x| {
                if self.drive > 0.0 {
                    (self.drive * x).tanh() / self.drive
                } else {
                    x
                }
            })
            .collect();
        let taps: Vec<(usize, f32)> = ir
            .iter()
            .enumerate()
            .filter(|(_, &h)| h.abs() > 1e-4)
            .map(|(i, &h)| (i, h))
            .collect();
        let mut out = vec![0.0f32; far.len()];
        for (n, o) in out.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for &(i, h) in &taps {
                if i > n {
                    break;
                }
                acc += h * driven[n - i];
            }
            *o = self.gain * acc;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_direct_sound_comes_after_the_delay_and_the_tail_decays() {
        let path = EchoPath {
            drive: 0.0,
            ..EchoPath::default()
        };
        let ir = path.impulse_response(16_000);
        assert_eq!(ir.iter().position(|&h| h == 1.0), Some(960));
        let energy = |r: std::ops::Range<usize>| ir[r].iter().map(|h| h * h).sum::<f32>();
        assert!(
            energy(961..1761) > 10.0 * energy(3761..4760),
            "the tail decays"
        );
        let mut far = vec![0.0f32; 2000];
        far[0] = 1.0;
        let echo = path.echo(&far, 16_000);
        assert!((echo[960] - 0.5).abs() < 1e-6);
        assert!(echo[..960].iter().all(|&v| v == 0.0));
    }
}
