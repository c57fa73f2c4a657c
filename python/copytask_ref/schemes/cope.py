"""cope: contextual positions (Golovneva et al. 2024), positions counted by gates of the
scores and interpolated in a learned table per block."""

import dataclasses
import math

import torch

from copytask_ref import draws
from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional


class CoPE(Positional):
    """Per head, seen (i, j):
    g_it = sigmoid(S_it) (the scores q . k / sqrt(Dh), before any bias),
    p_ij = sum_{t=j..i} g_it (j <= i) or sum_{t=i..j} g_it (j > i),
    P = min(p_ij, npos - 1), f = floor(P), c = ceil(P), w = P - f,
    C_ij = (1 - w) q_i . E[f] + w q_i . E[c]   (q . E unscaled),
    E = left_embedding[l] for j <= i, right_embedding[l] for j > i (bidirectional only).
    floor and ceil are constants for the gradient; min(p, npos - 1) passes it where
    p <= npos - 1 (torch.clamp's rule)."""

    def __init__(self, L, npos, Dh, causal, dtype):
        super().__init__(dtype)
        self.npos, self.causal = int(npos), causal
        self.left_embedding = draws.empty_parameter((L, self.npos, Dh), dtype)
        if not causal:
            self.right_embedding = draws.empty_parameter((L, self.npos, Dh), dtype)

    def draw_parameters(self, gen):
        draws.assign(self.left_embedding, 0.5 * draws.normal(gen, tuple(self.left_embedding.shape)))
        if not self.causal:
            draws.assign(self.right_embedding, 0.5 * draws.normal(gen, tuple(self.right_embedding.shape)))

    def positions(self, scores):
        """p (B, H, T, T): the gates summed from the key to the query, both included."""
        T = scores.shape[-1]
        i = torch.arange(T)[:, None]
        t = torch.arange(T)[None, :]
        gates = torch.sigmoid(scores)                                    # g[..., i, t]
        # sum over t >= j of the gates at t <= i (unseen keys, t > i, never enter)
        left = gates.masked_fill(t > i, 0.0).flip(-1).cumsum(-1).flip(-1)
        if self.causal:
            return left
        right = gates.masked_fill(t < i, 0.0).cumsum(-1)                # sum over i <= t <= j
        return torch.where(t <= i, left, right)                          # t is the key j here

    def interpolate(self, q, p, E):
        """(1 - w) q_i . E[floor P] + w q_i . E[ceil P], P = min(p, npos - 1); E (npos, Dh)."""
        P = p.clamp(max=self.npos - 1)
        low, high = P.floor(), P.ceil()
        w = P - low
        qe = q @ E.transpose(0, 1)                                       # (B, H, T, npos)
        return (1.0 - w) * qe.gather(-1, low.long()) + w * qe.gather(-1, high.long())

    def scheme_content_term(self, block, a, q, scores, bias):
        p = self.positions(scores)
        left = self.interpolate(q, p, self.left_embedding[block])
        if self.causal:
            return left                    # the entries j > i are masked
        right = self.interpolate(q, p, self.right_embedding[block])
        T = scores.shape[-1]
        return torch.where(torch.ones(T, T, dtype=torch.bool).tril(), left, right)


def npos_of(config):
    """npos = cope_positions, or the context when it is 0."""
    return config.options["cope_positions"] or config.context


def parameter_shapes(config):
    shapes = {"left_embedding": (config.blocks, npos_of(config), config.head_dim)}
    if not config.causal:
        shapes["right_embedding"] = shapes["left_embedding"]
    return shapes


def from_checkpoint(config, params):
    """npos is the table's rows; cope_positions (or the member's context, when given) must
    agree."""
    if "positional.left_embedding" not in params:
        return config          # the load names what is missing
    rows = params["positional.left_embedding"].shape[-2]
    expected = int(config.options["cope_positions"]) or int(config.context or rows)
    if expected != rows:
        raise ValueError("cope_positions %d does not match positional.left_embedding's %d rows" % (expected, rows))
    return dataclasses.replace(config, options=dict(config.options, cope_positions=rows))


def gate_sum(S_row, i, j):
    """p_ij from math: the gates sigmoid(S_it) for t from j to i, both included."""
    ts = range(j, i + 1) if j <= i else range(i, j + 1)
    return sum(1.0 / (1.0 + math.exp(-S_row[t])) for t in ts)


def content_math(view):
    """C_ij from its closed form: the gate sum, the clamp and the interpolation."""
    pos, l = view.positional, view.block
    npos = npos_of(view.config)
    E_left = pos.left_embedding[l].tolist()
    E_right = None if view.causal else pos.right_embedding[l].tolist()
    q, S, Dh = view.q, view.S, view.config.head_dim

    def term(b, h, i, j):
        P = min(gate_sum(S[b][h][i], i, j), npos - 1)
        lo, hi = math.floor(P), math.ceil(P)
        w = P - lo
        E = E_left if j <= i else E_right
        qe = lambda r: sum(q[b][h][i][d] * E[r][d] for d in range(Dh))
        return (1 - w) * qe(lo) + w * qe(hi)
    return term


