#!/usr/bin/python3
"""Independent PyTorch reference implementation of the copytask transformer.

This script is the *reference* side of the C++ (LibTorch) parity tests.  It is
written from the model specification (and the positional schemes' written
definitions) the plain PyTorch way -- a single model, ``nn.Module``s with
explicit, readable ops, everything in float64 -- and is deliberately NOT
derived from (or a transliteration of) the C++ code.  Its only job is to
produce numbers the C++ model must reproduce.

Model (pre-LN transformer encoder, no dropout):

    x = tok_emb[tokens]   (+ sinusoidal PE | + positional.table, for those schemes)
    for each block l:
        x = x + Attn_l(LN1(x))  # see below
        x = x + FF(LN2(x))      # relu MLP
    logits = LN_f(x) @ W_head + b_head
    loss = mean cross-entropy over all B*T positions

Attention of block l, in the order of the spec (a = LN1(x), the attention input):

    q, k, v = a @ Wqkv, split per head              (no bias)
    q, k    = rotate(q), rotate(k)                  (RoPE, xPos)
    q, k    = q * exp(u_q), k * exp(u_k)            (xPos's qk scale)
    S       = q k^T / sqrt(Dh)                      ("scores")
    Z       = S (+ bias[h, i, j]) (+ C)             (score bias: ALiBi, T5, dynamic,
                                                     KERPLE, FIRE; content term C:
                                                     CoPE, FoX or DAPE)
    Z'      = m[l, h, i] * Z                        (length scale, when on)
    then the causal -inf mask (j > i), applied last, softmax over j, @ v.

d = i - j is the signed distance (d > 0: the key is to the left of the query).
All weight matrices are stored in the (in, out) layout, i.e. ``y = x @ W``; a
scheme's parameters are ``positional.<name>``, the options' ``positional.dape.<name>``
and ``positional.length_scale.scale``.  Per-block parameters (CoPE, FoX, DAPE,
length scale) have a leading L (blocks) axis.

For each variant of VARIANTS (a scheme and its options) and each causal flag
(false, true) it writes ``parity_<variant>[_causal].json`` with the config
(options included), tokens, targets, all parameters, logits, loss, gradients of
the loss with respect to every parameter, and the attention probabilities of
every block.  A causal-only scheme (CAUSAL_ONLY: xpos, whose scale grows without
bound towards keys to the right, so the spec refuses it without the causal mask)
has only the causal file.  Before writing, a number of self-checks are asserted:
every scheme's table against its closed form computed a second way, RoPE and
xPos properties, every content term (CoPE, FoX, DAPE), the length multiplier and
the order of the terms against explicit loops from math, FoX's mirror image,
causality, a cross-check of the blocks against ``nn.TransformerEncoderLayer``
for every scheme whose positional term is a fixed score bias, and a finite
difference check of the gradients of every parameter.

Readings of the spec (issue 21) where it leaves a choice:
  * xPos's R2: the spec writes floor(fraction * Dh / 2); it is RoPE's rule, so this
    reference takes RoPE's max(1, floor(fraction * Dh / 2)) (the same at the
    fixtures' Dh = 4, fraction 0.5 or 1).  xPos's centre c = floor(P / 2) with
    P = T (the table covers the input's positions); c cancels in q_i . k_j.
  * CoPE: g_it = sigmoid(S_it) of the scores before any bias (and before the
    length multiplier); p_ii = g_ii on both sides (both sums include t = i).
    npos = cope_positions, or the context T when 0.  Under the causal mask only
    left_embedding exists and the term of j > i is not computed (masked anyway).
  * FoX: the gates' input is the block's attention input a = LN1(x); f^L_0 (and
    f^R_{T-1}) never enter a sum.
  * DAPE: u = [S^(0..H-1), B^(0..H-1)] in this order (heads of S, then heads of B);
    the same bias B (shared by the blocks) is the input of every block's MLP.
  * Length scale: n_i = i + 1 (causal) or T (bidirectional); under the causal mask
    row 0 has m = 0 (ln 1), which leaves its one unmasked weight at 1.

Usage:
    /usr/bin/python3 tests/reference/make_parity_fixtures.py [--out tests/fixtures] [--only VARIANT ...]

The float64 values are reproducible on one machine, but a gradient that is a long
reduction (positional.mlp0_weight of dynamic and fire sums over T*T distances) may
differ in its last bits on another CPU: --only regenerates some variants without
rewriting the others.
"""

import argparse
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.float64
torch.set_default_dtype(DTYPE)

# Fixture dimensions.
VOCAB = 11      # 0 = pad, 1..9 = content, 10 = <copy>
CONTEXT = 10
EMBED = 8
HEADS = 2
BLOCKS = 2
HIDDEN = 12
BATCH = 4
LN_EPS = 1e-5

# (variant, scheme, options).  The order fixes the seeds: the file of variant n
# has seed BASE_SEED + 2n (causal off) and BASE_SEED + 2n + 1 (causal on); a
# variant of a CAUSAL_ONLY scheme has only the causal file (2n is left unused).
# New variants are appended, so that the files of the earlier ones stay the same.
VARIANTS = [
    ("none", "none", {}),
    ("sinusoidal", "sinusoidal", {}),
    ("learned", "learned", {}),
    ("rope", "rope", {}),
    ("rope_partial", "rope", {"rope_fraction": 0.5, "rope_base": 100.0}),
    ("alibi", "alibi", {}),
    ("alibi_offset", "alibi", {"alibi_direction": "offset", "alibi_slopes": [0.5, 0.125]}),
    ("alibi_two_sided", "alibi", {"alibi_direction": "two-sided", "alibi_learned": True}),
    ("alibi_learned", "alibi", {"alibi_learned": True}),
    ("t5", "t5", {"t5_buckets": 8, "t5_max_distance": 20}),
    ("dynamic", "dynamic", {"bias_mlp_hidden": 6}),
    ("dynamic_log", "dynamic", {"bias_mlp_hidden": 6, "dynamic_depth": 3, "dynamic_log_distance": True}),
    ("kerple", "kerple", {}),
    ("fire", "fire", {"bias_mlp_hidden": 6, "fire_threshold": 4.0}),
    # Issue 21: content-dependent schemes and the options dape and length_scale.
    ("xpos", "xpos", {"xpos_scale_base": 8.0}),                                   # causal only
    ("xpos_partial", "xpos", {"xpos_scale_base": 8.0, "rope_fraction": 0.5, "rope_base": 100.0}),
    ("cope", "cope", {}),
    ("cope_clamped", "cope", {"cope_positions": 4}),
    ("fox", "fox", {}),
    ("alibi_dape", "alibi", {"dape": True, "dape_hidden": 6}),
    ("t5_dape", "t5", {"t5_buckets": 8, "t5_max_distance": 20, "dape": True, "dape_hidden": 6}),
    ("dynamic_dape", "dynamic", {"bias_mlp_hidden": 6, "dape": True, "dape_hidden": 6}),
    ("kerple_dape", "kerple", {"dape": True, "dape_hidden": 6}),
    ("fire_dape", "fire", {"bias_mlp_hidden": 6, "fire_threshold": 4.0, "dape": True, "dape_hidden": 6}),
    ("none_length_scale", "none", {"length_scale": True}),
    ("rope_length_scale", "rope", {"length_scale": True}),
    ("t5_length_scale", "t5", {"t5_buckets": 8, "t5_max_distance": 20, "length_scale": True}),
    ("cope_length_scale", "cope", {"length_scale": True}),
    ("fox_length_scale", "fox", {"length_scale": True}),
    ("xpos_length_scale", "xpos", {"xpos_scale_base": 8.0, "length_scale": True}),  # causal only
    ("kerple_dape_length_scale", "kerple", {"dape": True, "dape_hidden": 6, "length_scale": True}),
]
# Schemes that exist only with the causal mask: xPos scales q_i . k_j by
# zeta^((i - j) / gamma) with zeta < 1, which grows without bound towards keys to the
# right (j > i); the spec refuses a bidirectional xpos model.
CAUSAL_ONLY = {"xpos"}


def causal_flags(scheme):
    """The causal flags a variant of this scheme has files for, in file order."""
    return (True,) if scheme in CAUSAL_ONLY else (False, True)


def fixture_name(variant, causal):
    return f"parity_{variant}{'_causal' if causal else ''}.json"

BASE_SEED = 20240601

# Every option key, its default, and the schemes that read it.
DEFAULTS = {
    "rope_base": 10000.0,
    "rope_fraction": 1.0,
    "alibi_slopes": [],
    "alibi_right_slopes": [],
    "alibi_direction": "symmetric",
    "alibi_learned": False,
    "t5_buckets": 32,
    "t5_max_distance": 128,
    "bias_mlp_hidden": 32,
    "dynamic_depth": 2,
    "dynamic_log_distance": False,
    "fire_threshold": 0.0,
    "cope_positions": 0,         # 0 = the context
    "xpos_scale_base": 512.0,
    "dape": False,
    "dape_hidden": 32,
    "length_scale": False,
}
SCHEME_OPTIONS = {
    "none": [], "sinusoidal": [], "learned": [], "kerple": [],
    "rope": ["rope_base", "rope_fraction"],
    "alibi": ["alibi_slopes", "alibi_right_slopes", "alibi_direction", "alibi_learned"],
    "t5": ["t5_buckets", "t5_max_distance"],
    "dynamic": ["bias_mlp_hidden", "dynamic_depth", "dynamic_log_distance"],
    "fire": ["bias_mlp_hidden", "fire_threshold"],
    "xpos": ["rope_base", "rope_fraction", "xpos_scale_base"],
    "cope": ["cope_positions"],
    "fox": [],
}
SCHEMES = list(SCHEME_OPTIONS)
# DAPE reads a score bias: it is an option of the score-bias schemes only.
BIAS_SCHEMES = ["alibi", "t5", "dynamic", "kerple", "fire"]
for _scheme in BIAS_SCHEMES:
    SCHEME_OPTIONS[_scheme] += ["dape", "dape_hidden"]
