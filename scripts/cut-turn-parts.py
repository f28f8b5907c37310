#!/usr/bin/env python3
"""Cut the turn corpus's turns into the parts voxlat decodes after a pause, as WAV files.

When the user speaks past a provisional end, voxlat decodes only the audio after that pause
and joins it to the words before (`crates/voxlat-pipeline/src/asr_prefix.rs`). This script
makes an approximation of those parts from the corpus's pause truth, so that Whisper's
behaviour on them can be measured with `voxlat transcribe --fallback off` alone, without the
pipeline's timing:

- a part starts 150 ms into every labelled pause of at least 200 ms: the transcription
  before it covered the speech and the 150 ms of silence the endpointer keeps after it
  (`tail_ms`);
- it ends 150 ms into the next such pause, or 150 ms after the turn's true end for the last
  part (the commit's audio is trimmed the same way);
- `--context MS` starts each part that much earlier, with the words before the pause.

Usage: cut-turn-parts.py [--context MS] OUT_DIR SCENARIO.toml...
Writes OUT_DIR/<scenario file>-<turn id>-<start ms>.wav, 16-bit mono at the source's rate.
"""

import argparse
import os
import sys
import tomllib
import wave

INTO_PAUSE_MS = 150
MIN_PAUSE_MS = 200


def parts(turn):
    pauses = [p for p in turn.get("pauses_ms", []) if p[1] - p[0] >= MIN_PAUSE_MS]
    for i, (start, _) in enumerate(pauses):
        end = pauses[i + 1][0] if i + 1 < len(pauses) else turn["speech_end_ms"]
        yield start + INTO_PAUSE_MS, end + INTO_PAUSE_MS


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", type=int, default=0, metavar="MS")
    ap.add_argument("out")
    ap.add_argument("scenarios", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    written = 0
    for path in args.scenarios:
        with open(path, "rb") as f:
            scenario = tomllib.load(f)
        stem = os.path.splitext(os.path.basename(path))[0]
        for turn in scenario.get("turn", []):
            wav = os.path.join(os.path.dirname(path), turn["wav"])
            with wave.open(wav) as w:
                rate, width = w.getframerate(), w.getsampwidth()
                if w.getnchannels() != 1:
                    sys.exit(f"{wav}: {w.getnchannels()} channels; the corpus is mono")
                data = w.readframes(w.getnframes())
            length_ms = len(data) // width * 1000 // rate
            for start, end in parts(turn):
                first = max(0, start - args.context)
                end = min(end, length_ms)
                out = os.path.join(args.out, f"{stem}-{turn['id']}-{start}.wav")
                with wave.open(out, "wb") as o:
                    o.setnchannels(1)
                    o.setsampwidth(width)
                    o.setframerate(rate)
                    o.writeframes(data[first * rate // 1000 * width : end * rate // 1000 * width])
                written += 1
    print(f"{written} parts in {args.out}")


if __name__ == "__main__":
    main()
