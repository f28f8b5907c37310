#!/usr/bin/env python3
"""Reference values for voxlat's Smart Turn front end and probability, from upstream's own code.

voxlat computes Smart Turn v3's input features in Rust (crates/voxlat-vad/src/turn/features.rs).
This script computes the same thing the way Pipecat does, with Hugging Face's
`WhisperFeatureExtractor(chunk_length=8)` and `do_normalize=True`, and runs the model on
Python's ONNX Runtime, so the Rust code is checked against a different implementation:

  pip install numpy transformers onnxruntime
  f=crates/voxlat-vad/tests/fixtures/smart-turn.json
  python3 scripts/smart-turn-reference.py MODEL.onnx JFK.wav $f > $f.new && mv $f.new $f

The model is int8-quantised, and ONNX Runtime's int8 kernels give different probabilities on
CPUs with and without VNNI: without it, x86's 8-bit dot products saturate their 16-bit
intermediates, with it they do not (0.597 against 0.942 on one clip). So the probability is
kept per CPU family ("vnni", "no-vnni", or the machine's architecture elsewhere), and a run
fills in its own family's values, keeping the others from the existing fixture (third argument).
The features do not depend on the CPU.

Each clip is a sample range of a 16 kHz mono 16-bit WAV (read as int16 / 32768), so no
resampler stands between the two implementations. The audio is cut to its last 8 s or
zero-padded at the front to 8 s, as Pipecat's analyzer does. For each clip the fixture keeps
every STRIDE-th value of the [80, 800] feature matrix (mel-major), the matrix's max and mean,
and the model's probability.
"""

import json
import sys
import wave

import numpy as np
import onnxruntime as ort
from transformers import WhisperFeatureExtractor

RATE = 16_000
SECONDS = 8
STRIDE = 17

# (name, wav path relative to the repository, or "jfk" for the test sample; first sample;
# end sample or None for all). The cut "remind" clip ends mid-sentence (an incomplete turn);
# jfk is 11 s, longer than the model's window.
CLIPS = [
    ("weather", "scenarios/audio/synthetic-weather.wav", 0, None),
    ("remind-cut", "scenarios/audio/synthetic-remind.wav", 0, 19_200),
    ("joke", "scenarios/audio/synthetic-joke.wav", 0, None),
    ("jfk", "jfk", 0, None),
]


def read(path):
    with wave.open(path) as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768.0


def cpu_family():
    """The int8 kernel family ONNX Runtime picks on this CPU (see the module docstring)."""
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        return platform.machine()
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    return "vnni" if flags & {"avx512_vnni", "avx_vnni", "amx_int8"} else "no-vnni"


def main():
    model, jfk = sys.argv[1], sys.argv[2]
    family = cpu_family()
    previous = {}
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as f:
            previous = {c["name"]: c.get("probabilities", {}) for c in json.load(f)["clips"]}
    fe = WhisperFeatureExtractor(chunk_length=SECONDS)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    session = ort.InferenceSession(model, sess_options=so)
    out = {"generator": "scripts/smart-turn-reference.py", "stride": STRIDE, "clips": []}
    for name, path, start, end in CLIPS:
        x = read(jfk if path == "jfk" else path)[start:end]
        n = SECONDS * RATE
        window = x[-n:] if len(x) > n else np.pad(x, (n - len(x), 0))
        feats = fe(window, sampling_rate=RATE, return_tensors="np", do_normalize=True).input_features
        feats = feats.astype(np.float32)
        assert feats.shape == (1, 80, 800), feats.shape
        p = float(session.run(None, {"input_features": feats})[0].reshape(-1)[0])
        flat = feats.reshape(-1)
        out["clips"].append({
            "name": name,
            "wav": path,
            "start": start,
            "end": end,
            "probabilities": {**previous.get(name, {}), family: p},
            "max": float(flat.max()),
            "mean": float(flat.mean(dtype=np.float64)),
            "sampled": [round(float(v), 7) for v in flat[::STRIDE]],
        })
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
