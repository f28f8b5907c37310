#!/usr/bin/env bash
# The README's first command, on a fresh Debian/Ubuntu machine: installs what is missing
# (system packages, Rust check, models), builds, replays the bundled scenarios through the
# embedded models and prints the latency breakdown and the HTML report's path.
# Extra arguments go to `voxlat replay` (e.g. --repeat 5, --fast, --llm-url URL).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

install_system_packages
ensure_rust
export_portable_ggml_flags

step "building voxlat and voxlat-server (release; the first build compiles whisper.cpp and llama.cpp: about 8 min on 2 cores)"
# The workspace's default members are exactly these two binaries (Cargo.toml).
built=$SECONDS
cargo build --release --locked
echo "built in $((SECONDS - built)) s" >&2
build_server_variants

step "fetching and verifying models (cached in \${VOXLAT_MODELS_DIR:-~/.cache/voxlat/models})"
target/release/voxlat models fetch --all

step "replaying the bundled scenarios"
# Two repeats unless the caller chose (CI runs a short `--fast --repeat 1`).
args=("$@")
[[ " $* " == *" --repeat"* ]] || args=(--repeat 2 "${args[@]}")
target/release/voxlat replay "${args[@]}"
