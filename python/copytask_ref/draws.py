"""The random draws of the fixtures' parameters, all float64 from the fixture's generator.

A module allocates its parameters from the config (nothing drawn) and fills them in
draw(gen); the order of the draw() calls is the order of the draws, and so fixes every
value of a fixture. Parameters are drawn at random, not at the schemes' training init, so
that no check is trivial.
"""

import math

import torch

DTYPE = torch.float64


def uniform(gen, shape, fan_in):
    """U(+-1/sqrt(fan_in)), nn.Linear's range."""
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=gen, dtype=DTYPE) * 2.0 - 1.0) * bound


def uniform_range(gen, shape, low, high):
    return low + (high - low) * torch.rand(shape, generator=gen, dtype=DTYPE)


def normal(gen, shape):
    """N(0, 1)."""
    return torch.randn(shape, generator=gen, dtype=DTYPE)


def log_rates(gen, n):
    """log of U(0.1, 1.0), distinct per head: log-slopes, KERPLE's log r1 / log r2."""
    values = uniform_range(gen, (n,), 0.1, 1.0)
    assert len(set(values.tolist())) == n
    return values.log()


def ln_weight(gen, D):
    return 1.0 + 0.1 * torch.randn(D, generator=gen, dtype=DTYPE)


def ln_bias(gen, D):
    return 0.1 * torch.randn(D, generator=gen, dtype=DTYPE)


def assign(parameter, values):
    """Fills an allocated parameter with drawn values (exactly: a copy)."""
    with torch.no_grad():
        parameter.copy_(values)


def empty_parameter(shape, dtype):
    """A parameter of this shape whose values come later: drawn, or from a checkpoint."""
    return torch.nn.Parameter(torch.empty(shape, dtype=dtype))
