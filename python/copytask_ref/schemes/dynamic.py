"""dynamic: x-transformers' dynamic position bias, an MLP of d (or of sign(d) log(1 + |d|))."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from copytask_ref.bias_mlp import draw_mlp, register_mlp
from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional, signed_distance


class DynamicBias(Positional):
    """silu hidden layers of width `width`, `depth` of them, then one bias per head."""

    def __init__(self, H, width, depth, log_distance, dtype):
        super().__init__(dtype)
        depth = int(depth)
        assert depth >= 1
        self.depth, self.log_distance = depth, log_distance
        self.sizes = [1] + [int(width)] * depth + [H]
        register_mlp(self, self.sizes, dtype)

    def draw_parameters(self, gen):
        draw_mlp(self, self.sizes, gen)

    def score_bias(self, T):
        x = signed_distance(T, self.dtype)
        if self.log_distance:
            x = torch.sign(x) * torch.log(1.0 + x.abs())
        h = x[..., None]                                             # (T, T, 1)
        for k in range(self.depth):
            h = F.silu(h @ getattr(self, f"mlp{k}_weight") + getattr(self, f"mlp{k}_bias"))   # (T, T, W)
        out = h @ getattr(self, f"mlp{self.depth}_weight") + getattr(self, f"mlp{self.depth}_bias")
        return out.permute(2, 0, 1)                                  # (T, T, H) -> (H, T, T)


def parameter_shapes(config):
    W, depth, H = config.options["bias_mlp_hidden"], config.options["dynamic_depth"], config.heads
    shapes = {"mlp0_weight": (1, W), "mlp0_bias": (W,)}
    for k in range(1, depth):
        shapes.update({f"mlp{k}_weight": (W, W), f"mlp{k}_bias": (W,)})
    shapes.update({f"mlp{depth}_weight": (W, H), f"mlp{depth}_bias": (H,)})
    return shapes


def check_model(run):
    """x-transformers' way: the MLP (nn.Linear + nn.SiLU) on the 2T-1 distances
    -(T-1)..T-1, then indexed by i - j + T - 1."""
    from copytask_ref.checks import close

    o, pos, T, H = run.options, run.positional, run.config.context, run.config.heads
    with torch.no_grad():
        bias = pos.score_bias(T)
    W, depth = o["bias_mlp_hidden"], o["dynamic_depth"]
    layers = []
    for k in range(depth + 1):
        w, b_ = getattr(pos, f"mlp{k}_weight"), getattr(pos, f"mlp{k}_bias")
        lin = nn.Linear(w.shape[0], w.shape[1], dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(w.t())
            lin.bias.copy_(b_)
        layers += [lin, nn.SiLU()] if k < depth else [lin]
    assert layers[0].in_features == 1 and layers[-1].out_features == H
    assert all(l.out_features == W for l in layers[:-1] if isinstance(l, nn.Linear))
    mlp = nn.Sequential(*layers)
    dist = torch.arange(-T + 1, T, dtype=torch.float64)
    if o["dynamic_log_distance"]:
        dist = torch.sign(dist) * torch.log(dist.abs() + 1)
    with torch.no_grad():
        table = mlp(dist[:, None])                                # (2T-1, H)
    idx = torch.arange(T)[:, None] - torch.arange(T)[None, :] + T - 1
    expect = table[idx].permute(2, 0, 1)                          # (T, T, H) -> (H, T, T)
    assert close(bias, expect, 1e-13), (run.variant, (bias - expect).abs().max())


SCHEME = Scheme(
    name="dynamic",
    summary="score bias MLP(d) or MLP(sign(d) log(1 + |d|)), silu hidden layers",
    build=lambda config, dtype: DynamicBias(config.heads, config.options["bias_mlp_hidden"],
                                            config.options["dynamic_depth"],
                                            config.options["dynamic_log_distance"], dtype),
    defaults={"bias_mlp_hidden": 32, "dynamic_depth": 2, "dynamic_log_distance": False},
    score_bias=True,
    variants=(
        Variant("dynamic", 10, {"bias_mlp_hidden": 6}),
        Variant("dynamic_log", 11, {"bias_mlp_hidden": 6, "dynamic_depth": 3, "dynamic_log_distance": True}),
        Variant("dynamic_dape", 21, {"bias_mlp_hidden": 6, "dape": True, "dape_hidden": 6}),
        Variant("dynamic_coupled", 48, {"bias_mlp_hidden": 6}, position_ids="coupled"),
    ),
    parameter_shapes=parameter_shapes,
    check_model=check_model,
)
