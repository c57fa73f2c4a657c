#!/usr/bin/env python3
"""Prints the past-2N tables from the study's files, so that every number of README.md can
be regenerated:

    python3 experiments/past-2N/tables.py [copy|reverse|selective|n10|lengths|n10-lengths|causal-lengths|seeds|attention|attention-lengths|positions|outputs|errors|entropy|differ|coupled|separate|formats|goals|time]

Arms are named "<scheme>[+causal][+<position IDs>][.next]" on copy, the same with ".reverse"
or ".selective" on the other kinds; the N = 10 study's files are in n10/. Each cell is the
mean over seeds with its 95% t interval (experiments/study_tables.py); `seeds` gives every
seed's value. HERE=folder reads another copy of the files (e.g. runs/past-2N while the study
runs), N10=folder the N = 10 study's, CAUSAL=folder the placeholder arms under the mask added
after the first results (causal/ here)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import study_tables as st  # noqa: E402

HERE = os.environ.get("HERE") or os.path.dirname(os.path.abspath(__file__))
N10 = os.environ.get("N10") or os.path.join(HERE, "n10")
CAUSAL = os.environ.get("CAUSAL") or os.path.join(HERE, "causal")
KINDS = ("copy", "reverse", "selective")


def arms(folder=None):
    """[(arm name, results.json entry)] in the study's order."""
    results = st.load(folder or HERE, "results.json")
    return [(name, results["schemes"][name]) for name in results["scheme_order"] if name in results["schemes"]]


def all_arms():
    """Every arm of the three folders (N = 5, the causal placeholder arms, N = 10), in order."""
    out = []
    for folder in (HERE, CAUSAL, N10):
        if os.path.isdir(folder):
            out += [(name if folder == HERE else "%s (%s)" % (name, os.path.basename(os.path.normpath(folder))), entry)
                    for name, entry in arms(folder)]
    return out


def row_name(name):
    """The arm's name without its task suffix: the row it takes in each task's table."""
    for kind in KINDS[1:]:
        if name.endswith("." + kind):
            return name[: -len(kind) - 1]
    return name


def ids_of(entry):
    return entry["overrides"].get("model.position_ids", "sequential")


def print_table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def task_table(kind):
    """Exact match at the trained lengths, at 2N and 4N, token accuracy at 2N, and the
    copying head's source attention at 2N (each member's own head), for one task kind."""
    rows = []
    for name, entry in arms():
        # the next-token arms have their own table (formats)
        if entry["task"] != kind or entry["format"] != "placeholders":
            continue
        n = st.n_of(entry)
        rows.append([row_name(name), st.cell(st.trained_exact(entry)), st.cell(st.per_seed(entry, 2 * n, "exact")),
                     st.cell(st.per_seed(entry, 4 * n, "exact")), st.cell(st.per_seed(entry, 2 * n, "token")),
                     st.cell(st.source_attention(entry, 2 * n))])
    print_table(["arm (%s)" % kind, "exact k <= N", "exact k = 2N", "exact k = 4N", "token k = 2N",
                 "source attention k = 2N"], rows)


def length_cell(values):
    """The mean over seeds to two decimals, '-' where no seed has an example at that length
    (selective at k = 1: every such input was trained on)."""
    m = st.mean(values)
    return "-" if m != m else "%.2f" % m


def lengths(folder=None):
    """Exact match by content length, 1..4N (mean over seeds; * marks a trained length)."""
    entries = arms(folder)
    if not entries:
        return
    n = st.n_of(entries[0][1])
    ks = list(range(1, 4 * n + 1))
    rows = [[name] + [length_cell(st.per_seed(entry, k, "exact")) for k in ks] for name, entry in entries]
    print_table(["arm"] + ["%d%s" % (k, "*" if k <= n else "") for k in ks], rows)


def print_by_n(header, row):
    """One table per run of arms with the same N (all_arms, in order): header(n) gives the
    columns after "arm", row(entry, n) an arm's cells."""
    rows, last_n = [], None
    for name, entry in all_arms():
        n = st.n_of(entry)
        if last_n is not None and n != last_n:
            print_table(["arm"] + header(last_n), rows)
            print()
            rows = []
        last_n = n
        rows.append([name] + row(entry, n))
    if rows:
        print_table(["arm"] + header(last_n), rows)


