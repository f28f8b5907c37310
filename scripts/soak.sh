#!/usr/bin/env bash
# Soak benchmark: replays the bundled scenarios for about 1000 turns (or until a time limit)
# and samples the memory, open files and threads of voxlat and its embedded LLM server.
#   bash scripts/soak.sh                      # 1000 turns, at most 40 minutes
#   SOAK_TURNS=200 SOAK_MINUTES=10 bash scripts/soak.sh
# Writes results/soak/samples.csv (one row per process per sample) beside the replay results,
# and prints first/last/max figures and turns per minute. Not a CI test: it is a benchmark,
# and its figures go in the report, not into assertions.
set -euo pipefail
cd "$(dirname "$0")/.."

turns="${SOAK_TURNS:-1000}"
minutes="${SOAK_MINUTES:-40}"
every="${SOAK_SAMPLE_SECONDS:-2}"
out="${SOAK_DIR:-results/soak}"
bin=target/release/voxlat

if [ ! -x "$bin" ] || [ "${SOAK_BUILD:-1}" = 1 ]; then
    cargo build --release --locked --bins
fi
mkdir -p "$out"
scenarios=(scenarios/*.toml)
per_pass=0
for s in "${scenarios[@]}"; do
    per_pass=$((per_pass + $(grep -c '^\[\[turn\]\]' "$s")))
done
repeat=$(((turns + per_pass - 1) / per_pass))
echo "soak: ${#scenarios[@]} scenarios, $per_pass turns per pass, --repeat $repeat (≥ $turns turns), at most $minutes min"

"$bin" replay --fast --warmup 1 --repeat "$repeat" --output-dir "$out" "${scenarios[@]}" \
    >"$out/replay.log" 2>&1 &
pid=$!
trap 'kill -INT $pid 2>/dev/null || true' INT TERM

sample() { # pid label t
    local p=$1 label=$2 t=$3
    [ -r "/proc/$p/status" ] || return 0
    local rss threads fds
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status")
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$p/status")
    fds=$(find "/proc/$p/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    echo "$t,$label,$p,$rss,$fds,$threads" >>"$out/samples.csv"
}

echo "elapsed_s,process,pid,rss_kib,fds,threads" >"$out/samples.csv"
start=$(date +%s)
while kill -0 "$pid" 2>/dev/null; do
    now=$(($(date +%s) - start))
    sample "$pid" voxlat "$now"
    for c in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
        [ "$(cat /proc/"$c"/comm 2>/dev/null)" = voxlat-server ] && sample "$c" voxlat-server "$now"
    done
    if [ "$now" -ge $((minutes * 60)) ]; then
        echo "soak: time limit reached, stopping the replay (its results keep every finished turn)"
        kill -INT "$pid"
    fi
    sleep "$every"
done
wait "$pid" || true
elapsed=$(($(date +%s) - start))

python3 - "$out" "$elapsed" <<'PY'
import csv, glob, json, os, sys
out, elapsed = sys.argv[1], int(sys.argv[2])
rows = list(csv.DictReader(open(os.path.join(out, "samples.csv"))))
results = sorted(glob.glob(os.path.join(out, "replay-*.json")), key=os.path.getmtime)
r = json.load(open(results[-1]))
turns = [t for t in r["turns"] if not t["warmup"]]
ok = sum(t["outcome"] == "ok" for t in turns)
print(f"soak: {len(turns)} measured turns ({ok} ok) in {elapsed/60:.1f} min = {len(turns)/(elapsed/60):.1f} turns/min; results {results[-1]}")
for proc in ("voxlat", "voxlat-server"):
    s = [x for x in rows if x["process"] == proc]
    if not s:
        continue
    # Skip the first minute: model loading and warm-up are not growth.
    steady = [x for x in s if int(x["elapsed_s"]) >= 60] or s
    for key, unit in (("rss_kib", "MiB"), ("fds", ""), ("threads", "")):
        v = [int(x[key]) for x in steady]
        f = (lambda k: f"{k/1024:.1f}") if unit else str
        print(f"  {proc:14} {key:8} first {f(v[0])} last {f(v[-1])} max {f(max(v))} {unit}")
    # RSS swings within a turn as tensors come and go, so single samples mislead: the curve is
    # the median of each tenth of the run, at the turn it reaches (turns are evenly paced).
    rate = len(turns) / max(elapsed, 1)
    bins = [[] for _ in range(10)]
    for x in s:
        t = int(x["elapsed_s"])
        bins[min(9, t * 10 // max(elapsed, 1))].append(int(x["rss_kib"]) / 1024)
    curve = []
    for k, b in enumerate(bins):
        if b:
            b.sort()
            curve.append((round(rate * elapsed * (k + 1) / 10), b[len(b) // 2]))
    print(f"  {proc:14} rss median per tenth (turn: MiB): "
          + ", ".join(f"{t}: {m:.0f}" for t, m in curve))
    after = [m for _, m in curve[1:]]
    if after:
        print(f"  {proc:14} after the first tenth: {min(after):.0f}–{max(after):.0f} MiB "
              f"({100 * (max(after) / min(after) - 1):.1f} % spread)")
PY
