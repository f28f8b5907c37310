//! An OpenAI-compatible streaming chat client that stamps every protocol boundary on the
//! request's timeline. The `bench-llm` engine built on it is `voxlat-bench`. How requests
//! travel, and how an HTTP call fails, is `voxlat-net`'s.
//!
//! TTFT ends at the first delta with non-empty content (reasoning or answer), never at the
//! first byte or a role-only chunk: see `docs/latency-model.md` §4 and `docs/bench-llm.md`.

pub mod chunk;
pub mod client;
pub mod error;
pub mod record;
pub mod sse;
pub mod think;

pub use client::{ChatRequest, LlmClient, Message};
pub use error::{ErrorClass, LlmError, NetError, TimeoutKind};
pub use record::{DeltaStamp, StreamOutcome};
pub use voxlat_net::{ApiKey, ClientOptions, Endpoint};