def attention_lengths():
    """The source attention of each member's own copying head at every length 1..4N (mean
    over seeds), every arm of the three folders."""
    print_by_n(lambda n: ["%d%s" % (k, "*" if k <= n else "") for k in range(1, 4 * n + 1)],
               lambda entry, n: [length_cell(st.source_attention(entry, k)) for k in range(1, 4 * n + 1)])


def positions():
    """The share right at each output position j at k = 2N (mean over seeds), every arm."""
    print_by_n(lambda n: ["j = %d" % j for j in range(2 * n)],
               lambda entry, n: [length_cell(seeds) for seeds in st.by_output(entry, 2 * n)])


def seeds():
    """Every seed's exact match at 2N and 4N, every arm (both studies)."""
    rows = []
    for folder in (HERE, CAUSAL, N10):
        if not os.path.isdir(folder):
            continue
        for name, entry in arms(folder):
            n = st.n_of(entry)
            rows.append([name, str(n), st.seeds_cell(st.trained_exact(entry)),
                         st.seeds_cell(st.per_seed(entry, 2 * n, "exact")), st.seeds_cell(st.per_seed(entry, 4 * n, "exact"))])
    print_table(["arm", "N", "exact k <= N, by seed", "exact k = 2N, by seed", "exact k = 4N, by seed"], rows)


def attention():
    """Each member's copying head, and its attention on the source at N, N+1, 2N and 4N."""
    rows = []
    for name, entry in all_arms():
        n = st.n_of(entry)
        rows.append([name, st.heads_cell(entry)] + [st.cell(st.source_attention(entry, k)) for k in (n, n + 1, 2 * n, 4 * n)])
    print_table(["arm", "copying head by seed", "k = N", "k = N+1", "k = 2N", "k = 4N"], rows)


def outputs():
    """The share right of outputs j < N and j >= N at k = 2N, and of j >= 2N at 4N."""
    rows = []
    for name, entry in all_arms():
        n = st.n_of(entry)
        rows.append([name] + [st.cell(st.output_share(entry, k, part)) for k, part in
                              ((2 * n, slice(None, n)), (2 * n, slice(n, None)), (4 * n, slice(None, n)),
                               (4 * n, slice(2 * n, None)))])
    print_table(["arm", "2N: j < N", "2N: j >= N", "4N: j < N", "4N: j >= 2N"], rows)


def errors():
    """The wrong outputs by kind at k = 2N and 4N, as shares of all outputs (mean over seeds)."""
    kinds = ("stop", "neighbour", "content", "noise", "absent")
    rows = []
    for name, entry in all_arms():
        n = st.n_of(entry)
        row = [name]
        for k in (2 * n, 4 * n):
            shares = st.error_shares(entry, k, kinds)
            row.append(" / ".join("%.2f" % st.mean(shares[kind]) for kind in kinds))
        rows.append(row)
    print_table(["arm", "k = 2N: " + " / ".join(kinds), "k = 4N: " + " / ".join(kinds)], rows)


def entropy():
    rows = []
    for name, entry in all_arms():
        n = st.n_of(entry)
        rows.append([name] + [st.cell(st.entropy(entry, k), 2, 0.0, float("inf")) for k in (n, 2 * n, 4 * n)])
    print_table(["arm", "entropy k = N", "k = 2N", "k = 4N"], rows)


def differ():
    """Which position-ID kinds differ from the same scheme's sequential IDs at 2N and 4N
    (non-overlapping 95% intervals), on each task."""
    by_name = dict(arms())
    rows = []
    for name, entry in by_name.items():
        ids = ids_of(entry)
        if ids == "sequential" or entry["format"] != "placeholders":
            continue
        base = row_name(name).replace("+" + ids, "")
        base_name = base if entry["task"] == "copy" else base + "." + entry["task"]
        if base_name not in by_name:
            continue
        other = by_name[base_name]
        n = st.n_of(entry)
        row = [name, base_name]
        for k in (2 * n, 4 * n):
            a, b = st.per_seed(entry, k, "exact"), st.per_seed(other, k, "exact")
            row.append("%s vs %s: %s" % ("%.2f" % st.mean(a), "%.2f" % st.mean(b), "differ" if st.differ(a, b) else "no difference shown"))
        rows.append(row)
    print_table(["arm", "against", "exact k = 2N", "exact k = 4N"], rows)


