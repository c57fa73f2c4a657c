"""fire: FIRE (Li et al. 2023), bidirectional: an MLP of the distance normalised by the
query's position, sign(d) psi(|d|) / psi(max(L, i))."""

import math

import torch
import torch.nn as nn

from copytask_ref import draws
from copytask_ref.bias_mlp import draw_mlp, register_mlp
from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional, signed_distance


class FIRE(Positional):
    """psi(z) = log(|c| z + 1), L = |threshold_scale * L0|; relu hidden layer of `width`."""

    def __init__(self, H, width, L0, dtype):
        super().__init__(dtype)
        self.L0 = float(L0)
        self.c = draws.empty_parameter((1,), dtype)
        self.threshold_scale = draws.empty_parameter((1,), dtype)
        self.sizes = [1, int(width), H]
        register_mlp(self, self.sizes, dtype)

    def draw_parameters(self, gen):
        draws.assign(self.c, draws.uniform_range(gen, (1,), 0.05, 0.5))
        while True:   # L = |threshold_scale * L0| must not tie with a position i
            scale = draws.uniform_range(gen, (1,), 0.8, 1.2)
            L = abs(scale.item() * self.L0)
            if abs(L - round(L)) > 1e-3:
                break
        draws.assign(self.threshold_scale, scale)
        draw_mlp(self, self.sizes, gen)

    def psi(self, z):
        return torch.log(self.c.abs() * z + 1.0)

    def threshold(self):
        return (self.threshold_scale * self.L0).abs()               # L, (1)

    def normalized_distance(self, T):
        d = signed_distance(T, self.dtype)
        rows = torch.arange(T, dtype=self.dtype)
        scale = self.psi(torch.maximum(self.threshold(), rows)) + 1e-6   # (T): one per query i
        return torch.sign(d) * self.psi(d.abs()) / scale[:, None]        # (T, T)

    def score_bias(self, T):
        x = self.normalized_distance(T)[..., None]                   # (T, T, 1)
        h = torch.relu(x @ self.mlp0_weight + self.mlp0_bias)        # (T, T, W)
        out = h @ self.mlp1_weight + self.mlp1_bias                  # (T, T, H)
        return out.permute(2, 0, 1)                                  # (H, T, T)


def threshold_L0(config):
    """L0 = fire_threshold, or the context when it is 0."""
    return config.options["fire_threshold"] or config.context


def parameter_shapes(config):
    W, H = config.options["bias_mlp_hidden"], config.heads
    return {"c": (1,), "threshold_scale": (1,), "mlp0_weight": (1, W), "mlp0_bias": (W,),
            "mlp1_weight": (W, H), "mlp1_bias": (H,)}


def check_model(run):
    """The published (causal) form on d >= 0, its mirror image on d < 0, and a scalar loop
    from math; L is no integer (no tie in max(L, i)) and some rows have i > L."""
    from copytask_ref.checks import close

    o, pos, T, H = run.options, run.positional, run.config.context, run.config.heads
    with torch.no_grad():
        bias = pos.score_bias(T)
    L0 = threshold_L0(run.config)
    L = abs(pos.threshold_scale.item() * L0)
    assert abs(L - round(L)) > 1e-3, L                # no tie in max(L, i)
    assert any(i > L for i in range(T)) and L > 0     # the normaliser varies with i
    # The published (causal) form, as in the FIRE paper's code: no sign, |c * d|.
    W = o["bias_mlp_hidden"]
    mlp = nn.Sequential(nn.Linear(1, W, dtype=torch.float64), nn.ReLU(), nn.Linear(W, H, dtype=torch.float64))
    with torch.no_grad():
        mlp[0].weight.copy_(pos.mlp0_weight.t())
        mlp[0].bias.copy_(pos.mlp0_bias)
        mlp[2].weight.copy_(pos.mlp1_weight.t())
        mlp[2].bias.copy_(pos.mlp1_bias)
        positions = torch.arange(T, dtype=torch.float64)
        rel_distance = positions[:, None] - positions[None, :]
        threshold = torch.abs(pos.threshold_scale * L0)
        pos_normalizer = torch.max(positions, threshold)[:, None]
        rel_distance = torch.log(torch.abs(pos.c * rel_distance) + 1)
        pos_normalizer = torch.log(torch.abs(pos.c * pos_normalizer) + 1) + 1e-6
        normalized = rel_distance / pos_normalizer
        published = mlp(normalized[..., None]).permute(2, 0, 1)    # (T, T, H) -> (H, T, T)
        x = pos.normalized_distance(T)
    left = torch.ones(T, T, dtype=torch.bool).tril()          # d >= 0
    assert close(bias[:, left], published[:, left], 1e-13)
    assert close(x[left], normalized[left], 1e-14)
    assert close(x[~left], -normalized[~left], 1e-14), "keys to the right see the mirror image"
    # Scalar form from math: row i's normaliser is psi(max(L, i)).
    c = pos.c.item()
    for i in range(T):
        for j in range(T):
            d = i - j
            v = math.copysign(1.0, d) * math.log(c * abs(d) + 1) if d else 0.0
            v /= math.log(c * max(L, i) + 1) + 1e-6
            assert abs(x[i, j].item() - v) < 1e-14, (i, j)


SCHEME = Scheme(
    name="fire",
    summary="score bias relu MLP of sign(d) psi(|d|) / (psi(max(L, i)) + 1e-6)",
    build=lambda config, dtype: FIRE(config.heads, config.options["bias_mlp_hidden"], threshold_L0(config), dtype),
    defaults={"bias_mlp_hidden": 32, "fire_threshold": 0.0},
    score_bias=True,
    variants=(
        Variant("fire", 13, {"bias_mlp_hidden": 6, "fire_threshold": 4.0}),
        Variant("fire_dape", 23, {"bias_mlp_hidden": 6, "fire_threshold": 4.0, "dape": True, "dape_hidden": 6}),
        Variant("fire_coupled", 47, {"bias_mlp_hidden": 6, "fire_threshold": 4.0}, position_ids="coupled"),
    ),
    parameter_shapes=parameter_shapes,
    check_model=check_model,
)
