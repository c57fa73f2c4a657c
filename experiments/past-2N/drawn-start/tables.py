#!/usr/bin/env python3
"""Prints the drawn-start evaluation's tables from its files (here, or HERE=folder) and the
committed numbers at start 0 (../cho, ../seeds-range), so that every number of README.md can
be regenerated:

    python3 experiments/past-2N/drawn-start/tables.py [starts|differences|retrained]

starts: each coupled arm's exact match over the trained lengths (k <= N) and at N, 2N, 3N and
4N, at start 0 (as recorded at the end of training) and at drawn starts (`copytask eval ...
eval.position_start=drawn`), the mean over seeds with its 95% interval
(experiments/study_tables.py). differences: per arm and length, the largest difference of one
seed's exact match between the two evaluations, and how many seed-lengths differ at all.
retrained: the main study's arms trained again here (FIRE's coupled arms, fire-coupled/; the
absolute schemes' offset and coupled arms, absolute/) against its committed members."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import study_tables as st  # noqa: E402

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
PAST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
N = 5
LENGTHS = (N, 2 * N, 3 * N, 4 * N)
# (the study, its committed folder, this folder's evaluation at drawn starts); FIRE's coupled
# arms of the main study, trained again for their checkpoints, keep their files here.
STUDIES = (("cho", "cho", "cho-drawn.json"), ("seeds-range", "seeds-range", "seeds-range-drawn.json"),
           ("past-2N", os.path.join("drawn-start", "fire-coupled"), "fire-coupled-drawn.json"),
           ("past-2N", os.path.join("drawn-start", "absolute"), "absolute-drawn.json"))
# The main study's arms trained again here, each in its folder.
RETRAINED = ("fire-coupled", "absolute")


def pairs():
    """(study, arm, its entry at start 0, its entry at drawn starts) for every offset and
    coupled arm."""
    out = []
    for study, folder, drawn_file in STUDIES:
        at_zero = st.load(os.path.join(PAST, folder), "results.json")["schemes"]
        drawn = st.load(HERE, drawn_file)["schemes"]
        for arm, entry in drawn.items():
            if "coupled" in arm or "offset" in arm:
                out.append((study, arm, at_zero[arm], entry))
    return out


def starts_table():
    st.paired_exact_table("start", pairs(), ("0", "drawn"), LENGTHS)


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


def retrained_table():
    """The arms trained again against the main study's committed members: per arm,
    the seed-lengths (k = 1..20) whose exact match, token accuracy, token accuracy by output and
    wrong outputs by kind differ, and the largest difference of the losses (relative) and of the
    measurements of why (absolute)."""
    committed = st.load(PAST, "results.json")["schemes"]
    again = {}
    for folder in RETRAINED:
        again.update(st.load(os.path.join(PAST, "drawn-start", folder), "results.json")["schemes"])
    print("| arm | seeds | seed-lengths differing: exact, token, by output, errors | of them in exact | "
          "losses, relative | source attention | entropy |")
    print("|---|---|---|---|---|---|---|")
    for arm, entry in again.items():
        old = {run["seed"]: run for run in committed[arm]["runs"]}
        differing, in_exact, loss, attention, entropy = 0, 0, 0.0, 0.0, 0.0
        for run in st.runs_of(entry):
            then = old[run["seed"]]
            for key in ("final_loss", "test_loss"):
                loss = max(loss, abs(run[key] - then[key]) / then[key])
            for k in range(1, 4 * N + 1):
                a, b = st.at_length(run, k), st.at_length(then, k)
                if a is None or b is None:  # not evaluated (selective's k = 1: no input outside training)
                    differing += (a is None) != (b is None)
                    continue
                if any(a.get(key) != b.get(key) for key in ("exact", "token", "token_by_output", "errors")):
                    differing += 1
                in_exact += a.get("exact") != b.get("exact")
                for key, worst in (("source_attention", "attention"), ("entropy", "entropy")):
                    for x, y in zip(sum(a.get(key, []), []), sum(b.get(key, []), [])):
                        if worst == "attention":
                            attention = max(attention, abs(x - y))
                        else:
                            entropy = max(entropy, abs(x - y))
        print("| %s | %d | %d | %d | %.1e | %.4f | %.4f |" % (arm, len(entry["runs"]), differing, in_exact, loss,
                                                             attention, entropy))


if __name__ == "__main__":
    st.print_tables({"starts": starts_table, "differences": differences_table, "retrained": retrained_table},
                    sys.argv[1:])
