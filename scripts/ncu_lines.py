#!/usr/bin/env python3
"""The step kernel's warp stall samples by source line, from ncu's SASS page.

gpu_run.sh's fused-bench stage brings back fused_sass.csv.gz: ncu's samples of one launch,
instruction by instruction, without source lines (ncu imports the kernels' headers only when
it finds them at the build's paths). The binary that ran holds the kernel's line table
(-lineinfo): nvdisasm -g prints each instruction's offset under its file and line, and an
instruction's offset is its address less the kernel's first. So each sample is given its
line, and the lines are ranked by their share of the samples, each with the stall reasons
that hold most of it and the instructions it executed.

  scripts/ncu_lines.py BINARY SASS_CSV_GZ [--kernel NAME] [--top N] [--csv OUT]
    BINARY: the copytask that ran (gpu-bundle/bin/copytask) or the kernels' object file
    --kernel: a part of the kernel's mangled name (default fused_step_kernelILb0E: the step
              kernel with its kept activations in shared memory; ILb1E: in global memory)

It also prints the instructions executed by opcode: a multiply-add (FFMA) is an issue slot
of its own, so the FFMAs' share of the instructions bounds the share of the FP32 peak at any
issue rate.

cuobjdump and nvdisasm come with the CUDA toolkit; where it lacks them, PyPI has them
(pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm), or set CUDA_BIN to their folder.
"""
import argparse
import collections
import csv
import glob
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile


def tool(name):
    folder = os.environ.get("CUDA_BIN")
    path = os.path.join(folder, name) if folder else shutil.which(name)
    if not path or not os.path.exists(path):
        sys.exit("ncu_lines: %s not found: install the CUDA toolkit's, or pip install nvidia-cuda-%s, "
                 "and set CUDA_BIN to its bin folder" % (name, name))
    return path


def line_table(binary, kernel):
    """{offset: (file, line)} and {offset: opcode} of the kernel's instructions."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([tool("cuobjdump"), "-xelf", "all", os.path.abspath(binary)], cwd=folder, check=True,
                       stdout=subprocess.DEVNULL)
        listing = ""
        for cubin in sorted(glob.glob(os.path.join(folder, "*.cubin"))):
            text = subprocess.run([tool("nvdisasm"), "-g", "-c", cubin], check=True, capture_output=True,
                                  text=True).stdout
            if kernel in text:
                listing = text
                break
    if not listing:
        sys.exit("ncu_lines: no kernel named *%s* in %s" % (kernel, binary))
    lines = listing.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith(".text.") and kernel in l)
    where, opcode, current = {}, {}, None
    for l in lines[start + 1:]:
        if l.startswith(".text."):
            break  # the next function
        m = re.match(r'\s*//## File "(.*)", line (\d+)', l)
        if m:
            current = (m.group(1), int(m.group(2)))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", l)
        if m:
            offset = int(m.group(1), 16)
            where[offset] = current
            opcode[offset] = re.sub(r"^@!?U?P\w+\s+", "", m.group(2)).split()[0]
    return where, opcode


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("sass_csv")
    parser.add_argument("--kernel", default="fused_step_kernelILb0E")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--csv", help="every line's row into this file")
    args = parser.parse_args()
    where, opcode = line_table(args.binary, args.kernel)
    with gzip.open(args.sass_csv, "rt") if args.sass_csv.endswith(".gz") else open(args.sass_csv) as f:
        rows = list(csv.reader(f))
    header_at = next(i for i, r in enumerate(rows) if "Address" in r)
    header, data = rows[header_at], rows[header_at + 1:]
    address, source = header.index("Address"), header.index("Source")
    samples, executed = header.index("Warp Stall Sampling (All Samples)"), header.index("Instructions Executed")
    reasons = [(i, h[len("stall_"):]) for i, h in enumerate(header) if h.startswith("stall_") and "Not Issued" not in h]
    first = int(data[0][address], 16)
    by_line, executed_by_line, executed_by_opcode = collections.Counter(), collections.Counter(), collections.Counter()
    reasons_by_line = collections.defaultdict(collections.Counter)
    total, mismatched = 0, 0
    for r in data:
        offset = int(r[address], 16) - first
        ncu_opcode = re.sub(r"^@!?U?P\w+\s+", "", r[source].strip()).split()[:1]
        if [opcode.get(offset)] != ncu_opcode:
            mismatched += 1
        key = where.get(offset) or ("?", 0)
        n = int(r[samples] or 0)
        total += n
        by_line[key] += n
        executed_by_line[key] += int(r[executed] or 0)
        executed_by_opcode[(opcode.get(offset) or "?").split(".")[0]] += int(r[executed] or 0)
        for i, name in reasons:
            if r[i] and int(r[i]):
                reasons_by_line[key][name] += int(r[i])
    if mismatched:
        sys.exit("ncu_lines: %d of %d instructions differ between the binary and the samples: not the binary that ran"
                 % (mismatched, len(data)))
    text = {}

    def source_text(key):
        if key not in text:
            path, line = key
            candidates = [path, os.path.join("src", path.split("/src/", 1)[-1])] + glob.glob(
                os.path.join("src", "*", os.path.basename(path)))
            found = next((p for p in candidates if os.path.isfile(p)), None)
            text[key] = open(found).read().split("\n")[line - 1].strip() if found and line > 0 else ""
        return text[key]

    all_reasons = collections.Counter()
    for counter in reasons_by_line.values():
        all_reasons.update(counter)
    print("%d samples over %d instructions; by stall reason: %s" %
          (total, len(data), ", ".join("%s %.1f%%" % (k, 100 * v / total) for k, v in all_reasons.most_common(8))))
    instructions = sum(executed_by_opcode.values())
    print("%.3g warp instructions executed; by opcode: %s" %
          (instructions, ", ".join("%s %.1f%%" % (k, 100 * v / instructions)
                                   for k, v in executed_by_opcode.most_common(10))))
    print("%7s  %-28s %10s  %-44s %s" % ("share", "file:line", "executed", "stall reasons", "source"))
    for key, n in by_line.most_common(args.top):
        top = ", ".join("%s %.0f%%" % (k, 100 * v / n) for k, v in reasons_by_line[key].most_common(3)) if n else ""
        print("%6.2f%%  %-28s %9.1fM  %-44s %.70s" % (100 * n / total, "%s:%d" % (os.path.basename(key[0]), key[1]),
                                                   executed_by_line[key] / 1e6, top, source_text(key)))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["file", "line", "samples", "share", "instructions_executed"] + [name for _, name in reasons] +
                       ["source"])
            for key, n in by_line.most_common():
                w.writerow([os.path.basename(key[0]), key[1], n, "%.5f" % (n / total), executed_by_line[key]] +
                           [reasons_by_line[key][name] for _, name in reasons] + [source_text(key)])


if __name__ == "__main__":
    main()
