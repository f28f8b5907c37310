#!/usr/bin/env python3
"""Would splitting the Piper voice into a frontend and a decoder bring a short first chunk's
audio sooner? (issue 36 item 3; docs/benchmarks.md, 2026-12-05, has the figures.)

The PyPI package streaming-vits (MIT) cuts a Piper .onnx in two with the `onnx` package: the
frontend (text encoder, durations, prior sampling) gives z_p and the frame mask; the decoder
(reverse flow and HiFi-GAN, 256 samples a frame) turns any window of them into audio, with
margins of context that are decoded and thrown away. This times, on ONNX Runtime as voxlat
runs Piper:
  a. the whole voice (voxlat's first audio today: the whole chunk's waveform);
  b. the frontend, and the decoder on a first window of 16 or 32 frames plus its right margin;
  c. the decoder on all of z_p (the split's total work);
and checks that windows joined equal one decode of the same z_p.

  python3 -m venv /tmp/pv && /tmp/pv/bin/pip install streaming-vits==0.4.2 onnx onnxruntime \
      piper-phonemize numpy
  /tmp/pv/bin/python scripts/bench-piper-split.py [OUT_DIR] [calibrate] [bench] [check]

OUT_DIR defaults to results/piper-split; the split graphs are written there. Phoneme ids are
piper-phonemize's (espeak-ng, as Piper makes them), checked against its phoneme_ids_espeak.
Takes about 3 minutes on 2 cores; run it with nothing else busy.
"""
import json
import os
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import piper_phonemize as pp
from streaming_vits import calibrate as svcal
from streaming_vits import graph as svgraph
from streaming_vits.engine import StreamingTTS
from streaming_vits.profile import Profile

MODELS = os.environ.get("VOXLAT_MODELS_DIR", os.path.expanduser("~/.cache/voxlat/models"))
MODEL = os.path.join(MODELS, "piper-en_US-joe-medium/en_US-joe-medium.onnx")
CONFIG = MODEL + ".json"
ARGS = [a for a in sys.argv[1:] if a not in ("calibrate", "bench", "check")]
OUT = ARGS[0] if ARGS else "results/piper-split"
FRONT = os.path.join(OUT, "en_US-joe-medium.frontend.onnx")
DEC = os.path.join(OUT, "en_US-joe-medium.decoder.onnx")
HOP, SR = 256, 22050
DEFAULT_RIGHT = Profile().right          # 40
DEFAULT_LEFT = Profile().left            # 48
WINDOWS = (16, 32)
N_WARM, N_RUNS = 1, 15
# (intra-op threads, spin-wait). Two sessions run back to back; with 2 threads on 2 cores the
# idle one's spinning pool takes the cores from the busy one, so spinning off is tried too.
CONFIGS = ((1, "1"), (2, "1"), (2, "0"))

TEXTS = [
    "Okay, that is noted.",
    "I'm ready to assist you with your",
    "Sure, I can set a timer for ten minutes.",
    "The meeting has been moved to Thursday afternoon at three o'clock, so please "
    "update your calendar and let the rest of the team know about the change.",
]

CFG = json.load(open(CONFIG))
IDMAP = CFG["phoneme_id_map"]
INF = CFG["inference"]
SCALES = np.array([INF["noise_scale"], INF["length_scale"], INF["noise_w"]], np.float32)


def phoneme_ids(text):
    sents = pp.phonemize_espeak(text, CFG["espeak"]["voice"])
    phonemes = [p for s in sents for p in s]
    ids = list(IDMAP["^"]) + list(IDMAP["_"])
    for p in phonemes:
        if p not in IDMAP:
            continue
        ids += IDMAP[p] + IDMAP["_"]
    ids += IDMAP["$"]
    ref = [i for s in sents for i in pp.phoneme_ids_espeak(s)] if len(sents) == 1 else None
    if ref is not None:
        assert ref == ids, (ref, ids)
    return np.array([ids], np.int64), "".join(phonemes)


def feed(ids, scales=SCALES):
    return {"input": ids, "input_lengths": np.array([ids.shape[1]], np.int64), "scales": scales}


def opts(threads, spin="1"):
    o = ort.SessionOptions()
    o.add_session_config_entry("session.intra_op.allow_spinning", spin)
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    o.log_severity_level = 3
    return o


def sess(path_or_bytes, threads, spin="1"):
    return ort.InferenceSession(path_or_bytes, opts(threads, spin), providers=["CPUExecutionProvider"])


def seeded_bytes(path, seed):
    """Same seeding scheme as streaming_vits.graph.seeded_frontend_session."""
    m = onnx.load(path)
    n = 0
    for node in m.graph.node:
        if node.op_type == "RandomNormalLike":
            node.attribute.extend([onnx.helper.make_attribute("seed", float(seed + n))])
            n += 1
    assert n, path
    return m.SerializeToString()


def timeit(fn):
    for _ in range(N_WARM):
        fn()
    ts = []
    for _ in range(N_RUNS):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    p90 = float(np.percentile(ts, 90))
    return {"median": statistics.median(ts), "p90": p90, "min": ts[0]}


