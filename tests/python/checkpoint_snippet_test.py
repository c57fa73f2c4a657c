#!/usr/bin/python3
"""The Python snippet of docs/output-files.md, run as a user would: it must load a member's model.pt with
torch.load and reproduce, in plain PyTorch, the attention maps and outputs that copytask
recorded for that member (attention.json of the member's folder).

Usage: checkpoint_snippet_test.py --copytask BUILD/copytask --source REPO_ROOT
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--copytask", required=True)
parser.add_argument("--source", required=True)
args = parser.parse_args()

readme = open(os.path.join(args.source, "docs", "output-files.md")).read()
match = re.search(r"<!-- checkpoint-snippet -->\s*```python\n(.*?)```", readme, re.S)
assert match, "docs/output-files.md has no ```python block after <!-- checkpoint-snippet -->"
snippet = match.group(1)
assert re.search(r'^member = ".*"', snippet, re.M), "the snippet names its member folder in a line member = \"...\""

study = tempfile.mkdtemp(prefix="copytask_snippet_")
try:
    # Every scheme, and the options that change its table, trained for real (their
    # learned parameters moved away from their starting values).
    schemes = [
        {"name": "none", "model.positional": "none"},
        {"name": "sinusoidal", "model.positional": "sinusoidal"},
        {"name": "learned", "model.positional": "learned"},
        {"name": "rope", "model.positional": "rope"},
        {"name": "rope-partial", "model.positional": "rope", "model.rope_fraction": 0.5, "model.rope_base": 100},
        {"name": "alibi-2h", "model.positional": "alibi", "model.heads": 2},
        {"name": "alibi+causal", "model.positional": "alibi", "model.causal": True},
        {"name": "alibi-offset", "model.positional": "alibi", "model.alibi_direction": "offset", "model.alibi_slopes": [0.5]},
        {"name": "alibi-two-sided", "model.positional": "alibi", "model.alibi_direction": "two-sided",
         "model.alibi_learned": True},
        {"name": "t5", "model.positional": "t5"},
        {"name": "dynamic", "model.positional": "dynamic", "model.dynamic_log_distance": True},
        {"name": "kerple", "model.positional": "kerple"},
        {"name": "fire+causal", "model.positional": "fire", "model.causal": True},
        {"name": "xpos+causal", "model.positional": "xpos", "model.causal": True, "model.xpos_scale_base": 8},
        {"name": "cope", "model.positional": "cope"},
        {"name": "cope+causal", "model.positional": "cope", "model.causal": True, "model.cope_positions": 4},
        {"name": "fox", "model.positional": "fox"},
        {"name": "fox+causal", "model.positional": "fox", "model.causal": True},
        {"name": "pope-2h", "model.positional": "pope", "model.heads": 2},
        {"name": "kerple+dape", "model.positional": "kerple", "model.dape": True, "model.dape_hidden": 8},
        {"name": "rope+length_scale", "model.positional": "rope", "model.length_scale": True},
        {"name": "t5+dape+length_scale+causal", "model.positional": "t5", "model.dape": True, "model.length_scale": True,
         "model.causal": True},
    ]
    # None left out: every scheme and option copytask lists (a new one fails here until it has an arm).
    listed = json.loads(subprocess.run([args.copytask, "schemes", "--json"], check=True, capture_output=True,
                                       text=True).stdout)
    armed = {scheme["model.positional"] for scheme in schemes}
    missing = [s["name"] for s in listed["schemes"] if s["name"] not in armed] + \
              [o["key"] for o in listed["options"] if not any(scheme.get("model." + o["key"]) for scheme in schemes)]
    assert not missing, "no arm for " + ", ".join(missing)
    command = [args.copytask, "compare", "task.examples=400", "model.embed=8", "model.hidden=16", "train.steps=60",
               "train.batch_size=32", "train.eval_every=30", "train.lr=0.01", "train.seeds=[0]", "train.device=cpu",
               "compare.schemes=" + json.dumps(schemes), "--out", study + "/s"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    os.chdir(args.source)  # the snippet finds python/copytask_forward.py from the repository root
    worst = 0.0
    for scheme in schemes:
        member = os.path.join(study, "s", "members", scheme["name"], "seed-0")
        code = re.sub(r'^member = ".*"', 'member = "%s"' % member, snippet, flags=re.M)
        scope = {}
        exec(compile(code, "docs/output-files.md snippet", "exec"), scope)
        recorded = json.load(open(os.path.join(member, "attention.json")))
        assert recorded["inputs"][0] == scope["tokens"][0].tolist(), "the snippet's input is the default probe"
        probe = recorded["probes"][0]
        assert scope["logits"].argmax(-1)[0].tolist() == probe["output"], (scheme["name"], probe["output"])
        for layer, weights in enumerate(scope["attention"]):
            difference = (weights[0].double() - torch.tensor(probe["attention"][layer], dtype=torch.float64)).abs().max().item()
            worst = max(worst, difference)
            assert difference < 1e-5, "%s layer %d: attention differs by %g" % (scheme["name"], layer, difference)
        print("%-15s output %s, attention maxdiff %.2g" % (scheme["name"], probe["output"], worst))
    # A scheme copytask_forward.py does not know is refused, not run as another.
    try:
        scope["forward"](scope["params"], dict(scope["model"], positional="nope"), scope["tokens"])
        raise AssertionError("copytask_forward ran an unknown scheme")
    except ValueError as error:
        assert "nope" in str(error), error
    print("the docs/output-files.md snippet reproduces copytask's outputs and attention (maxdiff %.2g), torch %s" % (worst, torch.__version__))
finally:
    shutil.rmtree(study, ignore_errors=True)
