"""The layer forms: every choice of a block's arithmetic beside its sizes and its scheme,
each written here from its definition (not through torch's own function of that name), so
the reference checks the C++ model's and the fused steps' forms independently.

KEYS maps each config key (model.<key>) to its values; the C++ list is
src/config/layer_form.cpp, and tests/reference/check_ref_against_registry.py fails on a
value one side has and the other has not, or a value without a fixture.
"""

import math

import torch


def relu(x):
    return torch.clamp(x, min=0)


def gelu(x):
    """x Phi(x) = x (1 + erf(x / sqrt 2)) / 2: the exact form (not the tanh approximation)."""
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


# model.activation: hidden = f(fc1(ln2(x))).
ACTIVATIONS = {"relu": relu, "gelu": gelu}

KEYS = {"activation": ACTIVATIONS}
DEFAULTS = {"activation": "relu"}


def activation(name):
    if name not in ACTIVATIONS:
        raise ValueError("model.activation = %r: must be one of %s (python/copytask_ref/layer_forms.py)"
                         % (name, ", ".join(ACTIVATIONS)))
    return ACTIVATIONS[name]
