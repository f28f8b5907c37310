//! What to do about an error, for the line after it. Libraries say what failed and where;
//! only the binary knows its commands, flags and the models it can fetch.

use std::error::Error;
use std::path::Path;
use voxlat_models::known;
use voxlat_net::{NetError, Service, TimeoutKind};

/// Advice for the first error in `e`'s chain that has some (a stage's load failure is looked
/// into for its loader's own error).
pub fn for_error(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(|c| {
        let stage = c
            .downcast_ref::<voxlat_pipeline::StageError>()
            .and_then(|s| s.cause())
            .and_then(|cause| for_one(cause as &(dyn Error + 'static)));
        stage.or_else(|| for_one(c))
    })
}

fn for_one(e: &(dyn Error + 'static)) -> Option<String> {
    if let Some((service, kind)) = timeout(e) {
        return Some(timeout_advice(service, kind));
    }
    if let Some(NetError::Unauthorized { .. }) = net(e) {
        return Some(
            "--api-key gives the LLM's key (the speech servers have their own variables);              --allow-insecure-key sends a key over plain http to another machine"
                .into(),
        );
    }
    if let Some(voxlat_net::config::ConfigError::NoBaseUrl) = e.downcast_ref() {
        return Some("--base-url (bench-llm) or --llm-url (run, replay) names the server".into());
    }
    if let Some(e) = e.downcast_ref::<voxlat_asr::engine::AsrError>() {
        use voxlat_asr::engine::AsrError;
        return match e {
            AsrError::ModelMissing { path } | AsrError::Load { path, .. } => {
                Some(fetch(path, known::WHISPER.model))
            }
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<voxlat_tts::TtsError>() {
        use voxlat_tts::TtsError;
        return match e {
            TtsError::ModelMissing { path }
            | TtsError::ConfigRead { path, .. }
            | TtsError::ConfigInvalid { path, .. }
            | TtsError::Session { path, .. } => Some(fetch(path, known::PIPER_VOICE.model)),
            TtsError::RuntimeMissing { .. } | TtsError::RuntimeLoad { .. } => Some(runtime()),
            _ => None,
        };
    }
    if let Some(e) = e.downcast_ref::<voxlat_onnx::OnnxError>() {
        use voxlat_onnx::OnnxError;
        return match e {
            OnnxError::Missing { .. } | OnnxError::Load { .. } => Some(runtime()),
            OnnxError::Conflict { .. } => None,
        };
    }
    if let Some(e) = e.downcast_ref::<voxlat_vad::VadError>() {
        use voxlat_vad::VadError;
        return match e {
            VadError::TurnModel { path, .. } => Some(fetch(path, known::SMART_TURN.model)),
            VadError::Silero { path, .. } => Some(fetch(path, known::SILERO_VAD.model)),
            VadError::OnnxRuntime(voxlat_onnx::OnnxError::Missing { .. })
            | VadError::OnnxRuntime(voxlat_onnx::OnnxError::Load { .. }) => Some(runtime()),
            _ => None,
        };
    }
    if let Some(voxlat_models::ModelsError::NotFetched { model, .. }) = e.downcast_ref() {
        return Some(format!("fetch it with `voxlat models fetch {model}`"));
    }
    if let Some(e) = e.downcast_ref::<voxlat_audio::device::DeviceError>() {
        use voxlat_audio::device::DeviceError;
        return match e {
            DeviceError::UnknownHost { .. } | DeviceError::NotFound { .. } => {
                Some("`voxlat devices` lists the hosts and devices here".into())
            }
            DeviceError::NoDefault { direction, .. } => Some(format!(
                "name one with --{direction}; `voxlat devices` lists them. {NO_SOUND_CARD}"
            )),
            DeviceError::Host { .. } | DeviceError::Stream { .. } => Some(format!(
                "`voxlat devices` lists what this machine has. {NO_SOUND_CARD}"
            )),
            DeviceError::Ambiguous { .. } => None,
        };
    }
    None
}

/// What a machine without a sound card (a container, CI, a server) can do instead.
const NO_SOUND_CARD: &str = "Without a sound card, `bash scripts/pulse-null-sink.sh start DIR` starts a virtual one that `voxlat run` can use (docs/guide.md, live without a sound card), and `voxlat replay` needs none";

/// A network failure, as itself or inside an LLM one.
fn net<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a NetError> {
    e.downcast_ref::<NetError>()
        .or_else(|| match e.downcast_ref::<voxlat_llm::LlmError>() {
            Some(voxlat_llm::LlmError::Net(n)) => Some(n),
            _ => None,
        })
}

fn timeout(e: &(dyn Error + 'static)) -> Option<(Service, TimeoutKind)> {
    match net(e) {
        Some(NetError::Timeout { service, kind, .. }) => Some((*service, *kind)),
        _ => None,
    }
}

fn timeout_advice(service: Service, kind: TimeoutKind) -> String {
    let flag = match (service, kind) {
        (Service::Asr, _) => "--asr-timeout",
        (Service::Tts, _) => "--tts-timeout",
        (Service::Llm, TimeoutKind::Connect) => "--connect-timeout",
        (Service::Llm, TimeoutKind::Headers) => "--headers-timeout",
        (Service::Llm, TimeoutKind::Idle) => "--idle-timeout",
    };
    format!("{flag} raises that wait, where the command has it")
}

/// A model file that is missing or broken: fetch it again. The model is the cache folder the
/// file is in when that is a model voxlat knows, else the stage's default.
fn fetch(path: &Path, default_model: &str) -> String {
    let known = voxlat_models::manifest::Manifest::builtin().ok();
    let model = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .filter(|n| known.as_ref().is_some_and(|m| m.get(n).is_some()))
        .unwrap_or(default_model);
    format!("fetch it with `voxlat models fetch {model}`, or give the path of one you have")
}

fn runtime() -> String {
    "fetch it with `voxlat models fetch onnxruntime`, or set ORT_DYLIB_PATH to a \
     libonnxruntime.so of version 1.24 or newer"
        .into()
}

#[cfg(test)]
mod tests {
    use super::for_error;
    use std::path::PathBuf;
    use std::time::Duration;
    use voxlat_net::{NetError, Service, TimeoutKind};

    fn timeout(service: Service, kind: TimeoutKind) -> NetError {
        NetError::Timeout {
            service,
            kind,
            phase: "waiting",
            after: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_timeout_names_the_flag_for_its_service_and_wait() {
        let llm = voxlat_llm::LlmError::from(timeout(Service::Llm, TimeoutKind::Headers));
        let e = anyhow::Error::new(llm).context("turn 3");
        assert!(for_error(&e).unwrap().contains("--headers-timeout"));
        let e = anyhow::Error::new(timeout(Service::Asr, TimeoutKind::Idle));
        assert!(for_error(&e).unwrap().contains("--asr-timeout"));
        let e = anyhow::anyhow!("not a network failure");
        assert_eq!(for_error(&e), None);
        let denied = NetError::Unauthorized {
            status: 401,
            url: "http://h/v1".into(),
            hint: String::new(),
            body: String::new(),
        };
        let e = anyhow::Error::new(voxlat_llm::LlmError::from(denied));
        assert!(for_error(&e).unwrap().contains("--api-key"));
    }

    #[test]
    fn a_device_that_cannot_be_opened_points_at_the_virtual_sound_card() {
        let e = anyhow::Error::new(voxlat_audio::device::DeviceError::Stream {
            direction: "output",
            device: "alsa:default".into(),
            detail: "no usable output configuration: cannot find card 0".into(),
        });
        let a = for_error(&e).expect("advice");
        assert!(
            a.contains("pulse-null-sink.sh") && a.contains("voxlat devices"),
            "{a}"
        );
    }

    #[test]
    fn a_stage_that_did_not_load_gets_the_fetch_for_its_model() {
        let missing = voxlat_tts::TtsError::ModelMissing {
            path: PathBuf::from("/cache/piper-en_US-lessac-medium/v.onnx"),
        };
        let e = anyhow::Error::new(voxlat_pipeline::StageError::Load {
            stage: voxlat_pipeline::record::Stage::Tts,
            cause: Box::new(missing),
        });
        let advice = for_error(&e).unwrap();
        assert!(
            advice.contains("voxlat models fetch piper-en_US-joe-medium")
                || advice.contains("voxlat models fetch piper-en_US-lessac-medium"),
            "{advice}"
        );
        let whisper = voxlat_asr::engine::AsrError::ModelMissing {
            path: PathBuf::from("/somewhere/whisper-tiny.en/ggml-tiny.en.bin"),
        };
        let advice = for_error(&anyhow::Error::new(whisper)).unwrap();
        assert!(
            advice.contains("voxlat models fetch whisper-tiny.en"),
            "{advice}"
        );
    }
}
