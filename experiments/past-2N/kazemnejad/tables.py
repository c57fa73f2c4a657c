#!/usr/bin/env python3
"""Prints the Kazemnejad-protocol study's tables from its files (here, or HERE=folder), so
that every number of README.md can be regenerated:

    python3 experiments/past-2N/kazemnejad/tables.py [arms|seeds|lengths|ranking]

arms: each arm's exact match of the generated copy over the trained lengths (k <= 5), at
N + 1, N + 2, 2N and 4N, and its token accuracy at 2N (the mean over seeds with its 95%
interval, experiments/study_tables.py), and the stops' share of the outputs at 2N. seeds:
every seed's 2N and 4N. lengths: the mean exact match at every length. ranking: the arms by
their mean at 2N, and whether NoPE's interval lies above every other arm's (the criterion
prediction 5 set)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import study_tables as st  # noqa: E402

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
N = 5


def arms():
    results = st.load(HERE, "results.json")
    return [(name, results["schemes"][name]) for name in results["scheme_order"]]


def arms_table():
    print("| arm | exact k <= N | k = N+1 | k = N+2 | k = 2N | k = 4N | token k = 2N | stops at 2N |")
    print("|---|---|---|---|---|---|---|---|")
    for name, entry in arms():
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, st.cell(st.trained_exact(entry)), st.cell(st.per_seed(entry, N + 1, "exact")),
            st.cell(st.per_seed(entry, N + 2, "exact")), st.cell(st.per_seed(entry, 2 * N, "exact")),
            st.cell(st.per_seed(entry, 4 * N, "exact")), st.cell(st.per_seed(entry, 2 * N, "token")),
            st.cell(st.error_shares(entry, 2 * N)["stop"])))


def seeds_table():
    print("| arm | k <= N by seed | 2N by seed | 4N by seed |")
    print("|---|---|---|---|")
    for name, entry in arms():
        print("| %s | %s | %s | %s |" % (name, st.seeds_cell(st.trained_exact(entry)),
                                         st.seeds_cell(st.per_seed(entry, 2 * N, "exact")),
                                         st.seeds_cell(st.per_seed(entry, 4 * N, "exact"))))


def lengths_table():
    st.lengths_table("arm", arms(), 4 * N)


def ranking():
    ranked = sorted(arms(), key=lambda item: -st.mean(st.per_seed(item[1], 2 * N, "exact")))
    print("at 2N, by mean: " + ", ".join("%s %.2f" % (name, st.mean(st.per_seed(entry, 2 * N, "exact")))
                                         for name, entry in ranked))
    nope = dict(arms())["none"]
    _, nope_low, _ = st.interval(st.per_seed(nope, 2 * N, "exact"))
    above = all(nope_low > st.interval(st.per_seed(entry, 2 * N, "exact"))[2] for name, entry in arms() if name != "none")
    first = ranked[0][0] == "none"
    verdict = ("reproduced" if first and above else
               "not reproduced (another arm's mean is higher)" if not first else "not shown")
    print("NoPE first: %s; its lower end above every other arm's upper end: %s; Kazemnejad et al.: %s" %
          ("yes" if first else "no", "yes" if above else "no", verdict))


if __name__ == "__main__":
    st.print_tables({"arms": arms_table, "seeds": seeds_table, "lengths": lengths_table, "ranking": ranking}, sys.argv[1:])
