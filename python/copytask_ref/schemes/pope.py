"""pope: polar coordinate position embeddings (Gopalakrishnan, Csordas, Schmidhuber, Mozer
2025, "Decoupling the What and Where With Polar Coordinate Positional Embeddings", arXiv
2509.10534). Each head's q and k become complex numbers with magnitudes from the content
and phases from the position; the score replaces q . k / sqrt(Dh)."""

import cmath
import math

import torch
import torch.nn.functional as F

from copytask_ref import draws
from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional

DEFAULTS = {"rope_base": 10000.0}
PHASE_BIAS_RANGE = (-2.0 * math.pi, 0.0)   # delta is clamped to it where it is used


class PoPE(Positional):
    """S_ij = Re(sum_c qt_ic conj(kt_jc)) / sqrt(Dh) with qt_ic = softplus(q_ic) e^(i p_i theta_c)
    and kt_jc = softplus(k_jc) e^(i (p_j theta_c + delta_hc)), theta_c = base^(-c / Dh),
    c = 0 .. Dh-1; that is sum_c softplus(q_ic) softplus(k_jc) cos((p_i - p_j) theta_c - delta_hc)
    / sqrt(Dh). phase_bias (H, Dh) is delta before its clamp to [-2 pi, 0]."""

    def __init__(self, H, Dh, base, dtype):
        super().__init__(dtype)
        self.H, self.Dh, self.base = H, Dh, float(base)
        self.phase_bias = draws.empty_parameter((H, Dh), dtype)

    def draw_parameters(self, gen):
        # Inside the clamp's range, away from its ends: every entry moves the scores.
        low, high = PHASE_BIAS_RANGE
        draws.assign(self.phase_bias, draws.uniform_range(gen, (self.H, self.Dh), low + 0.1, high - 0.1))

    def frequencies(self):
        """theta (Dh) float64."""
        c = torch.arange(self.Dh, dtype=torch.float64)
        return torch.pow(torch.tensor(self.base, dtype=torch.float64), -c / self.Dh)

    def delta(self):
        return self.phase_bias.clamp(*PHASE_BIAS_RANGE)   # (H, Dh)

    def polar_scores(self, q, k, positions):
        """q, k (B, H, T, Dh), positions (T), or per example (B, T), of the query and key
        rows: (B, H, T, T)."""
        distance = (positions[..., :, None] - positions[..., None, :]).to(torch.float64)   # (T, T) | (B, T, T) p_i - p_j
        angle = (distance[..., None] * self.frequencies()).to(q.dtype)                     # (T, T, Dh) | (B, T, T, Dh)
        angle = angle.unsqueeze(-4) - self.delta()[:, None, None, :]                        # (H, T, T, Dh) | (B, H, T, T, Dh)
        magnitude = F.softplus(q)[..., :, None, :] * F.softplus(k)[..., None, :, :]  # (B, H, T, T, Dh)
        return (magnitude * torch.cos(angle)).sum(-1) / math.sqrt(self.Dh)

    def attention_scores(self, q, k):
        return self.polar_scores(q, k, torch.arange(q.shape[-2]))

    def attention_scores_at(self, q, k, ids):
        """The scores with each example's rows at its position IDs ids (B, T)."""
        return self.polar_scores(q, k, ids)


def polar_score_from_complex(q, k, delta, base, p_i, p_j):
    """One logit from q_i, k_j (lists of Dh floats) and delta_h as Python complex numbers:
    Re(sum_c qt_c conj(kt_c)) / sqrt(Dh)."""
    Dh = len(q)
    total = 0j
    for c in range(Dh):
        theta = base ** (-c / Dh)
        qt = cmath.rect(math.log1p(math.exp(q[c])), p_i * theta)
        kt = cmath.rect(math.log1p(math.exp(k[c])), p_j * theta + delta[c])
        total += qt * kt.conjugate()
    return total.real / math.sqrt(Dh)


