"""xpos: RoPE with a scale that decays with distance (Sun et al. 2022); causal only."""

import math

import torch

from copytask_ref.declarations import Scheme, Variant
from copytask_ref.schemes.rope import DEFAULTS as ROPE_DEFAULTS
from copytask_ref.schemes.rope import RoPE, check_rope_module, rotate_pair_math


class XPos(RoPE):
    """xPos: RoPE, then pair r of q at position p times exp(u_q[p, r]) and of k times
    exp(u_k[p, r]) = exp(-u_q[p, r]), with u_q[p, r] = ((p - c) / gamma) ln zeta_r,
    zeta_r = (2r / (2 R2) + 0.4) / 1.4 for the R2 rotated pairs (1 for the others),
    gamma = xpos_scale_base and the centre c = floor(P / 2), P = T.  So
    q_i . k_j = sum_r zeta_r^((i - j) / gamma) (rotated dot of pair r).  No parameters.
    R2 is RoPE's max(1, floor(fraction * Dh / 2)) (the spec's xpos paragraph writes
    floor(fraction * Dh / 2): the same unless it is 0)."""

    def __init__(self, Dh, base, fraction, scale_base, causal, dtype):
        if not causal:
            raise ValueError("xpos needs the causal mask (its scale grows without bound "
                             "towards keys to the right)")
        super().__init__(Dh, base, fraction, dtype)
        self.half = Dh // 2                     # pairs of a head, rotated or not
        self.scale_base = float(scale_base)     # gamma

    def log_zeta(self):
        """(Dh / 2) ln zeta_r; 0 for the pairs that do not rotate."""
        r = torch.arange(self.half, dtype=torch.float64)
        zeta = (2.0 * r / (2 * self.pairs) + 0.4) / 1.4
        return torch.where(r < self.pairs, torch.log(zeta), torch.zeros((), dtype=torch.float64))

    def scale_table(self, P):
        """(2, P, Dh / 2) float64: [0] = u_q, [1] = u_k = -u_q."""
        c = P // 2
        pos = torch.arange(P, dtype=torch.float64)[:, None]
        u_q = (pos - c) / self.scale_base * self.log_zeta()[None, :]
        return torch.stack([u_q, -u_q])

    def scale_query_key(self, x, side):
        u = self.scale_table(x.shape[-2])[0 if side == "q" else 1]              # (T, Dh/2)
        return x * torch.exp(u).repeat_interleave(2, dim=-1).to(x.dtype)        # both components of a pair


def xpos_zeta(r, R2):
    """zeta_r from the spec, with Python's math: (2r / (2 R2) + 0.4) / 1.4 for r < R2, else 1."""
    return (2.0 * r / (2 * R2) + 0.4) / 1.4 if r < R2 else 1.0


