"""The fixture variants, derived from the scheme modules' declarations; their seeds and
file names.

A variant's row fixes its seeds: BASE_SEED + 2 row (causal off) and BASE_SEED + 2 row + 1
(causal on); a variant of a causal-only scheme has only the causal file (2 row is left
unused). A new variant takes the next free row, so the files of the others stay the same.
"""

import dataclasses

from copytask_ref import registry

BASE_SEED = 20240601


def variants():
    """Every scheme's variants, ordered by row; names and rows are unique."""
    found = [dataclasses.replace(variant, scheme=scheme.name)
             for scheme in registry.schemes().values() for variant in scheme.variants]
    found.sort(key=lambda variant: variant.row)
    by_name, by_row = {}, {}
    for variant in found:
        for seen, key in ((by_name, variant.name), (by_row, variant.row)):
            if key in seen:
                raise RuntimeError("variants %r (%s) and %r (%s) have the same %s; the next free row is %d"
                                   % (seen[key].name, seen[key].scheme, variant.name, variant.scheme,
                                      "name" if seen is by_name else "row", next_free_row(found)))
            seen[key] = variant
    return found


def next_free_row(found=None):
    found = variants() if found is None else found
    return max((variant.row for variant in found), default=-1) + 1


def variant(name):
    for candidate in variants():
        if candidate.name == name:
            return candidate
    raise ValueError("unknown variant %r" % name)


def causal_flags(scheme_name):
    """The causal flags a variant of this scheme has files for, in file order."""
    return (True,) if registry.scheme(scheme_name).causal_only else (False, True)


def fixture_name(variant_name, causal):
    return f"parity_{variant_name}{'_causal' if causal else ''}.json"


def fixture_names(variant_):
    """The files of this variant, in file order."""
    return [fixture_name(variant_.name, causal) for causal in causal_flags(variant_.scheme)]


def seed(variant_, causal):
    return BASE_SEED + 2 * variant_.row + int(causal)


def options_on(variant_):
    """The option keys this variant turns on."""
    return [key for key in registry.options() if variant_.options.get(key)]
