//! Smart Turn v3.2 (Pipecat's audio end-of-turn model) on ONNX Runtime.
//!
//! Input `input_features` `[1, 80, 800]` from [`FeatureExtractor`]; output `logits` `[1, 1]`,
//! which the exported graph has already passed through a sigmoid: the probability that the
//! turn is complete. One intra-op thread and no spinning: it runs while ASR and the LLM do,
//! and on 2 cores a second thread was slower, not faster.

use super::features::{FeatureExtractor, FRAMES, MELS};
use super::{TurnScore, TurnScorer};
use crate::{InferError, VadError};
use ort::session::Session;
use ort::value::Tensor;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub struct SmartTurn {
    session: Session,
    path: PathBuf,
    features: FeatureExtractor,
    input: Vec<f32>,
}

impl SmartTurn {
    /// `runtime` is the ONNX Runtime library (loaded once per process).
    pub fn new(model: &Path, runtime: &Path) -> Result<SmartTurn, VadError> {
        let session = voxlat_onnx::single_thread_session(runtime, model).map_err(|e| {
            crate::session_error(e, |detail| VadError::TurnModel {
                path: model.to_path_buf(),
                detail,
            })
        })?;
        Ok(SmartTurn {
            session,
            path: model.to_path_buf(),
            features: FeatureExtractor::new(),
            input: Vec::with_capacity(MELS * FRAMES),
        })
    }

    /// The features the model is given for `audio` (for tests and tools).
    pub fn features(&mut self, audio: &[f32]) -> &[f32] {
        self.features.compute(audio, &mut self.input);
        &self.input
    }

    fn infer(&mut self, audio: &[f32]) -> Result<f32, InferError> {
        self.features.compute(audio, &mut self.input);
        let input = Tensor::from_array(([1usize, MELS, FRAMES], self.input.clone()))?;
        let outputs = self.session.run(ort::inputs!["input_features" => input])?;
        let (_, p) = outputs["logits"].try_extract_tensor::<f32>()?;
        p.first().copied().ok_or(InferError::NoOutput)
    }
}

impl TurnScorer for SmartTurn {
    fn name(&self) -> &'static str {
        "smart-turn-v3.2"
    }

    fn score(&mut self, audio: &[f32]) -> Result<TurnScore, VadError> {
        let start = Instant::now();
        let probability = self.infer(audio).map_err(|e| VadError::TurnModel {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        Ok(TurnScore {
            probability,
            took: start.elapsed(),
        })
    }
}