for _scheme in SCHEMES:   # the length scale multiplies the whole logit of any scheme
    SCHEME_OPTIONS[_scheme] += ["length_scale"]


def resolve_options(scheme, options):
    """The variant's options over the defaults; a key of another scheme is an error."""
    for key in options:
        assert key in SCHEME_OPTIONS[scheme], (scheme, key)
    resolved = {key: DEFAULTS[key] for key in SCHEME_OPTIONS[scheme]}
    resolved.update(options)
    return resolved


# ----------------------------------------------------------------------------
# Random draws
# ----------------------------------------------------------------------------

def _uniform(gen, shape, fan_in):
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=gen, dtype=DTYPE) * 2.0 - 1.0) * bound


def _uniform_range(gen, shape, low, high):
    return low + (high - low) * torch.rand(shape, generator=gen, dtype=DTYPE)


def _log_rates(gen, n):
    """log of U(0.1, 1.0), distinct per head: log-slopes, KERPLE's log r1 / log r2."""
    values = _uniform_range(gen, (n,), 0.1, 1.0)
    assert len(set(values.tolist())) == n
    return values.log()


def _ln_weight(gen, D):
    return 1.0 + 0.1 * torch.randn(D, generator=gen, dtype=DTYPE)


def _ln_bias(gen, D):
    return 0.1 * torch.randn(D, generator=gen, dtype=DTYPE)


# ----------------------------------------------------------------------------
# Positional schemes.  Each is a module with six hooks; the base class is
# "none" (no positions).  The options DAPE and length scale are sub-modules
# "dape" and "length_scale" of the scheme's module (parameters
# positional.dape.<name>, positional.length_scale.scale), attached by
# make_positional.  Parameters are drawn at random from the fixture's
# generator (not the schemes' training init) so that the check is not trivial.
# ----------------------------------------------------------------------------

def signed_distance(T):
    """(T, T) float d[i, j] = i - j (query row i, key column j)."""
    pos = torch.arange(T)
    return (pos[:, None] - pos[None, :]).to(DTYPE)


