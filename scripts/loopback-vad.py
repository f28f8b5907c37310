#!/usr/bin/env python3
"""Replays a live run's device recording through the endpointer, offline, gated as live was.

`check-loopback` says how far a live total was from what the listener waited, but not whether
the endpointer erred on the audio itself or the live path fed it something else. This script
separates the two. From a `scripts/live-vs-replay.sh` directory it:

1. fits the process clock to the recording's clock (a line through the first-audio instants of
   the clips `check-loopback` timed within 10 ms; the two clocks drift apart by ~170 ppm);
2. cuts every reply out of `device.wav`, from its first played buffer to 150 ms after its last
   (the listener's echo gate, `echo_tail_ms`): live, the endpointer is not fed those frames;
3. runs `voxlat vad` on what is left, in one go, so the VAD's state carries from clip to clip
   as it did live;
4. prints, per clip, the speech end's error against the truth: live (from `check-loopback`,
   late positive) and offline on the gated recording.

A clip whose two figures agree erred on its audio; one where they differ erred in the live
path (what the endpointer was fed, its timestamps, or the VAD's state). Barge-ins fed the live
endpointer some reply audio that this cut removes, so clips after one can differ for that.

Usage: loopback-vad.py LVR_DIR [VOXLAT_BINARY]   (default binary: target/release/voxlat)
"""

import array
import glob
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import wave

RATE = 16000
ECHO_TAIL_S = 0.150


def read_device(path):
    """The recording as floats at 16 kHz mono (parecord writes float32, a WAV tool may not)."""
    data = open(path, "rb").read()
    fmt_at = data.find(b"fmt ")
    tag, channels, rate = struct.unpack("<HHI", data[fmt_at + 8 : fmt_at + 16])
    if channels != 1 or rate != RATE:
        sys.exit(f"{path}: expected 16 kHz mono (parecord --rate=16000 --channels=1)")
    at = data.find(b"data")
    (size,) = struct.unpack("<I", data[at + 4 : at + 8])
    raw = data[at + 8 : at + 8 + size]
    if tag == 3:
        x = array.array("f")
        x.frombytes(raw)
        return x
    ints = array.array("h")
    ints.frombytes(raw)
    return array.array("f", (v / 32768.0 for v in ints))


def fit_clock(records, clips, truth_s):
    """Device seconds as a linear function of process nanoseconds."""
    points = []
    for rec in records:
        c = clips.get(rec["turn"])
        if not c or c["error_ms"] is None or abs(c["error_ms"]) >= 10:
            continue
        onset = c["at_s"] + truth_s[c["label"]] + c["heard_total_ms"] / 1000
        first_audio = (rec["events"]["speech_end"] + rec["breakdown"]["total_ns"]) / 1e9
        points.append((first_audio, onset - first_audio))
    if len(points) < 2:
        sys.exit("fewer than 2 clips timed within 10 ms: no clock to fit")
    mx = sum(p[0] for p in points) / len(points)
    my = sum(p[1] for p in points) / len(points)
    slope = sum((p[0] - mx) * (p[1] - my) for p in points) / sum((p[0] - mx) ** 2 for p in points)
    return lambda ns: ns / 1e9 + my + slope * (ns / 1e9 - mx)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    d = sys.argv[1]
    binary = sys.argv[2] if len(sys.argv) == 3 else "target/release/voxlat"
    x = read_device(os.path.join(d, "device.wav"))
    clips = {c["turn"]: c for c in json.load(open(os.path.join(d, "loopback.json")))["clips"] if c["turn"]}
    truth_s = {}
    for line in open(os.path.join(d, "plan.tsv")):
        fields = line.rstrip("\n").split("\t")
        truth_s[fields[1]] = float(fields[2]) / 1000
    records = [json.loads(l) for f in glob.glob(os.path.join(d, "live", "live-*.jsonl")) for l in open(f)]
    to_device = fit_clock(records, clips, truth_s)

    gated = []
    for rec in records:
        e = rec["events"]
        if "playout_start" in e and "playout_done" in e:
            gated.append((to_device(e["playout_start"]), to_device(e["playout_done"]) + ECHO_TAIL_S))
    gated.sort()
    kept, removed, pos = [], [], 0.0
    for a, b in gated:
        if a > pos:
            kept.append((pos, a))
        removed.append((a, b))
        pos = max(pos, b)
    kept.append((pos, len(x) / RATE))
    out = array.array("h")
    for a, b in kept:
        out.extend(max(-32768, min(32767, round(v * 32767))) for v in x[int(a * RATE) : int(b * RATE)])

    def on_gated(t):
        return t - sum(max(0.0, min(t, b) - a) for a, b in removed)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gated.wav")
        with wave.open(path, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes(out.tobytes())
        vad = subprocess.run([binary, "vad", path], capture_output=True, text=True, check=True).stdout
    ends = [float(m.group(1)) for m in re.finditer(r"endpoint: speech [\d.]+–([\d.]+)", vad)]
    if not ends:
        sys.exit("voxlat vad found no endpoint in the gated recording")

    print(f"{'clip':40s} {'live':>6s} {'offline':>8s}  (speech end − truth, ms; late positive)")
    for c in sorted(clips.values(), key=lambda c: c["at_s"]):
        if c["error_ms"] is None:
            continue
        truth = on_gated(c["at_s"] + truth_s[c["label"]])
        nearest = min(ends, key=lambda e: abs(e - truth))
        print(f"{c['label']:40s} {-c['error_ms']:6.0f} {1000 * (nearest - truth):8.0f}")


if __name__ == "__main__":
    main()
