#!/usr/bin/env python3
"""scripts/compare_results.py on the committed reference study: against itself every scheme is
"same" (its gzipped copy too); with one seed moved by 0.01 that scheme is no longer "same" but "in spread" (its std
is larger than the mean's move of 0.002); with every seed moved by 0.1 it "differs"; a scheme
missing from the second run exits 2.

    compare_results_test.py SOURCE_DIR
"""
import copy
import gzip
import json
import os
import subprocess
import sys
import tempfile

source = sys.argv[1]
script = os.path.join(source, "scripts", "compare_results.py")
reference = os.path.join(source, "experiments", "reference-study", "results.json")
with open(reference) as f:
    results = json.load(f)


def run(b, *extra, gzipped=False):
    with tempfile.TemporaryDirectory() as tmp:
        path, out = os.path.join(tmp, "b.json.gz" if gzipped else "b.json"), os.path.join(tmp, "out.json")
        with (gzip.open(path, "wt") if gzipped else open(path, "w")) as f:
            json.dump(b, f)
        done = subprocess.run([sys.executable, script, reference, path, "--labels", "CPU", "GPU", "--json", out] +
                              list(extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        verdicts = {}
        if os.path.exists(out):
            with open(out) as f:
                verdicts = {row["scheme"]: row["verdict"] for row in json.load(f)["schemes"]}
        return done, verdicts


def check(condition, message):
    if not condition:
        sys.exit("compare_results_test: FAIL: " + message)


done, verdicts = run(results)
check(done.returncode == 0, done.stderr)
check(set(verdicts) == set(results["scheme_order"]), str(verdicts))
check(all(v == "same" for v in verdicts.values()), str(verdicts))
check("| rope |" in done.stdout and "6 schemes: 6 same" in done.stdout, done.stdout)
# A study folder's gzipped results.json.gz reads as the plain file.
done, verdicts = run(results, gzipped=True)
check(done.returncode == 0 and all(v == "same" for v in verdicts.values()), done.stderr + str(verdicts))

moved = copy.deepcopy(results)
scheme = moved["schemes"]["alibi+causal"]  # std 0.015 over its 5 seeds
scheme["runs"][0]["test_exact"] += 0.01
scheme["test_exact"]["mean"] += 0.01 / len(scheme["runs"])
done, verdicts = run(moved)
check(verdicts["alibi+causal"] == "in spread" and verdicts["rope"] == "same", str(verdicts))

far = copy.deepcopy(results)
for run_ in far["schemes"]["rope"]["runs"]:
    run_["test_exact"] -= 0.1
far["schemes"]["rope"]["test_exact"]["mean"] -= 0.1
done, verdicts = run(far)
check(verdicts["rope"] == "differs", str(verdicts))

partial = copy.deepcopy(results)
del partial["schemes"]["none"]
done, verdicts = run(partial)
check(done.returncode == 2 and "missing from GPU: none" in done.stderr, done.stderr)
# --metric: another per-seed number; --strict: exit 1 unless every scheme is the same.
lossy = copy.deepcopy(results)
for run_ in lossy["schemes"]["rope"]["runs"]:
    run_["final_loss"] += 0.05
done, verdicts = run(lossy, "--metric", "final_loss", "--tolerance", "0.01")
check(done.returncode == 0 and "final loss" in done.stdout and list(verdicts.values()).count("same") == len(verdicts) - 1,
      done.stdout + str(verdicts))
done, verdicts = run(lossy, "--metric", "final_loss", "--tolerance", "0.01", "--strict")
check(done.returncode == 1 and "--strict" in done.stderr, done.stderr)
done, verdicts = run(results, "--metric", "test_token", "--strict")
check(done.returncode == 0 and all(v == "same" for v in verdicts.values()), str(verdicts))
print("compare_results_test: OK (same, in spread, differs, missing, --metric, --strict)")
