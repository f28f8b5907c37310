//! The models voxlat's stages load, each as its manifest entry and the file read from it: the
//! one place their file names are spelt (`tests/tidy.rs` holds every other file to that).

use crate::{ModelsError, Store};
use std::path::PathBuf;

/// A file of a model in the manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelFile {
    /// The manifest's `[[model]] name`, as `voxlat models fetch` takes it.
    pub model: &'static str,
    /// The file's `[[model.file]] name`.
    pub file: &'static str,
}

pub const WHISPER: ModelFile = ModelFile {
    model: "whisper-tiny.en",
    file: "ggml-tiny.en.bin",
};
pub const PIPER_VOICE: ModelFile = ModelFile {
    model: "piper-en_US-joe-medium",
    file: "en_US-joe-medium.onnx",
};
/// Piper reads the voice's settings from beside the `.onnx`.
pub const PIPER_VOICE_CONFIG: ModelFile = ModelFile {
    model: "piper-en_US-joe-medium",
    file: "en_US-joe-medium.onnx.json",
};
pub const ONNX_RUNTIME: ModelFile = ModelFile {
    model: "onnxruntime",
    file: "libonnxruntime.so.1.32.0",
};
pub const SILERO_VAD: ModelFile = ModelFile {
    model: "silero-vad",
    file: "silero_vad.onnx",
};
pub const SMART_TURN: ModelFile = ModelFile {
    model: "smart-turn-v3.2",
    file: "smart-turn-v3.2-cpu.onnx",
};

/// Every file above, for checks that walk them all.
pub const ALL: &[ModelFile] = &[
    WHISPER,
    PIPER_VOICE,
    PIPER_VOICE_CONFIG,
    ONNX_RUNTIME,
    SILERO_VAD,
    SMART_TURN,
];

impl Store {
    /// [`Store::ready_path`] of a known file.
    pub fn ready(&self, f: ModelFile) -> Result<PathBuf, ModelsError> {
        self.ready_path(f.model, f.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Manifest;

    #[test]
    fn every_known_file_is_in_the_builtin_manifest() {
        let m = Manifest::builtin().expect("the builtin manifest parses");
        for f in ALL {
            let model = m
                .get(f.model)
                .unwrap_or_else(|| panic!("{} is listed", f.model));
            assert!(model.file(f.file).is_some(), "{} has {}", f.model, f.file);
        }
    }
}
