#!/usr/bin/env python3
"""Reference values for voxlat's Smart Turn front end and probability, from upstream's own code.

voxlat computes Smart Turn v3's input features in Rust (crates/voxlat-vad/src/turn/features.rs).
This script computes the same thing the way Pipecat does, with Hugging Face's
`WhisperFeatureExtractor(chunk_length=8)` and `do_normalize=True`, and runs the model on
Python's ONNX Runtime, so the Rust code is checked against a different implementation:

  pip install numpy transformers onnxruntime
  python3 scripts/smart-turn-reference.py MODEL.onnx JFK.wav > crates/voxlat-vad/tests/fixtures/smart-turn.json

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


def main():
    model, jfk = sys.argv[1], sys.argv[2]
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
            "probability": p,
            "max": float(flat.max()),
            "mean": float(flat.mean(dtype=np.float64)),
            "sampled": [round(float(v), 7) for v in flat[::STRIDE]],
        })
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
