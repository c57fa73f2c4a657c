#!/usr/bin/env python3
"""The GPU architectures whose code an object file or binary holds: sm_XX for each ELF image
of its .nv_fatbin section, one a line, sorted, once each.

nvcc compresses the images (CMakeLists.txt: --compress-mode=size), so their names are no
longer text a `strings` finds; each image's header still says its architecture. The layout
(as cuobjdump reads it): the fatbin's header (magic 0xBA55ED50, u16 version, u16 header
size, u64 size of what follows), then the images one after another, each a header (u16
kind: 1 PTX, 2 ELF; u16 version; u32 header size; u64 payload size; ...; u32 architecture
at byte 28) and its payload.

  scripts/fatbin_archs.py OBJECT
Exits 1, saying why, where the object has no .nv_fatbin or it does not parse.
"""
import os
import struct
import subprocess
import sys
import tempfile

MAGIC = 0xBA55ED50
KIND_ELF = 2


def archs(blob):
    found, at = set(), 0
    while at + 16 <= len(blob):
        magic, _, header, size = struct.unpack_from("<IHHQ", blob, at)
        if magic != MAGIC:
            if any(blob[at:at + 16]):
                raise ValueError("no fatbin header at byte %d" % at)
            at += 16  # padding between the fatbins of a linked binary
            continue
        entry, end = at + header, at + header + size
        while entry + 32 <= end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", blob, entry)
            arch = struct.unpack_from("<I", blob, entry + 28)[0]
            if entry_header < 32 or entry + entry_header + payload > end:
                raise ValueError("an image's header at byte %d does not fit its fatbin" % entry)
            if kind == KIND_ELF:
                found.add("sm_%d" % arch)
            entry += entry_header + payload
        at = end
    return sorted(found)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "fatbin")
        done = subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", sys.argv[1], out],
                              capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(out) or os.path.getsize(out) == 0:
            sys.exit("fatbin_archs: %s has no .nv_fatbin section %s" % (sys.argv[1], done.stderr.strip()))
        blob = open(out, "rb").read()
    try:
        found = archs(blob)
    except ValueError as e:
        sys.exit("fatbin_archs: %s: %s" % (sys.argv[1], e))
    if not found:
        sys.exit("fatbin_archs: %s: no ELF image in its fatbin" % sys.argv[1])
    print("\n".join(found))


if __name__ == "__main__":
    main()
