//! A remote TTS stage: `POST {base}/audio/speech` (`model`, `voice`, `input`,
//! `response_format`), read as it streams. `first_byte` of the call is when the first audio
//! arrived, not when the body ended: that is what a player fed from the stream would wait for.

use crate::http::{Http, Timeouts};
use crate::pcm::{StreamDecoder, OPENAI_PCM_RATE};
use std::time::Duration;
use voxlat_core::remote::RemoteCall;
use voxlat_net::{Endpoint, NetError};

/// The response format asked for. Both decode as they arrive; compressed formats (mp3, opus)
/// would need a decoder voxlat does not carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AudioFormat {
    /// Raw 16-bit little-endian mono PCM, at 24 kHz unless the server says otherwise.
    Pcm,
    Wav,
}

impl AudioFormat {
    pub fn name(self) -> &'static str {
        match self {
            AudioFormat::Pcm => "pcm",
            AudioFormat::Wav => "wav",
        }
    }

    pub fn parse(s: &str) -> Option<AudioFormat> {
        match s.trim().to_ascii_lowercase().as_str() {
            "pcm" => Some(AudioFormat::Pcm),
            "wav" => Some(AudioFormat::Wav),
            _ => None,
        }
    }
}

/// The least audio one call may bring, in seconds, before it is cut as a server that does not
/// stop: a TTS call speaks one chunk (a sentence or so, a few seconds), and this is room for
/// the slowest voice. The same bound as a scenario turn's audio.
pub const MAX_SPEECH_S: f64 = 120.0;

/// Seconds of audio allowed per character of input, for long inputs: about eight times a
/// normal speaking rate of 15 characters a second.
pub const MAX_SPEECH_S_PER_CHAR: f64 = 0.5;

/// How much audio speaking `text` may bring before the call is cut: [`MAX_SPEECH_S`], or
/// [`MAX_SPEECH_S_PER_CHAR`] per character where that is more, in seconds at the rate the
/// audio is read at (the server's header may set it, from 1 to 384 kHz). Memory per call
/// stays bounded even from a server that streams forever: 120 s of samples is 11 MB at
/// OpenAI's 24 kHz, and 184 MB at the highest rate a header may claim.
pub fn speech_cap_s(text: &str) -> f64 {
    (text.chars().count() as f64 * MAX_SPEECH_S_PER_CHAR).max(MAX_SPEECH_S)
}

/// A header some servers (Kokoro-FastAPI, `voxlat serve-audio`) add to raw PCM.
pub const SAMPLE_RATE_HEADER: &str = "x-sample-rate";

#[derive(Clone, Debug)]
pub struct TtsClientOptions {
    pub model: String,
    pub voice: String,
    pub format: AudioFormat,
    /// The rate raw PCM is read at when the server sends no rate header.
    pub pcm_rate: u32,
    pub timeouts: Timeouts,
}

impl Default for TtsClientOptions {
    fn default() -> Self {
        TtsClientOptions {
            model: "tts-1".into(),
            voice: "alloy".into(),
            format: AudioFormat::Pcm,
            pcm_rate: OPENAI_PCM_RATE,
            timeouts: Timeouts {
                connect: Duration::from_secs(5),
                response: Duration::from_secs(30),
                idle: Duration::from_secs(10),
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RemoteSpeech {
    /// Mono samples at `sample_rate`.
    pub samples: Vec<f32>,
    pub sample_rate: u32,
    pub call: RemoteCall,
}

pub struct TtsClient {
    http: Http,
    opts: TtsClientOptions,
}

impl TtsClient {
    pub fn new(endpoint: Endpoint, opts: TtsClientOptions) -> Result<TtsClient, NetError> {
        Ok(TtsClient {
            http: Http::new(endpoint, opts.timeouts)?,
            opts,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.http.endpoint.base_url.value
    }

    pub fn options(&self) -> &TtsClientOptions {
        &self.opts
    }

    /// Speaks `text` (blocking, like [`crate::AsrClient::transcribe`]). A stream cut off
    /// mid-audio is an error that says how much arrived: a half-spoken chunk is not a result.
    pub fn speak(&self, text: &str, request_id: &str) -> Result<RemoteSpeech, NetError> {
        let url = self.http.url("audio/speech");
        let body = serde_json::json!({
            "model": self.opts.model,
            "voice": self.opts.voice,
            "input": text,
            "response_format": self.opts.format.name(),
        });
        let bytes = serde_json::to_vec(&body)
            .map_err(|e| NetError::Other(format!("cannot encode the request: {e}")))?;
        let mut call = RemoteCall {
            url: url.clone(),
            request_id: request_id.to_string(),
            upload_bytes: bytes.len() as u64,
            ..RemoteCall::default()
        };
        let rb = self
            .http
            .post(&url, request_id)
            .header("content-type", "application/json")
            .body(bytes);
        self.http.block_on(async {
            let resp = self.http.send(rb, &mut call).await?;
            let rate = resp
                .headers()
                .get(SAMPLE_RATE_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|r| (1_000..=384_000).contains(r))
                .unwrap_or(self.opts.pcm_rate);
            let mut decoder = StreamDecoder::new(rate);
            let cap_s = speech_cap_s(text);
            let too_long = |d: &StreamDecoder| {
                NetError::Other(format!(
                    "{url} sent more than {cap_s:.0} s of audio for {} characters of text, so the call was cut there: the speech server does not stop (the cap is MAX_SPEECH_S, or MAX_SPEECH_S_PER_CHAR per character); {} samples at {} Hz arrived",
                    text.chars().count(),
                    d.decoded(),
                    d.sample_rate()
                ))
            };
            let bad_audio = |e: crate::pcm::PcmError| {
                NetError::Other(format!(
                    "{url} sent audio voxlat cannot read: {e}. Ask it for pcm or wav"
                ))
            };
            self.http
                .read_body(resp, &mut call, |b| {
                    decoder.push(b).map_err(bad_audio)?;
                    // Checked at the rate the audio is read at: a WAV header may have set it.
                    if decoder.decoded() as f64 > cap_s * f64::from(decoder.sample_rate().max(1)) {
                        return Err(too_long(&decoder));
                    }
                    Ok(())
                })
                .await?;
            let (samples, sample_rate) = decoder.finish().map_err(|e| match e {
                crate::pcm::PcmError::Partial { bytes } => NetError::Disconnected {
                    detail: format!("{url} ended the audio inside a sample, after {bytes} bytes"),
                },
                other => bad_audio(other),
            })?;
            Ok(RemoteSpeech {
                samples,
                sample_rate,
                call,
            })
        })
    }
}
