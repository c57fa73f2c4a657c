"""A fixture's JSON file: one line per top-level key and per parameter."""

import json

import torch


def tensor_entry(t):
    """{"shape", "data"}: data flat and row-major, float64."""
    t = t.detach().to(torch.float64).contiguous()
    return {"shape": list(t.shape), "data": t.reshape(-1).tolist()}


def dump_json(obj, path):
    """JSON with one line per top-level key / per parameter; floats via repr
    (shortest round-trip representation, up to 17 significant digits)."""
    lines = ["{"]
    keys = list(obj.keys())
    for n, key in enumerate(keys):
        val = obj[key]
        comma = "," if n < len(keys) - 1 else ""
        if key in ("params", "grads"):
            lines.append(f"  {json.dumps(key)}: {{")
            names = list(val.keys())
            for m, name in enumerate(names):
                c2 = "," if m < len(names) - 1 else ""
                lines.append(f"    {json.dumps(name)}: "
                             f"{json.dumps(val[name], separators=(',', ':'), allow_nan=False)}{c2}")
            lines.append("  }" + comma)
        else:
            lines.append(f"  {json.dumps(key)}: "
                         f"{json.dumps(val, separators=(',', ':'), allow_nan=False)}{comma}")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
