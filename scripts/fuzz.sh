#!/usr/bin/env bash
# Runs every fuzz target (or those named) for a while each, seeded from fuzz/seeds/.
#   bash scripts/fuzz.sh                  # all six targets, 10 minutes each
#   FUZZ_SECONDS=60 bash scripts/fuzz.sh sse_parser chunker
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`); installs the latter
# when missing. A crash leaves its input in fuzz/artifacts/<target>/ and stops the script: turn
# it into a regression test next to the code that failed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-600}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(sse_parser wav_reader scenario ct2_model chunker bench_config)
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t"
    echo "== fuzzing $t for ${seconds}s"
    # -rss_limit_mb catches allocations sized by untrusted headers; -max_len lets WAV and model
    # inputs be larger than libFuzzer's 4 KiB default.
    cargo +nightly fuzz run "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
done
