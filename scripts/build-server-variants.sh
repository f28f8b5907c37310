#!/usr/bin/env bash
# Builds voxlat-server for this CPU's AVX-512 beside the portable build, if the CPU has it
# (scripts/setup.sh and scripts/test.sh do this too). Run it after `cargo build --release`
# when voxlat says the variant is stale.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

build_server_variants
