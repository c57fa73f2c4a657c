#!/usr/bin/python3
"""The pandas snippet of docs/output-files.md, run as a user would on a trained study's
results.csv (Debian's python3-pandas): its table must hold, for every arm, the mean and the
number of seeds of test exact match that copytask's own results.json gives, and every number
of results.csv must be the one results.json holds, bit for bit (read with pandas'
round_trip float parser).

Usage: results_csv_snippet_test.py --copytask BUILD/copytask --source REPO_ROOT
"""

import argparse
import contextlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import tempfile

import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--copytask", required=True)
parser.add_argument("--source", required=True)
args = parser.parse_args()

doc = open(os.path.join(args.source, "docs", "output-files.md")).read()
match = re.search(r"<!-- results-csv-snippet -->\s*```python\n(.*?)```", doc, re.S)
assert match, "docs/output-files.md has no ```python block after <!-- results-csv-snippet -->"
snippet = match.group(1)
assert len(snippet.strip().splitlines()) == 3, "the snippet is three lines"
assert re.search(r'pd\.read_csv\(".*results\.csv"\)', snippet), "the snippet reads a study's results.csv by its path"

work = tempfile.mkdtemp(prefix="copytask_csv_")
try:
    study = os.path.join(work, "s")
    schemes = [{"name": "rope", "model.positional": "rope"},
               {"name": "alibi+causal", "model.positional": "alibi", "model.causal": True},
               {"name": "reverse-t5", "model.positional": "t5", "task.kind": "reverse"}]
    command = [args.copytask, "compare", "task.examples=200", "model.embed=8", "model.hidden=16", "train.steps=40",
               "train.batch_size=32", "train.eval_every=20", "train.lr=0.01", "train.seeds=[0,1,2]",
               "train.device=cpu", "task.max_len=3", "task.context=8", "eval.max_len=5", "eval.per_length=10",
               "compare.schemes=" + json.dumps(schemes), "--out", study]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    code = re.sub(r'pd\.read_csv\(".*?"\)', 'pd.read_csv(%r)' % os.path.join(study, "results.csv"), snippet)
    scope, printed = {}, io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "docs/output-files.md results-csv snippet", "exec"), scope)
    print(printed.getvalue())
    recorded = json.load(open(os.path.join(study, "results.json")))
    results = scope["results"]
    assert list(results.columns) == ["arm", "scheme", "causal", "seed", "task", "length", "metric", "value"], \
        list(results.columns)
    table = results.query("metric == 'test_exact'").groupby("arm")["value"].agg(["mean", "std", "count"])
    assert sorted(table.index) == sorted(s["name"] for s in schemes), table.index
    for arm in table.index:
        summary = recorded["schemes"][arm]["test_exact"]
        assert table.loc[arm, "count"] == summary["n"] == 3, (arm, table.loc[arm, "count"])
        assert abs(table.loc[arm, "mean"] - summary["mean"]) < 1e-12, (arm, table.loc[arm, "mean"], summary["mean"])
        assert arm in printed.getvalue(), "the printed table names " + arm

    # Every number, bit for bit (pandas' default float parser may miss the last bit; its
    # round_trip parser, like Python's float(), reads back the double written), and the
    # descriptive columns from the arm's config.
    results = pd.read_csv(os.path.join(study, "results.csv"), float_precision="round_trip")
    rows = 0
    for arm, entry in recorded["schemes"].items():
        task = "reverse" if arm == "reverse-t5" else "copy"
        for run in entry["runs"]:
            mine = results[(results.arm == arm) & (results.seed == run["seed"])]
            assert (mine.scheme == entry["positional"]).all() and (mine.causal == entry["causal"]).all()
            assert (mine.task == task).all(), (arm, set(mine.task))
            expected = {(m, None): run[m] for m in
                        ["test_exact", "test_token", "train_exact", "train_token", "final_loss", "test_loss"]}
            for k, value in run["test_exact_by_length"].items():
                expected[("test_exact_by_length", int(k))] = value
            for k, one in run["length_generalization"]["by_length"].items():
                if one["exact"] is not None:
                    expected[("length_exact", int(k))] = one["exact"]
                    expected[("length_token", int(k))] = one["token"]
            got = {(r.metric, None if math.isnan(r.length) else int(r.length)): r.value for r in mine.itertuples()}
            assert got == expected, (arm, run["seed"], sorted(set(got.items()) ^ set(expected.items()))[:6])
            rows += len(expected)
    assert rows == len(results), (rows, len(results))
    print("results.csv: %d rows, every one equal to results.json's number" % rows)
finally:
    shutil.rmtree(work)
