//! `POST /v1/audio/speech`.

use super::{error, request_id, reserve, run_engine, set_id, speech_body_limit, State};
use crate::pcm::{pcm16_le, wav_bytes, OPENAI_PCM_RATE};
use crate::tts_client::SAMPLE_RATE_HEADER;
use axum::body::Body;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
pub(super) struct SpeechRequest {
    #[serde(default)]
    input: Option<String>,
    #[serde(default)]
    response_format: Option<String>,
    #[serde(default)]
    speed: Option<f64>,
    // model and voice: one voice is served, whatever is asked for.
}

pub(super) async fn handle(
    Extract(state): Extract<Arc<State>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let id = request_id(&headers);
    let bad = |m: String| error(StatusCode::BAD_REQUEST, &id, m);
    // Read whole within the upload deadline: a body sent a byte at a time holds a connection
    // no longer than that.
    let limit = speech_body_limit(&state.opts);
    let read =
        tokio::time::timeout(state.opts.upload_timeout, axum::body::to_bytes(body, limit)).await;
    let bytes = match read {
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                &id,
                format!(
                    "the request body did not arrive within {} s: send it whole",
                    state.opts.upload_timeout.as_secs()
                ),
            )
        }
        Ok(Err(_)) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &id,
                format!(
                    "the request body is larger than this endpoint's limit of {limit} bytes (`input` is at most {} characters), or it broke off: split the text",
                    state.opts.max_input_chars
                ),
            )
        }
        Ok(Ok(b)) => b,
    };
    let req: SpeechRequest = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            return bad(format!(
                "the request body is not the JSON this endpoint takes ({e}): send {{\"model\": …, \"voice\": …, \"input\": \"text\", \"response_format\": \"pcm\"}} with Content-Type: application/json"
            ))
        }
    };
    let Some(input) = req.input.filter(|t| !t.trim().is_empty()) else {
        return bad("`input` is missing or empty: send the text to speak".into());
    };
    let chars = input.chars().count();
    if chars > state.opts.max_input_chars {
        return bad(format!(
            "`input` has {chars} characters; the limit is {}: split the text",
            state.opts.max_input_chars
        ));
    }
    let format = req.response_format.unwrap_or_else(|| "wav".into());
    let format = format.trim().to_ascii_lowercase();
    if format != "pcm" && format != "wav" {
        return bad(format!(
            "response_format {format:?} is not supported: use pcm (16-bit little-endian, 24 kHz) or wav"
        ));
    }
    if let Some(speed) = req.speed {
        if (speed - 1.0).abs() > 1e-6 {
            return bad(format!(
                "speed {speed} is not supported: this server speaks at the voice's own rate (1.0)"
            ));
        }
    }
    let slot = match reserve(&state, &state.tts, &id, "tts") {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (samples, timing) = match run_engine(&state, &state.tts, slot, &id, "tts", move |e| {
        e.speak(&input)
    })
    .await
    {
        Ok(v) => v,
        Err(r) => return r,
    };
    let mut resp = if format == "pcm" {
        let at_24k =
            match voxlat_audio::resample::resample(&samples, state.tts_rate, OPENAI_PCM_RATE) {
                Ok(s) => s,
                Err(e) => {
                    return error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &id,
                        format!("cannot resample the voice's audio to 24 kHz: {e}"),
                    )
                }
            };
        let mut r = pcm16_le(&at_24k).into_response();
        r.headers_mut()
            .insert("content-type", HeaderValue::from_static("audio/pcm"));
        r.headers_mut()
            .insert(SAMPLE_RATE_HEADER, HeaderValue::from(OPENAI_PCM_RATE));
        r
    } else {
        let mut r = wav_bytes(&samples, state.tts_rate).into_response();
        r.headers_mut()
            .insert("content-type", HeaderValue::from_static("audio/wav"));
        r
    };
    set_id(&mut resp, &id);
    if let Ok(v) = HeaderValue::from_str(&timing) {
        resp.headers_mut().insert("server-timing", v);
    }
    resp
}
