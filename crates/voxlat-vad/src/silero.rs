//! Silero VAD (the neural VAD the leading voice frameworks use) behind the same trait as
//! webrtc-vad, on ONNX Runtime. It takes 32 ms frames (512 samples at 16 kHz) plus the last
//! 64 samples of the previous frame as context, and carries a recurrent state between calls.

use crate::detector::VoiceDetector;
use crate::{InferError, VadError};
use ort::session::Session;
use ort::value::Tensor;
use std::path::{Path, PathBuf};

const FRAME: usize = 512;
const CONTEXT: usize = 64;
const STATE: usize = 2 * 128;

pub struct SileroDetector {
    session: Session,
    path: PathBuf,
    threshold: f32,
    context: Vec<f32>,
    state: Vec<f32>,
    input: Vec<f32>,
    /// The last frame's speech probability.
    pub last_probability: f32,
}

impl SileroDetector {
    /// `runtime` is the ONNX Runtime library (loaded once per process); `threshold` the
    /// speech probability above which a frame is voiced (Silero's default is 0.5).
    pub fn new(model: &Path, runtime: &Path, threshold: f32) -> Result<SileroDetector, VadError> {
        // It shares the cores with ASR and TTS: one thread, never spinning.
        let session = voxlat_onnx::single_thread_session(runtime, model).map_err(|e| {
            crate::session_error(e, |detail| VadError::Silero {
                path: model.to_path_buf(),
                detail,
            })
        })?;
        Ok(SileroDetector {
            session,
            path: model.to_path_buf(),
            threshold,
            context: vec![0.0; CONTEXT],
            state: vec![0.0; STATE],
            input: Vec::with_capacity(CONTEXT + FRAME),
            last_probability: 0.0,
        })
    }

    /// Forgets the recurrent state (between unrelated recordings).
    pub fn reset(&mut self) {
        self.context.iter_mut().for_each(|v| *v = 0.0);
        self.state.iter_mut().for_each(|v| *v = 0.0);
    }

    fn infer(&mut self, frame: &[f32]) -> Result<f32, InferError> {
        self.input.clear();
        self.input.extend_from_slice(&self.context);
        self.input.extend_from_slice(frame);
        let input = Tensor::from_array(([1usize, CONTEXT + FRAME], self.input.clone()))?;
        let state = Tensor::from_array(([2usize, 1, 128], self.state.clone()))?;
        let sr = Tensor::from_array(([1usize], vec![16_000i64]))?;
        let outputs = self
            .session
            .run(ort::inputs!["input" => input, "state" => state, "sr" => sr])?;
        let (_, prob) = outputs["output"].try_extract_tensor::<f32>()?;
        let (_, new_state) = outputs["stateN"].try_extract_tensor::<f32>()?;
        if new_state.len() == STATE {
            self.state.copy_from_slice(new_state);
        }
        self.context.copy_from_slice(&frame[FRAME - CONTEXT..]);
        prob.first().copied().ok_or(InferError::NoOutput)
    }
}

impl VoiceDetector for SileroDetector {
    fn name(&self) -> &'static str {
        "silero"
    }

    fn frame_samples(&self) -> usize {
        FRAME
    }

    fn is_voice(&mut self, frame: &[f32]) -> Result<bool, VadError> {
        if frame.len() != FRAME {
            return Err(VadError::Frame(frame.len()));
        }
        let p = self.infer(frame).map_err(|e| VadError::Silero {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        self.last_probability = p;
        Ok(p >= self.threshold)
    }
}
