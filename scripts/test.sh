#!/usr/bin/env bash
# Runs the whole test suite from a fresh checkout: installs what is missing (Debian packages,
# models into the cache), builds once, then runs every test. `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

install_system_packages
ensure_rust

# Build once; the test run below reuses it.
step "building (debug, with optimised native crates)"
cargo build --workspace --all-targets --locked

fetch_models

step "running the tests"
cargo test --workspace --locked --no-fail-fast
