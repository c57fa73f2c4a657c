#!/usr/bin/env python3
"""Prints the per-seed-inputs evaluation's tables from its files (here, or HERE=folder) and the
committed numbers on the shared inputs (../cho, ../seeds-range, ../kazemnejad), so that every
number of README.md can be regenerated:

    python3 experiments/past-2N/per-seed-inputs/tables.py [means|moves|spread|verdicts]

means: each arm's exact match over the trained lengths (k <= N) and at N + 1, 2N, 3N and 4N,
on the shared inputs (as recorded at the end of training) and on each seed's own
(`copytask eval ... eval.inputs=per-seed`), the mean over seeds with its 95% interval
(experiments/study_tables.py). moves: per cell (an arm at one of those lengths) the change of
the mean and whether the two intervals overlap (prediction 2). spread: the ratio of the seeds'
standard deviation, per-seed over shared, over the cells whose shared mean lies in 0.05..0.95
(prediction 3). verdicts: the numbers prediction 4 names."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import study_tables as st  # noqa: E402

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
PAST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
N = 5
LENGTHS = (N + 1, 2 * N, 3 * N, 4 * N)
STUDIES = ("cho", "seeds-range", "kazemnejad")  # each: ../<study>, and <study>-per-seed.json here


def pairs():
    """(study, arm, its entry on the shared inputs, its entry on each seed's own) for every arm."""
    out = []
    for study in STUDIES:
        shared = st.load(os.path.join(PAST, study), "results.json")["schemes"]
        own = st.load(HERE, study + "-per-seed.json")["schemes"]
        for arm, entry in own.items():
            out.append((study, arm, shared[arm], entry))
    return out


def means_table():
    st.paired_exact_table("inputs", pairs(), ("shared", "per-seed"), LENGTHS)


def cells():
    """(study, arm, k, shared Shares, per-seed Shares) for every cell."""
    return [(study, arm, k, st.per_seed(shared, k, "exact"), st.per_seed(own, k, "exact"))
            for study, arm, shared, own in pairs() for k in LENGTHS]


def moves_table():
    print("| study | arm | " + " | ".join("k = %d" % k for k in LENGTHS) + " |")
    print("|---|---|" + "---|" * len(LENGTHS))
    rows, largest, apart = {}, (0.0, None), []
    for study, arm, k, a, b in cells():
        move = st.mean(b) - st.mean(a)
        _, a_low, a_high = st.interval(a)
        _, b_low, b_high = st.interval(b)
        overlap = not (a_high < b_low or b_high < a_low)
        rows.setdefault((study, arm), []).append("%+.2f%s" % (move, "" if overlap else " (apart)"))
        if abs(move) > abs(largest[0]):
            largest = (move, (study, arm, k))
        if not overlap:
            apart.append((study, arm, k))
    for (study, arm), row in rows.items():
        print("| %s | %s | %s |" % (study, arm, " | ".join(row)))
    print()
    print("cells: %d; largest move %+.3f (%s %s k = %d); within 0.10: %d; intervals apart: %d %s"
          % (len(cells()), largest[0], *largest[1], sum(1 for *_, a, b in cells() if abs(st.mean(b) - st.mean(a)) <= 0.10),
             len(apart), apart))


def spread_table():
    ratios = []
    for study, arm, k, a, b in cells():
        m = st.mean(a)
        if 0.05 <= m <= 0.95 and st.std(a) > 0:
            ratios.append((st.std(b) / st.std(a), study, arm, k))
    ratios.sort()
    print("| study | arm | k | seeds' sd, shared | per-seed | ratio |")
    print("|---|---|---|---|---|---|")
    for ratio, study, arm, k in ratios:
        a, b = [st.per_seed(entry, k, "exact") for entry in
                next((s, o) for s_, a_, s, o in pairs() if (s_, a_) == (study, arm))]
        print("| %s | %s | %d | %.3f | %.3f | %.2f |" % (study, arm, k, st.std(a), st.std(b), ratio))
    middle = len(ratios) // 2
    median = (ratios[middle][0] if len(ratios) % 2 else (ratios[middle - 1][0] + ratios[middle][0]) / 2) if ratios else float("nan")
    print()
    print("cells: %d; median ratio %.3f; at or above 1: %d" % (len(ratios), median, sum(1 for r in ratios if r[0] >= 1)))


def verdicts_table():
    entries = {(study, arm): (shared, own) for study, arm, shared, own in pairs()}

    def both(study, arm, k, what=st.per_seed):
        shared, own = entries[(study, arm)]
        return [(inputs, what(entry, k, "exact")) for inputs, entry in (("shared", shared), ("per-seed", own))]

    print("| check | shared | per-seed |")
    print("|---|---|---|")
    for arm in ("none", "rope", "learned", "t5", "alibi"):
        print("| kazemnejad %s, 2N | %s |" % (arm, " | ".join(st.cell(v) for _, v in both("kazemnejad", arm, 2 * N))))
    for arm in ("none", "alibi"):
        print("| kazemnejad %s, N + 1 | %s |" % (arm, " | ".join(st.cell(v) for _, v in both("kazemnejad", arm, N + 1))))
    for arm in ("learned+coupled.cho", "rope+coupled"):
        print("| cho %s, 2N | %s |" % (arm, " | ".join(st.cell(v) for _, v in both("cho", arm, 2 * N))))
    for arm in ("t5+coupled", "t5+coupled.reverse"):
        print("| seeds-range %s, 2N by seed | %s |"
              % (arm, " | ".join(st.seeds_cell(v) for _, v in both("seeds-range", arm, 2 * N))))
    print("| seeds-range pope+coupled.selective, 4N | %s |"
          % " | ".join(st.cell(v) for _, v in both("seeds-range", "pope+coupled.selective", 4 * N)))
    for study, arm, shared, own in pairs():
        if "random" in arm:
            print("| %s %s, 2N | %s |" % (study, arm, " | ".join(st.cell(v) for _, v in both(study, arm, 2 * N))))
    print()
    for study, arm, shared, own in pairs():
        if st.mean(st.trained_exact(own)) < 0.98:
            print("| %s %s, k <= N | %s | %s |" % (study, arm, st.cell(st.trained_exact(shared)), st.cell(st.trained_exact(own))))
    print()
    print("arms at or above 0.98 over k <= N on per-seed inputs: %d of %d"
          % (sum(1 for *_, own in pairs() if st.mean(st.trained_exact(own)) >= 0.98), len(pairs())))


if __name__ == "__main__":
    st.print_tables({"means": means_table, "moves": moves_table, "spread": spread_table, "verdicts": verdicts_table},
                    sys.argv[1:])
