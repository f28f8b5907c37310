//! A remote ASR stage: `POST {base}/audio/transcriptions` with the utterance as a 16 kHz WAV
//! upload (multipart `file`, `model`, `response_format`, optional `language`), as OpenAI,
//! Groq, whisper.cpp's server, speaches and `voxlat serve-audio` accept it.
//!
//! It asks for `verbose_json`, for Whisper's scores ([`crate::verbose`]), and for `json` from
//! then on once a server refuses that, or fails on it (HTTP 500 or 501) and answers `json`.

use crate::http::{Http, Timeouts};
use crate::pcm::wav_bytes;
use crate::verbose::scores_of;
use serde::Deserialize;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use voxlat_core::remote::RemoteCall;
use voxlat_core::whisper_scores::Scores;
use voxlat_net::error::truncate_body;
use voxlat_net::{Endpoint, NetError};

/// The rate Whisper (and every OpenAI-compatible transcription server) works at.
pub const UPLOAD_RATE: u32 = 16_000;

/// The largest transcription body read, bytes. `verbose_json` for the longest turn voxlat
/// sends (30 s) is a few tens of KB with every segment's tokens; a body past this is no
/// transcription (a misdirected URL streaming a file, a server that does not stop), and
/// reading on would grow memory until the idle timeout.
pub const MAX_TRANSCRIPTION_BYTES: usize = 1 << 20;

#[derive(Clone, Debug)]
pub struct AsrClientOptions {
    /// The `model` field: `whisper-1` for OpenAI, the server's own name elsewhere.
    pub model: String,
    /// ISO-639-1, e.g. `en`; `None` lets the server detect it.
    pub language: Option<String>,
    pub timeouts: Timeouts,
}

impl Default for AsrClientOptions {
    fn default() -> Self {
        AsrClientOptions {
            model: "whisper-1".into(),
            language: None,
            timeouts: Timeouts {
                connect: Duration::from_secs(5),
                response: Duration::from_secs(60),
                idle: Duration::from_secs(30),
            },
        }
    }
}

/// What the server said, and how the call went.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteTranscript {
    pub text: String,
    /// Whisper's scores, when the server answered `verbose_json` with them.
    pub scores: Option<Scores>,
    pub call: RemoteCall,
}

/// The `json` and `verbose_json` bodies share `text`; `verbose_json` adds the segments.
#[derive(Deserialize)]
struct Body {
    text: String,
    #[serde(default)]
    segments: Option<Vec<serde_json::Value>>,
}

pub struct AsrClient {
    http: Http,
    opts: AsrClientOptions,
    /// Set for a model known to refuse `verbose_json`, or once the server refuses it.
    json_only: AtomicBool,
    /// `verbose_json` calls in a row that failed with a 500 while `json` worked.
    verbose_failures: AtomicU32,
}

/// A 500 on `verbose_json` answered by `json` may be the format or a server's bad moment.
/// Twice in a row, with no `verbose_json` answer between, is the format: one transient failure
/// would otherwise cost Whisper's scores for the rest of the run. A 501 says so at once.
const VERBOSE_FAILURES_TO_GIVE_UP: u32 = 2;

/// Whether a failed call was the server refusing the `verbose_json` format itself, as OpenAI's
/// gpt-4o transcription models do (HTTP 400, "response_format 'verbose_json' is not
/// compatible with model …"), rather than the upload, the key or the server's state.
fn refuses_verbose_json(e: &NetError) -> bool {
    matches!(e, NetError::Status { status: 400 | 422, body, .. }
        if body.contains("verbose_json") || body.contains("response_format"))
}

/// Whether a failed `verbose_json` call may have failed for the format alone: a server error
/// that says nothing useful. Some servers fail on a format they do not write (HTTP 500 or 501)
/// instead of refusing it; asking them for `json` tells which. A 503 is a busy server.
fn may_fail_on_verbose_json(e: &NetError) -> bool {
    matches!(
        e,
        NetError::Status {
            status: 500 | 501,
            ..
        }
    )
}

/// A 501 Not Implemented names the request's feature, not the server's state.
fn not_implemented(e: &NetError) -> bool {
    matches!(e, NetError::Status { status: 501, .. })
}

