//! The one way a command that loads a model finds it and sizes its threads: the models cache
//! opened once, each file named through `voxlat_models::known`, and the CPU's thread budget.
//! `run` and `replay` build on it through [`crate::common::stack::Stack`]; the one-stage
//! commands (`transcribe`, `speak`, `vad`, `bench-stages`, `eval-turns`, `serve-audio`) use it
//! directly.

use crate::common::stages::ModelPaths;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use voxlat_core::threads::ThreadBudget;
use voxlat_models::known::{self, ModelFile};
use voxlat_models::Store;
use voxlat_vad::turn::smart_turn::SmartTurn;
use voxlat_vad::SharedScorer;

pub struct Setup {
    pub store: Store,
    /// The cores each stage may use, for one caller.
    pub budget: ThreadBudget,
}

impl Setup {
    pub fn open() -> Result<Setup> {
        Ok(Setup {
            store: Store::open_default(None)?,
            budget: ThreadBudget::detect(),
        })
    }

    /// A fetched model file, verified present (else the error says how to fetch it).
    pub fn model(&self, f: ModelFile) -> Result<PathBuf> {
        Ok(self.store.ready(f)?)
    }

    /// `given` if the user named one, else the cached file.
    pub fn model_or(&self, given: Option<PathBuf>, f: ModelFile) -> Result<PathBuf> {
        match given {
            Some(p) => Ok(p),
            None => self.model(f),
        }
    }

    /// Whisper, the voice (`voice` replaces the default one) and ONNX Runtime.
    pub fn stage_models(&self, voice: Option<PathBuf>) -> Result<ModelPaths> {
        let voice = match voice {
            Some(v) => {
                anyhow::ensure!(
                    v.exists(),
                    "voice {} not found; pass a Piper .onnx with its .onnx.json beside it",
                    v.display()
                );
                v
            }
            None => self.model(known::PIPER_VOICE)?,
        };
        Ok(ModelPaths {
            whisper: self.model(known::WHISPER)?,
            voice,
            runtime: self.model(known::ONNX_RUNTIME)?,
        })
    }

    /// Smart Turn on ONNX Runtime, and a note on stderr of which CPU family its thresholds
    /// hold for.
    pub fn turn_model(&self) -> Result<SharedScorer> {
        let path = self
            .model(known::SMART_TURN)
            .context("the turn model is missing; fetch it, or pass --turn-model off")?;
        let model = SmartTurn::new(&path, &self.model(known::ONNX_RUNTIME)?)?;
        eprintln!("{}", crate::common::turn::per_cpu_family_note());
        Ok(Arc::new(Mutex::new(model)))
    }
}