def sinusoidal_table(T, D):
    """PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D))."""
    pe = torch.zeros(T, D)
    pos = torch.arange(T, dtype=DTYPE)
    for i in range(D // 2):
        denom = 10000.0 ** (2 * i / D)
        pe[:, 2 * i] = torch.sin(pos / denom)
        pe[:, 2 * i + 1] = torch.cos(pos / denom)
    return pe


def alibi_slopes(H):
    """Head slopes from the ALiBi paper (Press et al.), reference rule."""
    def power_of_2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    if math.log2(H).is_integer():
        return power_of_2(H)
    n = 2 ** math.floor(math.log2(H))
    return power_of_2(n) + power_of_2(2 * n)[0::2][: H - n]


def t5_bucket(d, num_buckets, max_distance):
    """T5's bidirectional bucket of the signed distance d = i - j (a Python int)."""
    half = num_buckets // 2
    bucket = half if d < 0 else 0          # keys to the right use the upper half
    n = abs(d)
    max_exact = half // 2
    if n < max_exact:
        return bucket + n
    log_part = math.log(n / max_exact) / math.log(max_distance / max_exact) * (half - max_exact)
    return bucket + min(half - 1, max_exact + math.floor(log_part + 1e-9))


def _add_mlp(module, sizes, gen):
    """Registers mlp<k>_weight (in, out) and mlp<k>_bias (out) for consecutive sizes,
    both uniform(+-1/sqrt(fan_in))."""
    for k, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        setattr(module, f"mlp{k}_weight", nn.Parameter(_uniform(gen, (fan_in, fan_out), fan_in)))
        setattr(module, f"mlp{k}_bias", nn.Parameter(_uniform(gen, (fan_out,), fan_in)))


class Positional(nn.Module):
    """The "none" scheme, and the hooks every scheme may override."""

    def __init__(self):
        super().__init__()
        self.dape = None           # DAPE, when the option is on (score-bias schemes)
        self.length_scale = None   # LengthScale, when the option is on

    def add_to_embedding(self, x):   # x (B, T, D)
        return x

    def rotate(self, x):             # x (B, H, T, Dh): q or k
        return x

    def scale_query_key(self, x, side):   # x (B, H, T, Dh), side "q" or "k"; after rotate
        return x

    def score_bias(self, T):         # (H, T, T), added after the 1/sqrt(Dh) scaling
        return None

    def content_term(self, block, a, q, scores, bias):
        """C (B, H, T, T), added to the scores (and the bias) of block `block`, or None.
        a (B, T, D) is the block's attention input, q (B, H, T, Dh) the rotated query,
        scores (B, H, T, T) = q k^T / sqrt(Dh), bias (H, T, T) or None."""
        if self.dape is not None:
            return self.dape(block, scores, bias)
        return None

    def length_multiplier(self, block, T):
        """m (H, T, 1) of block `block`, multiplying the whole logit, or None."""
        if self.length_scale is not None:
            return self.length_scale(block, T)
        return None


class Sinusoidal(Positional):
    def add_to_embedding(self, x):
        return x + sinusoidal_table(x.shape[1], x.shape[2])


class Learned(Positional):
    def __init__(self, T, D, gen):
        super().__init__()
        self.table = nn.Parameter(torch.randn(T, D, generator=gen, dtype=DTYPE))

    def add_to_embedding(self, x):
        return x + self.table[: x.shape[1]]


class RoPE(Positional):
    """Rotates the pairs (2i, 2i+1) of the first 2*R2 dims of each head's q and k by
    theta[p, i] = p * base^(-2i / (2*R2)); the other dims pass through."""

    def __init__(self, Dh, base, fraction):
        super().__init__()
        self.base = float(base)
        self.pairs = max(1, int(math.floor(fraction * Dh / 2)))   # R2
        assert 2 * self.pairs <= Dh

    def angles(self, T):
        pos = torch.arange(T, dtype=DTYPE)[:, None]
        i = torch.arange(self.pairs, dtype=DTYPE)[None, :]
        return pos * torch.pow(torch.tensor(self.base), -2.0 * i / (2 * self.pairs))  # (T, R2)

    def rotate(self, x):
        R = 2 * self.pairs
        turned, rest = x[..., :R], x[..., R:]
        theta = self.angles(x.shape[-2])
        cos, sin = torch.cos(theta), torch.sin(theta)
        a, b = turned[..., 0::2], turned[..., 1::2]
        turned = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
        return torch.cat([turned, rest], dim=-1)


class XPos(RoPE):
    """xPos (Sun et al. 2022): RoPE, then pair r of q at position p times
    exp(u_q[p, r]) and of k times exp(u_k[p, r]) = exp(-u_q[p, r]), with
    u_q[p, r] = ((p - c) / gamma) ln zeta_r, zeta_r = (2r / (2 R2) + 0.4) / 1.4 for the
    R2 rotated pairs (1 for the others), gamma = xpos_scale_base and the centre
    c = floor(P / 2), P = T.  So q_i . k_j = sum_r zeta_r^((i - j) / gamma) (rotated dot
    of pair r).  No parameters.  R2 is RoPE's max(1, floor(fraction * Dh / 2)) (the
    spec's xpos paragraph writes floor(fraction * Dh / 2): the same unless it is 0)."""

    def __init__(self, Dh, base, fraction, scale_base, causal):
        if not causal:
            raise ValueError("xpos needs the causal mask (its scale grows without bound "
                             "towards keys to the right)")
        super().__init__(Dh, base, fraction)
        self.half = Dh // 2                     # pairs of a head, rotated or not
        self.scale_base = float(scale_base)     # gamma

    def log_zeta(self):
        """(Dh / 2) ln zeta_r; 0 for the pairs that do not rotate."""
        r = torch.arange(self.half, dtype=DTYPE)
        zeta = (2.0 * r / (2 * self.pairs) + 0.4) / 1.4
        return torch.where(r < self.pairs, torch.log(zeta), torch.zeros(()))

    def scale_table(self, P):
        """(2, P, Dh / 2): [0] = u_q, [1] = u_k = -u_q."""
        c = P // 2
        pos = torch.arange(P, dtype=DTYPE)[:, None]
        u_q = (pos - c) / self.scale_base * self.log_zeta()[None, :]
        return torch.stack([u_q, -u_q])

    def scale_query_key(self, x, side):
        u = self.scale_table(x.shape[-2])[0 if side == "q" else 1]      # (T, Dh/2)
        return x * torch.exp(u).repeat_interleave(2, dim=-1)            # both components of a pair


class ALiBi(Positional):
    """Linear biases; direction symmetric, offset (Ruoss et al.) or two-sided."""

    def __init__(self, H, slopes, right_slopes, direction, learned, gen):
        super().__init__()
        assert direction in ("symmetric", "offset", "two-sided"), direction
        self.direction = direction
        self.learned = learned
        left = list(slopes) if slopes else alibi_slopes(H)
        right = list(right_slopes) if right_slopes else left
        assert len(left) == H and len(right) == H
        if learned:
            self.log_slopes = nn.Parameter(_log_rates(gen, H))
            if direction == "two-sided":
                self.log_right_slopes = nn.Parameter(_log_rates(gen, H))
        else:
            self.register_buffer("fixed_slopes", torch.tensor(left, dtype=DTYPE))
            self.register_buffer("fixed_right_slopes", torch.tensor(right, dtype=DTYPE))

    def slopes(self):
        """(left slopes s, right slopes r), (H) each."""
        if not self.learned:
            return self.fixed_slopes, self.fixed_right_slopes
        s = torch.exp(self.log_slopes)
        r = torch.exp(self.log_right_slopes) if self.direction == "two-sided" else s
        return s, r

    def score_bias(self, T):
        s, r = (v[:, None, None] for v in self.slopes())
        d = signed_distance(T)[None]
        if self.direction == "symmetric":
            return -s * d.abs()
        if self.direction == "offset":
            return -s * (d.abs() - 0.5 * (d > 0).to(DTYPE))
        return torch.where(d >= 0, -s * d, -r * (-d))


class T5Bias(Positional):
    """A learned scalar per (bucket of d, head)."""

    def __init__(self, H, num_buckets, max_distance, gen):
        super().__init__()
        assert num_buckets % 2 == 0 and num_buckets >= 4
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bucket_bias = nn.Parameter(0.5 * torch.randn(num_buckets, H, generator=gen, dtype=DTYPE))

    def buckets(self, T):
        return torch.tensor([[t5_bucket(i - j, self.num_buckets, self.max_distance) for j in range(T)]
                             for i in range(T)])

    def score_bias(self, T):
        return self.bucket_bias[self.buckets(T)].permute(2, 0, 1)   # (T, T, H) -> (H, T, T)


class DynamicBias(Positional):
    """x-transformers' dynamic position bias: an MLP of d (or of sign(d) log(1 + |d|))."""

    def __init__(self, H, width, depth, log_distance, gen):
        super().__init__()
        assert depth >= 1
        self.depth, self.log_distance = depth, log_distance
        _add_mlp(self, [1] + [width] * depth + [H], gen)

    def score_bias(self, T):
        x = signed_distance(T)
        if self.log_distance:
            x = torch.sign(x) * torch.log(1.0 + x.abs())
        h = x[..., None]                                             # (T, T, 1)
        for k in range(self.depth):
            h = F.silu(h @ getattr(self, f"mlp{k}_weight") + getattr(self, f"mlp{k}_bias"))
        out = h @ getattr(self, f"mlp{self.depth}_weight") + getattr(self, f"mlp{self.depth}_bias")
        return out.permute(2, 0, 1)                                  # (H, T, T)


class Kerple(Positional):
    """KERPLE, logarithmic variant: -r1 * log(1 + r2 * |d|)."""

    def __init__(self, H, gen):
        super().__init__()
        self.log_r1 = nn.Parameter(_log_rates(gen, H))
        self.log_r2 = nn.Parameter(_log_rates(gen, H))

    def score_bias(self, T):
        r1 = torch.exp(self.log_r1)[:, None, None]
        r2 = torch.exp(self.log_r2)[:, None, None]
        return -r1 * torch.log(1.0 + r2 * signed_distance(T).abs()[None])


class FIRE(Positional):
    """FIRE (Li et al. 2023), bidirectional: an MLP of sign(d) psi(|d|) / psi(max(L, i))."""

    def __init__(self, H, width, L0, gen):
        super().__init__()
        self.L0 = float(L0)
        self.c = nn.Parameter(_uniform_range(gen, (1,), 0.05, 0.5))
        while True:   # L = |threshold_scale * L0| must not tie with a position i
            scale = _uniform_range(gen, (1,), 0.8, 1.2)
            L = abs(scale.item() * self.L0)
            if abs(L - round(L)) > 1e-3:
                break
        self.threshold_scale = nn.Parameter(scale)
        _add_mlp(self, [1, width, H], gen)

    def psi(self, z):
        return torch.log(self.c.abs() * z + 1.0)

    def threshold(self):
        return (self.threshold_scale * self.L0).abs()               # L, (1)

    def normalized_distance(self, T):
        d = signed_distance(T)
        rows = torch.arange(T, dtype=DTYPE)
        scale = self.psi(torch.maximum(self.threshold(), rows)) + 1e-6   # (T): one per query i
        return torch.sign(d) * self.psi(d.abs()) / scale[:, None]        # (T, T)

    def score_bias(self, T):
        x = self.normalized_distance(T)[..., None]                   # (T, T, 1)
        h = torch.relu(x @ self.mlp0_weight + self.mlp0_bias)
        out = h @ self.mlp1_weight + self.mlp1_bias                  # (T, T, H)
        return out.permute(2, 0, 1)


class CoPE(Positional):
    """CoPE (Golovneva et al. 2024), contextual positions.  Per head, seen (i, j):
    g_it = sigmoid(S_it) (the scores q . k / sqrt(Dh), before any bias),
    p_ij = sum_{t=j..i} g_it (j <= i) or sum_{t=i..j} g_it (j > i),
    P = min(p_ij, npos - 1), f = floor(P), c = ceil(P), w = P - f,
    C_ij = (1 - w) q_i . E[f] + w q_i . E[c]   (q . E unscaled),
    E = left_embedding[l] for j <= i, right_embedding[l] for j > i (bidirectional only).
    floor and ceil are constants for the gradient; min(p, npos - 1) passes it where
    p <= npos - 1 (torch.clamp's rule)."""

    def __init__(self, L, npos, Dh, causal, gen):
        super().__init__()
        self.npos, self.causal = int(npos), causal
        self.left_embedding = nn.Parameter(0.5 * torch.randn(L, npos, Dh, generator=gen, dtype=DTYPE))
        if not causal:
            self.right_embedding = nn.Parameter(0.5 * torch.randn(L, npos, Dh, generator=gen, dtype=DTYPE))

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

    def content_term(self, block, a, q, scores, bias):
        p = self.positions(scores)
        left = self.interpolate(q, p, self.left_embedding[block])
        if self.causal:
            return left                    # the entries j > i are masked
        right = self.interpolate(q, p, self.right_embedding[block])
        T = scores.shape[-1]
        return torch.where(torch.ones(T, T, dtype=torch.bool).tril(), left, right)


class FoX(Positional):
    """Forgetting transformer (Lin et al. 2025) as a data-dependent bias.  Per block l,
    from the attention input a (B, T, D):
    f^L_{t,h} = ln sigmoid(a_t . W_l[:, h] + b_l[h]), f^R_{t,h} the same with column H + h;
    C_ij = sum_{t=j+1..i} f^L_t (j <= i; 0 at j = i), sum_{t=i..j-1} f^R_t (j > i).
    gate_weight (L, D, sides*H), gate_bias (L, sides*H); sides = 1 causal, 2 bidirectional."""

    def __init__(self, L, D, H, causal, gen):
        super().__init__()
        self.H, self.causal = H, causal
        sides = 1 if causal else 2
        self.gate_weight = nn.Parameter(_uniform(gen, (L, D, sides * H), D))
        self.gate_bias = nn.Parameter(_uniform_range(gen, (L, sides * H), 0.5, 3.0))

    def log_gates(self, block, a):
        """(B, sides*H, T): ln sigmoid of the gates' pre-activations."""
        return F.logsigmoid(a @ self.gate_weight[block] + self.gate_bias[block]).transpose(1, 2)

    def content_term(self, block, a, q, scores, bias):
        f = self.log_gates(block, a)
        T = a.shape[1]
        at_or_left = torch.ones(T, T, dtype=torch.bool).tril()         # j <= i
        cum = f[:, :self.H].cumsum(-1)                                  # sum_{t <= i} f^L_t
        left = cum[..., :, None] - cum[..., None, :]                    # (B, H, T, T): t = j+1..i
        if self.causal:
            return left.masked_fill(~at_or_left, 0.0)
        fr = f[:, self.H:]
        before = fr.cumsum(-1) - fr                                     # sum_{t < i} f^R_t
        right = before[..., None, :] - before[..., :, None]             # t = i..j-1
        return torch.where(at_or_left, left, right)


def make_positional(scheme, options, T, D, H, gen, L=BLOCKS, causal=False):
    """The scheme's module, with the sub-modules "dape" and "length_scale" when on.
    T is the context (CoPE's npos when cope_positions is 0, FIRE's L0)."""
    o = resolve_options(scheme, options)
    pos = make_scheme(scheme, o, T, D, H, gen, L, causal)
    if o.get("dape"):
        pos.dape = DAPE(L, H, o["dape_hidden"], gen)
    if o["length_scale"]:
        pos.length_scale = LengthScale(L, H, causal, gen)
    return pos


def make_scheme(scheme, o, T, D, H, gen, L, causal):
    if scheme == "none":
        return Positional()
    if scheme == "sinusoidal":
        return Sinusoidal()
    if scheme == "learned":
        return Learned(T, D, gen)
    if scheme == "rope":
        return RoPE(D // H, o["rope_base"], o["rope_fraction"])
    if scheme == "alibi":
        return ALiBi(H, o["alibi_slopes"], o["alibi_right_slopes"], o["alibi_direction"],
                     o["alibi_learned"], gen)
    if scheme == "t5":
        return T5Bias(H, o["t5_buckets"], o["t5_max_distance"], gen)
    if scheme == "dynamic":
        return DynamicBias(H, o["bias_mlp_hidden"], o["dynamic_depth"], o["dynamic_log_distance"], gen)
    if scheme == "kerple":
        return Kerple(H, gen)
    if scheme == "fire":
        return FIRE(H, o["bias_mlp_hidden"], o["fire_threshold"] or T, gen)
    if scheme == "xpos":
        return XPos(D // H, o["rope_base"], o["rope_fraction"], o["xpos_scale_base"], causal)
    if scheme == "cope":
        return CoPE(L, o["cope_positions"] or T, D // H, causal, gen)
    if scheme == "fox":
        return FoX(L, D, H, causal, gen)
    raise ValueError(scheme)


# ----------------------------------------------------------------------------
# Options: DAPE and the length scale (sub-modules of the positional module)
# ----------------------------------------------------------------------------

class DAPE(nn.Module):
    """DAPE (Zheng et al. 2024): per block l a two-layer MLP across the heads, per (i, j):
    u = [S_ij^(0..H-1), B_ij^(0..H-1)] (2H), hidden = leaky_relu(u @ W1_l + b1_l, 0.01) (W),
    C_ij^h = (hidden @ W2_l + b2_l)[h].  weight1 (L, 2H, W), bias1 (L, W),
    weight2 (L, W, H), bias2 (L, H), all uniform(+-1/sqrt(fan_in))."""

    def __init__(self, L, H, W, gen):
        super().__init__()
        self.weight1 = nn.Parameter(_uniform(gen, (L, 2 * H, W), 2 * H))
        self.bias1 = nn.Parameter(_uniform(gen, (L, W), 2 * H))
        self.weight2 = nn.Parameter(_uniform(gen, (L, W, H), W))
        self.bias2 = nn.Parameter(_uniform(gen, (L, H), W))

    def forward(self, block, scores, bias):
        """scores (B, H, T, T), bias (H, T, T) -> C (B, H, T, T)."""
        u = torch.cat([scores, bias[None].expand_as(scores)], dim=1)   # (B, 2H, T, T)
        u = u.permute(0, 2, 3, 1)                                       # (B, T, T, 2H)
        hidden = F.leaky_relu(u @ self.weight1[block] + self.bias1[block], 0.01)
        out = hidden @ self.weight2[block] + self.bias2[block]          # (B, T, T, H)
        return out.permute(0, 3, 1, 2)


class LengthScale(nn.Module):
    """Scalable softmax (Nakanishi 2025): m[l, h, i] = scale[l, h] * ln(n_i), n_i the keys
    query i sees: i + 1 under the causal mask, T otherwise.  scale (L, H)."""

    def __init__(self, L, H, causal, gen):
        super().__init__()
        self.causal = causal
        self.scale = nn.Parameter(_uniform_range(gen, (L, H), 0.3, 1.2))

    def forward(self, block, T):
        """(H, T, 1)."""
        if self.causal:
            n = torch.arange(1, T + 1, dtype=DTYPE)
        else:
            n = torch.full((T,), float(T), dtype=DTYPE)
        return self.scale[block][:, None, None] * torch.log(n)[None, :, None]


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------

class LayerNorm(nn.Module):
    def __init__(self, D, gen):
        super().__init__()
        self.weight = nn.Parameter(_ln_weight(gen, D))
        self.bias = nn.Parameter(_ln_bias(gen, D))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, LN_EPS)


class Linear(nn.Module):
    """y = x @ W (+ b) with W stored (in, out)."""

    def __init__(self, fan_in, fan_out, gen, bias=True):
        super().__init__()
        self.weight = nn.Parameter(_uniform(gen, (fan_in, fan_out), fan_in))
        if bias:
            self.bias = nn.Parameter(_uniform(gen, (fan_out,), fan_in))
        else:
            self.bias = None

    def forward(self, x):
        y = x @ self.weight
        if self.bias is not None:
            y = y + self.bias
        return y


class Attention(nn.Module):
    def __init__(self, D, H, causal, gen, index=0):
        super().__init__()
        self.D, self.H, self.Dh = D, H, D // H
        self.causal = causal
        self.index = index          # the block's l, for the per-block positional parameters
        self.qkv = Linear(D, 3 * D, gen, bias=False)
        self.proj = Linear(D, D, gen, bias=True)
        self.trace = {}             # the last forward's intermediates, for the self-checks

    def split_heads(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.H, self.Dh).transpose(1, 2)    # (B, H, T, Dh)

    def forward(self, x, positional, bias):
        """x (B, T, D) is the attention input a = LN1(x) of the block."""
        B, T, D = x.shape
        qkv = self.qkv(x)
        q_in = self.split_heads(qkv[..., 0:D])
        k_in = self.split_heads(qkv[..., D:2 * D])
        v = self.split_heads(qkv[..., 2 * D:3 * D])
        q = positional.scale_query_key(positional.rotate(q_in), "q")   # rotation, then qk scale
        k = positional.scale_query_key(positional.rotate(k_in), "k")

        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.Dh)   # S (B, H, T, T)
        logits = scores
        if bias is not None:
            logits = logits + bias[None]
        content = positional.content_term(self.index, x, q, scores, bias)   # CoPE, FoX, DAPE
        if content is not None:
            logits = logits + content
        multiplier = positional.length_multiplier(self.index, T)            # (H, T, 1)
        if multiplier is not None:
            logits = multiplier * logits
        self.trace = {"a": x, "q_in": q_in, "k_in": k_in, "q": q, "k": k, "scores": scores,
                      "content": content, "multiplier": multiplier, "logits": logits}
        if self.causal:
            future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)   # j > i
            logits = logits.masked_fill(future, float("-inf"))

        attn = torch.softmax(logits, dim=-1)
        out = attn @ v                                                # (B, H, T, Dh)
        out = out.transpose(1, 2).reshape(B, T, D)                    # heads in order
        return self.proj(out), attn


class FeedForward(nn.Module):
    def __init__(self, D, F_, gen):
        super().__init__()
        self.fc1 = Linear(D, F_, gen)
        self.fc2 = Linear(F_, D, gen)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, D, H, F_, causal, gen, index=0):
        super().__init__()
        self.ln1 = LayerNorm(D, gen)
        self.attn = Attention(D, H, causal, gen, index)
        self.ln2 = LayerNorm(D, gen)
        self.ff = FeedForward(D, F_, gen)

    def forward(self, x, positional, bias):
        a, attn = self.attn(self.ln1(x), positional, bias)
        x = x + a
        x = x + self.ff(self.ln2(x))
        return x, attn


