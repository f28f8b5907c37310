//! `POST /v1/audio/transcriptions`.

use super::{error, request_id, reserve, run_engine, set_id, State};
use axum::extract::multipart::Multipart;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::path::Path;
use std::sync::Arc;

/// The formats this server writes; OpenAI's srt and vtt need segment times it does not keep.
const FORMATS: &[&str] = &["json", "verbose_json", "text"];

struct Upload {
    file: Option<(String, bytes::Bytes)>,
    format: String,
    language: Option<String>,
}

pub(super) async fn handle(
    Extract(state): Extract<Arc<State>>,
    headers: HeaderMap,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let id = request_id(&headers);
    // Before the body: a full queue answers at once and buffers nothing (the connection then
    // closes, with the unread body). The place is not held while the body is read, so slow
    // uploads cannot fill the queue; it is taken for good once the upload is in.
    if let Err(r) = reserve(&state, &state.asr, &id, "asr") {
        return r;
    }
    let bad = |m: String| error(StatusCode::BAD_REQUEST, &id, m);
    let multipart = match multipart {
        Ok(m) => m,
        Err(e) => {
            return bad(format!(
                "the request is not a multipart upload ({e}): send multipart/form-data with the audio in a field named `file`"
            ))
        }
    };
    let read = tokio::time::timeout(
        state.opts.upload_timeout,
        read_upload(multipart, state.opts.max_upload_bytes),
    )
    .await;
    let Ok(read) = read else {
        return error(
            StatusCode::REQUEST_TIMEOUT,
            &id,
            format!(
                "the upload did not arrive within {} s: send it whole, or a shorter clip",
                state.opts.upload_timeout.as_secs()
            ),
        );
    };
    let upload = match read {
        Ok(u) => u,
        Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &id,
                format!(
                    "the upload is larger than this server's limit of {} bytes",
                    state.opts.max_upload_bytes
                ),
            )
        }
        Err(r) => return bad(r.body),
    };
    if !FORMATS.contains(&upload.format.as_str()) {
        return bad(format!(
            "response_format {:?} is not supported: use one of {}",
            upload.format,
            FORMATS.join(", ")
        ));
    }
    if let Some(lang) = &upload.language {
        let l = lang.to_ascii_lowercase();
        if state.opts.english_only && !(l == "en" || l == "english") {
            return bad(format!(
                "language {lang:?}: this server's model ({}) transcribes English only; send `en` or no language",
                state.opts.asr_model
            ));
        }
    }
    let Some((name, bytes)) = upload.file else {
        return bad("the multipart field `file` is missing: send the audio as a WAV file in a field named `file`".into());
    };
    let audio = match decode(&name, &bytes, state.opts.max_audio_s) {
        Ok(a) => a,
        Err(e) => return bad(e.to_string()),
    };
    let duration = audio.len() as f64 / 16_000.0;
    let slot = match reserve(&state, &state.asr, &id, "asr") {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (heard, timing) = match run_engine(&state, &state.asr, slot, &id, "asr", move |e| {
        e.transcribe(&audio)
    })
    .await
    {
        Ok(v) => v,
        Err(r) => return r,
    };
    let text = heard.text;
    let mut resp = match upload.format.as_str() {
        "text" => text.into_response(),
        "verbose_json" => {
            let segments: Vec<_> = heard
                .scores
                .map(|s| crate::verbose::segment(&text, duration, s))
                .into_iter()
                .collect();
            axum::Json(serde_json::json!({
                "task": "transcribe",
                "language": upload.language.as_deref().unwrap_or("english"),
                "duration": duration,
                "text": text,
                "segments": segments,
            }))
            .into_response()
        }
        _ => axum::Json(serde_json::json!({ "text": text })).into_response(),
    };
    set_id(&mut resp, &id);
    if let Ok(v) = HeaderValue::from_str(&timing) {
        resp.headers_mut().insert("server-timing", v);
    }
    resp
}

/// A failed read, as the status and the words for the client.
struct ReadFailure {
    status: StatusCode,
    body: String,
}

