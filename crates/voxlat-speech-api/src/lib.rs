//! The OpenAI-compatible speech API, both sides.
//!
//! - [`asr_client`]: `POST {base}/audio/transcriptions`, a WAV upload, for a remote ASR stage.
//! - [`tts_client`]: `POST {base}/audio/speech`, streamed PCM or WAV, for a remote TTS stage.
//! - [`server`]: the same two endpoints over any speech-to-text and text-to-speech engine,
//!   each on its own thread behind a bounded queue (`voxlat serve-audio`).
//! - [`verbose`]: Whisper's scores ([`voxlat_core::whisper_scores::Scores`]) in
//!   `verbose_json`, which both sides read or write.
//!
//! Both clients use `voxlat-net`'s endpoint settings and error classes, as the LLM client does
//! ([`voxlat_net::NetError`]), so a remote stage fails the way the LLM stage does, with the
//! same fixes. Each call is stamped on the process clock as a
//! [`voxlat_core::remote::RemoteCall`], with the server's own `Server-Timing` when it sends one.

pub mod asr_client;
pub mod pcm;
pub mod server;
pub mod server_timing;
pub mod tts_client;
pub mod verbose;

mod http;
pub use http::Timeouts;

pub use asr_client::{AsrClient, AsrClientOptions, RemoteTranscript};
pub use tts_client::{AudioFormat, RemoteSpeech, TtsClient, TtsClientOptions};