class CopyTransformer(nn.Module):
    def __init__(self, V, T, D, H, L, F_, scheme, options, causal, gen):
        super().__init__()
        assert scheme in SCHEMES
        self.scheme = scheme
        self.tok_emb = nn.Parameter(torch.randn(V, D, generator=gen, dtype=DTYPE))
        # One module for the whole model: its parameters are "positional.<name>".
        self.positional = make_positional(scheme, options, T, D, H, gen, L, causal)
        self.blocks = nn.ModuleList([Block(D, H, F_, causal, gen, l) for l in range(L)])
        self.ln_f = LayerNorm(D, gen)
        self.head = Linear(D, V, gen)

    def embed(self, tokens):
        return self.positional.add_to_embedding(self.tok_emb[tokens])

    def forward(self, tokens):
        x = self.embed(tokens)
        bias = self.positional.score_bias(tokens.shape[1])   # (H, T, T) or None, shared by the blocks
        attns = []
        for block in self.blocks:
            x, attn = block(x, self.positional, bias)
            attns.append(attn)
        logits = self.head(self.ln_f(x))
        return logits, torch.stack(attns)      # (B,T,V), (L,B,H,T,T)


def loss_fn(logits, targets):
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="mean")


# ----------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------

def make_copy_batch(gen, B, T, V):
    """Copy task: k content tokens, <copy>, pad.  Target repeats the content
    after <copy>, truncated at T.  Distinct k per example, one with k = 8."""
    copy_tok = V - 1
    others = (torch.randperm(7, generator=gen) + 1)[: B - 1].tolist()   # from 1..7
    ks = others + [8]
    perm = torch.randperm(B, generator=gen).tolist()
    ks = [ks[i] for i in perm]
    tokens, targets = [], []
    for k in ks:
        content = torch.randint(1, V - 1, (k,), generator=gen).tolist()   # 1..V-2
        inp = content + [copy_tok]
        tgt = content + [copy_tok] + content
        inp = (inp + [0] * T)[:T]
        tgt = (tgt + [0] * T)[:T]
        tokens.append(inp)
        targets.append(tgt)
    return torch.tensor(tokens, dtype=torch.int64), torch.tensor(targets, dtype=torch.int64)


# ----------------------------------------------------------------------------
# Self-checks
# ----------------------------------------------------------------------------

def close(a, b, tol=1e-12):
    return torch.allclose(a, b, rtol=tol, atol=tol)


# T5 buckets for d = -9..9, written out by hand from the bucket definition.
# 8 buckets, max distance 20: half 4, max_exact 2; n = 2..6 -> 2, n = 7..9 -> 3
# (2 + floor(2 log(n/2) / log 10), and 2 log10(n/2) is 0.954... at n = 6, 1.088... at n = 7).
T5_BUCKETS_8_20 = [7, 7, 7, 6, 6, 6, 6, 6, 5, 0, 1, 2, 2, 2, 2, 2, 3, 3, 3]
# Defaults, 32 buckets, max distance 128: half 16, max_exact 8; bucket 8 + m starts at
# n = 8 * 16^(m/8): 11.3, 16 (exact), 22.6, 32 (exact), 45.3, 64 (exact), 90.5; 15 is the cap.
T5_BUCKETS_DEFAULT = {0: 0, 1: 1, 7: 7, 8: 8, 11: 8, 12: 9, 15: 9, 16: 10, 22: 10, 23: 11,
                      31: 11, 32: 12, 45: 12, 46: 13, 63: 13, 64: 14, 90: 14, 91: 15,
                      127: 15, 128: 15, 1000: 15,
                      -1: 17, -7: 23, -8: 24, -16: 26, -32: 28, -128: 31, -1000: 31}


