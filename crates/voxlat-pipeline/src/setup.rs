//! What a session ran on, as its results file records it: the `stages` block. One type for
//! replay and live, so the keys cannot drift between commands; live adds its devices.

use crate::live::{ListenerConfig, OutputInfo};
use serde::{Deserialize, Serialize};

/// What each stage ran on. Every field defaults, so results files written before a field
/// existed still load.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Stages {
    /// Whisper's model file, or the ASR server's base URL.
    #[serde(default)]
    pub asr: String,
    /// Piper's voice file, or the TTS server's base URL.
    #[serde(default)]
    pub tts: String,
    #[serde(default)]
    pub onnxruntime: String,
    /// How a runaway Whisper decode is decoded again.
    #[serde(default)]
    pub asr_fallback: String,
    /// The end-of-turn rule (`hangover` or `smart-turn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_model: Option<String>,
    /// The LLM's base URL.
    #[serde(default)]
    pub llm: String,
    /// The embedded server's model, by manifest name or file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_model: Option<String>,
    /// Live only: the devices, their clocks and the listener.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveSetup>,
}

/// The audio side of a live session.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LiveSetup {
    pub clock: ClockOffset,
    /// The audio host (ALSA, PulseAudio, …).
    pub host: String,
    pub input: InputInfo,
    pub output: OutputInfo,
    pub listener: ListenerConfig,
    /// Samples the capture ring had no room for, over the whole session (known at its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_dropped_samples: Option<u64>,
    /// Overruns the input driver reported (known at the session's end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_xruns: Option<u64>,
}

/// CLOCK_MONOTONIC against the process clock, which device timestamps are mapped through.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ClockOffset {
    pub monotonic_minus_process_ns: i64,
    pub error_ns: u64,
}

/// What the input device is.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InputInfo {
    pub device: String,
    pub rate: u32,
    pub channels: u16,
    pub clock_error_ns: u64,
    /// The capture callback runs at a raised scheduling weight.
    pub raised: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys files written before the block was typed carry, replay's and live's.
    #[test]
    fn blocks_written_before_the_type_still_load_and_keep_their_keys() {
        let replay = r#"{"asr":"/m/ggml-tiny.en.bin","tts":"/m/joe.onnx","onnxruntime":"/m/ort.so",
            "asr_fallback":"full-window","turn_model":"off","llm":"http://127.0.0.1:1/v1",
            "llm_model":"smollm2"}"#;
        let s: Stages = serde_json::from_str(replay).unwrap();
        assert_eq!(s.turn_model.as_deref(), Some("off"));
        assert!(s.live.is_none());
        let live = r#"{"asr":"a","tts":"t","onnxruntime":"o","asr_fallback":"off","llm":"l",
            "clock":{"monotonic_minus_process_ns":-5,"error_ns":3},"host":"alsa",
            "input":{"device":"pulse","rate":48000,"channels":1,"clock_error_ns":9,"raised":true},
            "output":{"device":"pulse","rate":48000,"channels":2,"clock_error_ns":9,"raised":false},
            "listener":{"endpointer":{},"barge_in":true,"barge_in_ratio":2.0,
                "barge_in_floor_db":-45.0,"echo_tail_ms":150},
            "input_dropped_samples":0,"input_xruns":2}"#;
        // The endpointer's own block is its type's business: the default's.
        let mut v: serde_json::Value = serde_json::from_str(live).unwrap();
        v["listener"]["endpointer"] =
            serde_json::to_value(voxlat_vad::EndpointerConfig::default()).unwrap();
        let s: Stages = serde_json::from_value(v).unwrap();
        let l = s.live.as_ref().expect("the live block");
        assert_eq!((l.host.as_str(), l.input_xruns), ("alsa", Some(2)));
        let back = serde_json::to_value(&s).unwrap();
        for key in ["asr", "llm", "clock", "host", "input", "output", "listener"] {
            assert!(back.get(key).is_some(), "{key} in {back}");
        }
        assert!(back.get("live").is_none(), "flattened, as before: {back}");
    }
}
