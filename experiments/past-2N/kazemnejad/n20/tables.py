#!/usr/bin/env python3
"""Prints the NoPE-at-N-=-20 study's tables from its files (here, or HERE=folder) beside the
N = 5 study's NoPE arm (..), so that every number of README.md can be regenerated:

    python3 experiments/past-2N/kazemnejad/n20/tables.py [arm|seeds|lengths|horizon]

arm: exact match of the generated copy over the trained lengths (k <= N), at N + 1, N + 2,
1.3 N, 2N, and the token accuracy and the wrong outputs by kind at 2N (mean over seeds with
its 95% interval, experiments/study_tables.py), at N = 20 and at N = 5. seeds: every seed's
trained lengths and 2N. lengths: the mean exact match at every length 1..40. horizon: the
first length past N whose mean exact match is below 0.5, in tokens and as a multiple of N."""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
import study_tables as st  # noqa: E402

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
FIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def nope(folder):
    """The NoPE arm's entry and its N."""
    entry = st.load(folder, "results.json")["schemes"]["none"]
    return entry, st.n_of(entry)


def studies():
    return [("N = 20", *nope(HERE)), ("N = 5", *nope(FIVE))]


def arm_table():
    print("| study | exact k <= N | k = N+1 | k = N+2 | k = 1.3N | k = 2N | token k = 2N | stop at 2N | neighbour at 2N |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, entry, n in studies():
        errors = st.error_shares(entry, 2 * n)
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, st.cell(st.trained_exact(entry)), st.cell(st.per_seed(entry, n + 1, "exact")),
            st.cell(st.per_seed(entry, n + 2, "exact")), st.cell(st.per_seed(entry, round(1.3 * n), "exact")),
            st.cell(st.per_seed(entry, 2 * n, "exact")), st.cell(st.per_seed(entry, 2 * n, "token")),
            st.cell(errors["stop"]), st.cell(errors["neighbour"])))


def seeds_table():
    print("| study | k <= N by seed | N + 1 by seed | 2N by seed |")
    print("|---|---|---|---|")
    for label, entry, n in studies():
        print("| %s | %s | %s | %s |" % (label, st.seeds_cell(st.trained_exact(entry)),
                                         st.seeds_cell(st.per_seed(entry, n + 1, "exact")),
                                         st.seeds_cell(st.per_seed(entry, 2 * n, "exact"))))


def lengths_table():
    entry, n = nope(HERE)
    st.lengths_table("arm", [("none, N = 20", entry)], 2 * n)


def horizon():
    for label, entry, n in studies():
        below = next((k for k in range(n + 1, 2 * n + 1) if st.mean(st.per_seed(entry, k, "exact")) < 0.5), None)
        if below is None:
            print("%s: exact match at or above 0.5 up to 2N" % label)
        else:
            print("%s: first below 0.5 at k = %d (N + %d, %.2f N)" % (label, below, below - n, below / n))


if __name__ == "__main__":
    st.print_tables({"arm": arm_table, "seeds": seeds_table, "lengths": lengths_table, "horizon": horizon},
                    sys.argv[1:])
