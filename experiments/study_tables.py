"""What every study's tables.py shares: reading a study's files (plain or gzipped), each
seed's value of a measurement, a 95% interval over seeds, and each member's own copying
head. Standard library only.

Intervals: Student's t over the seeds, mean +- t(0.975, n - 1) sd / sqrt(n), clipped to
[0, 1] for shares; and for a share of a finite test's inputs (an exact match or a token
accuracy at a length, per_seed and trained_exact below), widened to cover the Wilson score
interval of the mean over those inputs, counted once since every seed is evaluated on the
same ones: so seeds that agree still carry the test's uncertainty (five seeds at 1.00 on
100 inputs give [0.96, 1.00], not [1.00, 1.00]). The same rule as results.json's "ci95"
(src/report/stats.cpp, summarize_share). Two arms are said to differ only where their
intervals do not overlap."""
import gzip
import json
import math
import os
import sys

# t(0.975, df) for df = 1..30, as src/report/stats.cpp.
T_975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)


def load(here, name):
    """A study file by name, read from `name` or, where only that exists, `name`.gz."""
    path = os.path.join(here, name)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    with gzip.open(path + ".gz", "rt") as f:
        return json.load(f)


def finite(values):
    return [v for v in values if v is not None and not math.isnan(v)]


def mean(values):
    values = finite(values)
    return sum(values) / len(values) if values else float("nan")


def std(values):
    """Sample standard deviation over seeds."""
    values = finite(values)
    if len(values) < 2:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def t_975(df):
    if df <= 30:
        return T_975[df - 1]
    z = 1.959964  # Cornish-Fisher beyond the table, as src/report/stats.cpp
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df * df)


class Shares(list):
    """Each seed's share of `trials` inputs, the same inputs for every seed (a list, with the
    trials behind it for interval())."""

    def __init__(self, values, trials):
        super().__init__(values)
        self.trials = trials


def wilson_95(p, n):
    """The Wilson score 95% interval of a proportion p over n trials."""
    z = 1.959964
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def interval(values, low=0.0, high=1.0):
    """(mean, lower, upper): the 95% t interval over seeds, widened by the Wilson interval of
    the mean where the values are Shares; (mean, nan, nan) for a single seed of a plain list."""
    trials = getattr(values, "trials", 0)
    values = finite(values)
    m = mean(values)
    if len(values) < 2:
        t_low = t_high = float("nan")
    else:
        half = t_975(len(values) - 1) * std(values) / math.sqrt(len(values))
        t_low, t_high = max(low, m - half), min(high, m + half)
    if trials and values:
        w_low, w_high = wilson_95(min(1.0, max(0.0, m)), trials)
        if math.isnan(t_low):
            return m, w_low, w_high
        return m, min(t_low, w_low), max(t_high, w_high)
    return m, t_low, t_high


def differ(a, b):
    """Whether two arms' per-seed values have non-overlapping 95% intervals."""
    _, a_low, a_high = interval(a)
    _, b_low, b_high = interval(b)
    return a_high < b_low or b_high < a_low


def cell(values, digits=2, low=0.0, high=1.0):
    """'mean [lower, upper]', or '-' where no seed has a value; low and high clip the
    interval (a share's is [0, 1]; give -inf, inf for a quantity without bounds)."""
    m, low, high = interval(values, low, high)
    if math.isnan(m):
        return "-"
    if math.isnan(low):
        return "%.*f" % (digits, m)
    return "%.*f [%.*f, %.*f]" % (digits, m, digits, low, digits, high)


def seeds_cell(values, digits=2):
    """Each seed's value, by seed: '1.00 / 0.99 / 0.65'."""
    return " / ".join("-" if v is None or math.isnan(v) else "%.*f" % (digits, v) for v in values)


def runs_of(entry):
    return sorted(entry["runs"], key=lambda r: r["seed"])


def n_of(entry):
    """N, the longest trained content length."""
    return entry["length_generalization"]["train_max_len"]


def at_length(run, k):
    """One member's measurements at content length k, or None where not evaluated."""
    one = run["length_generalization"]["by_length"].get(str(k))
    return None if one is None or one.get("skipped") else one


def per_seed(entry, k, key):
    """Each seed's value of `key` ('exact', 'token') at length k (None where not evaluated),
    as Shares of the length's inputs."""
    out, inputs = [], []
    for run in runs_of(entry):
        one = at_length(run, k)
        out.append(None if one is None else one[key])
        if one is not None and one.get("n"):
            inputs.append(one["n"])
    return Shares(out, min(inputs) if inputs else 0)