impl AsrClient {
    pub fn new(endpoint: Endpoint, opts: AsrClientOptions) -> Result<AsrClient, NetError> {
        Ok(AsrClient {
            http: Http::new(endpoint, opts.timeouts)?,
            // OpenAI's GPT transcription models take only `json` and `text`: asking them for
            // `verbose_json` would cost the first turn a refused round trip.
            json_only: AtomicBool::new(opts.model.starts_with("gpt-")),
            verbose_failures: AtomicU32::new(0),
            opts,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.http.endpoint.base_url.value
    }

    /// Uploads 16 kHz mono audio and waits for the transcript (blocking: call it from a
    /// stage's worker thread, not from async code). `request_id` goes out as `X-Request-Id`.
    /// On failure the call's stamps are lost with it; the error says what failed. The first
    /// call to a server that refuses `verbose_json` is sent twice, and its stamps are the
    /// second call's.
    pub fn transcribe(
        &self,
        audio: &[f32],
        request_id: &str,
    ) -> Result<RemoteTranscript, NetError> {
        let wav = wav_bytes(audio, UPLOAD_RATE);
        if !self.json_only.load(Ordering::Relaxed) {
            match self.upload(wav.clone(), "verbose_json", request_id) {
                Err(e) if refuses_verbose_json(&e) => {
                    tracing::info!(
                        url = %self.base_url(),
                        "the transcription server refuses verbose_json; asking for json, which has no Whisper scores"
                    );
                    self.json_only.store(true, Ordering::Relaxed);
                }
                Err(e) if may_fail_on_verbose_json(&e) => {
                    // Only a `json` answer that works counts against the format; a server
                    // failing on everything is asked for `verbose_json` again next time.
                    let json = self.upload(wav, "json", request_id)?;
                    let failures = self.verbose_failures.fetch_add(1, Ordering::Relaxed) + 1;
                    if not_implemented(&e) || failures >= VERBOSE_FAILURES_TO_GIVE_UP {
                        tracing::warn!(
                            url = %self.base_url(),
                            error = %e,
                            "the transcription server fails on verbose_json and answers json; asking for json, which has no Whisper scores"
                        );
                        self.json_only.store(true, Ordering::Relaxed);
                    }
                    return Ok(json);
                }
                done => {
                    if done.is_ok() {
                        self.verbose_failures.store(0, Ordering::Relaxed);
                    }
                    return done;
                }
            }
        }
        self.upload(wav, "json", request_id)
    }

    fn upload(
        &self,
        wav: Vec<u8>,
        format: &'static str,
        request_id: &str,
    ) -> Result<RemoteTranscript, NetError> {
        let url = self.http.url("audio/transcriptions");
        let mut call = RemoteCall {
            url: url.clone(),
            request_id: request_id.to_string(),
            upload_bytes: wav.len() as u64,
            ..RemoteCall::default()
        };
        let part = reqwest::multipart::Part::bytes(wav)
            .file_name("utterance.wav")
            .mime_str("audio/wav")
            .map_err(|e| NetError::Other(format!("cannot build the upload: {e}")))?;
        let mut form = reqwest::multipart::Form::new()
            .part("file", part)
            .text("model", self.opts.model.clone())
            .text("response_format", format);
        if let Some(lang) = &self.opts.language {
            form = form.text("language", lang.clone());
        }
        let rb = self.http.post(&url, request_id).multipart(form);
        self.http.block_on(async {
            let resp = self.http.send(rb, &mut call).await?;
            let mut body = Vec::new();
            self.http
                .read_body(resp, &mut call, |b| {
                    if body.len() + b.len() > MAX_TRANSCRIPTION_BYTES {
                        return Err(NetError::Other(format!(
                            "{url} sent more than {MAX_TRANSCRIPTION_BYTES} bytes for one transcription, so the call was cut there (the cap is MAX_TRANSCRIPTION_BYTES): is --asr-url a transcription server (…/v1, serving /audio/transcriptions)?"
                        )));
                    }
                    body.extend_from_slice(b);
                    Ok(())
                })
                .await?;
            let parsed: Body = serde_json::from_slice(&body).map_err(|e| {
                NetError::Other(format!(
                    "{url} did not answer with a transcription ({e}): {}. Is the URL a transcription server (…/v1, serving /audio/transcriptions)?",
                    truncate_body(&String::from_utf8_lossy(&body))
                ))
            })?;
            Ok(RemoteTranscript {
                text: parsed.text.trim().to_string(),
                scores: parsed.segments.as_deref().and_then(scores_of),
                call,
            })
        })
    }
}
