"""One copytask member's forward pass in plain PyTorch, from its checkpoint.

A trained member's folder (members/<scheme>/seed-<s>/ of a study) holds model.pt, a plain
dict of tensors that torch.load reads in PyTorch 1.13 and 2.x (no TorchScript), and
result.json, whose "model" entry is the member's model config. Every tensor has a leading
member axis of size 1.

    import json, torch
    from copytask_forward import forward
    params = torch.load("DIR/members/rope/seed-0/model.pt")
    model = json.load(open("DIR/members/rope/seed-0/result.json"))["model"]
    logits, attention = forward(params, model, torch.tensor([[7, 1, 8, 2, 10, 0, 0, 0, 0, 0]]))
    print(logits.argmax(-1))   # tensor([[7, 1, 8, 2, 10, 7, 1, 8, 2, 0]])

The model (docs/design.md sections 1 and 2): token embedding (+ sinusoidal or learned
positions), pre-LN blocks of attention and a ReLU feed-forward, a final LayerNorm and the
head. Weights are stored (in, out): y = x @ W + b. Shapes: B batch, T positions, D embed,
H heads, Dh = D / H, L blocks. Attention of block l, with a = LN1(x):
    q, k, v = a @ W_qkv (no bias); q, k rotated (rope, xpos), then scaled (xpos)
    S  = q k^T / sqrt(Dh)
    Z  = S (+ the score bias B) (+ the content term C: cope, fox or dape)
    Z' = m Z (length scale), then the causal mask, softmax over the keys, @ v.

Positional schemes (model["positional"]), with their option keys in model (a key that is
absent takes its default, as in older result.json files) and their parameters
positional.<name>:
    none
    sinusoidal   x + PE
    learned      x + positional.table (T, D); older checkpoints call it pos_emb
    rope         rope_base 10000, rope_fraction 1: the first 2*R2 dims of each head rotate,
                 R2 = max(1, floor(rope_fraction * Dh / 2)), theta = p * rope_base^(-2i / (2*R2))
    alibi        alibi_slopes [] (the paper's), alibi_right_slopes [] (the same),
                 alibi_direction symmetric | offset | two-sided, alibi_learned false
                 (then positional.log_slopes (H) and, two-sided, positional.log_right_slopes (H))
    t5           t5_buckets 32, t5_max_distance 128; positional.bucket_bias (buckets, H)
    dynamic      bias_mlp_hidden 32, dynamic_depth 2, dynamic_log_distance false;
                 positional.mlp<k>_weight, positional.mlp<k>_bias, k = 0..depth
    kerple       positional.log_r1 (H), positional.log_r2 (H)
    fire         bias_mlp_hidden 32, fire_threshold 0 (= the context: model["context"] if
                 given, else T); positional.c (1), positional.threshold_scale (1),
                 positional.mlp0_weight, mlp0_bias, mlp1_weight, mlp1_bias
    xpos         (causal only) rope_base 10000, rope_fraction 1, xpos_scale_base 512: RoPE,
                 then pair r of q at position p times zeta_r^((p - c) / gamma) and of k times
                 zeta_r^(-(p - c) / gamma), zeta_r = (2r / (2*R2) + 0.4) / 1.4 (1 for r >= R2),
                 gamma = xpos_scale_base, c = T // 2; no parameters
    cope         cope_positions 0 (= the context); positional.left_embedding (L, npos, Dh) and,
                 bidirectional, positional.right_embedding (L, npos, Dh). C_ij interpolates
                 q_i . E[p] at p = min(sum of sigmoid(S_it) for t from j to i, npos - 1);
                 npos is read from the table (the rows of left_embedding)
    fox          positional.gate_weight (L, D, sides*H), positional.gate_bias (L, sides*H),
                 sides 1 causal, 2 bidirectional: C_ij = sum of ln sigmoid(a_t W + b) over
                 t = j+1..i (j <= i; columns 0..H-1) or t = i..j-1 (j > i; columns H..2H-1)
A score bias (H, T, T) is a function of d = i - j (query i, key j; d > 0: the key is to
the left); it is added after the 1/sqrt(Dh) scaling and before the causal mask.

Options of several schemes:
    dape         dape false, dape_hidden 32 (alibi, t5, dynamic, kerple, fire only): per
                 block a leaky_relu (0.01) MLP of [S^(0..H-1), B^(0..H-1)] per (i, j) gives C;
                 positional.dape.weight1 (L, 2H, W), dape.bias1 (L, W), dape.weight2 (L, W, H),
                 dape.bias2 (L, H)
    length_scale length_scale false (every scheme): m[l, h, i] = scale[l, h] * ln(n_i),
                 n_i = i + 1 (causal) or T (bidirectional); positional.length_scale.scale (L, H)

Randomized positions (model["random_positions"] = L > 0): this script places every token at
0..T-1, not at the sorted random subset of 0..L-1 that copytask draws in training and
evaluation, so its logits for such a member are not copytask's (the member was never
trained at exactly 0..T-1). Use copytask eval or predict for those members.
"""

