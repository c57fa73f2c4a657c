#!/usr/bin/python3
"""python/copytask_forward.py against the parity fixtures.

For every tests/fixtures/parity_*.json: the fixture's parameters become a checkpoint
(float32, a leading member axis of size 1, as in a member's model.pt), its config and
options a result.json "model" entry; forward() on the fixture's tokens must give the
fixture's logits and attention within float32 tolerance. Prints the largest differences;
exits non-zero on a mismatch, when a fixture is missing, when a causal-only variant
(xpos) has a bidirectional file, or when forward() accepts what it must refuse (an
unknown scheme, a bidirectional xpos, dape without a score bias).

Usage:
    /usr/bin/python3 tests/reference/check_forward_against_fixtures.py [--fixtures tests/fixtures]
"""

import argparse
import glob
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from copytask_forward import forward  # noqa: E402

TOLERANCE = 1e-4
# The variants of make_parity_fixtures.py (not imported: it sets float64 as torch's default).
VARIANTS = ["none", "sinusoidal", "learned", "rope", "rope_partial", "alibi", "alibi_offset",
            "alibi_two_sided", "alibi_learned", "t5", "dynamic", "dynamic_log", "kerple", "fire",
            "xpos", "xpos_partial", "cope", "cope_clamped", "fox",
            "alibi_dape", "t5_dape", "dynamic_dape", "kerple_dape", "fire_dape",
            "none_length_scale", "rope_length_scale", "t5_length_scale", "cope_length_scale",
            "fox_length_scale", "xpos_length_scale", "kerple_dape_length_scale"]
# Variants of a causal-only scheme (xpos): only parity_<variant>_causal.json exists.
CAUSAL_ONLY = {"xpos", "xpos_partial", "xpos_length_scale"}


def causal_suffixes(variant):
    return ("_causal",) if variant in CAUSAL_ONLY else ("", "_causal")


def tensor(entry):
    return torch.tensor(entry["data"], dtype=torch.float64).reshape(entry["shape"])


def check(path):
    fixture = json.load(open(path))
    config = fixture["config"]
    params = {name: tensor(entry).float()[None] for name, entry in fixture["params"].items()}
    model = {key: config[key] for key in ("embed", "heads", "blocks", "hidden", "positional", "causal")}
    model["dropout"] = 0.0
    model.update(config.get("options", {}))
    tokens = torch.tensor(fixture["tokens"], dtype=torch.int64)
    with torch.no_grad():
        logits, attention = forward(params, model, tokens)
    logits_diff = (logits.double() - tensor(fixture["logits"])).abs().max().item()
    attention_diff = (torch.stack(attention).double() - tensor(fixture["attention"])).abs().max().item()
    return logits_diff, attention_diff


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", default=os.path.normpath(os.path.join(HERE, "..", "fixtures")))
    args = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(args.fixtures, "parity_*.json")))
    expected = {"parity_%s%s.json" % (v, c) for v in VARIANTS for c in causal_suffixes(v)}
    names = {os.path.basename(path) for path in paths}
    missing = sorted(expected - names)
    if missing:
        print("FAIL: missing in %s: %s" % (args.fixtures, ", ".join(missing)))
        return 1
    stale = sorted("parity_%s.json" % v for v in CAUSAL_ONLY if "parity_%s.json" % v in names)
    if stale:
        print("FAIL: causal-only variants with a bidirectional file: " + ", ".join(stale))
        return 1

    # Unknown schemes and refused combinations are an error, not a silent other model.
    refused = [({"positional": "nope", "heads": 2, "blocks": 1, "causal": False}, ("nope", "fire", "fox")),
               ({"positional": "xpos", "heads": 2, "blocks": 1, "causal": False}, ("xpos", "causal")),
               ({"positional": "rope", "heads": 2, "blocks": 1, "causal": True, "dape": True}, ("dape", "rope"))]
    for model, words in refused:
        try:
            forward({}, model, torch.zeros(1, 1, dtype=torch.int64))
            print("FAIL: forward() accepted %s" % model)
            return 1
        except ValueError as error:
            assert all(word in str(error) for word in words), error

    failed = []
    worst = (0.0, 0.0)
    for path in paths:
        name = os.path.basename(path)[: -len(".json")]
        logits_diff, attention_diff = check(path)
        ok = logits_diff < TOLERANCE and attention_diff < TOLERANCE
        worst = (max(worst[0], logits_diff), max(worst[1], attention_diff))
        print("%-34s logits %.2e  attention %.2e%s" % (name, logits_diff, attention_diff, "" if ok else "  MISMATCH"))
        if not ok:
            failed.append(name)
    print("%d fixtures, largest differences: logits %.2e, attention %.2e (tolerance %g)"
          % (len(paths), worst[0], worst[1], TOLERANCE))
    if failed:
        print("FAIL: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
