"""rope: rotary positions (Su et al.), whole or partial (rope_fraction)."""

import math

import torch

from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional

DEFAULTS = {"rope_base": 10000.0, "rope_fraction": 1.0}


def rotating_pairs(Dh, fraction):
    """R2 = max(1, floor(fraction * Dh / 2)), the pairs that rotate."""
    return max(1, int(math.floor(fraction * Dh / 2)))


class RoPE(Positional):
    """Rotates the pairs (2i, 2i+1) of the first 2*R2 dims of each head's q and k by
    theta[p, i] = p * base^(-2i / (2*R2)); the other dims pass through."""

    def __init__(self, Dh, base, fraction, dtype):
        super().__init__(dtype)
        self.base = float(base)
        self.pairs = rotating_pairs(Dh, fraction)   # R2
        assert 2 * self.pairs <= Dh

    def angles(self, T):
        """(T, R2) float64."""
        pos = torch.arange(T, dtype=torch.float64)[:, None]
        i = torch.arange(self.pairs, dtype=torch.float64)[None, :]
        return pos * torch.pow(torch.tensor(self.base, dtype=torch.float64), -2.0 * i / (2 * self.pairs))

    def rotate(self, x):
        R = 2 * self.pairs
        turned, rest = x[..., :R], x[..., R:]
        theta = self.angles(x.shape[-2])
        cos, sin = torch.cos(theta).to(x.dtype), torch.sin(theta).to(x.dtype)
        a, b = turned[..., 0::2], turned[..., 1::2]
        turned = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
        return torch.cat([turned, rest], dim=-1)


def rotate_pair_math(a, b, angle):
    """A pair (a, b) turned by angle, as a complex number a + ib times e^(i angle)."""
    z = complex(a, b) * complex(math.cos(angle), math.sin(angle))
    return z.real, z.imag


def check_rope_module(rope, Dh, base, fraction, g):
    """Partial/full RoPE against a complex-number formulation with angles from
    Python's math, and its invariances."""
    from copytask_ref.checks import close
    from copytask_ref.fixture_sizes import CONTEXT

    R2 = max(1, math.floor(fraction * Dh / 2))
    assert rope.pairs == R2, (rope.pairs, R2)
    x = torch.randn(3, 2, CONTEXT, Dh, generator=g, dtype=torch.float64)
    y = rope.rotate(x)
    assert close(x.norm(dim=-1), y.norm(dim=-1)), "rope must preserve norms"
    assert torch.equal(x[..., 0, :], y[..., 0, :]), "rope is identity at position 0"
    assert torch.equal(x[..., 2 * R2:], y[..., 2 * R2:]), "dims past 2*R2 are not rotated"
    theta = torch.tensor([[p * base ** (-2.0 * i / (2 * R2)) for i in range(R2)]
                          for p in range(CONTEXT)], dtype=torch.float64)
    xc = torch.complex(x[..., 0:2 * R2:2], x[..., 1:2 * R2:2])
    yc = xc * torch.polar(torch.ones_like(theta), theta)
    assert close(torch.stack([yc.real, yc.imag], -1).flatten(-2), y[..., :2 * R2])
    # Relative-position property: <R_p q, R_s k> depends only on p - s.
    q = torch.randn(Dh, generator=g, dtype=torch.float64)
    k = torch.randn(Dh, generator=g, dtype=torch.float64)
    rq = rope.rotate(q.expand(CONTEXT, Dh))
    rk = rope.rotate(k.expand(CONTEXT, Dh))
    assert abs((rq[5] @ rk[2]) - (rq[3] @ rk[0])).item() < 1e-12
    assert abs((rq[1] @ rk[7]) - (rq[2] @ rk[8])).item() < 1e-12
    assert abs((rq[9] @ rk[4]) - (rq[6] @ rk[1])).item() < 1e-12


def check_static():
    """Full and partial, also with a head wide enough for rope_base to matter in the
    partial case (at Dh = 4 and fraction 0.5 a single pair rotates by p)."""
    from copytask_ref.fixture_sizes import EMBED, HEADS

    g = torch.Generator().manual_seed(7)
    Dh = EMBED // HEADS
    for dh, base, fraction in [(Dh, 10000.0, 1.0), (Dh, 100.0, 0.5), (12, 100.0, 0.5),
                               (12, 10000.0, 1.0), (10, 500.0, 0.7), (4, 10000.0, 0.2)]:
        check_rope_module(RoPE(dh, base, fraction, torch.float64), dh, base, fraction, g)
    assert RoPE(4, 10000.0, 0.2, torch.float64).pairs == 1 and RoPE(10, 1.0, 0.7, torch.float64).pairs == 3


def check_model(run):
    o = run.options
    check_rope_module(run.positional, run.config.head_dim, o["rope_base"], o["rope_fraction"],
                      torch.Generator().manual_seed(11))


SCHEME = Scheme(
    name="rope",
    summary="rotates the first 2*R2 dims of each head's q and k by p * base^(-2i / (2*R2))",
    build=lambda config, dtype: RoPE(config.head_dim, config.options["rope_base"],
                                     config.options["rope_fraction"], dtype),
    defaults=DEFAULTS,
    variants=(
        Variant("rope", 3),
        Variant("rope_partial", 4, {"rope_fraction": 0.5, "rope_base": 100.0}),
        Variant("rope_length_scale", 25, {"length_scale": True}),
        Variant("rope_offset", 42, position_ids="offset"),
        Variant("rope_coupled", 43, position_ids="coupled"),
        Variant("rope_gelu", 53, layer={"activation": "gelu"}),
    ),
    check_static=check_static,
    check_model=check_model,
)
