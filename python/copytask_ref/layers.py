"""The model's plain layers: LayerNorm, a linear map stored (in, out), the feed-forward."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from copytask_ref import draws, layer_forms

LN_EPS = 1e-5


class LayerNorm(nn.Module):
    def __init__(self, D, dtype):
        super().__init__()
        self.weight = draws.empty_parameter((D,), dtype)
        self.bias = draws.empty_parameter((D,), dtype)

    def draw(self, gen):
        D = self.weight.shape[0]
        draws.assign(self.weight, draws.ln_weight(gen, D))
        draws.assign(self.bias, draws.ln_bias(gen, D))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, LN_EPS)


class Linear(nn.Module):
    """y = x @ W (+ b) with W stored (in, out)."""

    def __init__(self, fan_in, fan_out, dtype, bias=True):
        super().__init__()
        self.weight = draws.empty_parameter((fan_in, fan_out), dtype)
        self.bias = draws.empty_parameter((fan_out,), dtype) if bias else None

    def draw(self, gen):
        fan_in, fan_out = self.weight.shape
        draws.assign(self.weight, draws.uniform(gen, (fan_in, fan_out), fan_in))
        if self.bias is not None:
            draws.assign(self.bias, draws.uniform(gen, (fan_out,), fan_in))

    def forward(self, x):
        y = x @ self.weight
        if self.bias is not None:
            y = y + self.bias
        return y


class FeedForward(nn.Module):
    def __init__(self, D, hidden, dtype, activation="relu"):
        super().__init__()
        self.activation = layer_forms.activation(activation)
        self.fc1 = Linear(D, hidden, dtype)
        self.fc2 = Linear(hidden, D, dtype)

    def draw(self, gen):
        self.fc1.draw(gen)
        self.fc2.draw(gen)

    def forward(self, x):
        return self.fc2(self.activation(self.fc1(x)))