def check_rope_module(rope, Dh, base, fraction, g):
    """Partial/full RoPE against a complex-number formulation with angles from
    Python's math, and its invariances."""
    R2 = max(1, math.floor(fraction * Dh / 2))
    assert rope.pairs == R2, (rope.pairs, R2)
    x = torch.randn(3, 2, CONTEXT, Dh, generator=g, dtype=DTYPE)
    y = rope.rotate(x)
    assert close(x.norm(dim=-1), y.norm(dim=-1)), "rope must preserve norms"
    assert torch.equal(x[..., 0, :], y[..., 0, :]), "rope is identity at position 0"
    assert torch.equal(x[..., 2 * R2:], y[..., 2 * R2:]), "dims past 2*R2 are not rotated"
    theta = torch.tensor([[p * base ** (-2.0 * i / (2 * R2)) for i in range(R2)]
                          for p in range(CONTEXT)], dtype=DTYPE)
    xc = torch.complex(x[..., 0:2 * R2:2], x[..., 1:2 * R2:2])
    yc = xc * torch.polar(torch.ones_like(theta), theta)
    assert close(torch.stack([yc.real, yc.imag], -1).flatten(-2), y[..., :2 * R2])
    # Relative-position property: <R_p q, R_s k> depends only on p - s.
    q = torch.randn(Dh, generator=g, dtype=DTYPE)
    k = torch.randn(Dh, generator=g, dtype=DTYPE)
    rq = rope.rotate(q.expand(CONTEXT, Dh))
    rk = rope.rotate(k.expand(CONTEXT, Dh))
    assert abs((rq[5] @ rk[2]) - (rq[3] @ rk[0])).item() < 1e-12
    assert abs((rq[1] @ rk[7]) - (rq[2] @ rk[8])).item() < 1e-12
    assert abs((rq[9] @ rk[4]) - (rq[6] @ rk[1])).item() < 1e-12


def xpos_zeta(r, R2):
    """zeta_r from the spec, with Python's math: (2r / (2 R2) + 0.4) / 1.4 for r < R2, else 1."""
    return (2.0 * r / (2 * R2) + 0.4) / 1.4 if r < R2 else 1.0


def rotate_pair_math(a, b, angle):
    """A pair (a, b) turned by angle, as a complex number a + ib times e^(i angle)."""
    z = complex(a, b) * complex(math.cos(angle), math.sin(angle))
    return z.real, z.imag