import math

import torch

SCHEMES = ("none", "sinusoidal", "learned", "rope", "alibi", "t5", "dynamic", "kerple", "fire",
           "xpos", "cope", "fox")
BIAS_SCHEMES = ("alibi", "t5", "dynamic", "kerple", "fire")   # the schemes DAPE may read

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
    "cope_positions": 0,
    "xpos_scale_base": 512.0,
    "dape": False,
    "dape_hidden": 32,
    "length_scale": False,
}


def _option(model, key):
    value = model.get(key)
    return DEFAULTS[key] if value is None else value


def _distance(T):
    """(T, T) d = i - j, float32."""
    position = torch.arange(T)
    return (position[:, None] - position[None, :]).float()


def _sinusoidal(T, D):
    position = torch.arange(T, dtype=torch.float64)[:, None]
    frequency = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    table = torch.zeros(T, D, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)[:, : D // 2]
    return table.float()


def _rope_pairs(Dh, fraction):
    """R2, the pairs that rotate."""
    return min(Dh // 2, max(1, int(math.floor(fraction * Dh / 2))))


def _rope(x, base, fraction):
    """Rotates the pairs (2i, 2i+1), i < R2, of x (B, H, T, Dh) by p * base^(-2i/(2*R2))."""
    T, Dh = x.shape[-2], x.shape[-1]
    R2 = _rope_pairs(Dh, fraction)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * float(base) ** (-torch.arange(0, 2 * R2, 2, dtype=torch.float64) / (2 * R2))
    cos, sin = angle.cos().float(), angle.sin().float()                  # (T, R2)
    a, b = x[..., 0:2 * R2:2], x[..., 1:2 * R2:2]
    rotated = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    return torch.cat([rotated, x[..., 2 * R2:]], dim=-1)


def _xpos_scale(x, sign, fraction, gamma):
    """xPos's scale of the (rotated) q (sign 1) or k (sign -1), x (B, H, T, Dh): pair r at
    position p times exp(sign * (p - T // 2) / gamma * ln zeta_r)."""
    T, Dh = x.shape[-2], x.shape[-1]
    R2 = _rope_pairs(Dh, fraction)
    r = torch.arange(Dh // 2, dtype=torch.float64)
    log_zeta = torch.where(r < R2, torch.log((2 * r / (2 * R2) + 0.4) / 1.4), torch.zeros(()))
    u = (torch.arange(T, dtype=torch.float64)[:, None] - T // 2) / float(gamma) * log_zeta  # (T, Dh/2)
    return x * torch.exp(sign * u).repeat_interleave(2, dim=-1).float()


def _cope(p, block, q, scores, causal):
    """CoPE's C (B, H, T, T): gates sigmoid(S), p_ij their sum from the key to the query
    (both included), P = min(p, npos - 1), (1 - w) q_i . E[floor P] + w q_i . E[ceil P]."""
    T = scores.shape[-1]
    row, col = torch.arange(T)[:, None], torch.arange(T)[None, :]
    gates = scores.sigmoid()
    position = gates.masked_fill(col > row, 0.0).flip(-1).cumsum(-1).flip(-1)   # t = j..i
    if not causal:
        right = gates.masked_fill(col < row, 0.0).cumsum(-1)                     # t = i..j
        position = torch.where(col <= row, position, right)
    sides = [("left", col <= row)] + ([] if causal else [("right", col > row)])
    term = torch.zeros_like(scores)
    for side, where in sides:
        table = p["positional.%s_embedding" % side][block]                       # (npos, Dh)
        P = position.clamp(max=table.shape[0] - 1)
        low, high = P.floor(), P.ceil()
        w = P - low
        qe = q @ table.t()                                                        # (B, H, T, npos)
        value = (1 - w) * qe.gather(-1, low.long()) + w * qe.gather(-1, high.long())
        term = torch.where(where, value, term)
    return term


def _fox(p, block, a, H, causal):
    """FoX's C (B, H, T, T) from the attention input a (B, T, D): sums of ln sigmoid gates,
    t = j+1..i for j <= i, t = i..j-1 (the right gates) for j > i."""
    T = a.shape[1]
    f = torch.nn.functional.logsigmoid(a @ p["positional.gate_weight"][block] + p["positional.gate_bias"][block])
    f = f.transpose(1, 2)                                                          # (B, sides*H, T)
    total = f[:, :H].cumsum(-1)
    left = total[..., :, None] - total[..., None, :]
    at_or_left = torch.ones(T, T, dtype=torch.bool).tril()
    if causal:
        return left.masked_fill(~at_or_left, 0.0)
    before = f[:, H:].cumsum(-1) - f[:, H:]                                        # sum over t < i
    return torch.where(at_or_left, left, before[..., None, :] - before[..., :, None])


def _dape(p, block, scores, bias):
    """DAPE's C (B, H, T, T): an MLP of [S^(0..H-1), B^(0..H-1)] per (i, j)."""
    u = torch.cat([scores, bias.expand_as(scores)], dim=1).permute(0, 2, 3, 1)    # (B, T, T, 2H)
    hidden = torch.nn.functional.leaky_relu(u @ p["positional.dape.weight1"][block] + p["positional.dape.bias1"][block], 0.01)
    return (hidden @ p["positional.dape.weight2"][block] + p["positional.dape.bias2"][block]).permute(0, 3, 1, 2)


def _length_multiplier(p, block, T, causal):
    """(H, T, 1): scale[l, h] * ln(n_i), n_i = i + 1 (causal) or T."""
    n = torch.arange(1, T + 1, dtype=torch.float64) if causal else torch.full((T,), float(T), dtype=torch.float64)
    return p["positional.length_scale.scale"][block][:, None, None] * n.log().float()[None, :, None]


def _paper_slopes(H):
    def powers(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    lower = 2 ** int(math.floor(math.log2(H)))
    return powers(lower) + powers(2 * lower)[0::2][: H - lower]


def _alibi(p, model, H, T):
    """(H, T, T): symmetric -s|d|, offset -s(|d| - 0.5 [d > 0]), two-sided -s d (d >= 0), -r |d| (d < 0)."""
    direction = _option(model, "alibi_direction")
    if direction not in ("symmetric", "offset", "two-sided"):
        raise ValueError("unknown alibi_direction %r; copytask_forward knows symmetric, offset, two-sided" % direction)
    if _option(model, "alibi_learned"):
        s = p["positional.log_slopes"].exp()
        r = p["positional.log_right_slopes"].exp() if direction == "two-sided" else s
    else:
        s = torch.tensor(list(_option(model, "alibi_slopes")) or _paper_slopes(H), dtype=torch.float32)
        r = torch.tensor(list(_option(model, "alibi_right_slopes")), dtype=torch.float32) if _option(model, "alibi_right_slopes") else s
    s, r = s[:, None, None], r[:, None, None]
    d = _distance(T)
    if direction == "symmetric":
        return -s * d.abs()
    if direction == "offset":
        return -s * (d.abs() - 0.5 * (d > 0).float())
    return torch.where(d >= 0, -s * d, r * d)


def _t5_bucket(d, buckets, max_distance):
    half = buckets // 2
    bucket, n, exact = (half if d < 0 else 0), abs(d), half // 2
    if n < exact:
        return bucket + n
    return bucket + min(half - 1, exact + int(math.floor(math.log(n / exact) / math.log(max_distance / exact) * (half - exact) + 1e-9)))


def _t5(p, model, T):
    buckets, max_distance = int(_option(model, "t5_buckets")), _option(model, "t5_max_distance")
    index = torch.tensor([[_t5_bucket(i - j, buckets, max_distance) for j in range(T)] for i in range(T)])
    return p["positional.bucket_bias"][index].permute(2, 0, 1)              # (T, T, H) -> (H, T, T)


def _dynamic(p, model, T):
    depth = int(_option(model, "dynamic_depth"))
    x = _distance(T)
    if _option(model, "dynamic_log_distance"):
        x = x.sign() * torch.log1p(x.abs())
    h = x[..., None]                                                          # (T, T, 1)
    for k in range(depth):
        h = torch.nn.functional.silu(h @ p["positional.mlp%d_weight" % k] + p["positional.mlp%d_bias" % k])  # (T, T, W)
    out = h @ p["positional.mlp%d_weight" % depth] + p["positional.mlp%d_bias" % depth]  # (T, T, H)
    return out.permute(2, 0, 1)


def _kerple(p, T):
    r1, r2 = p["positional.log_r1"].exp()[:, None, None], p["positional.log_r2"].exp()[:, None, None]
    return -r1 * torch.log1p(r2 * _distance(T).abs())


def _fire(p, model, T):
    """MLP of sign(d) psi(|d|) / (psi(max(L, i)) + 1e-6), psi(z) = log(|c| z + 1), L = |threshold_scale * L0|."""
    L0 = float(_option(model, "fire_threshold")) or float(model.get("context") or T)
    c = p["positional.c"].abs()
    psi = lambda z: torch.log(c * z + 1)
    L = (p["positional.threshold_scale"] * L0).abs()
    d = _distance(T)
    normaliser = psi(torch.maximum(L, torch.arange(T).float())) + 1e-6           # (T): per query i
    x = (d.sign() * psi(d.abs()) / normaliser[:, None])[..., None]             # (T, T, 1)
    h = torch.relu(x @ p["positional.mlp0_weight"] + p["positional.mlp0_bias"])  # (T, T, W)
    return (h @ p["positional.mlp1_weight"] + p["positional.mlp1_bias"]).permute(2, 0, 1)


def forward(params, model, tokens):
    """logits (B, T, V) and each block's attention (B, H, T, T) for tokens (B, T)."""
    scheme = model["positional"]
    if scheme not in SCHEMES:
        raise ValueError("unknown positional scheme %r; copytask_forward knows %s" % (scheme, ", ".join(SCHEMES)))
    if scheme == "xpos" and not model["causal"]:
        raise ValueError("xpos is causal only; this member has causal false")
    if _option(model, "dape") and scheme not in BIAS_SCHEMES:
        raise ValueError("dape needs a score bias scheme (%s), not %r" % (", ".join(BIAS_SCHEMES), scheme))
    if scheme == "cope" and "positional.left_embedding" in params:
        npos = params["positional.left_embedding"].shape[-2]
        expected = int(_option(model, "cope_positions")) or int(model.get("context") or npos)
        if expected != npos:
            raise ValueError("cope_positions %d does not match positional.left_embedding's %d rows" % (expected, npos))
    p = {name: value[0] for name, value in params.items() if not name.startswith("meta.")}
    B, T = tokens.shape
    D, H = p["tok_emb"].shape[1], model["heads"]
    Dh = D // H
    x = p["tok_emb"][tokens]                                          # (B, T, D)
    if scheme == "sinusoidal":
        x = x + _sinusoidal(T, D)
    elif scheme == "learned":
        x = x + p["positional.table" if "positional.table" in p else "pos_emb"][:T]
    bias = None                                                       # (H, T, T)
    if scheme == "alibi":
        bias = _alibi(p, model, H, T)
    elif scheme == "t5":
        bias = _t5(p, model, T)
    elif scheme == "dynamic":
        bias = _dynamic(p, model, T)
    elif scheme == "kerple":
        bias = _kerple(p, T)
    elif scheme == "fire":
        bias = _fire(p, model, T)
    layer_norm = lambda y, name: torch.nn.functional.layer_norm(y, (D,), p[name + ".weight"], p[name + ".bias"], 1e-5)
    attention = []
    for block in range(model["blocks"]):
        prefix = "blocks.%d." % block
        h = layer_norm(x, prefix + "ln1")
        q, k, v = (h @ p[prefix + "attn.qkv.weight"]).split(D, dim=-1)  # (B, T, D) each
        q, k, v = (t.view(B, T, H, Dh).transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
        if scheme in ("rope", "xpos"):
            base, fraction = _option(model, "rope_base"), _option(model, "rope_fraction")
            q, k = _rope(q, base, fraction), _rope(k, base, fraction)
        if scheme == "xpos":
            fraction, gamma = _option(model, "rope_fraction"), _option(model, "xpos_scale_base")
            q, k = _xpos_scale(q, 1.0, fraction, gamma), _xpos_scale(k, -1.0, fraction, gamma)
        scores = q @ k.transpose(-2, -1) / math.sqrt(Dh)                 # S (B, H, T, T)
        logits = scores
        if bias is not None:
            logits = logits + bias
        if scheme == "cope":
            logits = logits + _cope(p, block, q, scores, model["causal"])
        elif scheme == "fox":
            logits = logits + _fox(p, block, h, H, model["causal"])
        elif _option(model, "dape"):
            logits = logits + _dape(p, block, scores, bias)
        if _option(model, "length_scale"):
            logits = _length_multiplier(p, block, T, model["causal"]) * logits
        if model["causal"]:
            logits = logits.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        weights = logits.softmax(-1)
        attention.append(weights)
        out = (weights @ v).transpose(1, 2).reshape(B, T, D)              # (B, T, D)
        x = x + out @ p[prefix + "attn.proj.weight"] + p[prefix + "attn.proj.bias"]
        h = layer_norm(x, prefix + "ln2")
        h = torch.relu(h @ p[prefix + "ff.fc1.weight"] + p[prefix + "ff.fc1.bias"])
        x = x + h @ p[prefix + "ff.fc2.weight"] + p[prefix + "ff.fc2.bias"]
    logits = layer_norm(x, "ln_f") @ p["head.weight"] + p["head.bias"]  # (B, T, V)
    return logits, attention