def trained_exact(entry):
    """Per seed, the exact match over every evaluated example of lengths 1..N, each length
    weighted by its examples (k = 1 and 2 have only a few inputs the training never saw, so
    an unweighted mean over lengths would let 2 examples count as much as 100)."""
    out, inputs = [], []
    for run in runs_of(entry):
        pairs = [(one["exact"], one["n"]) for one in (at_length(run, k) for k in range(1, n_of(entry) + 1))
                 if one is not None and one["n"]]
        total = sum(n for _, n in pairs)
        out.append(sum(e * n for e, n in pairs) / total if total else float("nan"))
        if total:
            inputs.append(total)
    return Shares(out, min(inputs) if inputs else 0)


def copying_head(run):
    """This member's copying head: the (block, head) with the most attention on the source
    summed over the trained lengths. Found per member: the head that copies differs between
    seeds, so an index averaged across seeds would mix heads that do different things."""
    totals = {}
    for k in range(1, run["length_generalization"]["train_max_len"] + 1):
        one = at_length(run, k)
        for b, heads in enumerate((one or {}).get("source_attention") or []):
            for h, v in enumerate(heads):
                totals[(b, h)] = totals.get((b, h), 0.0) + v
    return max(totals, key=totals.get) if totals else None


def source_attention(entry, k):
    """Per seed, the attention on the source of that member's own copying head at length k."""
    out = []
    for run in runs_of(entry):
        head = copying_head(run)
        one = at_length(run, k)
        blocks = (one or {}).get("source_attention")
        out.append(blocks[head[0]][head[1]] if head is not None and blocks else None)
    return out


def heads_cell(entry):
    """Each member's copying head as block.head (1-based), by seed."""
    heads = [copying_head(run) for run in runs_of(entry)]
    return " ".join("-" if h is None else "%d.%d" % (h[0] + 1, h[1] + 1) for h in heads)


def by_output(entry, k):
    """Per output position j, the per-seed shares right at length k."""
    rows = [(at_length(run, k) or {}).get("token_by_output") for run in runs_of(entry)]
    return [[row[j] if row else None for row in rows] for j in range(k)]


def output_share(entry, k, outputs):
    """Per seed, the share right over the output positions `outputs` (a slice) at length k."""
    columns = by_output(entry, k)[outputs]
    return [mean(seed) for seed in zip(*columns)] if columns else []


def error_shares(entry, k, kinds=("stop", "neighbour", "content", "noise", "absent")):
    """{kind: per-seed share of all outputs} of the wrong outputs at length k."""
    runs = [at_length(run, k) for run in runs_of(entry)]
    return {kind: [None if one is None else one["errors"].get(kind) for one in runs] for kind in kinds}


def entropy(entry, k):
    """Per seed, the output rows' attention entropy (nats) at length k, mean over blocks and heads."""
    out = []
    for run in runs_of(entry):
        blocks = (at_length(run, k) or {}).get("entropy")
        out.append(mean([v for heads in blocks for v in heads]) if blocks else None)
    return out


def lengths_table(first, named_entries, last):
    """Prints the mean exact match at every length 1..last, one row per (name, entry); the
    first column headed `first`."""
    print("| %s | " % first + " | ".join(str(k) for k in range(1, last + 1)) + " |")
    print("|---|" + "---|" * last)
    for name, entry in named_entries:
        print("| %s | %s |" % (name, " | ".join("%.2f" % mean(per_seed(entry, k, "exact")) for k in range(1, last + 1))))


def print_tables(tables, names):
    """A study's tables.py command line: prints the tables named (every one when none is),
    a blank line between them; exits naming the known ones for an unknown name."""
    for i, name in enumerate(names or list(tables)):
        if name not in tables:
            sys.exit("unknown table %s: %s" % (name, ", ".join(tables)))
        if i:
            print()
        tables[name]()


def paired_exact_table(column, pairs, labels, lengths):
    """Prints each (study, arm, first, second) of `pairs` as two rows, the arm's exact match
    over the trained lengths and at each of `lengths` under `first` and then `second`, each
    row named in a column headed `column` by its entry of `labels` (one per side)."""
    heads = " | ".join("k = %d" % k for k in lengths)
    print("| study | arm | %s | exact k <= N | %s |" % (column, heads))
    print("|---|---|---|---|" + "---|" * len(lengths))
    for study, arm, first, second in pairs:
        for label, entry in zip(labels, (first, second)):
            cells = " | ".join(cell(per_seed(entry, k, "exact")) for k in lengths)
            print("| %s | %s | %s | %s | %s |" % (study, arm, label, cell(trained_exact(entry)), cells))
