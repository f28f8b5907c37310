#!/usr/bin/env python3
"""Does the LLM's own P(end of message) help the `cues` end-of-turn rule?

Issue 37 asks for it as an optional cue, kept only if it pays. This probe reads the stops
that `voxlat eval-turns --json` recorded (each stop's speculative transcript, Smart Turn
score and whether the speaker went on), asks an OpenAI-compatible llama.cpp server for the
probability that the user's message ends right after that transcript (the chat template's
end-of-message token as the next token), and replays the stops with and without that vote.

Usage:
    voxlat eval-turns scenarios/turns --json et.json
    llama-server -m SmolLM2-135M-Instruct.Q4_1.gguf --port 8098 -t 2
    python3 scripts/probe-llm-eot.py et.json --url http://127.0.0.1:8098

It needs llama.cpp's own `llama-server` (its `/completion` returns `n_probs` log-probabilities;
voxlat's embedded server does not), and only the Python standard library.

The replay here is simpler than eval-turns' (a cut-off is a commit at a stop the speaker went
on from; latency runs from the endpointer's end of speech, not the labelled one), so compare
its rows with one another, not with eval-turns' tables. The vote's constants are chosen on the
tuning half (the Allison voice) and reported on the test half.
"""

import argparse
import itertools
import json
import math
import sys
import urllib.error
import urllib.request
from collections import OrderedDict

TUNING_SCENARIO = "turns-allison"
# The `cues` rule as crates/voxlat-pipeline/src/cues.rs has it.
TAIL_FACTOR = {"question": 0.5, "open": 3.0}
SPEAKER_MIN_PAUSES = 3
SPEAKER_QUANTILE = 0.9
SPEAKER_MARGIN_MS = 100.0
MAX_WAIT_MS = 3000.0
TEMPLATES = {
    # ChatML (SmolLM2, Qwen): the user's message, then the token that would close it.
    "chatml": ("<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{text}", "<|im_end|>"),
    "gemma": ("<start_of_turn>user\n{system}\n\n{text}", "<end_of_turn>"),
}
SYSTEM = "You are a helpful voice assistant. Answer in one short sentence."


def post(url, path, body):
    req = urllib.request.Request(
        url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def p_end(url, prompt, end_id):
    r = post(url, "/completion", {"prompt": prompt, "n_predict": 1, "n_probs": 400, "temperature": 0})
    top = r["completion_probabilities"][0]["top_logprobs"]
    # Not among the 400 likeliest: count it as 0; it is below 1/400 of the mass anyway.
    return sum(math.exp(t["logprob"]) for t in top if t["id"] == end_id)


def auc(scores, ends):
    pos = [s for s, e in zip(scores, ends) if e]
    neg = [s for s, e in zip(scores, ends) if not e]
    won = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return won / (len(pos) * len(neg))


def quantile(xs, q):
    xs = sorted(xs)
    r = q * (len(xs) - 1)
    lo = int(r)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (r - lo)


def turns(stops, tuning):
    g = OrderedDict()
    for s in stops:
        if (s["scenario"] == TUNING_SCENARIO) == tuning:
            g.setdefault((s["scenario"], s["turn"]), []).append(s)
    return list(g.values())


def replay(ts, base, vote):
    """Cut-off rate and mean latency of the cues rule at base wait `base`, with `vote`."""
    cut, lat, seen = 0, [], {}
    for stops in ts:
        end = stops[-1]["quiet_from_ms"]
        pauses = seen.setdefault(stops[0]["scenario"], [])
        done = False
        for s in stops:
            wait = base * TAIL_FACTOR.get(s["tail"], 1.0) * vote(s)
            asked = s["tail"] == "question"
            if not asked and len(pauses) >= SPEAKER_MIN_PAUSES:
                wait = max(wait, quantile(pauses, SPEAKER_QUANTILE) + SPEAKER_MARGIN_MS)
            at = max(s["at_ms"], s["quiet_from_ms"] + min(wait, MAX_WAIT_MS))
            went_on = s["resumed_ms"] is not None
            if not done and not (went_on and s["resumed_ms"] <= at):
                done = True
                if went_on:
                    cut += 1
                else:
                    lat.append(at - end)
            if went_on:
                pauses.append(s["resumed_ms"] - s["quiet_from_ms"])
    return cut / len(ts), (sum(lat) / len(lat) if lat else None)


def latency_at(ts, vote, rate):
    ok = []
    for base in range(50, 3001, 25):
        c, l = replay(ts, base, vote)
        if c <= rate + 1e-9 and l is not None:
            ok.append(l)
    return min(ok) if ok else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("eval_json", help="the --json file of `voxlat eval-turns`")
    ap.add_argument("--url", default="http://127.0.0.1:8098")
    ap.add_argument("--template", choices=TEMPLATES, default="chatml")
    args = ap.parse_args()
    try:
        stops = json.load(open(args.eval_json))["stops"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"{args.eval_json}: not an eval-turns --json file with stops ({e}); "
                 "run `voxlat eval-turns scenarios/turns --json FILE` first")
    prompt, end_token = TEMPLATES[args.template]
    try:
        end_ids = post(args.url, "/tokenize", {"content": end_token, "parse_special": True})["tokens"]
    except (urllib.error.URLError, OSError) as e:
        sys.exit(f"{args.url}: no llama-server answered ({e}); start one on the model to probe")
    if len(end_ids) != 1:
        sys.exit(f"{end_token!r} is not one token for this model: pick the model's --template")
    for s in stops:
        s["p_eot"] = p_end(args.url, prompt.format(system=SYSTEM, text=s["text"].strip()), end_ids[0])
    ends = [s["resumed_ms"] is None for s in stops]
    print(f"{len(stops)} stops, {sum(ends)} at a true end")
    print(f"AUC, end against pause: LLM P(end) {auc([s['p_eot'] for s in stops], ends):.3f}, "
          f"Smart Turn {auc([s['p_complete'] or 0.0 for s in stops], ends):.3f}")

    def vote(lo, hi, slow, fast):
        return lambda s: slow if s["p_eot"] < lo else fast if s["p_eot"] > hi else 1.0

    grid = list(itertools.product([0.05, 0.1, 0.2], [0.3, 0.5, 0.7], [1.5, 2.0], [0.5, 0.75]))
    tune, test = turns(stops, True), turns(stops, False)

    def score(v):
        a, b = latency_at(tune, v, 0.05), latency_at(tune, v, 0.10)
        return (a if a is not None else 1e9) + (b if b is not None else 1e9)

    best = min(grid, key=lambda g: score(vote(*g)))
    print(f"vote chosen on the tuning half: P<{best[0]} waits x{best[2]}, P>{best[1]} waits x{best[3]}")
    if score(vote(*best)) > score(lambda s: 1.0):
        print("(no vote on the grid does better than none on the tuning half)")
    print("rule            half   latency at 5 % cut-offs   at 10 %")
    fmt = lambda x: "not reached" if x is None else f"{x:.0f} ms"
    for name, v in [("cues", lambda s: 1.0), ("cues + LLM", vote(*best))]:
        for half, ts in [("tune", tune), ("test", test)]:
            print(f"{name:15s} {half:5s}  {fmt(latency_at(ts, v, 0.05)):>22s}   {fmt(latency_at(ts, v, 0.10))}")


if __name__ == "__main__":
    main()
