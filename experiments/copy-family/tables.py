#!/usr/bin/env python3
"""Prints the copy-family tables from the study's results.json, so that every number of
README.md can be regenerated:

    python3 experiments/copy-family/tables.py [headline|reverse|attention|errors|entropy]

Arms are named "<scheme>" (copy), "<scheme>.reverse" and "<scheme>.selective". Standard
library only. HERE=folder reads another copy of the files (e.g. runs/copy-family while the
study runs: a study's output folder holds results.json once a batch has finished)."""
import json
import math
import os
import sys

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
KINDS = ("copy", "reverse", "selective")


def load(name):
    with open(os.path.join(HERE, name)) as f:
        return json.load(f)


def mean(values):
    values = [v for v in values if v is not None and not math.isnan(v)]
    return sum(values) / len(values) if values else float("nan")


def std(values):
    """Sample standard deviation over seeds, as results.json's."""
    values = [v for v in values if v is not None and not math.isnan(v)]
    if len(values) < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def arms():
    """{scheme: {kind: results.json entry}} in the study's order."""
    results = load("results.json")
    out = {}
    for name in results["scheme_order"]:
        if name not in results["schemes"]:
            continue
        scheme, _, kind = name.partition(".")
        out.setdefault(scheme, {})[kind or "copy"] = results["schemes"][name]
    return out


def each_arm():
    """(arm name, results.json entry) for every arm, by scheme, then copy, reverse, selective."""
    for scheme, kinds in arms().items():
        for kind in KINDS:
            if kind in kinds:
                yield (scheme if kind == "copy" else scheme + "." + kind), kinds[kind]


def runs_at(entry, k, key):
    """Each seed's value of `key` at length k (None where skipped)."""
    out = []
    for run in sorted(entry["runs"], key=lambda r: r["seed"]):
        one = run["length_generalization"]["by_length"].get(str(k))
        out.append(None if one is None or one.get("skipped") else one[key])
    return out


def n_of(entry):
    return entry["length_generalization"]["train_max_len"]


def cell(values, digits=2):
    m = mean(values)
    return "-" if math.isnan(m) else ("%.*f +- %.*f" % (digits, m, digits, std(values)))


def trained_exact(entry):
    """Per seed, exact match over every evaluated example of lengths 1..N (each length
    weighted by its examples: k = 1 and 2 have only a few inputs the training never saw, so
    an unweighted mean over lengths would let 2 examples count as much as 100)."""
    n = n_of(entry)
    exact = [runs_at(entry, k, "exact") for k in range(1, n + 1)]
    count = [runs_at(entry, k, "n") for k in range(1, n + 1)]
    per_seed = []
    for i in range(len(entry["runs"])):
        pairs = [(e[i], c[i]) for e, c in zip(exact, count) if e[i] is not None and c[i]]
        total = sum(c for _, c in pairs)
        per_seed.append(sum(e * c for e, c in pairs) / total if total else float("nan"))
    return per_seed


def headline():
    """Exact match at the trained lengths and at 2N, per task kind; token accuracy at 2N."""
    print("| scheme | copy exact k <= N | copy exact k = 2N | copy token k = 2N | reverse exact k <= N | "
          "reverse exact k = 2N | reverse token k = 2N | selective exact k <= N | selective exact k = 2N |")
    print("|---|---|---|---|---|---|---|---|---|")
    for scheme, kinds in arms().items():
        row = [scheme]
        for kind, keys in (("copy", ("exact", "token")), ("reverse", ("exact", "token")), ("selective", ("exact",))):
            entry = kinds.get(kind)
            if entry is None:
                row += ["-"] * (1 + len(keys))
                continue
            row.append(cell(trained_exact(entry)))
            for key in keys:
                row.append(cell(runs_at(entry, 2 * n_of(entry), key)))
        print("| " + " | ".join(row) + " |")


def by_output_means(entry, k):
    """Mean over seeds of the share right at each output j of length k."""
    rows = [run["length_generalization"]["by_length"].get(str(k), {}).get("token_by_output") for run in entry["runs"]]
    rows = [r for r in rows if r]
    return [mean([r[j] for r in rows]) for j in range(k)] if rows else []


def reverse():
    """At k = 2N: the share right of the first N outputs (distances seen in training) and of
    the later ones, for copy and reverse."""
    print("| scheme | copy, outputs j < N | copy, outputs j >= N | reverse, outputs j < N | reverse, outputs j >= N |")
    print("|---|---|---|---|---|")
    for scheme, kinds in arms().items():
        row = [scheme]
        for kind in ("copy", "reverse"):
            entry = kinds.get(kind)
            if entry is None:
                row += ["-", "-"]
                continue
            n = n_of(entry)
            outputs = by_output_means(entry, 2 * n)
            row += ["%.2f" % mean(outputs[:n]), "%.2f" % mean(outputs[n:])] if outputs else ["-", "-"]
        print("| " + " | ".join(row) + " |")


def copying_head(entry):
    """The (block, head) with the most attention on the source over the trained lengths
    (the report's choice), from the means over seeds."""
    by_length = entry["length_generalization"]["by_length"]
    totals = {}
    for k in range(1, n_of(entry) + 1):
        blocks = by_length.get(str(k), {}).get("source_attention")
        for b, heads in enumerate(blocks or []):
            for h, v in enumerate(heads):
                totals[(b, h)] = totals.get((b, h), 0.0) + v
    return max(totals, key=totals.get) if totals else None


def attention():
    """The copying head's mean attention on the source at k = N, N+1, 2N, 4N, per arm."""
    print("| arm | head | k = N | k = N+1 | k = 2N | k = 4N |")
    print("|---|---|---|---|---|---|")
    for name, entry in each_arm():
        head = copying_head(entry)
        if head is None:
            continue
        n = n_of(entry)
        by_length = entry["length_generalization"]["by_length"]
        values = []
        for k in (n, n + 1, 2 * n, 4 * n):
            one = by_length.get(str(k), {}).get("source_attention")
            values.append("%.2f" % one[head[0]][head[1]] if one else "-")
        print("| %s | %d.%d | %s |" % (name, head[0] + 1, head[1] + 1, " | ".join(values)))


def errors():
    """The wrong outputs by kind at k = 2N (shares of all outputs, mean over seeds)."""
    names = ("stop", "neighbour", "content", "noise", "absent")
    print("| arm | wrong | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for arm, entry in each_arm():
        one = entry["length_generalization"]["by_length"].get(str(2 * n_of(entry)), {})
        if "errors" not in one:
            continue
        shares = [one["errors"].get(name, float("nan")) for name in names]
        print("| %s | %.2f | %s |" % (arm, sum(shares), " | ".join("%.2f" % v for v in shares)))


def entropy():
    """The output rows' attention entropy (nats, mean over blocks and heads) at k = N, 2N, 4N."""
    print("| arm | k = N | k = 2N | k = 4N |")
    print("|---|---|---|---|")
    for name, entry in each_arm():
        n = n_of(entry)
        by_length = entry["length_generalization"]["by_length"]
        values = []
        for k in (n, 2 * n, 4 * n):
            one = by_length.get(str(k), {}).get("entropy")
            values.append("%.2f" % mean([v for heads in one for v in heads]) if one else "-")
        print("| %s | %s |" % (name, " | ".join(values)))


if __name__ == "__main__":
    tables = {"headline": headline, "reverse": reverse, "attention": attention, "errors": errors, "entropy": entropy}
    chosen = sys.argv[1:] or list(tables)
    for name in chosen:
        if name not in tables:
            sys.exit("unknown table %r; choose from %s" % (name, ", ".join(tables)))
        tables[name]()
        print()