impl ReadFailure {
    fn status(&self) -> StatusCode {
        self.status
    }
}

/// How much of an over-size upload is read and discarded before the 413 is sent. An HTTP/1.1
/// server that answers while the client is still sending, then closes with unread data, makes
/// the kernel reset the connection, and the client loses the answer with it. Past this much,
/// the server gives up on the client hearing why.
const DRAIN_BYTES: usize = 64 * 1024 * 1024;

async fn read_upload(mut m: Multipart, max: usize) -> Result<Upload, ReadFailure> {
    let mut up = Upload {
        file: None,
        format: "json".into(),
        language: None,
    };
    let mut total = 0usize;
    loop {
        let field = match m.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) if total > max => {
                return Err(ReadFailure {
                    status: StatusCode::PAYLOAD_TOO_LARGE,
                    body: String::new(),
                })
            }
            Ok(None) => return Ok(up),
            Err(e) => {
                return Err(ReadFailure {
                    status: e.status(),
                    body: format!("the multipart body is malformed: {}", e.body_text()),
                })
            }
        };
        let name = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().unwrap_or("upload").to_string();
        let mut field = field;
        let mut buf = Vec::new();
        loop {
            match field.chunk().await {
                Ok(Some(c)) => {
                    total += c.len();
                    if total <= max {
                        buf.extend_from_slice(&c);
                    } else if total > max + DRAIN_BYTES {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(ReadFailure {
                        status: e.status(),
                        body: format!("cannot read the field `{name}`: {}", e.body_text()),
                    })
                }
            }
        }
        if total > max {
            // Read on (and discard) to the end, so that the client hears the 413.
            if total <= max + DRAIN_BYTES {
                continue;
            }
            return Err(ReadFailure {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                body: String::new(),
            });
        }
        let data = bytes::Bytes::from(buf);
        let text = || String::from_utf8_lossy(&data).trim().to_string();
        match name.as_str() {
            "file" => up.file = Some((file_name, data.clone())),
            "response_format" => up.format = text(),
            "language" => up.language = Some(text()).filter(|l| !l.is_empty()),
            // model, prompt, temperature and the rest do not change what this server does.
            _ => {}
        }
    }
}

/// What is wrong with an upload, in the words the client gets; each names the file.
#[derive(Debug, thiserror::Error)]
enum UploadError {
    #[error("the uploaded file {0:?} is empty")]
    Empty(String),
    #[error("the uploaded file {0:?} is not a WAV file: this server reads WAV only (16-bit, 24-bit, 32-bit or float PCM, any rate); convert it first, e.g. `ffmpeg -i in -ar 16000 -ac 1 out.wav`")]
    NotWav(String),
    /// The reader names the file itself.
    #[error(transparent)]
    Wav(#[from] voxlat_audio::wav::WavError),
    #[error("the uploaded file {0:?} holds no samples")]
    NoSamples(String),
    #[error("the uploaded file {name:?}: {cause}")]
    Rate {
        name: String,
        cause: voxlat_audio::resample::RateError,
    },
}

/// The upload as 16 kHz mono, or what is wrong with it.
fn decode(name: &str, bytes: &[u8], max_s: u32) -> Result<Vec<f32>, UploadError> {
    if bytes.is_empty() {
        return Err(UploadError::Empty(name.into()));
    }
    if !bytes.starts_with(b"RIFF") {
        return Err(UploadError::NotWav(name.into()));
    }
    let decoded =
        voxlat_audio::wav::decode_limited(std::io::Cursor::new(bytes), Path::new(name), max_s)?;
    let audio = decoded.audio;
    if audio.samples.is_empty() {
        return Err(UploadError::NoSamples(name.into()));
    }
    if audio.rate == 16_000 {
        return Ok(audio.samples);
    }
    voxlat_audio::resample::resample(&audio.samples, audio.rate, 16_000).map_err(|cause| {
        UploadError::Rate {
            name: name.into(),
            cause,
        }
    })
}
