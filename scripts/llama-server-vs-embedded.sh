#!/usr/bin/env bash
# The embedded LLM server (`voxlat serve`) against llama.cpp's own `llama-server` on the same
# GGUF: prefill and decode, one server at a time, in interleaved rounds. Each round starts one
# server, measures a short and a long synthetic prompt with `voxlat bench-llm`, stops it, then
# does the same with the other; the prompts are fresh per round and the same for both servers.
#
#   LLAMA_SERVER=/path/to/llama-server bash scripts/llama-server-vs-embedded.sh OUTDIR
#
# Build `llama-server` from llama.cpp's sources (LLAMA_BUILD_SERVER=ON; docs/models.md says
# how). Settings: MODEL (default the fetched Gemma 3 270M), THREADS (2), ROUNDS (3), TOKENS
# ("32 512"), REQUESTS (15), BUILDS (the embedded server's builds to measure, each in turn:
# default "portable", and "portable avx512" where scripts/setup.sh built the variant). Prints
# each run's server-side P50s; the full results stay in OUTDIR. Needs the release build
# (scripts/setup.sh) and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: LLAMA_SERVER=… bash scripts/llama-server-vs-embedded.sh OUTDIR}
ref=${LLAMA_SERVER:?set LLAMA_SERVER to a llama-server binary}
model=${MODEL:-$HOME/.cache/voxlat/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
tokens=${TOKENS:-32 512}
requests=${REQUESTS:-15}
builds_default=portable
[ -x target/release/voxlat-server-avx512 ] && builds_default="portable avx512"
builds=${BUILDS:-$builds_default}
voxlat=target/release/voxlat
mkdir -p "$out"
[ -x "$voxlat" ] || { echo "no $voxlat: run scripts/setup.sh first" >&2; exit 1; }
[ -f "$model" ] || { echo "no model at $model: set MODEL, or run voxlat models fetch" >&2; exit 1; }

pid=
stop() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; pid=; }
trap stop EXIT
up() {
  for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$1/v1/models" >/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { echo "the server on port $1 exited" >&2; return 1; }
    sleep 0.2
  done
  echo "the server on port $1 did not start" >&2; return 1
}
bench() { # NAME PORT ROUND TOKENS
  local dir="$out/$1-p$4-r$3"
  "$voxlat" bench-llm --base-url "http://127.0.0.1:$2/v1" --prompt-tokens "$4" --max-tokens 64 \
    --requests "$requests" --warmup 2 --prompt-seed $((1000 * $3 + $4)) --seed 7 \
    --temperature 0 --output-dir "$dir" --quiet > "$dir.txt" 2>&1
  printf '%-13s round %s, %4s words:' "$1" "$3" "$4"
  grep -E "^server (prompt_n|prompt_ms|predicted_per_second) " "$dir.txt" \
    | awk '{printf " %s %s", $2, $5}'
  echo
}
for r in $(seq 1 "$rounds"); do
  for b in $builds; do
    VOXLAT_SERVER_BUILD=$b "$voxlat" serve --model "$model" --port 8091 --threads "$threads" \
      --slots 1 --ctx 4096 > "$out/embedded-$b-r$r.log" 2>&1 &
    pid=$!
    up 8091
    for t in $tokens; do bench "$b" 8091 "$r" "$t"; done
    stop
  done
  "$ref" -m "$model" --host 127.0.0.1 --port 8092 -t "$threads" -c 4096 -np 1 --no-jinja \
    --chat-template gemma --no-webui > "$out/llama-server-r$r.log" 2>&1 &
  pid=$!
  up 8092
  for t in $tokens; do bench llama-server 8092 "$r" "$t"; done
  stop
done
