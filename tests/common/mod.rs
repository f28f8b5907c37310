//! Shared by the CLI tests.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::process::Command;

/// Variables that would point voxlat at another server or through a proxy: a test's
/// environment must not leak into the command under test.
const ENDPOINT_AND_PROXY_VARS: &[&str] = &[
    "VOXLAT_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "VOXLAT_API_KEY",
    "OPENAI_API_KEY",
    "VOXLAT_MODEL",
    "OPENAI_MODEL",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// The voxlat binary under test, with a clean endpoint and proxy environment.
pub fn voxlat() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_voxlat"));
    for v in ENDPOINT_AND_PROXY_VARS {
        c.env_remove(v);
    }
    c
}
