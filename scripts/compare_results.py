#!/usr/bin/env python3
"""Two runs of the same study side by side (e.g. the reference study on the CPU and on a GPU):
per scheme, test exact match (mean +- std over seeds) in each, the largest difference of one
seed's number between them, and a verdict:

  same        every seed's test exact within --tolerance (the dropout stream and the data
              are the same on every device, so a GPU run should land here, float rounding
              aside)
  in spread   not seed for seed, but the means differ by less than the larger seed std
  differs     neither: a finding or a bug to explain

    scripts/compare_results.py A/results.json B/results.json[.gz] [--labels CPU GPU] [--tolerance 0.002]
                               [--metric test_exact|test_token|final_loss] [--strict] [--json FILE]

--metric: the per-seed number compared (default test exact match; test_token, the token
accuracy, and final_loss, the last training loss, move with every step of a short run, so a
smoke study whose exact match is still 0 is compared on them). --strict: every scheme must be
`same`. Plain Python, no third-party modules; prints a Markdown table. Exit 0 when every scheme
of A is in B (and, with --strict, every one is the same), 1 when --strict finds one that is
not, 2 when a scheme is missing.
"""
import argparse
import gzip
import json
import sys


def per_seed(scheme, metric="test_exact"):
    return {run["seed"]: run[metric] for run in scheme["runs"]}


def mean_std(values):
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    return {"mean": mean, "std": std}


def compare(a, b, tolerance, metric="test_exact"):
    rows, missing = [], []
    for name in a["scheme_order"]:
        if name not in b["schemes"]:
            missing.append(name)
            continue
        sa, sb = a["schemes"][name], b["schemes"][name]
        seeds_a, seeds_b = per_seed(sa, metric), per_seed(sb, metric)
        common = sorted(set(seeds_a) & set(seeds_b))
        largest = max((abs(seeds_a[s] - seeds_b[s]) for s in common), default=None)
        stats_a, stats_b = mean_std(list(seeds_a.values())), mean_std(list(seeds_b.values()))
        ma, mb = stats_a["mean"], stats_b["mean"]
        spread = max(stats_a["std"], stats_b["std"])
        if largest is not None and largest <= tolerance and len(common) == len(seeds_a):
            verdict = "same"
        elif abs(ma - mb) <= spread:
            verdict = "in spread"
        else:
            verdict = "differs"
        rows.append({"scheme": name, "seeds": common, "a": stats_a, "b": stats_b,
                     "largest_seed_difference": largest, "mean_difference": mb - ma, "verdict": verdict})
    return rows, missing


def load(path):
    """A results.json, or its gzipped copy (a study folder kept small: results.json.gz)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--labels", nargs=2, default=["A", "B"])
    ap.add_argument("--tolerance", type=float, default=0.002, help="per seed, test exact (0.002 = 2 of 1000 test inputs)")
    ap.add_argument("--metric", default="test_exact", choices=["test_exact", "test_token", "final_loss"])
    ap.add_argument("--strict", action="store_true", help="exit 1 unless every scheme is the same")
    ap.add_argument("--json", help="also write the comparison here")
    args = ap.parse_args()
    a, b = load(args.a), load(args.b)
    rows, missing = compare(a, b, args.tolerance, args.metric)
    la, lb = args.labels
    what = args.metric.replace("_", " ")
    print("| scheme | %s %s | %s %s | largest seed difference | verdict |" % (la, what, lb, what))
    print("|---|---|---|---|---|")
    for r in rows:
        largest = "-" if r["largest_seed_difference"] is None else "%.4f" % r["largest_seed_difference"]
        print("| %s | %.4f +- %.4f | %.4f +- %.4f | %s | %s |" % (r["scheme"], r["a"]["mean"], r["a"].get("std") or 0.0,
                                                             r["b"]["mean"], r["b"].get("std") or 0.0, largest,
                                                             r["verdict"]))
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("same", "in spread", "differs")}
    print("\n%d schemes: %d same (every seed within %g), %d within the seed spread, %d differ" %
          (len(rows), counts["same"], args.tolerance, counts["in spread"], counts["differs"]))
    if missing:
        print("missing from %s: %s" % (lb, ", ".join(missing)), file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"labels": args.labels, "metric": args.metric, "tolerance": args.tolerance, "schemes": rows,
                       "missing": missing}, f,
                      indent=2)
            f.write("\n")
    if missing:
        sys.exit(2)
    if args.strict and counts["same"] != len(rows):
        print("--strict: %d scheme(s) not the same on both" % (len(rows) - counts["same"]), file=sys.stderr)
        sys.exit(1)
    sys.exit(0)


if __name__ == "__main__":
    main()
