#!/usr/bin/env python3
"""Writes a study folder's gzipped results.json.gz and metrics.jsonl.gz again with the
measurements of why (source_attention, entropy, token_by_output and the error kinds'
shares, per run and their means over seeds) at 6 significant digits, the precision copytask
keeps them at since it rounds them itself (measurement_rounded, src/report/scores.h). For
the folders of studies run before that: their 17 written digits were two thirds of the
files. No other number is touched; every table the study's tables.py prints is the same.

    python3 experiments/round_measurements.py FOLDER [FOLDER ...]
"""
import gzip
import json
import os
import sys

KEYS = ("source_attention", "entropy", "token_by_output", "errors")


def rounded(value, inside=False):
    if isinstance(value, dict):
        return {k: rounded(v, inside or k in KEYS) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, inside) for v in value]
    if inside and isinstance(value, float):
        return float("%.6g" % value)
    return value


def rewrite(path, text):
    temporary = path + ".tmp"
    with gzip.GzipFile(temporary, "wb", compresslevel=9, mtime=0) as f:  # gzip -9 -n
        f.write(text.encode())
    os.replace(temporary, path)


for folder in sys.argv[1:]:
    results = os.path.join(folder, "results.json.gz")
    if os.path.exists(results):
        with gzip.open(results, "rt") as f:
            data = json.load(f)
        rewrite(results, json.dumps(rounded(data), indent=2, ensure_ascii=False) + "\n")
    metrics = os.path.join(folder, "metrics.jsonl.gz")
    if os.path.exists(metrics):
        with gzip.open(metrics, "rt") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        rewrite(metrics, "".join(json.dumps(rounded(line), separators=(",", ":"), ensure_ascii=False) + "\n" for line in lines))
    print(folder, *("%s %.2f MB" % (name, os.path.getsize(os.path.join(folder, name)) / 1e6)
                    for name in ("results.json.gz", "metrics.jsonl.gz") if os.path.exists(os.path.join(folder, name))))
