#!/usr/bin/env python3
"""Prints the convention study's tables from its files (here, or HERE=folder), so that every
number of README.md can be regenerated:

    python3 experiments/past-2N/cho/tables.py [arms|conventions|seeds|lengths|rung6]

arms: each arm's exact match of the generated copy over the trained lengths (k <= 5), at
N + 1, N + 2, 2N and 4N (the mean over seeds with its 95% interval,
experiments/study_tables.py), the seeds at >= 0.9 and <= 0.1 at 2N, and the stops' share of
the outputs at 2N. conventions: for each scheme and task kind, copytask's and cho's 2N and 4N
side by side and whether they differ (intervals apart). seeds: every seed's 2N and 4N.
lengths: the mean exact match at every length. rung6: learned+coupled beside the ladder's
rung 6 (the same task, seeds and recipe), seed by seed."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import study_tables as st  # noqa: E402

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
LADDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ladder", "rung-6")
N = 5
KINDS = ("copy", "reverse", "selective")
SCHEMES = ("learned+coupled", "rope+coupled")


def arms():
    results = st.load(HERE, "results.json")
    return [(name, results["schemes"][name]) for name in results["scheme_order"]]


def arm_name(scheme, convention, kind):
    """configs/past-2N-cho.json's names: <scheme>[.cho][.<kind> but copy]."""
    return scheme + (".cho" if convention == "cho" else "") + ("" if kind == "copy" else "." + kind)


def arms_table():
    print("| arm | exact k <= N | k = N+1 | k = N+2 | k = 2N | k = 4N | seeds >= 0.9 / <= 0.1 at 2N | stops at 2N |")
    print("|---|---|---|---|---|---|---|---|")
    for name, entry in arms():
        at_2n = st.per_seed(entry, 2 * N, "exact")
        print("| %s | %s | %s | %s | %s | %s | %d / %d | %s |" % (
            name, st.cell(st.trained_exact(entry)), st.cell(st.per_seed(entry, N + 1, "exact")),
            st.cell(st.per_seed(entry, N + 2, "exact")), st.cell(at_2n), st.cell(st.per_seed(entry, 4 * N, "exact")),
            sum(1 for v in at_2n if v is not None and v >= 0.9), sum(1 for v in at_2n if v is not None and v <= 0.1),
            st.cell(st.error_shares(entry, 2 * N)["stop"], 2, 0.0, 1.0)))


def conventions_table():
    entries = dict(arms())
    print("| scheme | kind | 2N copytask | 2N cho | 2N | 4N copytask | 4N cho | 4N |")
    print("|---|---|---|---|---|---|---|---|")
    for scheme in SCHEMES:
        for kind in KINDS:
            ours, cho = entries[arm_name(scheme, "copytask", kind)], entries[arm_name(scheme, "cho", kind)]
            cells = []
            for k in (2 * N, 4 * N):
                a, b = st.per_seed(ours, k, "exact"), st.per_seed(cho, k, "exact")
                cells += [st.cell(a), st.cell(b), "differ" if st.differ(a, b) else "no difference shown"]
            print("| %s | %s | %s |" % (scheme, kind, " | ".join(cells)))


def seeds_table():
    print("| arm | 2N by seed | 4N by seed |")
    print("|---|---|---|")
    for name, entry in arms():
        print("| %s | %s | %s |" % (name, st.seeds_cell(st.per_seed(entry, 2 * N, "exact")),
                                    st.seeds_cell(st.per_seed(entry, 4 * N, "exact"))))


def lengths_table():
    st.lengths_table("arm", arms(), 4 * N)


def rung6_table():
    ours = dict(arms())["learned+coupled"]
    rung6 = st.load(LADDER, "results.json")["schemes"]["6.own-end"]
    print("| | 2N by seed | 4N by seed |")
    print("|---|---|---|")
    for name, entry in (("learned+coupled (here)", ours), ("6.own-end (ladder/rung-6)", rung6)):
        print("| %s | %s | %s |" % (name, st.seeds_cell(st.per_seed(entry, 2 * N, "exact"), 4),
                                    st.seeds_cell(st.per_seed(entry, 4 * N, "exact"), 4)))
    same = all(st.per_seed(ours, k, "exact") == st.per_seed(rung6, k, "exact") for k in range(1, 4 * N + 1))
    print()
    print("every length's exact match equal, seed by seed: %s" % ("yes" if same else "no"))


if __name__ == "__main__":
    st.print_tables({"arms": arms_table, "conventions": conventions_table, "seeds": seeds_table,
                     "lengths": lengths_table, "rung6": rung6_table}, sys.argv[1:])