def check_xpos_module(xpos, Dh, base, fraction, gamma, g):
    """xPos against the spec's closed form with Python's math: its u table, the pair
    products q_i . k_j = zeta_r^((i - j) / gamma) times RoPE's rotated product, and
    that q_i . k_j depends on i - j only."""
    from copytask_ref.checks import close
    from copytask_ref.fixture_sizes import CONTEXT

    R2 = max(1, math.floor(fraction * Dh / 2))
    assert xpos.pairs == R2 and xpos.half == Dh // 2 and xpos.scale_base == gamma
    for P in (CONTEXT, 7):
        table = xpos.scale_table(P)
        assert table.shape == (2, P, Dh // 2)
        c = P // 2
        expect = torch.tensor([[(p - c) / gamma * math.log(xpos_zeta(r, R2)) for r in range(Dh // 2)]
                               for p in range(P)], dtype=torch.float64)
        assert close(table[0], expect, 1e-15) and torch.equal(table[1], -table[0])
        assert torch.all(table[:, c] == 0) and torch.all(table[:, :, R2:] == 0)
    assert all(xpos_zeta(r, R2) < 1 for r in range(R2))   # decays towards the left

    T = CONTEXT
    q = torch.randn(Dh, generator=g, dtype=torch.float64)
    k = torch.randn(Dh, generator=g, dtype=torch.float64)
    rq = xpos.scale_query_key(xpos.rotate(q.expand(T, Dh)), "q")
    rk = xpos.scale_query_key(xpos.rotate(k.expand(T, Dh)), "k")
    plain_q, plain_k = xpos.rotate(q.expand(T, Dh)), xpos.rotate(k.expand(T, Dh))
    c = T // 2
    assert torch.equal(rq[c], plain_q[c]) and torch.equal(rk[c], plain_k[c]), "scale 1 at the centre"
    for i in range(T):
        for j in range(T):
            for r in range(Dh // 2):
                theta = base ** (-2.0 * r / (2 * R2)) if r < R2 else 0.0
                qa, qb = rotate_pair_math(q[2 * r].item(), q[2 * r + 1].item(), i * theta)
                ka, kb = rotate_pair_math(k[2 * r].item(), k[2 * r + 1].item(), j * theta)
                expect = xpos_zeta(r, R2) ** ((i - j) / gamma) * (qa * ka + qb * kb)
                got = (rq[i, 2 * r:2 * r + 2] @ rk[j, 2 * r:2 * r + 2]).item()
                assert abs(got - expect) < 1e-12 * (1 + abs(expect)), (i, j, r, got, expect)
    dots = rq @ rk.t()                                      # (T, T): q_i . k_j
    for d in range(-(T - 1), T):
        diagonal = torch.diagonal(dots, offset=-d)          # the (i, j) with i - j = d
        assert close(diagonal, diagonal[:1].expand_as(diagonal), 1e-12), ("depends on i - j only", d)


def check_static():
    """Full and partial, as the fixtures and at wider heads; refused without the mask, as a
    module, as a model and as a config."""
    from copytask_ref import registry
    from copytask_ref.config import ModelConfig
    from copytask_ref.fixture_sizes import BLOCKS, CONTEXT, EMBED, HEADS, HIDDEN, VOCAB
    from copytask_ref.transformer import CopyTransformer

    g = torch.Generator().manual_seed(7)
    Dh = EMBED // HEADS
    for dh, base, fraction, gamma in [(Dh, 10000.0, 1.0, 8.0), (Dh, 100.0, 0.5, 8.0),
                                      (12, 100.0, 0.5, 512.0), (10, 500.0, 0.7, 20.0)]:
        check_xpos_module(XPos(dh, base, fraction, gamma, True, torch.float64), dh, base, fraction, gamma, g)
    bidirectional = ModelConfig(vocab=VOCAB, context=CONTEXT, embed=EMBED, heads=HEADS, blocks=BLOCKS,
                                hidden=HIDDEN, positional="xpos", causal=False, options=dict(SCHEME.defaults))
    for build in (lambda: XPos(Dh, 10000.0, 1.0, 512.0, False, torch.float64),
                  lambda: CopyTransformer(bidirectional, torch.float64),
                  lambda: registry.resolve_options("xpos", {}, False, strict=True)):
        try:
            build()
            raise AssertionError("a bidirectional xpos model was built")
        except ValueError as error:
            assert "causal" in str(error)


def check_model(run):
    """Its rotation is RoPE's; its module against the closed form; and in every block each
    S_ij from the unrotated q, k: each pair turned by p * theta_r and scaled by
    zeta_r^((p - c) / gamma) (q) and zeta_r^(-(p - c) / gamma) (k)."""
    o, pos, c = run.options, run.positional, run.config
    Dh = c.head_dim
    check_rope_module(pos, Dh, o["rope_base"], o["rope_fraction"], torch.Generator().manual_seed(11))
    check_xpos_module(pos, Dh, o["rope_base"], o["rope_fraction"], o["xpos_scale_base"],
                      torch.Generator().manual_seed(12))
    B, H, T = run.tokens.shape[0], c.heads, c.context
    R2, gamma = pos.pairs, o["xpos_scale_base"]
    with torch.no_grad():
        run.model(run.tokens)
    for block in run.model.blocks:
        trace = block.attn.trace
        S = trace["scores"].tolist()
        q_in, k_in = trace["q_in"].tolist(), trace["k_in"].tolist()
        for b in range(B):
            for h in range(H):
                for i in range(T):
                    for j in range(T):
                        total = 0.0
                        for r in range(Dh // 2):
                            theta = o["rope_base"] ** (-2.0 * r / (2 * R2)) if r < R2 else 0.0
                            qa, qb = rotate_pair_math(*q_in[b][h][i][2 * r:2 * r + 2], i * theta)
                            ka, kb = rotate_pair_math(*k_in[b][h][j][2 * r:2 * r + 2], j * theta)
                            total += xpos_zeta(r, R2) ** ((i - j) / gamma) * (qa * ka + qb * kb)
                        total /= math.sqrt(Dh)
                        assert abs(S[b][h][i][j] - total) < 1e-12 * (1 + abs(total)), (b, h, i, j)


SCHEME = Scheme(
    name="xpos",
    summary="RoPE, then q and k scaled so that q_i . k_j decays as zeta^((i - j) / gamma)",
    build=lambda config, dtype: XPos(config.head_dim, config.options["rope_base"],
                                     config.options["rope_fraction"], config.options["xpos_scale_base"],
                                     config.causal, dtype),
    defaults={**ROPE_DEFAULTS, "xpos_scale_base": 512.0},
    # Its scale zeta^((i - j) / gamma), zeta < 1, grows without bound towards keys to the
    # right (j > i): the spec refuses a bidirectional xpos model.
    causal_only=True,
    variants=(
        Variant("xpos", 14, {"xpos_scale_base": 8.0}),
        Variant("xpos_partial", 15, {"xpos_scale_base": 8.0, "rope_fraction": 0.5, "rope_base": 100.0}),
        Variant("xpos_length_scale", 29, {"xpos_scale_base": 8.0, "length_scale": True}),
        Variant("xpos_offset", 44, {"xpos_scale_base": 8.0}, position_ids="offset"),
    ),
    check_static=check_static,
    check_model=check_model,
)