def check_static():
    """By hand: T = 5, npos = 3, every score 0 (gates 1/2), q = (1, 0) so that q . E[r] is
    E[r, 0]: left rows 1, 3, 7, right rows 10, 20, 40.  p = (|i - j| + 1) / 2:
    0.5, 1, 1.5, 2, 2.5 -> min(p, 2); 0.5 -> (1 + 3) / 2 = 2, 1.5 -> (3 + 7) / 2 = 5."""
    f64 = torch.float64
    cope = CoPE(1, 3, 2, False, f64)
    with torch.no_grad():
        cope.left_embedding.copy_(torch.tensor([[[1.0, 5.0], [3.0, -2.0], [7.0, 0.5]]], dtype=f64))
        cope.right_embedding.copy_(torch.tensor([[[10.0, 1.0], [20.0, 9.0], [40.0, -3.0]]], dtype=f64))
    q = torch.tensor([1.0, 0.0], dtype=f64).expand(1, 1, 5, 2)
    scores = torch.zeros(1, 1, 5, 5, dtype=f64, requires_grad=True)
    term = cope.content_term(0, None, q, scores, None)
    LEFT, RIGHT = [2.0, 3.0, 5.0, 7.0, 7.0], [None, 20.0, 30.0, 40.0, 40.0]
    expect = [[LEFT[i - j] if j <= i else RIGHT[j - i] for j in range(5)] for i in range(5)]
    assert term[0, 0].tolist() == expect, term[0, 0].tolist()
    # Its derivatives: C[2, 0] has p = g_20 + g_21 + g_22 = 1.5, dC/dp = 7 - 3, dg/dS = 1/4;
    # C[4, 0] has p = 2.5, clamped: no gradient; C[0, 3] (right) has p = 2 = ceil = floor:
    # w's slope meets E[2] - E[2] = 0.
    grad, = torch.autograd.grad(term[0, 0, 2, 0], scores, retain_graph=True)
    assert grad[0, 0].tolist() == [[0.0] * 5] * 2 + [[1.0, 1.0, 1.0, 0.0, 0.0]] + [[0.0] * 5] * 2
    assert torch.all(torch.autograd.grad(term[0, 0, 4, 0], scores, retain_graph=True)[0] == 0)
    assert torch.all(torch.autograd.grad(term[0, 0, 0, 3], scores, retain_graph=True)[0] == 0)
    # C[1, 3] (right): p = g_11 + g_12 + g_13 = 1.5, between the right rows 1 and 2:
    # dC/dp = 40 - 20 = 20, times dg/dS = 1/4: 5 for S[1, 1..3].
    grad, = torch.autograd.grad(term[0, 0, 1, 3], scores)
    assert grad[0, 0].tolist() == [[0.0] * 5, [0.0, 5.0, 5.0, 5.0, 0.0]] + [[0.0] * 5] * 3


def check_model(run):
    """The clamp is exercised where the variant says so: cope_clamped (npos = 4) has seen
    pairs on both sides of min(p, npos - 1); with npos = T, p < T - 1 for these weights, so
    the clamp is not reached (the gates would all need to be 1)."""
    c = run.config
    npos, T = npos_of(c), c.context
    with torch.no_grad():
        run.model(run.tokens)
    clamped = []
    for block in run.model.blocks:
        S = block.attn.trace["scores"].tolist()
        for b in range(run.tokens.shape[0]):
            for h in range(c.heads):
                for i in range(T):
                    for j in (range(i + 1) if c.causal else range(T)):
                        clamped.append(gate_sum(S[b][h][i], i, j) > npos - 1)
    if run.options["cope_positions"] and run.options["cope_positions"] < T:
        assert any(clamped) and not all(clamped), run.variant
    else:
        assert not any(clamped), run.variant


SCHEME = Scheme(
    name="cope",
    summary="content term: q_i . E[p] interpolated at p = the gates sigmoid(S) summed from key to query",
    build=lambda config, dtype: CoPE(config.blocks, npos_of(config), config.head_dim, config.causal, dtype),
    defaults={"cope_positions": 0},        # 0 = the context
    variants=(
        Variant("cope", 16),
        Variant("cope_clamped", 17, {"cope_positions": 4}),
        Variant("cope_length_scale", 27, {"length_scale": True}),
    ),
    parameter_shapes=parameter_shapes,
    from_checkpoint=from_checkpoint,
    content_math=content_math,
    check_static=check_static,
    check_model=check_model,
)
