//! An OpenAI-compatible streaming chat client that stamps every protocol boundary on the
//! request's timeline. The `bench-llm` engine built on it is `voxlat-bench`.
//!
//! TTFT ends at the first delta with non-empty content (reasoning or answer), never at the
//! first byte or a role-only chunk: see `docs/latency-model.md`.

pub mod chunk;
pub mod client;
pub mod config;
pub mod connection;
pub mod direct;
pub mod error;
pub mod h1;
pub mod http_error;
pub mod record;
pub mod sse;
pub mod think;
pub mod transport;

pub use client::{ChatRequest, ClientOptions, LlmClient, Message};
pub use config::{ApiKey, Endpoint};
pub use error::{ErrorClass, LlmError};
pub use record::{DeltaStamp, StreamOutcome};
