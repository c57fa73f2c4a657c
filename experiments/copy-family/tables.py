#!/usr/bin/env python3
"""Prints the copy-family tables from the study's results.json, so that every number of
README.md can be regenerated:

    python3 experiments/copy-family/tables.py [headline|reverse|attention|rescaled|errors|entropy|seeds|separate]

Arms are named "<scheme>" (copy), "<scheme>.reverse" and "<scheme>.selective". Each cell
is the mean over seeds with its 95% t interval (experiments/study_tables.py, shared with
experiments/past-2N); `seeds` gives every seed's value. Standard library only. HERE=folder reads another copy of the files (e.g. runs/copy-family while the
study runs: a study's output folder holds results.json once a batch has finished)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import study_tables as st  # noqa: E402
from study_tables import mean, n_of, trained_exact  # noqa: E402

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
KINDS = ("copy", "reverse", "selective")


def arms():
    """{scheme: {kind: results.json entry}} in the study's order."""
    results = st.load(HERE, "results.json")
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


cell = st.cell


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
                row.append(cell(st.per_seed(entry, 2 * n_of(entry), key)))
        print("| " + " | ".join(row) + " |")


def reverse():
    """At k = 2N: the share right of the first N outputs (distances seen in training, on
    reverse) and of the later ones, for copy and reverse, with 95% intervals over seeds."""
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
            row += [cell(st.output_share(entry, 2 * n, slice(None, n))), cell(st.output_share(entry, 2 * n, slice(n, None)))]
        print("| " + " | ".join(row) + " |")


def attention():
    """Each member's own copying head (the head with the most attention on the source over
    the trained lengths, for that member) and its attention on the source at k = N, N+1, 2N,
    4N: the mean over members with its 95% interval."""
    print("| arm | copying head by seed | k = N | k = N+1 | k = 2N | k = 4N |")
    print("|---|---|---|---|---|---|")
    for name, entry in each_arm():
        n = n_of(entry)
        values = [st.cell(st.source_attention(entry, k)) for k in (n, n + 1, 2 * n, 4 * n)]
        print("| %s | %s | %s |" % (name, st.heads_cell(entry), " | ".join(values)))


def seeds():
    """Every seed's exact match over k <= N and at k = 2N, every arm."""
    print("| arm | exact k <= N, by seed | exact k = 2N, by seed | token k = 2N, by seed |")
    print("|---|---|---|---|")
    for name, entry in each_arm():
        n = n_of(entry)
        print("| %s | %s | %s | %s |" % (name, st.seeds_cell(trained_exact(entry)),
                                        st.seeds_cell(st.per_seed(entry, 2 * n, "exact")),
                                        st.seeds_cell(st.per_seed(entry, 2 * n, "token"))))


def separate():
    """Pairs of arms of one task kind whose copy token accuracy at 2N three seeds cannot
    separate (overlapping 95% intervals), and the trained-length exact matches below 0.95."""
    entries = list(each_arm())
    for kind in KINDS:
        same = [(name, entry) for name, entry in entries if (name.partition(".")[2] or "copy") == kind]
        apart, together = 0, []
        for i, (a, ea) in enumerate(same):
            for b, eb in same[i + 1:]:
                va, vb = st.per_seed(ea, 2 * n_of(ea), "token"), st.per_seed(eb, 2 * n_of(eb), "token")
                if st.differ(va, vb):
                    apart += 1
                else:
                    together.append("%s/%s" % (a, b))
        print("%s, token accuracy at 2N: %d pairs separated, %d not: %s" % (kind, apart, len(together), ", ".join(together)))
    below = ["%s %.3f" % (name, mean(trained_exact(entry))) for name, entry in entries if mean(trained_exact(entry)) < 0.95]
    print("exact k <= N below 0.95 (%d of %d arms): %s" % (len(below), len(entries), ", ".join(below)))


def rescaled():
    """RoPE's rescalings at evaluation (the factor per length): exact match by length (mean
    over seeds), and at k = 2N the mean with its 95% interval, for every arm that has them."""
    lengths = (6, 7, 8, 9, 10, 11, 12, 15, 20)
    print("| arm | " + " | ".join("k = %d" % k for k in lengths) + " | k = 2N, 95% interval |")
    print("|---|" + "---|" * (len(lengths) + 1))
    for name, entry in each_arm():
        runs = st.runs_of(entry)
        for method in ("pi", "ntk", "yarn"):
            if not all(method in run.get("length_generalization_rescaled", {}) for run in runs):
                continue
            as_plain = [{"seed": run["seed"], "length_generalization": run["length_generalization_rescaled"][method]}
                        for run in runs]
            per_length = {k: st.per_seed({"runs": as_plain}, k, "exact") for k in lengths}
            at_2n = st.per_seed({"runs": as_plain}, 2 * n_of(entry), "exact")
            print("| %s (%s) | %s | %s |" % (name, method, " | ".join("%.2f" % mean(per_length[k]) for k in lengths),
                                            cell(at_2n)))


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
        values = [cell(st.entropy(entry, k), 2, 0.0, float("inf")) for k in (n, 2 * n, 4 * n)]
        print("| %s | %s |" % (name, " | ".join(values)))


if __name__ == "__main__":
    tables = {"headline": headline, "reverse": reverse, "attention": attention, "errors": errors, "entropy": entropy,
              "rescaled": rescaled, "seeds": seeds, "separate": separate}
    chosen = sys.argv[1:] or list(tables)
    for name in chosen:
        if name not in tables:
            sys.exit("unknown table %r; choose from %s" % (name, ", ".join(tables)))
        tables[name]()
        print()
