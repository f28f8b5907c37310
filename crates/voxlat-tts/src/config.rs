//! A Piper voice's `.onnx.json`: sample rate, espeak-ng voice, inference scales, speakers and
//! the phoneme → id table. Only the fields synthesis needs are read.

use crate::error::TtsError;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
pub struct VoiceConfig {
    pub audio: AudioConfig,
    pub espeak: EspeakConfig,
    #[serde(default)]
    pub inference: InferenceConfig,
    /// `espeak` for every voice this crate can run; Piper's `text` voices take raw characters.
    #[serde(default = "default_phoneme_type")]
    pub phoneme_type: String,
    /// Substitutions applied to phonemes before the id lookup (usually empty).
    #[serde(default)]
    pub phoneme_map: HashMap<String, Vec<String>>,
    pub phoneme_id_map: HashMap<String, Vec<i64>>,
    #[serde(default = "one")]
    pub num_speakers: u32,
    #[serde(default)]
    pub speaker_id_map: HashMap<String, i64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct AudioConfig {
    pub sample_rate: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EspeakConfig {
    pub voice: String,
}

/// Piper's three scales, passed to the model as the `scales` input in this order.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct InferenceConfig {
    #[serde(default = "default_noise_scale")]
    pub noise_scale: f32,
    #[serde(default = "default_length_scale")]
    pub length_scale: f32,
    #[serde(default = "default_noise_w")]
    pub noise_w: f32,
}

// Piper's own defaults, for configs that leave a scale out.
fn default_noise_scale() -> f32 {
    0.667
}
fn default_length_scale() -> f32 {
    1.0
}
fn default_noise_w() -> f32 {
    0.8
}
fn default_phoneme_type() -> String {
    "espeak".into()
}
fn one() -> u32 {
    1
}

impl Default for InferenceConfig {
    fn default() -> Self {
        Self {
            noise_scale: default_noise_scale(),
            length_scale: default_length_scale(),
            noise_w: default_noise_w(),
        }
    }
}

impl VoiceConfig {
    pub fn from_json(text: &str, path: &Path) -> Result<Self, TtsError> {
        let invalid = |detail: String| TtsError::ConfigInvalid {
            path: path.to_path_buf(),
            detail,
        };
        let config: VoiceConfig = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if config.phoneme_type != "espeak" {
            return Err(invalid(format!(
                "phoneme_type is {:?}; only espeak voices are supported",
                config.phoneme_type
            )));
        }
        if !(8_000..=192_000).contains(&config.audio.sample_rate) {
            return Err(invalid(format!(
                "audio.sample_rate {} is not a plausible rate",
                config.audio.sample_rate
            )));
        }
        if config.num_speakers == 0 {
            return Err(invalid("num_speakers is 0".into()));
        }
        Ok(config)
    }

    pub fn load(path: &Path) -> Result<Self, TtsError> {
        let text = std::fs::read_to_string(path).map_err(|source| TtsError::ConfigRead {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text, path)
    }

    /// The config that belongs to a voice model: `<model>.json` (Piper's naming,
    /// `voice.onnx` → `voice.onnx.json`).
    pub fn path_for(model: &Path) -> PathBuf {
        let mut name = model.as_os_str().to_os_string();
        name.push(".json");
        PathBuf::from(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"{
        "audio": {"sample_rate": 16000},
        "espeak": {"voice": "en-us"},
        "phoneme_id_map": {"_": [0], "^": [1], "$": [2]}
    }"#;

    #[test]
    fn missing_optional_fields_take_pipers_defaults() {
        let c = VoiceConfig::from_json(MINIMAL, Path::new("v.onnx.json")).expect("valid");
        assert_eq!(c.inference, InferenceConfig::default());
        assert_eq!(c.num_speakers, 1);
        assert_eq!(c.phoneme_type, "espeak");
    }

    #[test]
    fn invalid_configs_name_the_file() {
        let err = VoiceConfig::from_json("{", Path::new("/x/v.onnx.json")).expect_err("bad json");
        assert!(err.to_string().contains("/x/v.onnx.json"), "{err}");
        let text = MINIMAL.replace("16000", "12");
        let err = VoiceConfig::from_json(&text, Path::new("v.json")).expect_err("bad rate");
        assert!(err.to_string().contains("sample_rate"), "{err}");
        let text = MINIMAL.replace("\"audio\"", "\"phoneme_type\": \"text\", \"audio\"");
        let err = VoiceConfig::from_json(&text, Path::new("v.json")).expect_err("text voice");
        assert!(err.to_string().contains("phoneme_type"), "{err}");
    }

    #[test]
    fn the_config_sits_next_to_the_model() {
        assert_eq!(
            VoiceConfig::path_for(Path::new("/m/en_US-joe-medium.onnx")),
            Path::new("/m/en_US-joe-medium.onnx.json")
        );
    }
}