def n10():
    """The N = 10 arms beside the same arms at N = 5: exact match at the trained lengths, at
    N + 1, N + 2, 2N and 4N, token accuracy and the copying head's source attention at 2N."""
    at_5 = dict(arms())
    rows = []
    for name, entry in arms(N10):
        for arm in (at_5.get(name), entry):
            if arm is None:
                continue
            n = st.n_of(arm)
            rows.append([name, str(n), st.cell(st.trained_exact(arm))] +
                        [st.cell(st.per_seed(arm, k, "exact")) for k in (n + 1, n + 2, 2 * n, 4 * n)] +
                        [st.cell(st.per_seed(arm, 2 * n, "token")), st.cell(st.source_attention(arm, 2 * n))])
    print_table(["arm", "N", "exact k <= N", "k = N+1", "k = N+2", "k = 2N", "k = 4N", "token k = 2N",
                 "source attention k = 2N"], rows)


def coupled():
    """Each coupled scheme on the three tasks: exact match at 2N and 4N, with whether
    selective differs from copy (non-overlapping intervals)."""
    by_name = dict(arms())
    rows = []
    for name, entry in by_name.items():
        if entry["task"] != "copy" or ids_of(entry) != "coupled" or entry["format"] != "placeholders":
            continue
        n = st.n_of(entry)
        row = [name]
        for k in (2 * n, 4 * n):
            values = [st.per_seed(by_name[name + suffix], k, "exact") for suffix in ("", ".reverse", ".selective")
                      if name + suffix in by_name]
            row += [st.cell(v) for v in values]
            row.append("differ" if len(values) == 3 and st.differ(values[0], values[2]) else "no difference shown")
        rows.append(row)
    print_table(["arm", "copy 2N", "reverse 2N", "selective 2N", "selective vs copy, 2N",
                 "copy 4N", "reverse 4N", "selective 4N", "selective vs copy, 4N"], rows)


def separate():
    """Which coupled arms of one task differ (non-overlapping intervals) in exact match at 2N
    and at 4N: every pair, with the verdict."""
    by_task = {}
    for name, entry in arms():
        if ids_of(entry) == "coupled" and entry["format"] == "placeholders":
            by_task.setdefault(entry["task"], []).append((name, entry))
    rows = []
    for kind, entries in by_task.items():
        for i, (a_name, a) in enumerate(entries):
            for b_name, b in entries[i + 1:]:
                n = st.n_of(a)
                row = [a_name, b_name]
                for k in (2 * n, 4 * n):
                    x, y = st.per_seed(a, k, "exact"), st.per_seed(b, k, "exact")
                    row.append("%.2f vs %.2f: %s" % (st.mean(x), st.mean(y), "differ" if st.differ(x, y) else "-"))
                rows.append(row)
    print_table(["arm", "arm", "exact k = 2N", "exact k = 4N"], rows)


def formats():
    """Each next-token arm beside the placeholder arm that differs from it in the format alone
    (same scheme, mask, IDs, width and steps): exact match at N + 1, N + 2, 2N and 4N."""
    by_name = dict(arms())
    if os.path.isdir(CAUSAL):
        by_name.update(arms(CAUSAL))  # the placeholder partners added after the first results
    rows = []
    for name, entry in list(by_name.items()):
        if entry["format"] == "placeholders" or entry["task"] != "copy":
            continue
        base = name[: -len(".next")]
        pair = [(base, by_name.get(base)), (name, entry)]
        n = st.n_of(entry)
        for arm_name, arm in pair:
            if arm is None:
                rows.append([arm_name, "not trained", "", "", "", ""])
                continue
            rows.append([arm_name, st.cell(st.trained_exact(arm))] +
                        [st.cell(st.per_seed(arm, k, "exact")) for k in (n + 1, n + 2, 2 * n, 4 * n)])
        if pair[0][1] is not None:
            verdicts = ["differ" if st.differ(st.per_seed(pair[0][1], k, "exact"), st.per_seed(entry, k, "exact")) else "-"
                        for k in (n + 1, n + 2, 2 * n, 4 * n)]
            rows.append(["(format alone)", ""] + verdicts)
    print_table(["arm", "exact k <= N", "k = N+1", "k = N+2", "k = 2N", "k = 4N"], rows)


