#!/usr/bin/env python3
"""Reference speech bounds for scenario WAVs, by a method that shares no code with voxlat's.

voxlat's endpointer refines its speech end on a speech-band energy track
(`crates/voxlat-vad/src/energy.rs`): two cascaded 2nd-order Butterworth high-passes at
150 Hz, 5 ms blocks, a block is speech within 50 dB of the turn's peak and at least 6 dB above
the noise floor, a block counts only with its predecessor, and blocks that lose more than 10 dB
to the filter are thumps. `voxlat annotate` uses 10 ms frames within 40 dB of the loudest.
Annotating scenarios with either would grade the endpointer against itself. This script is
plain Python with no voxlat code, and its rule differs in the filter, the floor margin and the
click rule:

1. high-pass the signal (one 2nd-order Butterworth at 120 Hz), so hum, rumble and microphone
   thumps do not count as speech;
2. 5 ms frames, energy in dB;
3. a frame is speech when it is above BOTH the noise floor + 15 dB (the floor is the 2nd
   percentile of frame energies, or -90 dBFS for digital silence) and the loudest frame
   - 50 dB;
4. the end of speech is the end of the last speech frame; runs of speech shorter than 15 ms
   after 100 ms of non-speech are ignored as clicks.

The two energy rules are alike in kind (both high-pass, both use 5 ms frames and the same
50 dB below the peak), so agreement between them is weak evidence on its own: what makes the
reference independent is that each value is then checked by eye on a spectrogram (`sox FILE -n spectrogram -o FILE.png`),
and scenarios/README.md records the check per clip. Usage: annotate-reference.py WAV...
Prints `file start_ms end_ms` per file.

With `--pauses` (annotate-reference.py --pauses WAV...) it also prints the pauses inside the
speech, for `pauses_ms`: every run of non-speech frames of at least 100 ms (GAP_MS) between the
first and the last speech frame, with the same frames, thresholds and click rule (a dropped
click counts as non-speech). The line becomes `file start_ms end_ms [[a, b], [c, d]]`, `[]`
when there is none. scenarios/turns/ was annotated this way (scripts/make-turn-corpus.sh).
"""

import math
import sys
import wave

FRAME_MS = 5
HIGH_PASS_HZ = 120.0
ABOVE_FLOOR_DB = 15.0
BELOW_PEAK_DB = 50.0
MIN_BURST_MS = 15
GAP_MS = 100


def read_mono(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            raise SystemExit(f"{path}: only 16-bit PCM WAVs are supported")
        rate, channels = w.getframerate(), w.getnchannels()
        raw = w.readframes(w.getnframes())
    ints = [int.from_bytes(raw[i : i + 2], "little", signed=True) for i in range(0, len(raw), 2)]
    mono = [sum(ints[i : i + channels]) / channels / 32768.0 for i in range(0, len(ints), channels)]
    return mono, rate


def high_pass(x, rate, cutoff):
    # RBJ audio-EQ-cookbook biquad, Q = 1/sqrt(2) (Butterworth).
    w0 = 2 * math.pi * cutoff / rate
    alpha = math.sin(w0) / (2 * (1 / math.sqrt(2)))
    cos = math.cos(w0)
    b0, b1, b2 = (1 + cos) / 2, -(1 + cos), (1 + cos) / 2
    a0, a1, a2 = 1 + alpha, -2 * cos, 1 - alpha
    b0, b1, b2, a1, a2 = b0 / a0, b1 / a0, b2 / a0, a1 / a0, a2 / a0
    y, x1, x2, y1, y2 = [], 0.0, 0.0, 0.0, 0.0
    for v in x:
        out = b0 * v + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2
        x2, x1, y2, y1 = x1, v, y1, out
        y.append(out)
    return y


def bounds(path):
    """(start_ms, end_ms) of the speech, or None when the file holds none."""
    a = analyse(path)
    return a and a[:2]


def analyse(path):
    """(start_ms, end_ms, pauses) of the speech, or None; pauses is a list of [start, end] ms,
    each a run of non-speech of at least GAP_MS between two kept runs of speech."""
    x, rate = read_mono(path)
    y = high_pass(x, rate, HIGH_PASS_HZ)
    n = max(1, rate * FRAME_MS // 1000)
    db = []
    for i in range(0, len(y), n):
        f = y[i : i + n]
        e = sum(v * v for v in f) / len(f)
        db.append(10 * math.log10(max(e, 1e-12)))
    ordered = sorted(db)
    floor = max(ordered[len(ordered) // 50], -90.0)
    peak = ordered[-1]
    threshold = max(floor + ABOVE_FLOOR_DB, peak - BELOW_PEAK_DB)
    speech = [d >= threshold for d in db]
    # Drop short bursts separated from the rest by a gap: clicks, not speech.
    runs, i = [], 0
    while i < len(speech):
        if speech[i]:
            j = i
            while j < len(speech) and speech[j]:
                j += 1
            runs.append((i, j))
            i = j
        else:
            i += 1
    kept = []
    for k, (a, b) in enumerate(runs):
        short = (b - a) * FRAME_MS < MIN_BURST_MS
        gap_before = a - runs[k - 1][1] if k else a
        gap_after = runs[k + 1][0] - b if k + 1 < len(runs) else len(speech) - b
        isolated = min(gap_before, gap_after) * FRAME_MS >= GAP_MS
        if not (short and isolated):
            kept.append((a, b))
    if not kept:
        return None
    ms = lambda frames: frames * n * 1000 // rate
    pauses = [
        [ms(kept[k - 1][1]), ms(kept[k][0])]
        for k in range(1, len(kept))
        if (kept[k][0] - kept[k - 1][1]) * FRAME_MS >= GAP_MS
    ]
    return ms(kept[0][0]), min(ms(kept[-1][1]), len(x) * 1000 // rate), pauses


def main():
    args = sys.argv[1:]
    with_pauses = "--pauses" in args
    paths = [a for a in args if a != "--pauses"]
    if not paths:
        raise SystemExit(__doc__)
    for path in paths:
        a = analyse(path)
        if not a:
            print(path, "-", "-", *(["[]"] if with_pauses else []))
        elif with_pauses:
            print(path, a[0], a[1], "[" + ", ".join(f"[{p}, {q}]" for p, q in a[2]) + "]")
        else:
            print(path, a[0], a[1])


if __name__ == "__main__":
    main()
