#!/usr/bin/python3
"""Writes the parity fixtures tests/fixtures/parity_<variant>[_causal].json.

The command over python/copytask_ref, the independent float64 PyTorch reference of the
copytask transformer (its package docstring describes the model and the readings of the
spec; python/copytask_ref/README.md its layout). For each variant the scheme modules
declare and each causal flag its scheme takes (a causal-only scheme: only the causal file)
it draws the model from the variant's seed, runs the self-checks (every scheme's and
option's closed forms, the logits from math, causality, nn.TransformerEncoderLayer where
the positional term is a fixed bias, finite differences of every parameter) and writes the
config, tokens, targets, parameters, logits, loss, gradients and attention.

Usage:
    /usr/bin/python3 tests/reference/make_parity_fixtures.py [--out tests/fixtures]
        [--only VARIANT ...] [--scheme NAME ...] [--list]

    --only VARIANT ...   only these variants' files (the seeds do not change)
    --scheme NAME ...    every variant of these schemes, or with these options on
                         (--scheme alibi: alibi, alibi_offset, ..., alibi_dape;
                         --scheme dape: every *_dape variant)
    --list               the variants, their rows (seeds) and files, and the next free row

The float64 values are reproducible on one machine, but a gradient that is a long
reduction (positional.mlp0_weight of dynamic and fire, positional.dape.weight1 and
weight2) may differ in its last bits on another CPU: --only and --scheme regenerate some
variants without rewriting the others.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "python")))

from copytask_ref import checks, fixtures, registry, variants  # noqa: E402


def selected(all_variants, only, names):
    """The variants --only and --scheme pick (all of them when neither is given)."""
    if not only and not names:
        return all_variants
    return [v for v in all_variants
            if (only and v.name in only)
            or (names and (v.scheme in names or any(key in names for key in variants.options_on(v))))]


def print_list(all_variants):
    for v in all_variants:
        files = ", ".join(variants.fixture_names(v))
        print(f"{v.row:3d}  {v.name:28s} {v.scheme:11s} {files}")
    print(f"next free row: {variants.next_free_row(all_variants)}")


def main():
    all_variants = variants.variants()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.normpath(os.path.join(HERE, "..", "fixtures")),
                    help="output directory (default: tests/fixtures)")
    ap.add_argument("--only", nargs="+", metavar="VARIANT", choices=[v.name for v in all_variants],
                    help="write only these variants' files (the seeds do not change)")
    ap.add_argument("--scheme", nargs="+", metavar="NAME", choices=list(registry.schemes()) + list(registry.options()),
                    help="write every variant of these schemes, or with these options on")
    ap.add_argument("--list", action="store_true", help="list the variants and the next free row")
    args = ap.parse_args()
    if args.list:
        print_list(all_variants)
        return

    os.makedirs(args.out, exist_ok=True)
    checks.check_declarations()
    checks.check_static()
    for variant in selected(all_variants, args.only, args.scheme):
        for causal in variants.causal_flags(variant.scheme):   # causal only: (True,); else (False, True)
            fixture = fixtures.make_fixture(variant, causal)
            name = variants.fixture_name(variant.name, causal)
            path = os.path.join(args.out, name)
            fixtures.write_fixture(fixture, path)
            print(f"{name:40s} loss={fixture['loss']:.17g}  size={os.path.getsize(path)} B")
        stale = fixtures.stale_bidirectional_file(variant, args.out)
        assert stale is None, f"{stale}: {variant.scheme} is causal only"


if __name__ == "__main__":
    main()
