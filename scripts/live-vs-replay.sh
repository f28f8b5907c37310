#!/usr/bin/env bash
# Live against replay on the same clips: plays every turn of the given scenarios into a private
# PulseAudio null sink whose speaker loops back into its microphone, so `voxlat run` hears them
# through a real audio device, then replays the same scenarios, and prints both breakdowns side
# by side (P50 per segment, live/replay ratio) and per clip. The device is recorded all the while
# (parecord of the sink's monitor), and `voxlat check-loopback` times every live turn from that
# recording: the live total against what the listener heard.
#
#   bash scripts/live-vs-replay.sh [SCENARIO.toml ...] [-- FLAGS for both run and replay]
#
# Defaults to every bundled scenario. Needs the release build (scripts/setup.sh) and
# pulseaudio, pulseaudio-utils and libasound2-plugins. Results stay in $LVR_DIR
# (default: a new directory under results/).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/voxlat
[[ -x $bin ]] || { echo "no $bin: run scripts/setup.sh first" >&2; exit 1; }

scenarios=()
while [[ $# -gt 0 && $1 != "--" ]]; do scenarios+=("$1"); shift; done
[[ ${1:-} == "--" ]] && shift
flags=("$@")
[[ ${#scenarios[@]} -gt 0 ]] || mapfile -t scenarios < <(ls scenarios/*.toml)

dir=${LVR_DIR:-results/live-vs-replay-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# One line per turn: the clip's path, the scenario:turn label and the annotated end of speech.
python3 - "${scenarios[@]}" >"$dir/clips.txt" <<'PY'
import sys, tomllib, pathlib
for s in sys.argv[1:]:
    p = pathlib.Path(s)
    doc = tomllib.loads(p.read_text())
    for t in doc["turn"]:
        if "speech_end_ms" not in t:
            sys.exit(f"{s}: turn {t['id']} has no speech_end_ms; `voxlat annotate` prints it")
        print(f"{(p.parent / t['wav']).resolve()}\t{doc['name']}:{t['id']}\t{t['speech_end_ms']}")
PY
n=$(wc -l <"$dir/clips.txt")
echo "$n clips from ${scenarios[*]}; results in $dir"

pulse="$dir/pulse"
bash scripts/pulse-null-sink.sh start "$pulse" >"$dir/pulse-server.txt"
export PULSE_SERVER=$(sed -n 's/^PULSE_SERVER=//p' "$dir/pulse-server.txt")
voxlat_pid=
rec_pid=
cleanup() {
  [[ -n $voxlat_pid ]] && kill "$voxlat_pid" 2>/dev/null || true
  [[ -n $rec_pid ]] && kill "$rec_pid" 2>/dev/null || true
  bash scripts/pulse-null-sink.sh stop "$pulse"
}
trap cleanup EXIT

# Live: one clip at a time, each after the previous turn is in the results file (so its reply
# has finished playing and cannot overlap the next question).
"$bin" run --idle-timeout 120 --output-dir "$dir/live" --save-replies "$dir/replies" "${flags[@]}" \
  >"$dir/live.out" 2>"$dir/live.err" &
voxlat_pid=$!
for _ in $(seq 1 1200); do
  grep -q "^listening on" "$dir/live.err" 2>/dev/null && break
  kill -0 "$voxlat_pid" 2>/dev/null || { cat "$dir/live.err" >&2; exit 1; }
  sleep 0.5
done
grep -q "^listening on" "$dir/live.err" || { echo "voxlat run never listened" >&2; exit 1; }
mkdir -p "$dir/replies"
# The device as a listener hears it: what the clips and the replies put on the sink, recorded
# by PulseAudio's own client on its own clock.
parecord --device=spk.monitor --rate=16000 --channels=1 --format=float32le --file-format=wav \
  "$dir/device.wav" &
rec_pid=$!
sleep 1
# A finished turn is one line of the JSONL, appended when the turn (its playout included) ends;
# an interrupted one (its user went on speaking) is followed by the turn that goes on.
turns_done() { cat "$dir"/live/live-*.jsonl 2>/dev/null | wc -l; }
answered_since() { cat "$dir"/live/live-*.jsonl 2>/dev/null | tail -n +$(($1 + 1)) | grep -vc '"outcome":"interrupted"' || true; }
k=0
: >"$dir/plan.tsv"
while IFS=$'\t' read -r wav label end_ms; do
  k=$((k + 1))
  echo "live $k/$n: $label"
  before=$(turns_done)
  printf '%s\t%s\t%s\t%s\n' "$wav" "$label" "$end_ms" "$before" >>"$dir/plan.tsv"
  paplay "$wav" </dev/null
  for _ in $(seq 1 600); do
    [[ $(answered_since "$before") -ge 1 ]] && break
    kill -0 "$voxlat_pid" 2>/dev/null || break
    sleep 0.1
  done
  sleep 1
done <"$dir/clips.txt"
kill -INT "$rec_pid" 2>/dev/null || true
wait "$rec_pid" 2>/dev/null || true
rec_pid=
# What the virtual device itself cost: the PulseAudio daemon shares the two cores with voxlat.
pulse_pid=$(cat "$pulse/runtime/pulse/pid" 2>/dev/null || echo)
if [[ -n $pulse_pid && -r /proc/$pulse_pid/stat ]]; then
  awk -v hz="$(getconf CLK_TCK)" -v s="$SECONDS" \
    '{printf "PulseAudio daemon: %.1f s of CPU during the %d s of this script so far\n", ($14+$15)/hz, s}' \
    "/proc/$pulse_pid/stat" | tee "$dir/pulse-cpu.txt"
fi
# And voxlat's own threads (the audio threads should be a few percent of a core).
for t in /proc/$voxlat_pid/task/*; do
  awk -v n="$(cat "$t/comm")" -v hz="$(getconf CLK_TCK)" '{print n, ($14+$15)/hz}' "$t/stat"
done | awk '{s[$1]+=$2} END {for (n in s) printf "  %-16s %6.1f s\n", n, s[n]}' | sort -k2 -rn \
  | { echo "voxlat run, CPU by thread:"; cat; } | tee "$dir/live-threads.txt"
# Ctrl-C ends a live session and writes its results; a clip the endpointer split into two
# turns would make --max-turns end it early.
kill -INT "$voxlat_pid"
wait "$voxlat_pid" || { echo "voxlat run failed:" >&2; tail -20 "$dir/live.err" >&2; exit 1; }
voxlat_pid=

# Replay: the same scenarios, paced in real time, after the live run so they never compete.
"$bin" replay --output-dir "$dir/replay" "${flags[@]}" "${scenarios[@]}" >"$dir/replay.out" 2>&1 \
  || { tail -20 "$dir/replay.out" >&2; exit 1; }

"$bin" check-loopback --recording "$dir/device.wav" --plan "$dir/plan.tsv" \
  --turns "$(ls "$dir"/live/live-*.jsonl)" --replies "$dir/replies" --json "$dir/loopback.json" \
  | tee "$dir/loopback.txt"

python3 - "$dir" <<'PY' | tee "$dir/report.txt"
import glob, json, statistics, sys
d = sys.argv[1]
def load(kind):
    return json.load(open(glob.glob(f"{d}/{kind}/{kind}-*.json")[0]))
live, replay = load("live"), load("replay")
def ok(turns):
    return [t for t in turns if t["outcome"] == "ok" and t.get("breakdown")]
def seg(t):
    b = t["breakdown"]
    out = {s["name"]: s["ns"] / 1e6 for s in b["segments"]}
    out["total"] = b["total_ns"] / 1e6
    return out
L, R = [seg(t) for t in ok(live["turns"])], [seg(t) for t in ok(replay["turns"])]
print(f"\nlive: {len(L)} of {len(live['turns'])} turns ok; replay: {len(R)} of {len(replay['turns'])} ok")
names = [s["name"] for s in ok(replay["turns"])[0]["breakdown"]["segments"]] + ["total"]
print(f"\n| ms, P50 | live | replay | live / replay |\n| --- | --- | --- | --- |")
for n in names:
    l = statistics.median(x.get(n, 0) for x in L) if L else float("nan")
    r = statistics.median(x.get(n, 0) for x in R) if R else float("nan")
    ratio = f"{l / r:.2f}" if r else "–"
    print(f"| {n} | {l:.0f} | {r:.0f} | {ratio} |")
def p95(xs):
    xs = sorted(xs); return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
if L and R:
    print(f"| total P95 | {p95([x['total'] for x in L]):.0f} | {p95([x['total'] for x in R]):.0f} | |")
print("\nPer clip (the live turns made while it played; replay matched by scenario and turn id):")
rep = {f"{t['scenario']}:{t['turn']}": t for t in replay["turns"]}
plan = [line.rstrip("\n").split("\t") for line in open(f"{d}/plan.tsv")]
for k, (_, label, _, before) in enumerate(plan):
    upto = int(plan[k + 1][3]) if k + 1 < len(plan) else len(live["turns"])
    r = rep.get(label)
    rt = seg(r)["total"] if r and r.get("breakdown") else float("nan")
    for t in live["turns"][int(before):upto]:
        lt = seg(t)["total"] if t.get("breakdown") else float("nan")
        print(f"  {label:32} live {lt:7.0f}  replay {rt:7.0f}  {t['outcome']:>11}  \"{(t.get('transcript') or '')[:40]}\"")
PY
