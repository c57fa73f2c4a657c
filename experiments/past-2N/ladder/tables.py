#!/usr/bin/env python3
"""Prints the ladder's tables from its studies' files (rungs-0-4/, rungs-0-1-seeds-5-9/,
rung-5/, rung-6/, rung-1e/ here, whichever exist; a rung in two of them gets the seeds of
both), so that every number of README.md can be regenerated:

    python3 experiments/past-2N/ladder/tables.py [rungs|seeds|lengths]

rungs: each rung's exact match of the generated copy at the trained lengths (k <= 5), N + 1,
N + 2, 2N and 4N (the mean over seeds with its 95% interval, experiments/study_tables.py),
the seeds at >= 0.9 and <= 0.1 at 2N, the stops' share of the outputs at 2N, and whether its
2N differs from the rung it changes (intervals apart). seeds: every seed's 2N and 4N.
lengths: the mean exact match at every length."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import study_tables as st  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDERS = ("rungs-0-4", "rungs-0-1-seeds-5-9", "rung-5", "rung-6", "rung-1e")
# The rung each rung changes one thing of.
BEFORE = {"1.range-64": "0.study-arm", "2.no-dropout": "1.range-64", "3.width-64": "2.no-dropout",
          "4.its-optimizer": "3.width-64", "5.fresh": "4.its-optimizer", "6.own-end": "5.fresh",
          "1e.range-64+own-end": "1.range-64"}
N = 5


def rungs():
    """[(rung, its results.json entry)] in order; a rung trained in two studies (more seeds)
    gets the runs of both."""
    out, index = [], {}
    for folder in FOLDERS:
        path = os.path.join(HERE, folder)
        if not os.path.isdir(path):
            continue
        results = st.load(path, "results.json")
        for name in results["scheme_order"]:
            entry = results["schemes"][name]
            if name in index:
                merged = dict(out[index[name]][1])
                merged["runs"] = merged["runs"] + entry["runs"]
                out[index[name]] = (name, merged)
            else:
                index[name] = len(out)
                out.append((name, entry))
    return out


def rungs_table():
    entries = dict(rungs())
    print("| rung | exact k <= N | k = N+1 | k = N+2 | k = 2N | k = 4N | seeds >= 0.9 / <= 0.1 at 2N | stops at 2N | 2N vs the rung before |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, entry in rungs():
        at_2n = st.per_seed(entry, 2 * N, "exact")
        stops = st.error_shares(entry, 2 * N)["stop"]
        before = BEFORE.get(name)
        verdict = "-"
        if before in entries:
            verdict = "%s: %s" % (before, "differ" if st.differ(at_2n, st.per_seed(entries[before], 2 * N, "exact"))
                                  else "no difference shown")
        print("| %s | %s | %s | %s | %s | %s | %d / %d | %s | %s |" % (
            name, st.cell(st.trained_exact(entry)), st.cell(st.per_seed(entry, N + 1, "exact")),
            st.cell(st.per_seed(entry, N + 2, "exact")), st.cell(at_2n), st.cell(st.per_seed(entry, 4 * N, "exact")),
            sum(1 for v in at_2n if v is not None and v >= 0.9), sum(1 for v in at_2n if v is not None and v <= 0.1),
            st.cell(stops, 2, 0.0, 1.0), verdict))


def seeds_table():
    print("| rung | 2N by seed | 4N by seed |")
    print("|---|---|---|")
    for name, entry in rungs():
        print("| %s | %s | %s |" % (name, st.seeds_cell(st.per_seed(entry, 2 * N, "exact")),
                                    st.seeds_cell(st.per_seed(entry, 4 * N, "exact"))))


def lengths_table():
    st.lengths_table("rung", rungs(), 4 * N)


if __name__ == "__main__":
    st.print_tables({"rungs": rungs_table, "seeds": seeds_table, "lengths": lengths_table}, sys.argv[1:])
