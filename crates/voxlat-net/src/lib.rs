//! Every HTTP call voxlat makes goes through here: where to send it and with which key
//! ([`config`]), how it travels ([`transport`]: the direct HTTP/1.1 path with kernel arrival
//! stamps, or reqwest for TLS, HTTP/2 and proxies), and how it fails ([`NetError`]). The LLM
//! client and the speech-API clients build on it and know nothing of each other.

pub mod arrival;
pub mod classify;
pub mod config;
pub mod connection;
pub mod direct;
pub mod error;
pub mod h1;
pub mod transport;

pub use config::{ApiKey, Endpoint, Service};
pub use error::{ErrorClass, NetError, TimeoutKind};
pub use transport::{ClientOptions, Transport};
