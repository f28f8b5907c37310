//! Audio in and out: WAV files of any common format to mono f32 at the pipeline's rate, and
//! back; microphone capture and speaker playback on cpal, with device timestamps mapped onto
//! the process clock.

pub mod aec;
pub mod align;
#[cfg(target_os = "linux")]
mod alsa_capture;
pub mod capture;
pub mod clockmap;
pub mod device;
pub mod playback;
pub mod playout;
mod priority;
pub mod resample;
pub mod wav;

/// The pipeline's internal rate: what webrtc-vad and Whisper take.
pub const PIPELINE_RATE: u32 = 16_000;

/// Mono samples in [-1, 1] at a known rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Audio {
    pub samples: Vec<f32>,
    pub rate: u32,
}

impl Audio {
    pub fn duration_s(&self) -> f64 {
        self.samples.len() as f64 / f64::from(self.rate.max(1))
    }
}