def check_xpos_module(xpos, Dh, base, fraction, gamma, g):
    """xPos against the spec's closed form with Python's math: its u table, the pair
    products q_i . k_j = zeta_r^((i - j) / gamma) times RoPE's rotated product, and
    that q_i . k_j depends on i - j only."""
    R2 = max(1, math.floor(fraction * Dh / 2))
    assert xpos.pairs == R2 and xpos.half == Dh // 2 and xpos.scale_base == gamma
    for P in (CONTEXT, 7):
        table = xpos.scale_table(P)
        assert table.shape == (2, P, Dh // 2)
        c = P // 2
        expect = torch.tensor([[(p - c) / gamma * math.log(xpos_zeta(r, R2)) for r in range(Dh // 2)]
                               for p in range(P)], dtype=DTYPE)
        assert close(table[0], expect, 1e-15) and torch.equal(table[1], -table[0])
        assert torch.all(table[:, c] == 0) and torch.all(table[:, :, R2:] == 0)
    assert all(xpos_zeta(r, R2) < 1 for r in range(R2))   # decays towards the left

    T = CONTEXT
    q = torch.randn(Dh, generator=g, dtype=DTYPE)
    k = torch.randn(Dh, generator=g, dtype=DTYPE)
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
    # ALiBi slopes.
    assert alibi_slopes(8) == [2.0 ** -(h + 1) for h in range(8)], alibi_slopes(8)
    assert alibi_slopes(2) == [2.0 ** -4, 2.0 ** -8]
    assert alibi_slopes(6) == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    b = ALiBi(2, [], [], "symmetric", False, None).score_bias(4)
    assert b[0, 0, 3].item() == -3 * 2.0 ** -4 and b[0, 3, 0].item() == -3 * 2.0 ** -4
    assert torch.all(torch.diagonal(b, dim1=-2, dim2=-1) == 0)

    # T5 buckets, by hand.
    assert [t5_bucket(d, 8, 20) for d in range(-9, 10)] == T5_BUCKETS_8_20
    for d, bucket in T5_BUCKETS_DEFAULT.items():
        assert t5_bucket(d, 32, 128) == bucket, (d, t5_bucket(d, 32, 128), bucket)

    # Sinusoidal table.
    pe = sinusoidal_table(CONTEXT, EMBED)
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * (EMBED // 2)))
    assert abs(pe[1, 0].item() - math.sin(1.0)) < 1e-15
    assert abs(pe[1, 1].item() - math.cos(1.0)) < 1e-15
    assert abs(pe[3, 2].item() - math.sin(3.0 / 10000.0 ** (2 / EMBED))) < 1e-15
    assert abs(pe[3, 7].item() - math.cos(3.0 / 10000.0 ** (6 / EMBED))) < 1e-15

    # RoPE: full and partial, also with a head wide enough for rope_base to matter
    # in the partial case (at Dh = 4 and fraction 0.5 a single pair rotates by p).
    g = torch.Generator().manual_seed(7)
    Dh = EMBED // HEADS
    for dh, base, fraction in [(Dh, 10000.0, 1.0), (Dh, 100.0, 0.5), (12, 100.0, 0.5),
                               (12, 10000.0, 1.0), (10, 500.0, 0.7), (4, 10000.0, 0.2)]:
        check_rope_module(RoPE(dh, base, fraction), dh, base, fraction, g)
    assert RoPE(4, 10000.0, 0.2).pairs == 1 and RoPE(10, 1.0, 0.7).pairs == 3

    # xPos: full and partial, as the fixtures and at wider heads; refused without the mask.
    for dh, base, fraction, gamma in [(Dh, 10000.0, 1.0, 8.0), (Dh, 100.0, 0.5, 8.0),
                                      (12, 100.0, 0.5, 512.0), (10, 500.0, 0.7, 20.0)]:
        check_xpos_module(XPos(dh, base, fraction, gamma, True), dh, base, fraction, gamma, g)
    for build in (lambda: XPos(Dh, 10000.0, 1.0, 512.0, False),
                  lambda: CopyTransformer(VOCAB, CONTEXT, EMBED, HEADS, BLOCKS, HIDDEN, "xpos",
                                          {}, False, torch.Generator().manual_seed(0))):
        try:
            build()
            raise AssertionError("a bidirectional xpos model was built")
        except ValueError as error:
            assert "causal" in str(error)

    # CoPE by hand: T = 5, npos = 3, every score 0 (gates 1/2), q = (1, 0) so that
    # q . E[r] is E[r, 0]: left rows 1, 3, 7, right rows 10, 20, 40.  p = (|i - j| + 1) / 2:
    # 0.5, 1, 1.5, 2, 2.5 -> min(p, 2); 0.5 -> (1 + 3) / 2 = 2, 1.5 -> (3 + 7) / 2 = 5.
    cope = CoPE(1, 3, 2, False, torch.Generator().manual_seed(0))
    with torch.no_grad():
        cope.left_embedding.copy_(torch.tensor([[[1.0, 5.0], [3.0, -2.0], [7.0, 0.5]]]))
        cope.right_embedding.copy_(torch.tensor([[[10.0, 1.0], [20.0, 9.0], [40.0, -3.0]]]))
    q = torch.tensor([1.0, 0.0]).expand(1, 1, 5, 2)
    scores = torch.zeros(1, 1, 5, 5, requires_grad=True)
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

    # FoX with a zero input: constant gates, so C is two-sided ALiBi with the slopes
    # -ln sigmoid(b) (left) and -ln sigmoid(b_right).
    fox = FoX(1, EMBED, HEADS, False, torch.Generator().manual_seed(1))
    term = fox.content_term(0, torch.zeros(1, CONTEXT, EMBED), None, None, None)[0]
    left = [-math.log(1 / (1 + math.exp(-b))) for b in fox.gate_bias[0, :HEADS].tolist()]
    right = [-math.log(1 / (1 + math.exp(-b))) for b in fox.gate_bias[0, HEADS:].tolist()]
    expect = ALiBi(HEADS, left, right, "two-sided", False, None).score_bias(CONTEXT)
    assert close(term, expect, 1e-14), (term - expect).abs().max()

    # DAPE: the same MLP as nn.Linear, nn.LeakyReLU(0.01), nn.Linear on the 2H features.
    W = 5
    dape = DAPE(2, HEADS, W, torch.Generator().manual_seed(2))
    scores = torch.randn(3, HEADS, CONTEXT, CONTEXT, generator=g, dtype=DTYPE)
    bias = torch.randn(HEADS, CONTEXT, CONTEXT, generator=g, dtype=DTYPE)
    for l in range(2):
        mlp = nn.Sequential(nn.Linear(2 * HEADS, W, dtype=DTYPE), nn.LeakyReLU(0.01),
                            nn.Linear(W, HEADS, dtype=DTYPE))
        with torch.no_grad():
            mlp[0].weight.copy_(dape.weight1[l].t())
            mlp[0].bias.copy_(dape.bias1[l])
            mlp[2].weight.copy_(dape.weight2[l].t())
            mlp[2].bias.copy_(dape.bias2[l])
            features = torch.cat([scores, bias.expand(3, -1, -1, -1)], dim=1).permute(0, 2, 3, 1)
            expect = mlp(features).permute(0, 3, 1, 2)
            assert close(dape(l, scores, bias), expect, 1e-14)

    # Length scale: scale * ln(i + 1) (causal), scale * ln T (bidirectional).
    for causal in (False, True):
        length = LengthScale(2, HEADS, causal, torch.Generator().manual_seed(3))
        for l in range(2):
            m = length(l, 4)
            assert m.shape == (HEADS, 4, 1)
            for h in range(HEADS):
                for i in range(4):
                    n = i + 1 if causal else 4
                    assert abs(m[h, i, 0].item() - length.scale[l, h].item() * math.log(n)) < 1e-15


def check_scheme_table(model, variant, scheme, options):
    """The model's positional table (or rotation) against its closed form computed a
    second way, from the written definitions."""
    o = resolve_options(scheme, options)
    pos = model.positional
    T, H = CONTEXT, HEADS
    with torch.no_grad():
        bias = pos.score_bias(T)
    if scheme in ("none", "sinusoidal", "learned", "rope", "xpos", "cope", "fox"):
        assert bias is None
    else:
        assert bias.shape == (H, T, T) and bias.dtype == DTYPE and torch.isfinite(bias).all()

    if scheme == "rope":
        check_rope_module(pos, EMBED // H, o["rope_base"], o["rope_fraction"],
                          torch.Generator().manual_seed(11))

    elif scheme == "xpos":
        check_rope_module(pos, EMBED // H, o["rope_base"], o["rope_fraction"],
                          torch.Generator().manual_seed(11))   # its rotation is RoPE's
        check_xpos_module(pos, EMBED // H, o["rope_base"], o["rope_fraction"], o["xpos_scale_base"],
                          torch.Generator().manual_seed(12))

    elif scheme == "learned":
        x = torch.zeros(1, T, EMBED)
        assert torch.equal(pos.add_to_embedding(x)[0], pos.table)

    elif scheme == "alibi":
        if o["alibi_learned"]:
            s = [math.exp(v) for v in pos.log_slopes.tolist()]
            r = ([math.exp(v) for v in pos.log_right_slopes.tolist()]
                 if o["alibi_direction"] == "two-sided" else s)
        else:
            s = list(o["alibi_slopes"]) or alibi_slopes(H)
            r = list(o["alibi_right_slopes"]) or s
        assert len(set(s)) == H and len(set(r)) == H
        expect = torch.zeros(H, T, T)
        for h in range(H):
            for i in range(T):
                for j in range(T):
                    if o["alibi_direction"] == "symmetric":
                        v = -s[h] * abs(i - j)
                    elif o["alibi_direction"] == "offset":
                        v = -s[h] * (abs(i - j) - 0.5) if j < i else -s[h] * abs(i - j)
                    elif j <= i:                       # two-sided: left and the diagonal
                        v = -s[h] * (i - j)
                    else:                              # two-sided: right
                        v = -r[h] * (j - i)
                    expect[h, i, j] = v
        assert close(bias, expect, 1e-14), (variant, (bias - expect).abs().max())
        if variant == "alibi_offset":   # slopes [0.5, 0.125], query row 3, keys 0..5
            assert bias[0, 3, :6].tolist() == [-1.25, -0.75, -0.25, 0.0, -0.5, -1.0]
            assert bias[1, 3, :6].tolist() == [-0.3125, -0.1875, -0.0625, 0.0, -0.125, -0.25]
        if o["alibi_direction"] == "two-sided":   # left and right slopes differ
            assert not close(bias, bias.transpose(1, 2), 1e-3)

    elif scheme == "t5":
        assert (o["t5_buckets"], o["t5_max_distance"]) == (8, 20)
        for i in range(T):
            for j in range(T):
                bucket = T5_BUCKETS_8_20[(i - j) + 9]
                assert torch.equal(bias[:, i, j], pos.bucket_bias[bucket]), (i, j)

    elif scheme == "dynamic":
        # x-transformers' way: the MLP (nn.Linear + nn.SiLU) on the 2T-1 distances
        # -(T-1)..T-1, then indexed by i - j + T - 1.
        W, depth = o["bias_mlp_hidden"], o["dynamic_depth"]
        layers = []
        for k in range(depth + 1):
            w, b_ = getattr(pos, f"mlp{k}_weight"), getattr(pos, f"mlp{k}_bias")
            lin = nn.Linear(w.shape[0], w.shape[1], dtype=DTYPE)
            with torch.no_grad():
                lin.weight.copy_(w.t())
                lin.bias.copy_(b_)
            layers += [lin, nn.SiLU()] if k < depth else [lin]
        assert layers[0].in_features == 1 and layers[-1].out_features == H
        assert all(l.out_features == W for l in layers[:-1] if isinstance(l, nn.Linear))
        mlp = nn.Sequential(*layers)
        dist = torch.arange(-T + 1, T, dtype=DTYPE)
        if o["dynamic_log_distance"]:
            dist = torch.sign(dist) * torch.log(dist.abs() + 1)
        with torch.no_grad():
            table = mlp(dist[:, None])                                # (2T-1, H)
        idx = torch.arange(T)[:, None] - torch.arange(T)[None, :] + T - 1
        expect = table[idx].permute(2, 0, 1)
        assert close(bias, expect, 1e-13), (variant, (bias - expect).abs().max())

    elif scheme == "kerple":
        r1 = [math.exp(v) for v in pos.log_r1.tolist()]
        r2 = [math.exp(v) for v in pos.log_r2.tolist()]
        expect = torch.tensor([[[-r1[h] * math.log1p(r2[h] * abs(i - j)) for j in range(T)]
                                for i in range(T)] for h in range(H)])
        assert close(bias, expect, 1e-13), (bias - expect).abs().max()

    elif scheme == "fire":
        L0 = o["fire_threshold"] or T
        L = abs(pos.threshold_scale.item() * L0)
        assert abs(L - round(L)) > 1e-3, L                # no tie in max(L, i)
        assert any(i > L for i in range(T)) and L > 0     # the normaliser varies with i
        # The published (causal) form, as in the FIRE paper's code: no sign, |c * d|.
        W = o["bias_mlp_hidden"]
        mlp = nn.Sequential(nn.Linear(1, W, dtype=DTYPE), nn.ReLU(), nn.Linear(W, H, dtype=DTYPE))
        with torch.no_grad():
            mlp[0].weight.copy_(pos.mlp0_weight.t())
            mlp[0].bias.copy_(pos.mlp0_bias)
            mlp[2].weight.copy_(pos.mlp1_weight.t())
            mlp[2].bias.copy_(pos.mlp1_bias)
            positions = torch.arange(T, dtype=DTYPE)
            rel_distance = positions[:, None] - positions[None, :]
            threshold = torch.abs(pos.threshold_scale * L0)
            pos_normalizer = torch.max(positions, threshold)[:, None]
            rel_distance = torch.log(torch.abs(pos.c * rel_distance) + 1)
            pos_normalizer = torch.log(torch.abs(pos.c * pos_normalizer) + 1) + 1e-6
            normalized = rel_distance / pos_normalizer
            published = mlp(normalized[..., None]).permute(2, 0, 1)
            x = pos.normalized_distance(T)
        left = torch.ones(T, T, dtype=torch.bool).tril()          # d >= 0
        assert close(bias[:, left], published[:, left], 1e-13)
        assert close(x[left], normalized[left], 1e-14)
        assert close(x[~left], -normalized[~left], 1e-14), "keys to the right see the mirror image"
        # Scalar form from math: row i's normaliser is psi(max(L, i)).
        c = pos.c.item()
        for i in range(T):
            for j in range(T):
                d = i - j
                v = math.copysign(1.0, d) * math.log(c * abs(d) + 1) if d else 0.0
                v /= math.log(c * max(L, i) + 1) + 1e-6
                assert abs(x[i, j].item() - v) < 1e-14, (i, j)


def check_against_torch_layers(model, tokens, causal):
    """Cross-check the hand-written blocks against nn.TransformerEncoderLayer
    (norm_first, relu, no dropout), with the score bias and the causal mask
    passed as a float mask.  Only for the schemes whose positional term is a fixed
    bias: not RoPE, xPos (q/k are rotated and scaled inside attention), CoPE, FoX,
    DAPE (content terms, computed from q, k or the block's input) nor the length
    scale (it multiplies q k^T too)."""
    pos = model.positional
    if (model.scheme in ("rope", "xpos", "cope", "fox") or pos.dape is not None
            or pos.length_scale is not None):
        return
    T = tokens.shape[1]
    H = HEADS
    with torch.no_grad():
        bias = model.positional.score_bias(T)
    mask = torch.zeros(H, T, T) if bias is None else bias.clone()
    if causal:
        mask = mask.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    B = tokens.shape[0]
    mask = mask.repeat(B, 1, 1)            # (B*H, T, T), batch-major like MHA expects

    with torch.no_grad():
        x = model.embed(tokens)
        for blk in model.blocks:
            ref = nn.TransformerEncoderLayer(EMBED, H, HIDDEN, dropout=0.0, activation="relu",
                                             layer_norm_eps=LN_EPS, batch_first=True,
                                             norm_first=True, dtype=DTYPE)
            ref.train()   # avoid the fused inference fast path
            ref.norm1.weight.copy_(blk.ln1.weight)
            ref.norm1.bias.copy_(blk.ln1.bias)
            ref.norm2.weight.copy_(blk.ln2.weight)
            ref.norm2.bias.copy_(blk.ln2.bias)
            ref.self_attn.in_proj_weight.copy_(blk.attn.qkv.weight.t())
            ref.self_attn.in_proj_bias.zero_()
            ref.self_attn.out_proj.weight.copy_(blk.attn.proj.weight.t())
            ref.self_attn.out_proj.bias.copy_(blk.attn.proj.bias)
            ref.linear1.weight.copy_(blk.ff.fc1.weight.t())
            ref.linear1.bias.copy_(blk.ff.fc1.bias)
            ref.linear2.weight.copy_(blk.ff.fc2.weight.t())
            ref.linear2.bias.copy_(blk.ff.fc2.bias)
            mine, _ = blk(x, model.positional, bias)
            theirs = ref(x, src_mask=mask)
            assert close(mine, theirs, 1e-11), (model.scheme, causal, (mine - theirs).abs().max())
            x = mine


def check_gradients(model, tokens, targets, grads, n_per_param=3, n_positional=8, seed=0):
    """Central finite differences on random entries of every parameter: 3 of each
    model parameter, up to 8 distinct ones of each positional.* parameter."""
    g = torch.Generator().manual_seed(seed)
    eps = 1e-6
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.view(-1)
            if name.startswith("positional."):
                idx = torch.randperm(flat.numel(), generator=g)[:n_positional].tolist()
            else:
                idx = torch.randint(0, flat.numel(), (n_per_param,), generator=g).tolist()
            for j in idx:
                old = flat[j].item()
                flat[j] = old + eps
                lp = loss_fn(model(tokens)[0], targets).item()
                flat[j] = old - eps
                lm = loss_fn(model(tokens)[0], targets).item()
                flat[j] = old
                fd = (lp - lm) / (2 * eps)
                an = grads[name].view(-1)[j].item()
                assert abs(fd - an) <= 1e-7 + 1e-6 * abs(an), (name, j, fd, an)


def zero_gradient_expected(scheme, options, causal):
    """Parameters that cannot reach the loss: with the causal mask, the right slopes
    of two-sided ALiBi only bias masked (j > i) scores.  Every parameter of issue 21
    reaches it: a scheme without the mask has no right-side parameters (CoPE's
    right_embedding, FoX's right gates), the length scale's row 0 (m = ln 1 = 0 under
    the mask) is one row of T, and FoX's unused gates (f^L at t = 0, f^R at t = T - 1)
    share their weights with the used ones."""
    o = resolve_options(scheme, options)
    if scheme == "alibi" and causal and o["alibi_learned"] and o["alibi_direction"] == "two-sided":
        return {"positional.log_right_slopes"}
    return set()


def check_terms(model, tokens, attn, variant, scheme, options, causal):
    """Every block's logits Z' (before the mask) against the spec's formula computed a
    second way, with explicit Python loops from math over (b, h, i, j):

        Z'_ij = m_i * (S_ij + B_ij + C_ij),   S_ij = q_i . k_j / sqrt(Dh)

    with C the CoPE / FoX / DAPE term from its closed form (CoPE's gate sums p_ij and
    the interpolation; FoX's sums of ln sigmoid; DAPE's MLP per (i, j)), m the length
    multiplier s[l, h] ln(n_i) (1 when off), B the score bias as the model adds it
    (its own closed form is check_scheme_table's), and the attention probabilities
    against a softmax of the seen logits written out.  Also: xPos's S from the
    unrotated q, k (pair by pair, zeta_r^((i - j) / gamma) times the rotated
    product); FoX's mirror image (bidirectional); CoPE's clamp exercised where the
    variant says so; a bidirectional length scale at 1 / ln T is plain softmax."""
    o = resolve_options(scheme, options)
    pos = model.positional
    B, H, T, Dh = tokens.shape[0], HEADS, CONTEXT, EMBED // HEADS
    with torch.no_grad():
        model(tokens)
        bias = pos.score_bias(T)
    bias_list = bias.tolist() if bias is not None else None
    sigmoid = lambda z: 1.0 / (1.0 + math.exp(-z))
    clamped = []                                    # CoPE: p_ij > npos - 1, per seen pair
    for l, block in enumerate(model.blocks):
        tr = block.attn.trace
        q, k, S = tr["q"].tolist(), tr["k"].tolist(), tr["scores"].tolist()
        got = tr["logits"].tolist()
        probs = attn[l].tolist()
        if scheme == "cope":
            npos = o["cope_positions"] or T
            E_left = pos.left_embedding[l].tolist()
            E_right = None if causal else pos.right_embedding[l].tolist()
        if scheme == "fox":
            a = tr["a"].tolist()
            Wg, bg = pos.gate_weight[l].tolist(), pos.gate_bias[l].tolist()
            # f[b][side][t][h] = ln sigmoid(a_t . W[:, side*H + h] + b[side*H + h])
            f = [[[[math.log(sigmoid(sum(a[b][t][d] * Wg[d][s_ * H + h] for d in range(EMBED))
                                     + bg[s_ * H + h])) for h in range(H)]
                   for t in range(T)] for s_ in range(1 if causal else 2)] for b in range(B)]
        if pos.dape is not None:
            W1, b1 = pos.dape.weight1[l].tolist(), pos.dape.bias1[l].tolist()
            W2, b2 = pos.dape.weight2[l].tolist(), pos.dape.bias2[l].tolist()
            width = len(b1)
        if pos.length_scale is not None:
            scale = pos.length_scale.scale[l].tolist()
        for b in range(B):
            for h in range(H):
                for i in range(T):
                    seen = range(i + 1) if causal else range(T)
                    row = []
                    for j in seen:
                        s_ij = sum(q[b][h][i][d] * k[b][h][j][d] for d in range(Dh)) / math.sqrt(Dh)
                        assert abs(S[b][h][i][j] - s_ij) < 1e-12 * (1 + abs(s_ij))
                        bias_ij = bias_list[h][i][j] if bias is not None else 0.0
                        c_ij = 0.0
                        if scheme == "cope":
                            ts = range(j, i + 1) if j <= i else range(i, j + 1)
                            p = sum(sigmoid(S[b][h][i][t]) for t in ts)
                            clamped.append(p > npos - 1)
                            P = min(p, npos - 1)
                            lo, hi = math.floor(P), math.ceil(P)
                            w = P - lo
                            E = E_left if j <= i else E_right
                            qe = lambda r: sum(q[b][h][i][d] * E[r][d] for d in range(Dh))
                            c_ij = (1 - w) * qe(lo) + w * qe(hi)
                        elif scheme == "fox":
                            if j <= i:
                                c_ij = sum(f[b][0][t][h] for t in range(j + 1, i + 1))
                            else:
                                c_ij = sum(f[b][1][t][h] for t in range(i, j))
                        elif pos.dape is not None:
                            u = [S[b][g_][i][j] for g_ in range(H)] + [bias_list[g_][i][j] for g_ in range(H)]
                            hidden = [sum(u[n] * W1[n][w] for n in range(2 * H)) + b1[w] for w in range(width)]
                            hidden = [x if x > 0 else 0.01 * x for x in hidden]
                            c_ij = sum(hidden[w] * W2[w][h] for w in range(width)) + b2[h]
                        m = 1.0
                        if pos.length_scale is not None:
                            m = scale[h] * math.log(i + 1 if causal else T)
                        z = m * (s_ij + bias_ij + c_ij)
                        assert abs(got[b][h][i][j] - z) < 1e-12 * (1 + abs(z)), \
                            (variant, l, b, h, i, j, got[b][h][i][j], z)
                        row.append(z)
                    top = max(row)
                    total = sum(math.exp(z - top) for z in row)
                    for j, z in zip(seen, row):
                        assert abs(probs[b][h][i][j] - math.exp(z - top) / total) < 1e-13

        if scheme == "xpos":
            # S from the unrotated q, k: each pair turned by p * theta_r and scaled by
            # zeta_r^(p - c) / gamma (q) and zeta_r^-(p - c) / gamma (k).
            R2, gamma = pos.pairs, o["xpos_scale_base"]
            q_in, k_in = tr["q_in"].tolist(), tr["k_in"].tolist()
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

        if scheme == "fox" and not causal:
            # The mirror image: reversing the sequence and swapping the left and right
            # gate parameters reverses the term along both axes.
            mirror = FoX(BLOCKS, EMBED, H, False, torch.Generator().manual_seed(0))
            with torch.no_grad():
                mirror.gate_weight.copy_(torch.cat([pos.gate_weight[..., H:], pos.gate_weight[..., :H]], -1))
                mirror.gate_bias.copy_(torch.cat([pos.gate_bias[..., H:], pos.gate_bias[..., :H]], -1))
                back = mirror.content_term(l, tr["a"].flip(1), None, None, None).flip(-1).flip(-2)
            assert close(back, tr["content"], 1e-13), (back - tr["content"]).abs().max()
            assert not close(tr["content"], tr["content"].transpose(-1, -2), 1e-3)

        if pos.length_scale is not None and causal:
            assert torch.all(tr["multiplier"][:, 0] == 0), "row 0 sees one key: ln 1 = 0"

    if scheme == "cope":
        # cope_clamped: both sides of min(p, npos - 1) occur; cope (npos = T): p < T - 1
        # for these weights, so the clamp is not reached (the gates would all need to be 1).
        if o["cope_positions"] and o["cope_positions"] < T:
            assert any(clamped) and not all(clamped), variant
        else:
            assert not any(clamped), variant

    if pos.length_scale is not None and not causal:
        # At scale = 1 / ln T (the training start at the trained context) the
        # bidirectional model is the model without the length scale.
        with torch.no_grad():
            saved = pos.length_scale.scale.clone()
            pos.length_scale.scale.fill_(1.0 / math.log(T))
            scaled, _ = model(tokens)
            module, pos.length_scale = pos.length_scale, None
            plain, _ = model(tokens)
            pos.length_scale = module
            pos.length_scale.scale.copy_(saved)
        assert close(scaled, plain, 1e-12), (scaled - plain).abs().max()


def check_model(model, tokens, targets, logits, attn, loss, grads, variant, scheme, options, causal):
    L, B, H, T = BLOCKS, BATCH, HEADS, CONTEXT
    assert logits.shape == (B, T, VOCAB)
    assert attn.shape == (L, B, H, T, T)
    assert math.isfinite(loss) and 0.5 < loss < 10.0, loss
    assert torch.isfinite(logits).all() and torch.isfinite(attn).all()
    assert close(attn.sum(-1), torch.ones(L, B, H, T)), "attention rows sum to 1"

    if causal:
        assert torch.all(attn.triu(diagonal=1) == 0), "no attention to the future"
        assert torch.all(attn[..., 0, 0] == 1.0)
        # Changing the last token must not change logits at earlier positions.
        t2 = tokens.clone()
        t2[:, -1] = (t2[:, -1] + 3) % VOCAB
        with torch.no_grad():
            l2, _ = model(t2)
        assert torch.equal(l2[:, :-1], logits[:, :-1]), "causal leak"
        assert not torch.equal(l2[:, -1], logits[:, -1])
    else:
        t2 = tokens.clone()
        t2[:, -1] = (t2[:, -1] + 3) % VOCAB
        with torch.no_grad():
            l2, _ = model(t2)
        assert not torch.equal(l2[:, 0], logits[:, 0]), "bidirectional model sees the future"

    zero = zero_gradient_expected(scheme, options, causal)
    for name, gr in grads.items():
        if name in zero:
            assert torch.all(gr == 0), name
        else:
            assert gr.abs().max() > 0, f"zero gradient for {name}"
    if scheme == "t5":
        # A bucket's row has a gradient exactly when some unmasked score uses it.
        used = {T5_BUCKETS_8_20[d + 9] for d in range(-(T - 1), T) if d >= 0 or not causal}
        rows = {b for b in range(grads["positional.bucket_bias"].shape[0])
                if grads["positional.bucket_bias"][b].abs().max() > 0}
        assert rows == used, (rows, used)

    # Without any positional information and without a mask, the model is
    # permutation equivariant over positions.
    if scheme == "none" and not causal:
        perm = torch.tensor([3, 1, 4, 0, 9, 2, 6, 5, 8, 7])
        with torch.no_grad():
            lp, _ = model(tokens[:, perm])
        assert close(lp, logits[:, perm], 1e-11)

    check_terms(model, tokens, attn, variant, scheme, options, causal)
    check_scheme_table(model, variant, scheme, options)
    check_against_torch_layers(model, tokens, causal)
    check_gradients(model, tokens, targets, grads)


# ----------------------------------------------------------------------------
# Fixture generation
# ----------------------------------------------------------------------------

BASE_SHAPES = {
    "tok_emb": (VOCAB, EMBED),
    "ln_f.weight": (EMBED,),
    "ln_f.bias": (EMBED,),
    "head.weight": (EMBED, VOCAB),
    "head.bias": (VOCAB,),
}
for _l in range(BLOCKS):
    BASE_SHAPES.update({
        f"blocks.{_l}.ln1.weight": (EMBED,),
        f"blocks.{_l}.ln1.bias": (EMBED,),
        f"blocks.{_l}.attn.qkv.weight": (EMBED, 3 * EMBED),
        f"blocks.{_l}.attn.proj.weight": (EMBED, EMBED),
        f"blocks.{_l}.attn.proj.bias": (EMBED,),
        f"blocks.{_l}.ln2.weight": (EMBED,),
        f"blocks.{_l}.ln2.bias": (EMBED,),
        f"blocks.{_l}.ff.fc1.weight": (EMBED, HIDDEN),
        f"blocks.{_l}.ff.fc1.bias": (HIDDEN,),
        f"blocks.{_l}.ff.fc2.weight": (HIDDEN, EMBED),
        f"blocks.{_l}.ff.fc2.bias": (EMBED,),
    })


def expected_shapes(scheme, options, causal):
    """Every parameter's name and shape, the scheme's and the options' from their
    written definitions (per-block parameters with a leading L axis)."""
    o = resolve_options(scheme, options)
    T, D, H, L, Dh = CONTEXT, EMBED, HEADS, BLOCKS, EMBED // HEADS
    shapes = dict(BASE_SHAPES)
    extra = {}
    if scheme == "learned":
        extra = {"table": (T, D)}
    elif scheme == "alibi" and o["alibi_learned"]:
        extra = {"log_slopes": (H,)}
        if o["alibi_direction"] == "two-sided":
            extra["log_right_slopes"] = (H,)
    elif scheme == "t5":
        extra = {"bucket_bias": (o["t5_buckets"], H)}
    elif scheme == "dynamic":
        W, depth = o["bias_mlp_hidden"], o["dynamic_depth"]
        extra = {"mlp0_weight": (1, W), "mlp0_bias": (W,)}
        for k in range(1, depth):
            extra.update({f"mlp{k}_weight": (W, W), f"mlp{k}_bias": (W,)})
        extra.update({f"mlp{depth}_weight": (W, H), f"mlp{depth}_bias": (H,)})
    elif scheme == "kerple":
        extra = {"log_r1": (H,), "log_r2": (H,)}
    elif scheme == "fire":
        W = o["bias_mlp_hidden"]
        extra = {"c": (1,), "threshold_scale": (1,), "mlp0_weight": (1, W), "mlp0_bias": (W,),
                 "mlp1_weight": (W, H), "mlp1_bias": (H,)}
    elif scheme == "cope":
        npos = o["cope_positions"] or T
        extra = {"left_embedding": (L, npos, Dh)}
        if not causal:
            extra["right_embedding"] = (L, npos, Dh)
    elif scheme == "fox":
        sides = 1 if causal else 2
        extra = {"gate_weight": (L, D, sides * H), "gate_bias": (L, sides * H)}
    if o.get("dape"):
        W = o["dape_hidden"]
        extra.update({"dape.weight1": (L, 2 * H, W), "dape.bias1": (L, W),
                      "dape.weight2": (L, W, H), "dape.bias2": (L, H)})
    if o["length_scale"]:
        extra["length_scale.scale"] = (L, H)
    shapes.update({"positional." + n: s for n, s in extra.items()})
    return shapes


def tensor_entry(t):
    t = t.detach().to(DTYPE).contiguous()
    return {"shape": list(t.shape), "data": t.reshape(-1).tolist()}


def dump_json(obj, path):
    """JSON with one line per top-level key / per parameter; floats via repr
    (shortest round-trip representation, up to 17 significant digits)."""
    lines = ["{"]
    keys = list(obj.keys())
    for n, key in enumerate(keys):
        val = obj[key]
        comma = "," if n < len(keys) - 1 else ""
        if key in ("params", "grads"):
            lines.append(f"  {json.dumps(key)}: {{")
            names = list(val.keys())
            for m, name in enumerate(names):
                c2 = "," if m < len(names) - 1 else ""
                lines.append(f"    {json.dumps(name)}: "
                             f"{json.dumps(val[name], separators=(',', ':'), allow_nan=False)}{c2}")
            lines.append("  }" + comma)
        else:
            lines.append(f"  {json.dumps(key)}: "
                         f"{json.dumps(val, separators=(',', ':'), allow_nan=False)}{comma}")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def make_fixture(index, variant, scheme, options, causal):
    """The fixture of VARIANTS[index] with this causal flag; seed BASE_SEED + 2 index + causal."""
    assert causal in causal_flags(scheme), (variant, causal)
    seed = BASE_SEED + 2 * index + int(causal)
    gen = torch.Generator().manual_seed(seed)
    model = CopyTransformer(VOCAB, CONTEXT, EMBED, HEADS, BLOCKS, HIDDEN, scheme, options, causal, gen)
    tokens, targets = make_copy_batch(gen, BATCH, CONTEXT, VOCAB)

    shapes = expected_shapes(scheme, options, causal)
    names = [n for n, _ in model.named_parameters()]
    assert set(names) == set(shapes), set(names) ^ set(shapes)
    for n, p in model.named_parameters():
        assert tuple(p.shape) == shapes[n], (n, p.shape)
        assert p.dtype == DTYPE

    model.zero_grad()
    logits, attn = model(tokens)
    loss = loss_fn(logits, targets)
    loss.backward()
    grads = {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
             for n, p in model.named_parameters()}
    logits, attn = logits.detach(), attn.detach()

    check_model(model, tokens, targets, logits, attn, loss.item(), grads, variant, scheme, options, causal)

    fixture = {
        "description": (
            f"Parity fixture for the copytask transformer: variant={variant}, positional={scheme}, "
            f"options={json.dumps(options, separators=(',', ':'))}, causal={str(causal).lower()}. "
            f"Generated by tests/reference/make_parity_fixtures.py "
            f"(independent float64 PyTorch reference, seed {seed}). Weights are stored (in, out): "
            f"y = x @ W. Scheme parameters are positional.<name>, drawn at random. "
            f"Loss = mean cross-entropy over all B*T positions (padding included). "
            f"attention = softmax probabilities, shape [blocks, batch, heads, T, T]."),
        "config": {"vocab_size": VOCAB, "context": CONTEXT, "embed": EMBED, "heads": HEADS,
                   "blocks": BLOCKS, "hidden": HIDDEN, "positional": scheme,
                   "causal": causal, "options": dict(options)},
        "tokens": tokens.tolist(),
        "targets": targets.tolist(),
        "params": {n: tensor_entry(p) for n, p in model.named_parameters()},
        "logits": tensor_entry(logits),
        "loss": loss.item(),
        "grads": {n: tensor_entry(grads[n]) for n in names},
        "attention": tensor_entry(attn),
    }
    return fixture


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.normpath(os.path.join(here, "..", "fixtures"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=default_out, help="output directory (default: tests/fixtures)")
    ap.add_argument("--only", nargs="+", metavar="VARIANT", choices=[v for v, _, _ in VARIANTS],
                    help="write only these variants' files (the seeds do not change)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    check_static()
    assert len({v for v, _, _ in VARIANTS}) == len(VARIANTS)
    for index, (variant, scheme, options) in enumerate(VARIANTS):
        if args.only and variant not in args.only:
            continue
        for causal in causal_flags(scheme):   # causal only: (True,); else (False, True)
            fx = make_fixture(index, variant, scheme, options, causal)
            name = fixture_name(variant, causal)
            path = os.path.join(args.out, name)
            dump_json(fx, path)
            # Round-trip: the file must reproduce the exact float64 values.
            with open(path) as f:
                back = json.load(f)
            assert back["loss"] == fx["loss"]
            assert back["logits"]["data"] == fx["logits"]["data"]
            assert back["config"] == fx["config"]
            print(f"{name:40s} loss={fx['loss']:.17g}  size={os.path.getsize(path)} B")
        if scheme in CAUSAL_ONLY:   # a stale bidirectional file would be read as a fixture
            stale = os.path.join(args.out, fixture_name(variant, False))
            assert not os.path.exists(stale), f"{stale}: {scheme} is causal only"


if __name__ == "__main__":
    main()