def check_polar(pope, g, B=2, T=7):
    """The module's scores against complex numbers one logit at a time, at 0..T-1 and at
    other positions; their dependence on p_i - p_j alone; the clamp of delta."""
    from copytask_ref.checks import close

    H, Dh = pope.H, pope.Dh
    q = torch.randn(B, H, T, Dh, generator=g, dtype=torch.float64)
    k = torch.randn(B, H, T, Dh, generator=g, dtype=torch.float64)
    delta = pope.delta().tolist()
    unordered = torch.tensor([5, 0, 11, 3, 3, 8, 1][:T])   # need not increase, may repeat
    for positions in (torch.arange(T), unordered):
        with torch.no_grad():
            got = pope.polar_scores(q, k, positions)
        p = positions.tolist()
        expect = torch.tensor([[[[polar_score_from_complex(q[b, h, i].tolist(), k[b, h, j].tolist(), delta[h],
                                                            pope.base, p[i], p[j]) for j in range(T)]
                                 for i in range(T)] for h in range(H)] for b in range(B)], dtype=torch.float64)
        assert close(got, expect, 1e-12), (got - expect).abs().max()
        with torch.no_grad():
            shifted = pope.polar_scores(q, k, positions + 17)
        assert close(shifted, got, 1e-12), "the score depends on p_i - p_j only"
    with torch.no_grad():
        assert torch.equal(pope.attention_scores(q, k), pope.polar_scores(q, k, torch.arange(T)))
    # Equal contents score by distance alone: the positions are decoupled from the content.
    same = torch.randn(1, H, 1, Dh, generator=g, dtype=torch.float64).expand(1, H, T, Dh)
    with torch.no_grad():
        by_pair = pope.polar_scores(same, same, torch.arange(T))[0]   # (H, T, T)
    for d in range(-(T - 1), T):
        diagonal = torch.diagonal(by_pair, offset=-d, dim1=-2, dim2=-1)
        assert close(diagonal, diagonal[..., :1].expand_as(diagonal), 1e-12), d


def check_static():
    """The polar score against complex numbers at several heads, sizes and bases, and
    delta's clamp."""
    g = torch.Generator().manual_seed(13)
    for H, Dh, base in [(2, 4, 10000.0), (1, 5, 100.0), (3, 6, 10.0)]:
        pope = PoPE(H, Dh, base, torch.float64)
        pope.draw(g)
        check_polar(pope, g)
    pope = PoPE(1, 3, 10000.0, torch.float64)
    draws.assign(pope.phase_bias, torch.tensor([[-10.0, 0.5, -1.0]], dtype=torch.float64))
    assert torch.equal(pope.delta(), torch.tensor([[-2.0 * math.pi, 0.0, -1.0]], dtype=torch.float64))


def check_model(run):
    pope = run.positional
    assert pope.base == run.options["rope_base"]
    check_polar(pope, torch.Generator().manual_seed(17))


def score_math(view):
    """S_ij from math: sum_c softplus(q_ic) softplus(k_jc) cos((i - j) theta_c - delta_hc) / sqrt(Dh)."""
    pope = view.positional
    Dh, base = view.config.head_dim, view.options["rope_base"]
    delta = [[min(max(x, PHASE_BIAS_RANGE[0]), PHASE_BIAS_RANGE[1]) for x in row] for row in pope.phase_bias.tolist()]
    q, k = view.q, view.k

    def score(b, h, i, j):
        return sum(math.log1p(math.exp(q[b][h][i][c])) * math.log1p(math.exp(k[b][h][j][c]))
                   * math.cos((i - j) * base ** (-c / Dh) - delta[h][c]) for c in range(Dh)) / math.sqrt(Dh)
    return score


SCHEME = Scheme(
    name="pope",
    summary="replaces q.k with sum_c softplus(q_c) softplus(k_c) cos((i - j) base^(-c/Dh) - delta_hc), per-head delta",
    build=lambda config, dtype: PoPE(config.heads, config.head_dim, config.options["rope_base"], dtype),
    defaults=DEFAULTS,
    variants=(
        Variant("pope", 31),
        Variant("pope_length_scale", 32, {"length_scale": True, "rope_base": 100.0}),
        Variant("pope_coupled", 51, position_ids="coupled"),
    ),
    parameter_shapes=lambda config: {"phase_bias": (config.heads, config.head_dim)},
    score_math=score_math,
    check_static=check_static,
    check_model=check_model,
)