class Shim(StreamingTTS):
    """The package's windowed decoding alone: no phonemizer, no split of its own."""

    def __init__(self, dec, left, right):
        self.dec = dec
        self.hop, self.sample_rate = HOP, SR
        self.profile = Profile(left=left, right=right)
        self._in = [ZP, MASK]


def windowed(tts, z_p, mask, schedule):
    """engine.stream()'s windowed loop, without the frontend."""
    T = z_p.shape[2]
    parts, a, i = [], 0, 0
    while a < T:
        b = min(a + schedule[min(i, len(schedule) - 1)], T)
        parts.append(tts.decode_chunk(z_p, mask, None, a, b))
        a, i = b, i + 1
    return np.concatenate(parts)


def do_calibrate():
    """streaming_vits.calibrate.measure_margins on CALIB_TEXT, seeded frontend (seed 1234)."""
    t0 = time.time()
    ids, _ = phoneme_ids(svcal.CALIB_TEXT)
    fe = sess(seeded_bytes(FRONT, svcal.CALIB_SEED), 2)
    z_p, mask = fe.run(None, feed(ids))
    tts = Shim(sess(DEC, 2), DEFAULT_LEFT, DEFAULT_RIGHT)
    left, right, rows = svcal.measure_margins(tts, z_p, mask, None)
    res = {"left": left, "right": right, "rows": rows, "frames": int(z_p.shape[2]),
           "ids": int(ids.shape[1]), "seconds": time.time() - t0}
    print(res)
    json.dump(res, open(f"{OUT}/margins.json", "w"), indent=1)
    return res


def load_margins():
    p = f"{OUT}/margins.json"
    return json.load(open(p)) if os.path.exists(p) else None


def do_bench():
    cal = load_margins()
    rights = [("R40", DEFAULT_RIGHT)] + ([("Rcal%d" % cal["right"], cal["right"])] if cal else [])
    rows = []
    for threads, spin in CONFIGS:
        full, fe, dec = sess(MODEL, threads, spin), sess(FRONT, threads, spin), sess(DEC, threads, spin)
        for text in TEXTS:
            ids, phon = phoneme_ids(text)
            f = feed(ids)
            r = {"text": text, "chars": len(text), "ids": int(ids.shape[1]), "threads": threads if spin == "1" else f"{threads} nospin"}
            # a. full model (voxlat's first audio today: whole waveform)
            lens = []
            r["full"] = timeit(lambda: lens.append(full.run(None, f)[0].size))
            r["full_audio_s_median"] = statistics.median(lens) / SR
            # b. frontend
            r["frontend"] = timeit(lambda: fe.run(None, f))
            # one fixed z_p for the decoder timings
            z_p, mask = fe.run(None, f)
            T = int(z_p.shape[2])
            r["frames"] = T
            r["audio_s"] = T * HOP / SR
            for rn, right in rights:
                for n in WINDOWS:
                    hi = min(T, n + right)
                    zf, mf = z_p[:, :, :hi].copy(), mask[:, :, :hi].copy()
                    k = f"win{n}_{rn}"
                    r[k] = timeit(lambda: dec.run(None, {ZP: zf, MASK: mf}))
                    r[k]["frames_decoded"] = hi

                    # end-to-end split first audio, measured directly (frontend + slice + decode)
                    def e2e():
                        z, m = fe.run(None, f)
                        h = min(z.shape[2], n + right)
                        y = dec.run(None, {ZP: z[:, :, :h], MASK: m[:, :, :h]})[0].reshape(-1)
                        return y[: min(n, z.shape[2]) * HOP]
                    r[f"e2e{n}_{rn}"] = timeit(e2e)
            # c. decoder on the whole z_p
            r["dec_whole"] = timeit(lambda: dec.run(None, {ZP: z_p, MASK: mask}))
            rows.append(r)
            print(json.dumps({k: (v["median"] if isinstance(v, dict) else v) for k, v in r.items()}),
                  flush=True)
        del full, fe, dec
    json.dump(rows, open(f"{OUT}/bench.json", "w"), indent=1)
    table(rows, rights)


def table(rows, rights):
    lines = []
    for rn, _ in rights:
        lines.append(f"\nright margin {rn}  (ms, median [p90]; split = frontend + first-window decode)")
        lines.append("| text | chars | ids | audio s | thr | full | frontend | win16 | win32 | "
                     "split16 | split32 | e2e16 | e2e32 | full/e2e16 | full/e2e32 | dec whole |")
        lines.append("|" + "---|" * 16)
        for r in rows:
            fm, fr = r["full"]["median"], r["frontend"]["median"]
            w16, w32 = r[f"win16_{rn}"]["median"], r[f"win32_{rn}"]["median"]
            s16, s32 = fr + w16, fr + w32
            pm = lambda d: f"{d['median']:.1f} [{d['p90']:.1f}]"
            lines.append(
                f"| {r['text'][:24]} | {r['chars']} | {r['ids']} | {r['audio_s']:.2f} | {r['threads']} | "
                f"{pm(r['full'])} | {pm(r['frontend'])} | {pm(r[f'win16_{rn}'])} | {pm(r[f'win32_{rn}'])} | "
                f"{s16:.1f} | {s32:.1f} | {pm(r[f'e2e16_{rn}'])} | {pm(r[f'e2e32_{rn}'])} | "
                f"{fm / r[f'e2e16_{rn}']['median']:.2f} | {fm / r[f'e2e32_{rn}']['median']:.2f} | {pm(r['dec_whole'])} |")
    s = "\n".join(lines)
    print(s)
    open(f"{OUT}/table.md", "w").write(s + "\n")


