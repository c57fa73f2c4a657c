#!/usr/bin/env python3
"""Prints the drawn-start evaluation's tables from its files (here, or HERE=folder) and the
committed numbers at start 0 (../cho, ../seeds-range), so that every number of README.md can
be regenerated:

    python3 experiments/past-2N/drawn-start/tables.py [starts|differences]

starts: each coupled arm's exact match over the trained lengths (k <= N) and at N, 2N, 3N and
4N, at start 0 (as recorded at the end of training) and at drawn starts (`copytask eval ...
eval.position_start=drawn`), the mean over seeds with its 95% interval
(experiments/study_tables.py). differences: per arm and length, the largest difference of one
seed's exact match between the two evaluations, and how many seed-lengths differ at all."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import study_tables as st  # noqa: E402

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
PAST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
N = 5
LENGTHS = (N, 2 * N, 3 * N, 4 * N)
# (the study, its committed folder, this folder's evaluation at drawn starts)
STUDIES = (("cho", "cho", "cho-drawn.json"), ("seeds-range", "seeds-range", "seeds-range-drawn.json"))


def pairs():
    """(study, arm, its entry at start 0, its entry at drawn starts) for every coupled arm."""
    out = []
    for study, folder, drawn_file in STUDIES:
        at_zero = st.load(os.path.join(PAST, folder), "results.json")["schemes"]
        drawn = st.load(HERE, drawn_file)["schemes"]
        for arm, entry in drawn.items():
            if "coupled" in arm:
                out.append((study, arm, at_zero[arm], entry))
    return out


def starts_table():
    heads = " | ".join("k = %d" % k for k in LENGTHS)
    print("| study | arm | start | exact k <= N | %s |" % heads)
    print("|---|---|---|---|" + "---|" * len(LENGTHS))
    for study, arm, zero, drawn in pairs():
        for start, entry in (("0", zero), ("drawn", drawn)):
            cells = " | ".join(st.cell(st.per_seed(entry, k, "exact")) for k in LENGTHS)
            print("| %s | %s | %s | %s | %s |" % (study, arm, start, st.cell(st.trained_exact(entry)), cells))


def differences_table():
    print("| study | arm | " + " | ".join("k = %d" % k for k in LENGTHS) + " | seed-lengths differing (k = 1..20) |")
    print("|---|---|" + "---|" * len(LENGTHS) + "---|")
    for study, arm, zero, drawn in pairs():
        def gap(k):
            a, b = st.per_seed(zero, k, "exact"), st.per_seed(drawn, k, "exact")
            return max(abs(x - y) for x, y in zip(a, b) if x is not None and y is not None)
        differing = sum(1 for k in range(1, 4 * N + 1)
                        for x, y in zip(st.per_seed(zero, k, "exact"), st.per_seed(drawn, k, "exact"))
                        if x is not None and y is not None and x != y)
        print("| %s | %s | %s | %d |" % (study, arm, " | ".join("%.2f" % gap(k) for k in LENGTHS), differing))


if __name__ == "__main__":
    st.print_tables({"starts": starts_table, "differences": differences_table}, sys.argv[1:])
