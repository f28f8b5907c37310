//! Frame classifiers behind one trait, so engines can be swapped and compared on the same audio.

use crate::{VadError, RATE};

pub trait VoiceDetector {
    fn name(&self) -> &'static str;
    /// Samples per frame (at 16 kHz) that [`VoiceDetector::is_voice`] takes.
    fn frame_samples(&self) -> usize;
    fn is_voice(&mut self, frame: &[f32]) -> Result<bool, VadError>;
    /// Sound has come back after digital silence (a muted or switched input, a sound server
    /// feeding zeros between streams). A detector that adapts to what it hears forgets it:
    /// what it learnt describes a room it may no longer be hearing.
    fn restart(&mut self) {}
}

/// webrtc-vad (libfvad). Not `Send`: it lives on the thread that created it.
pub struct WebRtcDetector {
    vad: webrtc_vad::Vad,
    mode: u8,
    frame: usize,
    pcm: Vec<i16>,
}

impl WebRtcDetector {
    /// `mode` 0..=3 (3 most aggressive at calling non-speech), `frame_ms` 10, 20 or 30.
    pub fn new(mode: u8, frame_ms: u32) -> Result<WebRtcDetector, VadError> {
        let vad = vad(mode)?;
        if ![10, 20, 30].contains(&frame_ms) {
            return Err(VadError::FrameMs(frame_ms));
        }
        let frame = (RATE * frame_ms / 1000) as usize;
        Ok(WebRtcDetector {
            vad,
            mode,
            frame,
            pcm: Vec::with_capacity(frame),
        })
    }
}

fn vad(mode: u8) -> Result<webrtc_vad::Vad, VadError> {
    let mode = match mode {
        0 => webrtc_vad::VadMode::Quality,
        1 => webrtc_vad::VadMode::LowBitrate,
        2 => webrtc_vad::VadMode::Aggressive,
        3 => webrtc_vad::VadMode::VeryAggressive,
        m => return Err(VadError::Mode(m)),
    };
    Ok(webrtc_vad::Vad::new_with_rate_and_mode(
        webrtc_vad::SampleRate::Rate16kHz,
        mode,
    ))
}

impl VoiceDetector for WebRtcDetector {
    fn name(&self) -> &'static str {
        "webrtc"
    }

    fn frame_samples(&self) -> usize {
        self.frame
    }

    fn is_voice(&mut self, frame: &[f32]) -> Result<bool, VadError> {
        // An empty or odd-sized slice panics or errors inside libfvad: check first.
        if frame.len() != self.frame {
            return Err(VadError::Frame(frame.len()));
        }
        self.pcm.clear();
        self.pcm
            .extend(frame.iter().map(|&s| (s.clamp(-1.0, 1.0) * 32767.0) as i16));
        self.vad
            .is_voice_segment(&self.pcm)
            .map_err(|_| VadError::Frame(frame.len()))
    }

    /// webrtc-vad learns the noise from what it hears and skips digital silence, so after a
    /// gap of zeros it still judges by the last room. Adapted to a quiet one, it called the
    /// next recording's louder room tone speech for seconds (docs/latency-model.md §6); a
    /// fresh one, as replay gives every turn, does not. (`Vad::reset` would fall back to
    /// mode 0 and 8 kHz, hence a new instance.)
    fn restart(&mut self) {
        if let Ok(fresh) = vad(self.mode) {
            self.vad = fresh;
        }
    }
}

/// So callers can pick an engine at run time.
impl VoiceDetector for Box<dyn VoiceDetector> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn frame_samples(&self) -> usize {
        (**self).frame_samples()
    }

    fn is_voice(&mut self, frame: &[f32]) -> Result<bool, VadError> {
        (**self).is_voice(frame)
    }

    fn restart(&mut self) {
        (**self).restart()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_and_frames_are_errors_not_panics() {
        assert!(matches!(WebRtcDetector::new(4, 20), Err(VadError::Mode(4))));
        assert!(matches!(
            WebRtcDetector::new(2, 25),
            Err(VadError::FrameMs(25))
        ));
        let mut d = WebRtcDetector::new(2, 20).unwrap();
        assert!(matches!(d.is_voice(&[]), Err(VadError::Frame(0))));
        assert!(matches!(d.is_voice(&[0.0; 100]), Err(VadError::Frame(100))));
        assert!(!d.is_voice(&[0.0; 320]).unwrap());
    }
}
