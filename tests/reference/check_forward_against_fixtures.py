#!/usr/bin/python3
"""python/copytask_forward.py against the parity fixtures.

For every tests/fixtures/parity_*.json: the fixture's parameters become a checkpoint
(float32, a leading member axis of size 1, as in a member's model.pt), its config and
options a result.json "model" entry; forward() on the fixture's tokens (at its position IDs
where it has them) must give the
fixture's logits and attention, in float32, within float32 tolerance. The fixtures are
found by listing the folder and matched with the variants python/copytask_ref declares
(and the causal flags their schemes take). Prints the largest differences; exits non-zero
on a mismatch, on a fixture no variant declares (a causal-only variant's bidirectional
file included), on a variant without its fixture, or when forward() accepts what it must
refuse (an unknown scheme, a bidirectional xpos, dape without a score bias).

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
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "python")))
from copytask_forward import forward  # noqa: E402
from copytask_ref import layer_forms, variants  # noqa: E402

TOLERANCE = 1e-4


def tensor(entry):
    return torch.tensor(entry["data"], dtype=torch.float64).reshape(entry["shape"])


def check(path):
    fixture = json.load(open(path))
    config = fixture["config"]
    params = {name: tensor(entry).float()[None] for name, entry in fixture["params"].items()}
    model = {key: config[key] for key in ("embed", "heads", "blocks", "hidden", "positional", "causal")}
    model.update({key: config[key] for key in layer_forms.KEYS if key in config})
    model["dropout"] = 0.0
    model.update(config.get("options", {}))
    tokens = torch.tensor(fixture["tokens"], dtype=torch.int64)
    ids = torch.tensor(fixture["positions"], dtype=torch.int64) if "positions" in fixture else None
    with torch.no_grad():
        logits, attention = forward(params, model, tokens, ids)
    assert logits.dtype == torch.float32 and all(a.dtype == torch.float32 for a in attention), \
        "the forward computes in float32"
    logits_diff = (logits.double() - tensor(fixture["logits"])).abs().max().item()
    attention_diff = (torch.stack(attention).double() - tensor(fixture["attention"])).abs().max().item()
    return logits_diff, attention_diff


def unmatched(directory):
    """(fixtures no variant declares, declared files that are missing), by file name."""
    names = {os.path.basename(path) for path in glob.glob(os.path.join(directory, "parity_*.json"))}
    declared = {name for variant in variants.variants() for name in variants.fixture_names(variant)}
    return sorted(names - declared), sorted(declared - names)


def refusals_hold():
    """Unknown schemes and refused combinations are an error, not a silent other model."""
    refused = [({"positional": "nope", "heads": 2, "blocks": 1, "causal": False}, ("nope", "fire", "fox")),
               ({"positional": "xpos", "heads": 2, "blocks": 1, "causal": False}, ("xpos", "causal")),
               ({"positional": "rope", "heads": 2, "blocks": 1, "causal": True, "dape": True}, ("dape", "rope"))]
    for model, words in refused:
        try:
            forward({}, model, torch.zeros(1, 1, dtype=torch.int64))
            print("FAIL: forward() accepted %s" % model)
            return False
        except ValueError as error:
            assert all(word in str(error) for word in words), error
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", default=os.path.normpath(os.path.join(HERE, "..", "fixtures")))
    args = ap.parse_args()
    undeclared, missing = unmatched(args.fixtures)
    if undeclared:
        print("FAIL: fixtures in %s that no variant of python/copytask_ref declares: %s"
              % (args.fixtures, ", ".join(undeclared)))
    if missing:
        print("FAIL: declared variants' fixtures missing in %s: %s (make them with "
              "tests/reference/make_parity_fixtures.py --only VARIANT)" % (args.fixtures, ", ".join(missing)))
    if undeclared or missing or not refusals_hold():
        return 1

    paths = sorted(glob.glob(os.path.join(args.fixtures, "parity_*.json")))
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
