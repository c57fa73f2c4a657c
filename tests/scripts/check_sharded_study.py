"""The shard scripts' tests (study_scripts_test.sh, slurm_real_test.sh): tiny_study.json
trained in 3 shards into FOLDER must have every member complete, one record per shard
(each "ok", 2 members) and the report written.
Usage: check_sharded_study.py FOLDER WHAT"""
import json
import os
import sys

folder, what = sys.argv[1], sys.argv[2]
results = json.load(open(os.path.join(folder, "results.json")))
assert results["complete"] == {"runs": 6, "expected": 6, "missing": []}, (what, results["complete"])
shards = sorted(os.listdir(os.path.join(folder, "shards")))
assert shards == ["1-of-3.json", "2-of-3.json", "3-of-3.json"], (what, shards)
for name in shards:
    record = json.load(open(os.path.join(folder, "shards", name)))
    assert record["status"] == "ok" and len(record["members_trained"]) == 2, (what, name, record)
assert os.path.getsize(os.path.join(folder, "report.html")) > 10000, what
print("%s: 3 shards, 6 of 6 members, report written" % what)