def time():
    """The training time: each batch's wall seconds (every member of a batch carries its
    batch's), summed over the batches of both studies. Pauses between runs of a resumed
    study are not in it (run.json's wall time is)."""
    rows, total = [], 0.0
    for folder in (HERE, CAUSAL, N10):
        if not os.path.isdir(folder):
            continue
        batches = {}
        for name, entry in arms(folder):
            for run in entry["runs"]:
                key = (run["batch_members"], run["steps"], run["seconds"])
                batches.setdefault(key, []).append(name)
        for (members, steps, seconds), names in batches.items():
            arms_in = sorted(set(names), key=names.index)
            rows.append([os.path.basename(os.path.normpath(folder)), "%d" % members, "%d" % steps, "%.0f" % seconds,
                         "%.0f" % (members * steps / seconds), ", ".join(arms_in)])
            total += seconds
    print_table(["study", "members", "steps", "seconds", "member-steps/s", "arms"], rows)
    print()
    print("training, all batches: %.0f s (%d h %02d min)" % (total, total // 3600, total % 3600 // 60))


def goals():
    """The goals, graded by the numbers: (a) a task-agnostic arm (no coupling; no rescaling
    is evaluated here) at >= 0.9 on copy at 2N with its interval's lower end >= 0.8; (b) for
    each task, the coupled arms at >= 0.9 at 2N and >= 0.5 at 4N (means)."""
    best = None
    for folder in (HERE, CAUSAL, N10):
        if not os.path.isdir(folder):
            continue
        for name, entry in arms(folder):
            if entry["task"] != "copy" or ids_of(entry) == "coupled":
                continue
            n = st.n_of(entry)
            m, low, _ = st.interval(st.per_seed(entry, 2 * n, "exact"))
            if best is None or m > best[1]:
                best = (name, m, low)
    if best:
        met = best[1] >= 0.9 and best[2] >= 0.8
        print("(a) best task-agnostic copy at 2N: %s %.2f, lower end %.2f: %s" % (best[0], best[1], best[2], "met" if met else "not met"))
    for kind in KINDS:
        passing = []
        for name, entry in arms():
            if entry["task"] != kind or ids_of(entry) != "coupled":
                continue
            n = st.n_of(entry)
            at_2n, at_4n = st.mean(st.per_seed(entry, 2 * n, "exact")), st.mean(st.per_seed(entry, 4 * n, "exact"))
            if at_2n >= 0.9 and at_4n >= 0.5:
                passing.append("%s (%.2f, %.2f)" % (name, at_2n, at_4n))
        print("(b) %s, coupled, >= 0.9 at 2N and >= 0.5 at 4N: %s" % (kind, ", ".join(passing) or "none"))


if __name__ == "__main__":
    tables = {"copy": lambda: task_table("copy"), "reverse": lambda: task_table("reverse"),
              "selective": lambda: task_table("selective"), "n10": n10, "lengths": lengths,
              "n10-lengths": lambda: lengths(N10),
              "causal-lengths": lambda: lengths(CAUSAL), "seeds": seeds,
              "attention": attention, "attention-lengths": attention_lengths, "positions": positions, "outputs": outputs, "errors": errors, "entropy": entropy, "differ": differ,
              "goals": goals, "time": time,
              "coupled": coupled, "separate": separate, "formats": formats}
    chosen = sys.argv[1:] or list(tables)
    for name in chosen:
        if name not in tables:
            sys.exit("unknown table %r; choose from %s" % (name, ", ".join(tables)))
        if (name.startswith("n10") and not os.path.isdir(N10)) or (name.startswith("causal") and not os.path.isdir(CAUSAL)):
            continue
        tables[name]()
        print()
