"""sinusoidal: the fixed sine and cosine table added to the token embedding."""

import math

import torch

from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional


def sinusoidal_table(T, D):
    """(T, D) float64: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D))."""
    pe = torch.zeros(T, D, dtype=torch.float64)
    pos = torch.arange(T, dtype=torch.float64)
    for i in range(D // 2):
        denom = 10000.0 ** (2 * i / D)
        pe[:, 2 * i] = torch.sin(pos / denom)
        pe[:, 2 * i + 1] = torch.cos(pos / denom)
    return pe


class Sinusoidal(Positional):
    def add_to_embedding(self, x):
        return x + sinusoidal_table(x.shape[1], x.shape[2]).to(x.dtype)


def check_static():
    """Spot values of the table, from math."""
    from copytask_ref.fixture_sizes import CONTEXT, EMBED

    pe = sinusoidal_table(CONTEXT, EMBED)
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * (EMBED // 2), dtype=torch.float64))
    assert abs(pe[1, 0].item() - math.sin(1.0)) < 1e-15
    assert abs(pe[1, 1].item() - math.cos(1.0)) < 1e-15
    assert abs(pe[3, 2].item() - math.sin(3.0 / 10000.0 ** (2 / EMBED))) < 1e-15
    assert abs(pe[3, 7].item() - math.cos(3.0 / 10000.0 ** (6 / EMBED))) < 1e-15


SCHEME = Scheme(
    name="sinusoidal",
    summary="x + PE, the sine and cosine table",
    build=lambda config, dtype: Sinusoidal(dtype),
    variants=(Variant("sinusoidal", 1), Variant("sinusoidal_coupled", 40, position_ids="coupled")),
    check_static=check_static,
)
