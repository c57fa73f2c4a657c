#!/usr/bin/env python3
"""Prints the README's tables from the files run.sh and probe.sh put here, so that every
number in README.md can be regenerated from results.json, positional.json and probes/:

    python3 experiments/length-generalization/tables.py [summary|exact|token|bias|attention]

Standard library only (the machines this runs on have no numpy). HERE=folder reads another
copy of the files (a study's output folder, with its probes/)."""
import json
import math
import os
import re
import sys

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))


def load(name):
    with open(os.path.join(HERE, name)) as f:
        return json.load(f)


def mean(values):
    return sum(values) / len(values)


def std(values):
    """Sample standard deviation over seeds, as results.json's."""
    if len(values) < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def schemes():
    results = load("results.json")
    for name in results["scheme_order"]:
        yield name, results["schemes"][name]


def per_seed_average(scheme, lengths, metric):
    """Each seed's mean over the given lengths (those evaluated), one value per seed."""
    out = []
    for run in sorted(scheme["runs"], key=lambda r: r["seed"]):
        by_length = run["length_generalization"]["by_length"]
        values = [by_length[str(k)][metric] for k in lengths
                  if str(k) in by_length and by_length[str(k)].get("skipped") is None]
        out.append(mean(values) if values else float("nan"))
    return out


def summary():
    """In distribution (trained lengths) and out of distribution (longer), mean +- std over seeds."""
    print("| scheme | test exact (held-out, k <= N, whole sequence) | copy exact, k = 1..N | "
          "copy exact, k = N+1..2N | copy token, k = N+1..2N | exact at k = N+1 | token at k = N+1 |")
    print("|---|---|---|---|---|---|---|")
    for name, scheme in schemes():
        lg = scheme["length_generalization"]
        n = lg["train_max_len"]
        longest = max(int(k) for k in lg["by_length"])
        trained, longer = range(1, n + 1), range(n + 1, longest + 1)
        cells = ["%.3f +- %.3f" % (scheme["test_exact"]["mean"], scheme["test_exact"].get("std", 0.0))]
        for lengths, metric in ((trained, "exact"), (longer, "exact"), (longer, "token"),
                                ([n + 1], "exact"), ([n + 1], "token")):
            values = per_seed_average(scheme, lengths, metric)
            cells.append("%.3f +- %.3f" % (mean(values), std(values)))
        print("| %s | %s |" % (name, " | ".join(cells)))


def by_length(metric):
    """Copy exact match (or token accuracy) by content length k, mean over seeds; * = trained."""
    rows = list(schemes())
    lg = rows[0][1]["length_generalization"]
    n = lg["train_max_len"]
    lengths = sorted(int(k) for k in lg["by_length"])
    print("| scheme | " + " | ".join("%d%s" % (k, "*" if k <= n else "") for k in lengths) + " |")
    print("|---|" + "---|" * len(lengths))
    for name, scheme in rows:
        cells = []
        for k in lengths:
            entry = scheme["length_generalization"]["by_length"][str(k)][metric]
            cells.append("%.2f" % entry["mean"] if entry.get("mean") is not None else "-")
        print("| %s | %s |" % (name, " | ".join(cells)))


def bias():
    """The score biases by signed distance d = query - key (d > 0: the key is to the left),
    seed 0, every head: the distances the copy needs are k + 1 (2..6 trained, 7..11 not; the
    trained context of 11 has distances up to 10, the longest biases positional.json holds)."""
    positional = load("positional.json")
    distances = [1, 2, 4, 6, 7, 8, 9, 10]
    print("| scheme | head | " + " | ".join("d=%d" % d for d in distances) + " |")
    print("|---|---|" + "---|" * len(distances))
    for name, scheme in positional["schemes"].items():
        runs = [r for r in scheme["runs"] if str(r["seed"]) == "0" and "bias_by_distance" in r]
        for run in runs:
            table = run["bias_by_distance"]
            index = {d: i for i, d in enumerate(table["distance"])}
            for h, head in enumerate(table["heads"]):
                cells = ["%.2f" % head[index[d]] if d in index else "-" for d in distances]
                print("| %s | %d | %s |" % (name, h + 1, " | ".join(cells)))


def read_probe(path):
    """A `copytask predict` output: the input tokens, the output, and per (layer, head) each
    query row's strongest key and its weight."""
    text = open(path).read()
    tokens = text.split("\ninput   ", 1)[1].split("\n", 1)[0].split()
    output = text.split("\noutput  ", 1)[1].split("\n", 1)[0].split()
    maps = {}
    for block in re.split(r"\nlayer ", text)[1:]:
        head_line, _, rest = block.partition("\n")
        layer, head = (int(x) for x in re.match(r"(\d+) head (\d+)", head_line).groups())
        rows = re.findall(r"max ([0-9.]+) at position (\d+)", rest)
        maps[(layer, head)] = [(int(p), float(w)) for w, p in rows]
    return tokens, output, maps


def attention():
    """At a length never trained (probe.sh's 10 tokens, context 21, seed 0): for each output j (which
    must read key j), the key the last layer attends to most (over its heads), its weight,
    and how many outputs are right."""
    folder = os.path.join(HERE, "probes")
    order = [name for name, _ in schemes()]
    print("| scheme | output | right | last layer: strongest key for outputs j = 0..k-1 (wanted: j) | on the wanted key |")
    print("|---|---|---|---|---|")
    for name in order:
        path = os.path.join(folder, name + ".txt")
        if not os.path.exists(path):
            continue
        tokens, output, maps = read_probe(path)
        separator = tokens.index("<copy>")
        k = separator
        last = max(layer for layer, _ in maps)
        keys, hits = [], 0
        for j in range(k):
            query = separator + 1 + j
            best = max((maps[(last, h)][query] for (layer, h) in maps if layer == last), key=lambda kw: kw[1])
            keys.append("%d" % best[0])
            hits += best[0] == j
        copy = output[separator + 1:separator + 1 + k]
        right = sum(a == b for a, b in zip(copy, tokens[:k]))
        print("| %s | %s | %d/%d | %s | %d/%d |" % (name, " ".join(copy), right, k, " ".join(keys), hits, k))


if __name__ == "__main__":
    parts = sys.argv[1:] or ["summary", "exact", "token", "bias", "attention"]
    for part in parts:
        if part == "summary":
            summary()
        elif part in ("exact", "token"):
            by_length(part)
        elif part == "bias":
            bias()
        elif part == "attention":
            attention()
        else:
            sys.exit("unknown table %s: summary, exact, token, bias or attention" % part)
        print()
