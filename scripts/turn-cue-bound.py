#!/usr/bin/env python3
"""How fast can any wait rule built on `cues`' inputs be, at 5 % cut-offs?

`voxlat eval-turns --json` records every stop it judged: the speculative transcript's tail,
Smart Turn's P(complete), when the silence began and whether the speaker went on. This script
fits the best rule it can over those stops *on the same turns it then scores*: a wait for
each (tail, Smart Turn bucket) pair, optionally never below the speaker's own pauses so far.
A rule fitted in-sample is faster than any rule can be on voices it has not heard, so its
figure is a bound on what these cues can give, not a result.

Usage:
    voxlat eval-turns scenarios/turns/test --json test.json
    python3 scripts/turn-cue-bound.py test.json

First it replays `cues` itself from the stops and checks that this script's replay gives the
same cut-off rates and latencies as eval-turns' own `cues` rows (a second implementation of
the same commit rule), so the bound is computed by a replay that agrees with the product's.
Only the Python standard library (3.11+, for tomllib).
"""

import argparse
import collections
import itertools
import json
import math
import random
import sys
import tomllib

TAIL_FACTOR = {"question": 0.5, "closed": 1.0, "bare": 1.0, "number": 1.0, "open": 3.0}
MAX_WAIT_MS = 3000.0
WAITS = [200, 250, 300, 350, 400, 450, 500, 600, 700, 800, 1000, 1200, 1500, 2000, 2500, 3000]
BUCKETS = [0.1, 0.5, 0.9]  # Smart Turn's P(complete): under 0.1, 0.1-0.5, 0.5-0.9, 0.9 and up


def load(path):
    doc = json.load(open(path))
    ends = {}
    for f in doc["scenarios"]:
        sc = tomllib.load(open(f, "rb"))
        for t in sc["turn"]:
            if "speech_end_ms" in t:
                ends[(sc["name"], t["id"])] = float(t["speech_end_ms"])
    turns = collections.OrderedDict()
    for s in doc["stops"]:
        turns.setdefault((s["scenario"], s["turn"]), []).append(s)
    return doc, ends, turns


def quantile(xs, q):
    """The nearest-rank quantile, as voxlat's statistics take it."""
    xs = sorted(xs)
    rank = math.ceil(q * len(xs))
    return xs[min(max(rank, 1), len(xs)) - 1]


def replay(turns, ends, wait_of, floor_margin=None):
    """Cut-off count, turns and mean latency of a rule. `wait_of(stop)` gives the wait (ms)
    and whether the speaker's floor applies to it."""
    cut, lat, speaker, pauses = 0, [], None, []
    for key, stops in turns.items():
        if key[0] != speaker:
            speaker, pauses = key[0], []
        commit = None
        for s in stops:
            wait, floored = wait_of(s)
            if floor_margin is not None and floored and len(pauses) >= 3:
                wait = max(wait, quantile(pauses, 0.9) + floor_margin)
            wait = min(wait, MAX_WAIT_MS)
            at = max(s["at_ms"], s["quiet_from_ms"] + wait)
            r = s["resumed_ms"]
            if r is None or at < r:
                commit = at
                break
            pauses.append(r - s["quiet_from_ms"])
        if commit is None:
            continue
        if commit < ends[key]:
            cut += 1
        else:
            lat.append(commit - ends[key])
    return cut, len(turns), (sum(lat) / len(lat) if lat else None)


def check_cues(doc, ends, turns):
    """Replays `cues` at each of its settings and compares with eval-turns' own row. Smart
    Turn's vote does not scale the wait in `cues` (factor 1.0); a question skips the floor
    unless Smart Turn scores it under 0.5."""
    row = next((p for p in doc["policies"] if p["name"] == "cues"), None)
    if row is None:
        return "no cues row in the JSON; run eval-turns with --policy cues to check the replay"
    worst = 0.0
    for pt in row["points"]:
        base = pt["setting"]

        def wait_of(s):
            unsure = s["p_complete"] is not None and s["p_complete"] < 0.5
            asked = s["tail"] == "question" and not unsure
            return base * TAIL_FACTOR[s["tail"]], not asked

        cut, n, mean = replay(turns, ends, wait_of, 100.0)
        if abs(cut / n - pt["cutoff"]) > 1e-9:
            sys.exit(
                f"cues at {base} ms: this replay cuts off {cut}/{n}, eval-turns "
                f"{pt['cutoff']:.3f}; the replay does not match the product's rule"
            )
        if mean is not None and pt["latency_mean_ms"] is not None:
            worst = max(worst, abs(mean - pt["latency_mean_ms"]))
    return f"cues replayed: the same cut-off rate at all {len(row['points'])} settings, mean latency within {worst:.1f} ms"


def cell(s):
    p = s["p_complete"] if s["p_complete"] is not None else 0.0
    return (s["tail"], sum(p >= b for b in BUCKETS))


def fit(turns, ends, rate, seeds):
    """Coordinate descent over the wait table, from a 3 s start and from random starts."""
    cells = sorted({cell(s) for stops in turns.values() for s in stops})
    allowed = int(rate * len(turns) + 1e-9)
    best = None
    for seed, floor in itertools.product(range(seeds), [None, 0.0, 100.0]):
        rng = random.Random(seed)
        table = {c: (3000 if seed == 0 else rng.choice(WAITS)) for c in cells}

        def score(t):
            return replay(turns, ends, lambda s: (t[cell(s)], True), floor)

        for _ in range(20):
            changed = False
            for c in rng.sample(cells, len(cells)):
                cut0, _, l0 = score(table)
                for w in WAITS:
                    old = table[c]
                    table[c] = w
                    cut, _, l = score(table)
                    better = cut <= allowed and l is not None and (
                        cut0 > allowed or l0 is None or l < l0 - 1e-9
                    )
                    if better:
                        changed, cut0, l0 = True, cut, l
                    else:
                        table[c] = old
            if not changed:
                break
        cut, _, l = score(table)
        if cut <= allowed and l is not None and (best is None or l < best[1]):
            best = (cut, l, dict(table), floor)
    return allowed, best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="voxlat eval-turns --json output")
    ap.add_argument("--rate", type=float, default=0.05, help="cut-off rate (default 0.05)")
    ap.add_argument("--seeds", type=int, default=20, help="random starts (default 20)")
    a = ap.parse_args()
    doc, ends, turns = load(a.json)
    if not turns:
        sys.exit(f"{a.json} has no stops: run eval-turns with the cues policies")
    print(check_cues(doc, ends, turns))
    allowed, best = fit(turns, ends, a.rate, a.seeds)
    if best is None:
        print(f"no rule found that cuts off at most {allowed} of {len(turns)} turns")
        return
    cut, mean, table, floor = best
    floor_txt = "none" if floor is None else f"90th percentile of their pauses + {floor:.0f} ms"
    print(
        f"best wait table fitted on these {len(turns)} turns themselves, at most {allowed} cut off: "
        f"mean latency {mean:.0f} ms ({cut} cut off); speaker floor: {floor_txt}"
    )
    for (tail, bucket), w in sorted(table.items()):
        lo = ([0.0] + BUCKETS)[bucket]
        print(f"  {tail:9} P(complete) >= {lo:<4} wait {w} ms")


if __name__ == "__main__":
    main()
