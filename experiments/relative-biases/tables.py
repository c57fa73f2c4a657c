#!/usr/bin/env python3
"""Prints the README's tables from the small files run.sh copied here, so that every number
in README.md can be regenerated from results.json, positional.json and attention.json:

    python3 experiments/relative-biases/tables.py [screen|heads|slopes|blocks|reference|learned|attention]

Standard library only (the machines this runs on have no numpy)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load(part, name):
    with open(os.path.join(HERE, part, name)) as f:
        return json.load(f)


def mean(values):
    return sum(values) / len(values)


def scheme_rows(part):
    """One row per scheme: name, runs, test exact mean/std/min/max, per seed, train exact mean."""
    results = load(part, "results.json")
    for name in results["scheme_order"]:
        scheme = results["schemes"][name]
        runs = scheme["runs"]
        test = scheme["test_exact"]
        yield name, scheme, runs, test, mean([r["train_exact"] for r in runs])


def table_exact(part):
    print("| scheme | runs | test exact mean | std | min | max | per seed | train exact mean |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _, runs, test, train in scheme_rows(part):
        seeds = " ".join("%.3f" % r["test_exact"] for r in sorted(runs, key=lambda r: r["seed"]))
        print("| %s | %d | %.4f | %.4f | %.3f | %.3f | %s | %.4f |" %
              (name, len(runs), test["mean"], test.get("std", 0.0), test["min"], test["max"], seeds, train))


def table_by_length(part):
    """Test exact-match by copy length k, averaged over seeds."""
    print("| scheme | " + " | ".join("k=%d" % k for k in range(1, 9)) + " |")
    print("|---|" + "---|" * 8)
    for name, _, runs, _, _ in scheme_rows(part):
        cells = []
        for k in range(1, 9):
            values = [r["test_exact_by_length"][str(k)] for r in runs if str(k) in r["test_exact_by_length"]]
            cells.append("%.2f" % mean(values) if values else "-")
        print("| %s | %s |" % (name, " | ".join(cells)))


def table_grid(part, key):
    """A grid's schemes (name@key=value) as one row per base scheme, one column per value."""
    cells, values = {}, []
    for name, _, _, test, _ in scheme_rows(part):
        base, _, rest = name.partition("@")
        value = rest.split("=", 1)[1] if key in rest else rest
        if value not in values:
            values.append(value)
        cells.setdefault(base, {})[value] = "%.3f +- %.3f" % (test["mean"], test.get("std", 0.0))
    print("| scheme | " + " | ".join("%s=%s" % (key, v) for v in values) + " |")
    print("|---|" + "---|" * len(values))
    for base, row in cells.items():
        print("| %s | %s |" % (base, " | ".join(row.get(v, "-") for v in values)))


def table_slopes():
    """The two-sided slopes grid: rows the right slope, columns the left slope."""
    grid = {}
    for _, scheme, _, test, _ in scheme_rows("slopes"):
        left = scheme["overrides"]["model.alibi_slopes"][0]
        right = scheme["overrides"]["model.alibi_right_slopes"][0]
        grid[(right, left)] = "%.3f +- %.3f" % (test["mean"], test.get("std", 0.0))
    lefts = sorted({left for _, left in grid})
    print("| right slope \\ left slope | " + " | ".join("%g" % left for left in lefts) + " |")
    print("|---|" + "---|" * len(lefts))
    for right in sorted({right for right, _ in grid}):
        print("| %g | %s |" % (right, " | ".join(grid.get((right, left), "-") for left in lefts)))


def table_learned():
    """The values the learned schemes report at the end of the screen, per seed."""
    positional = load("screen", "positional.json")["schemes"]
    print("| scheme | seed | values at the end | bias at d = -3, -1, 0, 1, 3, 5, 8 |")
    print("|---|---|---|---|")
    for name, scheme in positional.items():
        if "bias" not in scheme["runs"][0]:
            continue
        for run in scheme["runs"]:
            values = ", ".join("%s %s" % (k, " ".join("%.4g" % v for v in run[k]))
                               for k in sorted(run) if k not in ("seed", "bias", "bias_by_distance"))
            by_distance = run["bias_by_distance"]
            at = dict(zip(by_distance["distance"], by_distance["heads"][0]))
            picks = " ".join("%.2f" % at[d] for d in (-3, -1, 0, 1, 3, 5, 8))
            print("| %s | %d | %s | %s |" % (name, run["seed"], values or "-", picks))


def table_attention(part, names):
    """Block 2's attention of the probe's output positions (seed 0): where each output looks."""
    attention = load(part, "attention.json")
    probe_tokens = attention["inputs"][0]
    print("probe input:", probe_tokens)
    for name in names:
        probe = attention["schemes"][name]["probes"][0]
        last_block = probe["attention"][0][-1][0]  # seed 0, last block, head 0: [query][key]
        print("\n%s (seed 0), output %s" % (name, probe["output"][0]))
        print("| query | " + " | ".join("key %d" % k for k in range(len(last_block))) + " |")
        print("|---|" + "---|" * len(last_block))
        for q, row in enumerate(last_block):
            print("| %d | %s |" % (q, " | ".join("%.2f" % v for v in row)))


def main():
    parts = sys.argv[1:] or ["screen", "heads", "slopes", "blocks", "reference", "learned", "attention"]
    for part in parts:
        print("\n## %s\n" % part)
        if part in ("screen", "reference"):
            table_exact(part)
            print()
            table_by_length(part)
        elif part == "heads":
            table_grid("heads", "model.heads")
        elif part == "blocks":
            table_grid("blocks", "model.blocks")
        elif part == "slopes":
            table_slopes()
        elif part == "learned":
            table_learned()
        elif part == "attention":
            table_attention("screen", ["alibi-two-sided-fixed", "alibi+causal", "t5", "fire"])
        else:
            sys.exit("unknown part %s: screen, heads, slopes, blocks, reference, learned or attention" % part)


if __name__ == "__main__":
    main()
