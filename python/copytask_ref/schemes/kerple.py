"""kerple: KERPLE's logarithmic variant, -r1 log(1 + r2 |d|) per head."""

import math

import torch

from copytask_ref import draws
from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional, signed_distance


class Kerple(Positional):
    """KERPLE, logarithmic variant: -r1 * log(1 + r2 * |d|), r1 and r2 learned in log."""

    def __init__(self, H, dtype):
        super().__init__(dtype)
        self.H = H
        self.log_r1 = draws.empty_parameter((H,), dtype)
        self.log_r2 = draws.empty_parameter((H,), dtype)

    def draw_parameters(self, gen):
        draws.assign(self.log_r1, draws.log_rates(gen, self.H))
        draws.assign(self.log_r2, draws.log_rates(gen, self.H))

    def score_bias(self, T):
        r1 = torch.exp(self.log_r1)[:, None, None]                  # (H, 1, 1)
        r2 = torch.exp(self.log_r2)[:, None, None]
        return -r1 * torch.log(1.0 + r2 * signed_distance(T, self.dtype).abs()[None])


def check_model(run):
    """The table against a loop with math.log1p."""
    from copytask_ref.checks import close

    pos, T, H = run.positional, run.config.context, run.config.heads
    with torch.no_grad():
        bias = pos.score_bias(T)
    r1 = [math.exp(v) for v in pos.log_r1.tolist()]
    r2 = [math.exp(v) for v in pos.log_r2.tolist()]
    expect = torch.tensor([[[-r1[h] * math.log1p(r2[h] * abs(i - j)) for j in range(T)]
                            for i in range(T)] for h in range(H)], dtype=torch.float64)
    assert close(bias, expect, 1e-13), (bias - expect).abs().max()


SCHEME = Scheme(
    name="kerple",
    summary="score bias -r1_h log(1 + r2_h |d|)",
    build=lambda config, dtype: Kerple(config.heads, dtype),
    score_bias=True,
    variants=(
        Variant("kerple", 12),
        Variant("kerple_dape", 22, {"dape": True, "dape_hidden": 6}),
        Variant("kerple_dape_length_scale", 30, {"dape": True, "dape_hidden": 6, "length_scale": True}),
        Variant("kerple_coupled", 49, position_ids="coupled"),
    ),
    parameter_shapes=lambda config: {"log_r1": (config.heads,), "log_r2": (config.heads,)},
    check_model=check_model,
)
