#!/usr/bin/env bash
# Runs the whole test suite from a fresh checkout: installs what is missing (Debian packages,
# models into the cache), builds once, then runs every test.
#
# Tests run in the release profile, the one scripts/setup.sh builds, so a checkout that has run
# setup.sh (CI runs both, .ci/run) compiles whisper.cpp and llama.cpp once, not twice.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

install_system_packages
ensure_rust
export_portable_ggml_flags

step "building (release, every target)"
cargo build --release --workspace --all-targets --locked
build_server_variants

fetch_models

step "running the tests"
cargo test --release --workspace --locked --no-fail-fast
