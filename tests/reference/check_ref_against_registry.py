#!/usr/bin/python3
"""python/copytask_ref against the C++ registry of positional schemes.

Runs `BINARY schemes --json` (the schemes and options src/model/schemes/registry.cpp
registers) and fails, naming what is missing and which file to add or change, when:
  * a registered scheme or option has no module in python/copytask_ref (schemes/<name>.py,
    options/<key>.py), or a module has no registered scheme or option;
  * a scheme has no fixture for a causal flag it takes (tests/fixtures/parity_<variant>.json
    and parity_<variant>_causal.json of one of its variants; a causal-only scheme has only
    the _causal file, and a bidirectional file of it is an error too);
  * a scheme's causal-only flag differs between the registry and its module;
  * the schemes an option attaches to differ (the registry's options[].schemes, the
    module's attaches_to over the package's schemes);
  * a layer form's value (src/config/layer_form.cpp, `layer_forms` in the listing) is
    missing from python/copytask_ref/layer_forms.py or the other way round, or from the
    benchmarks' PyTorch peer (scripts/baseline_pytorch.py), or a value other than its key's
    default has no fixture.

Usage:
    /usr/bin/python3 tests/reference/check_ref_against_registry.py BINARY [--fixtures tests/fixtures]
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "python")))
from copytask_ref import layer_forms, registry, variants  # noqa: E402

PACKAGE = "python/copytask_ref"
HOW_TO = "see python/copytask_ref/README.md"


def registered(binary):
    """The registry as the binary prints it: ({name: scheme entry}, {key: option entry})."""
    done = subprocess.run([binary, "schemes", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    if done.returncode != 0:
        raise SystemExit("FAIL: %s schemes --json exited with %d: %s"
                         % (binary, done.returncode, (done.stderr or done.stdout).strip()))
    try:
        listing = json.loads(done.stdout)
    except ValueError as error:
        raise SystemExit("FAIL: %s schemes --json did not print JSON (%s): %.200s" % (binary, error, done.stdout))
    return ({entry["name"]: entry for entry in listing["schemes"]},
            {entry["key"]: entry for entry in listing["options"]},
            [(entry["key"], entry["value"]) for entry in listing["layer_forms"]])


def module_problems(kind, folder, declared_names, registered_names):
    problems = []
    for name in registered_names:
        if name not in declared_names:
            problems.append("%s %r is registered (src/model/schemes/registry.cpp) but has no module: add "
                            "%s/%s/%s.py declaring %s (%s), then make its fixtures: "
                            "tests/reference/make_parity_fixtures.py --scheme %s"
                            % (kind, name, PACKAGE, folder, name, kind.upper(), HOW_TO, name))
    for name in declared_names:
        if name not in registered_names:
            problems.append("%s/%s/%s.py declares %s %r, which the C++ registry does not register: add it to "
                            "src/model/schemes/registry.cpp, or remove the module" % (PACKAGE, folder, name, kind, name))
    return problems


def causal_only_problems(cpp_schemes):
    problems = []
    for name, scheme in registry.schemes().items():
        if name in cpp_schemes and bool(cpp_schemes[name]["causal_only"]) != scheme.causal_only:
            problems.append("scheme %r: causal_only is %s in the C++ registry (src/model/schemes/%s.cpp) but %s in "
                            "%s/schemes/%s.py" % (name, str(bool(cpp_schemes[name]["causal_only"])).lower(), name,
                                                   str(scheme.causal_only).lower(), PACKAGE, name))
    return problems


def fixture_problems(directory):
    """Each scheme of the package has, for each causal flag it takes, the file of one of its
    variants; a causal-only scheme has no bidirectional file."""
    problems = []
    present = set(os.listdir(directory)) if os.path.isdir(directory) else set()
    by_scheme = {}
    for variant in variants.variants():
        by_scheme.setdefault(variant.scheme, []).append(variant)
    for name, scheme in registry.schemes().items():
        own = by_scheme.get(name, [])
        for causal in variants.causal_flags(name):
            if not any(variants.fixture_name(v.name, causal) in present for v in own):
                expected = variants.fixture_name(name, causal)
                if own:
                    advice = "make them: tests/reference/make_parity_fixtures.py --scheme %s" % name
                else:
                    advice = ("declare a Variant in %s/schemes/%s.py (make_parity_fixtures.py --list gives the "
                              "next free row), then tests/reference/make_parity_fixtures.py --scheme %s"
                              % (PACKAGE, name, name))
                problems.append("scheme %r has no %s fixture (e.g. %s/%s): %s"
                                % (name, "causal" if causal else "bidirectional", directory, expected, advice))
        if scheme.causal_only:
            for v in own:
                stale = variants.fixture_name(v.name, False)
                if stale in present:
                    problems.append("%s/%s: scheme %r is causal only; remove the file" % (directory, stale, name))
    return problems


def layer_form_problems(cpp_forms, directory):
    """Every value of every layer-form key on both sides (src/config/layer_form.cpp,
    layer_forms.py), and a fixture of each value other than its key's default (a variant
    with layer={key: value}, both its files present)."""
    problems = []
    ours = [("model." + key, value) for key, values in layer_forms.KEYS.items() for value in values]
    for key, value in cpp_forms:
        if (key, value) not in ours:
            problems.append("layer form %s=%s is in src/config/layer_form.cpp but not in %s/layer_forms.py: write it "
                            "there from its definition (docs/adding-a-layer-form.md)" % (key, value, PACKAGE))
    for key, value in ours:
        if (key, value) not in cpp_forms:
            problems.append("%s/layer_forms.py has layer form %s=%s, which src/config/layer_form.cpp does not list"
                            % (PACKAGE, key, value))
    # The PyTorch peer the benchmarks time (scripts/baseline_pytorch.py --activation).
    sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "scripts")))
    import baseline_pytorch  # noqa: E402
    peer = [("model.activation", value) for value in baseline_pytorch.ACTIVATIONS]
    for key, value in cpp_forms:
        if key == "model.activation" and (key, value) not in peer:
            problems.append("layer form %s=%s has no --activation %s in scripts/baseline_pytorch.py (ACTIVATIONS)"
                            % (key, value, value))
    present = set(os.listdir(directory)) if os.path.isdir(directory) else set()
    for key, value in ours + [form for form in cpp_forms if form not in ours]:
        leaf = key[len("model."):]
        if layer_forms.DEFAULTS.get(leaf) == value:
            continue  # every other fixture has it
        own = [v for v in variants.variants() if v.layer.get(leaf) == value]
        if not own or not all(name in present for v in own for name in variants.fixture_names(v)):
            problems.append("layer form %s=%s has no fixture in %s: declare a Variant with layer={%r: %r} in a "
                            "scheme module (make_parity_fixtures.py --list gives the next free row), then "
                            "tests/reference/make_parity_fixtures.py --only <its name>"
                            % (key, value, directory, leaf, value))
    return problems


def attachment_problems(cpp_schemes, cpp_options):
    """The schemes each option attaches to, compared over the schemes both sides have (a
    scheme one side lacks is reported on its own)."""
    problems = []
    common = set(cpp_schemes) & set(registry.schemes())
    for key, option in registry.options().items():
        if key not in cpp_options:
            continue
        cpp = set(cpp_options[key]["schemes"]) & common
        ours = set(registry.schemes_of(option)) & common
        if cpp != ours:
            parts = []
            if cpp - ours:
                parts.append("the registry attaches it to %s, the reference does not" % ", ".join(sorted(cpp - ours)))
            if ours - cpp:
                parts.append("the reference attaches it to %s, the registry does not" % ", ".join(sorted(ours - cpp)))
            problems.append("option %r: %s (%s/options/%s.py attaches_to, or the schemes' flags it reads)"
                            % (key, "; ".join(parts), PACKAGE, key))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", help="the copytask binary")
    ap.add_argument("--fixtures", default=os.path.normpath(os.path.join(HERE, "..", "fixtures")))
    args = ap.parse_args()
    cpp_schemes, cpp_options, cpp_forms = registered(args.binary)
    problems = (module_problems("scheme", "schemes", list(registry.schemes()), list(cpp_schemes))
                + module_problems("option", "options", list(registry.options()), list(cpp_options))
                + causal_only_problems(cpp_schemes)
                + fixture_problems(args.fixtures)
                + attachment_problems(cpp_schemes, cpp_options)
                + layer_form_problems(cpp_forms, args.fixtures))
    for problem in problems:
        print("FAIL: " + problem)
    if problems:
        return 1
    print("python/copytask_ref agrees with the C++ registry: %d schemes (%s), %d options (%s), %d layer forms "
          "(%s); every scheme and layer form has its fixtures in %s"
          % (len(cpp_schemes), ", ".join(cpp_schemes), len(cpp_options), ", ".join(cpp_options), len(cpp_forms),
             ", ".join("%s=%s" % form for form in cpp_forms), args.fixtures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
