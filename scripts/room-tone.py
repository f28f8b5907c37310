#!/usr/bin/env python3
"""Cuts a recording's room tone out of its pauses, for eval-turns --noise.

Usage: room-tone.py OUT.wav IN.wav...

Every stretch of at least 150 ms whose 10 ms frames all stay within 4 dB of the recording's
10th-percentile frame level (and above -90 dBFS: a gap in the source is no room) is room,
not speech: 40 ms are dropped at each edge (the fade of
the word before and the rise of the one after), and the stretches are joined with 10 ms
cross-fades, so that no join clicks. Standard library only; 16-bit PCM mono 16 kHz in and out
(scripts/make-room-noise.sh resamples with sox first).
"""

import math
import struct
import sys
import wave

FRAME_MS = 10
ABOVE_P10_DB = 4.0
MIN_RUN_MS = 150
EDGE_MS = 40
FADE_MS = 10
# A gap in the source (a cut between its recordings), not a room.
DIGITAL_SILENCE_DB = -90.0


def read(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise SystemExit(f"{path}: 16-bit PCM mono only")
        rate = w.getframerate()
        raw = w.readframes(w.getnframes())
    return [v / 32768 for v in struct.unpack(f"<{len(raw) // 2}h", raw)], rate


def room(x, rate):
    f = rate * FRAME_MS // 1000
    levels = [
        10 * math.log10(max(1e-12, sum(v * v for v in x[i : i + f]) / f))
        for i in range(0, len(x) - f + 1, f)
    ]
    p10 = sorted(levels)[len(levels) // 10]
    quiet = [DIGITAL_SILENCE_DB < d < p10 + ABOVE_P10_DB for d in levels] + [False]
    out, start = [], None
    for i, q in enumerate(quiet):
        if q and start is None:
            start = i
        elif not q and start is not None:
            if (i - start) * FRAME_MS >= MIN_RUN_MS:
                edge = EDGE_MS // FRAME_MS
                out.append(x[(start + edge) * f : (i - edge) * f])
            start = None
    return out


def join(parts, rate):
    fade = rate * FADE_MS // 1000
    y = []
    for p in parts:
        if not y:
            y = list(p)
            continue
        for k in range(fade):
            a = k / fade
            y[-fade + k] = y[-fade + k] * (1 - a) + p[k] * a
        y.extend(p[fade:])
    return y


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    parts = []
    for path in sys.argv[2:]:
        x, rate = read(path)
        if rate != 16000:
            raise SystemExit(f"{path}: {rate} Hz, 16 kHz only")
        parts += room(x, rate)
    y = join(parts, 16000)
    with wave.open(sys.argv[1], "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(
            struct.pack(f"<{len(y)}h", *(max(-32768, min(32767, round(v * 32768))) for v in y))
        )
    print(f"{sys.argv[1]}: {len(parts)} stretches, {len(y) / 16000:.2f} s")


if __name__ == "__main__":
    main()
