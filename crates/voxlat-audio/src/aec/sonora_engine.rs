//! WebRTC's AEC3 through `sonora`.

use super::{AecError, EchoCanceller, EchoStats, FRAME, RATE};
use sonora::config::{EchoCanceller as Aec3, HighPassFilter};
use sonora::{AudioProcessing, Config, StreamConfig};

/// AEC3 with its high-pass filter, mono at 16 kHz.
pub struct Sonora {
    apm: AudioProcessing,
    /// The render output the engine writes, which nothing plays.
    scratch: Vec<f32>,
    /// The capture input, copied: the engine reads one buffer and writes another.
    input: Vec<f32>,
}

impl Sonora {
    pub fn new() -> Sonora {
        let stream = StreamConfig::new(RATE, 1);
        let config = Config {
            echo_canceller: Some(Aec3::default()),
            high_pass_filter: Some(HighPassFilter::default()),
            ..Config::default()
        };
        Sonora {
            apm: AudioProcessing::builder()
                .config(config)
                .capture_config(stream)
                .render_config(stream)
                .build(),
            scratch: vec![0.0; FRAME],
            input: vec![0.0; FRAME],
        }
    }
}

impl Default for Sonora {
    fn default() -> Self {
        Sonora::new()
    }
}

fn frame(len: usize) -> Result<(), AecError> {
    if len == FRAME {
        Ok(())
    } else {
        Err(AecError::Frame(len))
    }
}

impl EchoCanceller for Sonora {
    fn name(&self) -> &'static str {
        "aec3-sonora"
    }

    fn render(&mut self, far: &[f32]) -> Result<(), AecError> {
        frame(far.len())?;
        self.apm
            .process_render_f32(&[far], &mut [&mut self.scratch])
            .map_err(|e| AecError::Engine(e.to_string()))
    }

    fn capture(&mut self, near: &mut [f32]) -> Result<(), AecError> {
        frame(near.len())?;
        self.input.copy_from_slice(near);
        self.apm
            .process_capture_f32(&[&self.input], &mut [near])
            .map_err(|e| AecError::Engine(e.to_string()))
    }

    fn set_delay_hint_ms(&mut self, ms: u32) {
        // Clamped to 500 ms by the engine, which says so; AEC3 finds the delay itself anyway.
        let _ = self.apm.set_stream_delay_ms(ms.min(500) as i32);
    }

    fn stats(&self) -> EchoStats {
        let s = self.apm.statistics();
        EchoStats {
            erl_db: s.echo_return_loss,
            erle_db: s.echo_return_loss_enhancement,
            // The median is aggregated once a second after the first call, so a caller that
            // asks once gets the instantaneous estimate.
            delay_ms: s.delay_median_ms.or(s.delay_ms).map(f64::from),
        }
    }
}
