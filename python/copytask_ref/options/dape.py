"""dape: DAPE (Zheng et al. 2024), an MLP across the heads of the scores and the score
bias, added to the logits. An option of the score-bias schemes (their Scheme.score_bias)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from copytask_ref import draws
from copytask_ref.declarations import Option
from copytask_ref.positional import PositionalOption


class DAPE(PositionalOption):
    """Per block l a two-layer MLP across the heads, per (i, j):
    u = [S_ij^(0..H-1), B_ij^(0..H-1)] (2H), hidden = leaky_relu(u @ W1_l + b1_l, 0.01) (W),
    C_ij^h = (hidden @ W2_l + b2_l)[h].  weight1 (L, 2H, W), bias1 (L, W),
    weight2 (L, W, H), bias2 (L, H), all uniform(+-1/sqrt(fan_in))."""

    def __init__(self, L, H, W, dtype):
        super().__init__()
        self.H, self.W = H, W
        self.weight1 = draws.empty_parameter((L, 2 * H, W), dtype)
        self.bias1 = draws.empty_parameter((L, W), dtype)
        self.weight2 = draws.empty_parameter((L, W, H), dtype)
        self.bias2 = draws.empty_parameter((L, H), dtype)

    def draw(self, gen):
        H, W = self.H, self.W
        draws.assign(self.weight1, draws.uniform(gen, tuple(self.weight1.shape), 2 * H))
        draws.assign(self.bias1, draws.uniform(gen, tuple(self.bias1.shape), 2 * H))
        draws.assign(self.weight2, draws.uniform(gen, tuple(self.weight2.shape), W))
        draws.assign(self.bias2, draws.uniform(gen, tuple(self.bias2.shape), W))

    def forward(self, block, scores, bias):
        """scores (B, H, T, T), bias (H, T, T) or per example (B, H, T, T) -> C (B, H, T, T)."""
        u = torch.cat([scores, bias.expand_as(scores)], dim=1)         # (B, 2H, T, T)
        u = u.permute(0, 2, 3, 1)                                       # (B, T, T, 2H)
        hidden = F.leaky_relu(u @ self.weight1[block] + self.bias1[block], 0.01)   # (B, T, T, W)
        out = hidden @ self.weight2[block] + self.bias2[block]          # (B, T, T, H)
        return out.permute(0, 3, 1, 2)                                  # (B, H, T, T)

    def content_term(self, block, a, q, scores, bias):
        return self(block, scores, bias)


def parameter_shapes(config):
    L, H, W = config.blocks, config.heads, config.options["dape_hidden"]
    return {"weight1": (L, 2 * H, W), "bias1": (L, W), "weight2": (L, W, H), "bias2": (L, H)}


def content_math(view):
    """C_ij from its closed form: the MLP applied to (i, j)'s 2H features."""
    dape, l, H = view.positional.option("dape"), view.block, view.config.heads
    W1, b1 = dape.weight1[l].tolist(), dape.bias1[l].tolist()
    W2, b2 = dape.weight2[l].tolist(), dape.bias2[l].tolist()
    width = len(b1)
    S, bias = view.S, view.bias

    def term(b, h, i, j):
        u = [S[b][g][i][j] for g in range(H)] + [bias[g][i][j] for g in range(H)]
        hidden = [sum(u[n] * W1[n][w] for n in range(2 * H)) + b1[w] for w in range(width)]
        hidden = [x if x > 0 else 0.01 * x for x in hidden]
        return sum(hidden[w] * W2[w][h] for w in range(width)) + b2[h]
    return term


def check_static():
    """The same MLP as nn.Linear, nn.LeakyReLU(0.01), nn.Linear on the 2H features."""
    from copytask_ref.checks import close
    from copytask_ref.fixture_sizes import CONTEXT, HEADS

    f64 = torch.float64
    W = 5
    g = torch.Generator().manual_seed(7)
    dape = DAPE(2, HEADS, W, f64)
    dape.draw(torch.Generator().manual_seed(2))
    scores = torch.randn(3, HEADS, CONTEXT, CONTEXT, generator=g, dtype=f64)
    bias = torch.randn(HEADS, CONTEXT, CONTEXT, generator=g, dtype=f64)
    for l in range(2):
        mlp = nn.Sequential(nn.Linear(2 * HEADS, W, dtype=f64), nn.LeakyReLU(0.01),
                            nn.Linear(W, HEADS, dtype=f64))
        with torch.no_grad():
            mlp[0].weight.copy_(dape.weight1[l].t())
            mlp[0].bias.copy_(dape.bias1[l])
            mlp[2].weight.copy_(dape.weight2[l].t())
            mlp[2].bias.copy_(dape.bias2[l])
            features = torch.cat([scores, bias.expand(3, -1, -1, -1)], dim=1).permute(0, 2, 3, 1)
            expect = mlp(features).permute(0, 3, 1, 2)
            assert close(dape(l, scores, bias), expect, 1e-14)


OPTION = Option(
    key="dape",
    summary="each block adds MLP([scores; bias]) across heads to its scores",
    build=lambda config, dtype: DAPE(config.blocks, config.heads, config.options["dape_hidden"], dtype),
    # DAPE reads a score bias: it is an option of the schemes that declare one.
    attaches_to=lambda scheme: scheme.score_bias,
    requirement="a score bias scheme",
    defaults={"dape": False, "dape_hidden": 32},
    parameter_shapes=parameter_shapes,
    content_math=content_math,
    check_static=check_static,
)