def do_check():
    cal = load_margins()
    out = {}
    dec = sess(DEC, 2)
    margins = [("L48/R40", DEFAULT_LEFT, DEFAULT_RIGHT)]
    if cal:
        margins.append((f"L{cal['left']}/R{cal['right']}", cal["left"], cal["right"]))
    for text in TEXTS:
        ids, phon = phoneme_ids(text)
        res = {"phonemes": phon, "ids": ids[0].tolist()}
        # seeded frontend -> fixed z_p
        z_p, mask = sess(seeded_bytes(FRONT, 1234), 2).run(None, feed(ids))
        ref = dec.run(None, {ZP: z_p, MASK: mask})[0].reshape(-1)
        rms = float(np.sqrt(np.mean(ref ** 2)))
        res["frames"] = int(z_p.shape[2])
        for name, l, rr in margins:
            tts = Shim(dec, l, rr)
            for sched_name, sched in (("16,32,64,128,256", [16, 32, 64, 128, 256]),
                                      ("uniform16", [16]), ("uniform32", [32])):
                got = windowed(tts, z_p, mask, sched)
                assert len(got) == len(ref), (len(got), len(ref))
                d = got - ref
                res[f"win {name} sched {sched_name}"] = {
                    "rel_rms": float(np.sqrt(np.mean(d ** 2)) / rms),
                    "max_abs": float(np.abs(d).max()), "ref_peak": float(np.abs(ref).max())}
        # full model vs frontend + whole decoder, same seeds on both RandomNormalLike nodes
        full_seeded = sess(seeded_bytes(MODEL, 1234), 2).run(None, feed(ids))[0].reshape(-1)
        res["seeded full vs split: len"] = [len(full_seeded), len(ref)]
        if len(full_seeded) == len(ref):
            d = full_seeded - ref
            res["seeded full vs split: rel_rms"] = float(np.sqrt(np.mean(d ** 2)) / rms)
            res["seeded full vs split: max_abs"] = float(np.abs(d).max())
        # noise-free (noise_scale = noise_w = 0): deterministic on both paths
        sc0 = np.array([0.0, INF["length_scale"], 0.0], np.float32)
        f0 = sess(MODEL, 2).run(None, feed(ids, sc0))[0].reshape(-1)
        z0, m0 = sess(FRONT, 2).run(None, feed(ids, sc0))
        s0 = dec.run(None, {ZP: z0, MASK: m0})[0].reshape(-1)
        res["noise0 full vs split: len"] = [len(f0), len(s0)]
        if len(f0) == len(s0):
            res["noise0 full vs split: max_abs"] = float(np.abs(f0 - s0).max())
        # unseeded, default scales: lengths of several independent runs (duration noise)
        fs, fe_ = sess(MODEL, 2), sess(FRONT, 2)
        res["unseeded full lens"] = [int(fs.run(None, feed(ids))[0].size) for _ in range(5)]
        res["unseeded split lens"] = [int(fe_.run(None, feed(ids))[0].shape[2] * HOP) for _ in range(5)]
        out[text] = res
        print(text, json.dumps({k: v for k, v in res.items() if k != "ids"}, indent=1), flush=True)
    json.dump(out, open(f"{OUT}/check.json", "w"), indent=1)


if __name__ == "__main__":
    if not os.path.exists(MODEL):
        sys.exit(f"{MODEL}: no Piper voice; run scripts/setup.sh (or voxlat models fetch --all)")
    os.makedirs(OUT, exist_ok=True)
    if not (os.path.exists(FRONT) and os.path.exists(DEC)):
        svgraph.split(MODEL, OUT)
    seam = json.load(open(os.path.join(OUT, "en_US-joe-medium.split.json")))["seam"]
    ZP, MASK = seam["z_p"], seam["mask"]
    steps = [a for a in sys.argv[1:] if a in ("calibrate", "bench", "check")]
    steps = steps or ["calibrate", "bench", "check"]
    print("onnxruntime", ort.__version__, "| piper_phonemize", getattr(pp, "__version__", "?"))
    for t in TEXTS:
        print(len(t), repr(t), phoneme_ids(t)[0].shape[1], "ids")
    for s in steps:
        {"calibrate": do_calibrate, "bench": do_bench, "check": do_check}[s]()
