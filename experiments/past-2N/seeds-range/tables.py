#!/usr/bin/env python3
"""Prints the seeds-range study's tables from its files and the past-2N study's (here and
.., or HERE=folder for this study's), so that every number of README.md can be regenerated:

    python3 experiments/past-2N/seeds-range/tables.py [split|seeds|random]

split: each split arm over its ten seeds (0..4 from experiments/past-2N, 5..9 here): exact
match at the trained lengths (k <= 5), 2N and 4N (the mean with its 95% interval,
experiments/study_tables.py), the seeds at >= 0.9 and <= 0.5 at 2N, and the five-seed cells
beside them. seeds: every seed's 2N and 4N. random: each randomized arm over L = 256 beside
the same arm over L = the longest evaluated context (the past-2N study): exact over k <= 5,
N + 1, 2N and 4N, and the token accuracy at 2N."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import study_tables as st  # noqa: E402

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
PAST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
N = 5
SPLIT = ("learned+coupled", "t5+coupled", "learned+coupled.reverse", "t5+coupled.reverse", "pope+coupled.selective")
RANDOM = ("sinusoidal+random", "rope+random", "sinusoidal+random.reverse", "rope+random.reverse",
          "sinusoidal+random.selective", "rope+random.selective")


def entries():
    """(this study's schemes, the past-2N study's schemes)."""
    return st.load(HERE, "results.json")["schemes"], st.load(PAST, "results.json")["schemes"]


def merged(name):
    """The split arm with the runs of both studies (seeds 0..9), and the past-2N one alone."""
    here, past = entries()
    entry = dict(past[name])
    entry["runs"] = past[name]["runs"] + here[name]["runs"]
    return entry, past[name]


def wide(name):
    """The L = 256 arm's name for a past-2N randomized arm: sinusoidal+random.reverse ->
    sinusoidal+random-256.reverse."""
    scheme, _, kind = name.partition(".")
    return scheme + "-256" + ("." + kind if kind else "")


def split_table():
    print("| arm | seeds | exact k <= N | k = 2N | k = 4N | seeds >= 0.9 / <= 0.5 at 2N | 2N, seeds 0..4 | 4N, seeds 0..4 |")
    print("|---|---|---|---|---|---|---|---|")
    for name in SPLIT:
        entry, five = merged(name)
        at_2n = st.per_seed(entry, 2 * N, "exact")
        print("| %s | %d | %s | %s | %s | %d / %d | %s | %s |" % (
            name, len(st.runs_of(entry)), st.cell(st.trained_exact(entry)), st.cell(at_2n),
            st.cell(st.per_seed(entry, 4 * N, "exact")),
            sum(1 for v in at_2n if v is not None and v >= 0.9), sum(1 for v in at_2n if v is not None and v <= 0.5),
            st.cell(st.per_seed(five, 2 * N, "exact")), st.cell(st.per_seed(five, 4 * N, "exact"))))


def seeds_table():
    print("| arm | 2N by seed (0..9) | 4N by seed (0..9) |")
    print("|---|---|---|")
    for name in SPLIT:
        entry, _ = merged(name)
        print("| %s | %s | %s |" % (name, st.seeds_cell(st.per_seed(entry, 2 * N, "exact")),
                                    st.seeds_cell(st.per_seed(entry, 4 * N, "exact"))))


def random_table():
    here, past = entries()
    print("| arm | L | exact k <= N | k = N+1 | k = 2N | k = 4N | token k = 2N |")
    print("|---|---|---|---|---|---|---|")
    for name in RANDOM:
        for label, entry in (("longest context", past[name]), ("256", here[wide(name)])):
            print("| %s | %s | %s | %s | %s | %s | %s |" % (
                name, label, st.cell(st.trained_exact(entry)), st.cell(st.per_seed(entry, N + 1, "exact")),
                st.cell(st.per_seed(entry, 2 * N, "exact")), st.cell(st.per_seed(entry, 4 * N, "exact")),
                st.cell(st.per_seed(entry, 2 * N, "token"))))


if __name__ == "__main__":
    st.print_tables({"split": split_table, "seeds": seeds_table, "random": random_table}, sys.argv[1:])
