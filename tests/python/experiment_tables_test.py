#!/usr/bin/env python3
"""Every committed study's tables regenerate from its committed files, byte for byte: each
experiments/**/tables.py beside a tables.md is run with no argument and its output compared
with that file. A change to a study's files, to experiments/study_tables.py or to a tables.py
that moves a printed number fails here, naming the study and the first line that differs.

    python3 tests/python/experiment_tables_test.py --source REPO"""
import argparse
import os
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True, help="the repository's root")
    args = parser.parse_args()
    root = os.path.join(args.source, "experiments")
    checked, failed = 0, []
    for folder, _, files in sorted(os.walk(root)):
        if "tables.py" not in files or "tables.md" not in files:
            continue
        with open(os.path.join(folder, "tables.md")) as f:
            committed = f.read()
        run = subprocess.run([sys.executable, os.path.join(folder, "tables.py")], capture_output=True, text=True)
        checked += 1
        name = os.path.relpath(folder, args.source)
        if run.returncode != 0:
            failed.append("%s: tables.py exited %d: %s" % (name, run.returncode, run.stderr.strip()[-500:]))
            continue
        if run.stdout != committed:
            now, then = run.stdout.splitlines(), committed.splitlines()
            line = next((i for i, (a, b) in enumerate(zip(now, then)) if a != b), min(len(now), len(then)))
            failed.append("%s: tables.md line %d differs:\n  committed: %s\n  now:       %s"
                          % (name, line + 1, then[line] if line < len(then) else "(end)",
                             now[line] if line < len(now) else "(end)"))
    print("%d studies' tables checked" % checked)
    if checked < 5:
        failed.append("only %d tables.md found under %s: expected the past-2N studies' at least" % (checked, root))
    for failure in failed:
        print("FAILED " + failure)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
