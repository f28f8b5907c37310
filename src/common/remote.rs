//! `--asr-url` and `--tts-url`: the ASR and TTS stages on OpenAI-compatible speech servers
//! instead of the embedded Whisper and Piper.

use crate::common::stages::ModelPaths;
use anyhow::Result;
use clap::Args;
use std::time::Duration;
use voxlat_net::config::{Endpoint, Service, Settings, BASE_URL_VARS};
use voxlat_speech_api::{AsrClientOptions, AudioFormat, TtsClientOptions};

#[derive(Args, Debug, Clone)]
pub struct RemoteStageArgs {
    /// A transcription server (OpenAI-compatible: POST {URL}/audio/transcriptions) instead of
    /// the embedded Whisper, e.g. http://127.0.0.1:8090/v1 for `voxlat serve-audio`
    /// [env VOXLAT_ASR_URL, also read from .env]. Its API key is VOXLAT_ASR_API_KEY; without
    /// one, the LLM's key only when the server is on the LLM's origin (scheme, host, port).
    #[arg(long, value_name = "URL")]
    pub asr_url: Option<String>,
    /// The `model` field of transcription requests.
    #[arg(long, value_name = "NAME", default_value = "whisper-1")]
    pub asr_model: String,
    /// The `language` field of transcription requests (ISO-639-1), e.g. en.
    #[arg(long, value_name = "CODE")]
    pub asr_language: Option<String>,
    /// Longest wait for a transcription server's answer.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::common::parse_duration)]
    pub asr_timeout: Duration,
    /// A speech server (OpenAI-compatible: POST {URL}/audio/speech) instead of the embedded
    /// Piper [env VOXLAT_TTS_URL, also read from .env]. Its API key is VOXLAT_TTS_API_KEY;
    /// without one, the LLM's key only when the server is on the LLM's origin.
    #[arg(long, value_name = "URL")]
    pub tts_url: Option<String>,
    /// The `model` field of speech requests.
    #[arg(long, value_name = "NAME", default_value = "tts-1")]
    pub tts_model: String,
    /// The `voice` field of speech requests.
    #[arg(long, value_name = "NAME", default_value = "alloy")]
    pub tts_voice: String,
    /// The audio asked for: pcm (16-bit, read at --tts-pcm-rate unless the server sends
    /// X-Sample-Rate) or wav.
    #[arg(long, value_name = "FORMAT", default_value = "pcm", value_parser = parse_format)]
    pub tts_format: AudioFormat,
    /// The rate raw PCM is read at when the server does not say (OpenAI's is 24000).
    #[arg(long, value_name = "HZ", default_value_t = voxlat_speech_api::pcm::OPENAI_PCM_RATE)]
    pub tts_pcm_rate: u32,
    /// Longest wait for a speech server's first audio.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::common::parse_duration)]
    pub tts_timeout: Duration,
    /// Send API keys over plain http:// to hosts that are not loopback (the LLM's, the ASR's
    /// and the TTS's). Without it such a key is withheld, with a warning: it would cross the
    /// network in clear text.
    #[arg(long)]
    pub allow_insecure_key: bool,
}

fn parse_format(s: &str) -> Result<AudioFormat, crate::common::ArgError> {
    AudioFormat::parse(s).ok_or_else(|| crate::common::ArgError::AudioFormat(s.to_string()))
}

pub const ASR_URL_VARS: &[&str] = &["VOXLAT_ASR_URL"];
pub const TTS_URL_VARS: &[&str] = &["VOXLAT_TTS_URL"];

/// The remote stages a session uses; `None` runs the embedded one.
#[derive(Clone, Debug, Default)]
pub struct RemoteStages {
    pub asr: Option<(Endpoint, AsrClientOptions)>,
    pub tts: Option<(Endpoint, TtsClientOptions)>,
}

impl RemoteStages {
    /// `llm_url` is the `--llm-url` flag: a stage on the LLM's origin shares the LLM's key.
    pub fn resolve(args: &RemoteStageArgs, llm_url: Option<&str>) -> Result<RemoteStages> {
        let settings = Settings::from_process()?.allow_insecure_key(args.allow_insecure_key);
        // Each stage has its own key (VOXLAT_ASR_API_KEY, VOXLAT_TTS_API_KEY); without one it
        // borrows the LLM's only on the LLM's origin (one provider serving chat and audio).
        // The embedded LLM has no key to lend. Resolved here as attach_llm resolves it.
        let llm = settings
            .pick(llm_url.map(|u| ("--llm-url", u)), BASE_URL_VARS)
            .map(|url| settings.endpoint_from(url, None))
            .transpose()?;
        let endpoint = |service: Service,
                        flag: &str,
                        value: Option<&str>,
                        vars: &[&str]|
         -> Result<Option<Endpoint>> {
            let Some(url) = settings.pick(value.map(|v| (flag, v)), vars) else {
                return Ok(None);
            };
            // The error names the flag or variable the URL came from.
            let e = settings.service_endpoint(service, url, None, llm.as_ref())?;
            crate::common::llm::warn_withheld(&e);
            Ok(Some(e))
        };
        let asr = endpoint(
            Service::Asr,
            "--asr-url",
            args.asr_url.as_deref(),
            ASR_URL_VARS,
        )?
        .map(|e| {
            let mut o = AsrClientOptions {
                model: args.asr_model.clone(),
                language: args.asr_language.clone(),
                ..AsrClientOptions::default()
            };
            o.timeouts.response = args.asr_timeout;
            (e, o)
        });
        anyhow::ensure!(
            (1_000..=384_000).contains(&args.tts_pcm_rate),
            "--tts-pcm-rate {} Hz is outside 1000–384000 Hz",
            args.tts_pcm_rate
        );
        let tts = endpoint(
            Service::Tts,
            "--tts-url",
            args.tts_url.as_deref(),
            TTS_URL_VARS,
        )?
        .map(|e| {
            let mut o = TtsClientOptions {
                model: args.tts_model.clone(),
                voice: args.tts_voice.clone(),
                format: args.tts_format,
                pcm_rate: args.tts_pcm_rate,
                ..TtsClientOptions::default()
            };
            o.timeouts.response = args.tts_timeout;
            (e, o)
        });
        Ok(RemoteStages { asr, tts })
    }

    /// For the results' `stages`: each stage's server URL, or the embedded model's path.
    pub fn labels(&self, models: &ModelPaths) -> (String, String) {
        let url = |e: &Endpoint| e.base_url.value.clone();
        (
            self.asr
                .as_ref()
                .map_or_else(|| models.whisper.display().to_string(), |(e, _)| url(e)),
            self.tts
                .as_ref()
                .map_or_else(|| models.voice.display().to_string(), |(e, _)| url(e)),
        )
    }
}
