#!/usr/bin/python3
"""Independent PyTorch reference implementation of the copytask transformer.

This script is the *reference* side of the C++ (LibTorch) parity tests.  It is
written from the model specification the plain PyTorch way -- a single model,
an ``nn.Module`` with explicit, readable ops, everything in float64 -- and is
deliberately NOT derived from (or a transliteration of) the C++ code.  Its
only job is to produce numbers the C++ model must reproduce.

Model (pre-LN transformer encoder, no dropout):

    x = tok_emb[tokens]   (+ sinusoidal PE | + pos_emb, for those schemes)
    for each block:
        x = x + Attn(LN1(x))    # RoPE on q/k, ALiBi bias, causal mask optional
        x = x + FF(LN2(x))      # relu MLP
    logits = LN_f(x) @ W_head + b_head
    loss = mean cross-entropy over all B*T positions

All weight matrices are stored in the (in, out) layout, i.e. ``y = x @ W``.

For each positional scheme (none, sinusoidal, learned, rope, alibi) and each
causal flag (false, true) it writes ``parity_<scheme>[_causal].json`` with the
config, tokens, targets, all parameters, logits, loss, gradients of the loss
with respect to every parameter, and the attention probabilities of every
block.  Before writing, a number of self-checks are asserted (RoPE properties,
ALiBi slopes, causality, a cross-check of the blocks against
``nn.TransformerEncoderLayer`` for the non-RoPE schemes, and a finite
difference check of the gradients).

Usage:
    /usr/bin/python3 tests/reference/make_parity_fixtures.py [--out tests/fixtures]
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

SCHEMES = ["none", "sinusoidal", "learned", "rope", "alibi"]
BASE_SEED = 20240601


# ----------------------------------------------------------------------------
# Positional helpers
# ----------------------------------------------------------------------------

def sinusoidal_table(T, D):
    """PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D))."""
    pe = torch.zeros(T, D)
    pos = torch.arange(T, dtype=DTYPE)
    for i in range(D // 2):
        denom = 10000.0 ** (2 * i / D)
        pe[:, 2 * i] = torch.sin(pos / denom)
        pe[:, 2 * i + 1] = torch.cos(pos / denom)
    return pe


def rope_rotate(x):
    """Rotate the adjacent pairs (2i, 2i+1) of the last dim of x (..., T, Dh).

    theta = p * 10000^(-2i/Dh), p the position along dim -2.
    new[2i]   = a cos(theta) - b sin(theta)
    new[2i+1] = a sin(theta) + b cos(theta)
    """
    T, Dh = x.shape[-2], x.shape[-1]
    pos = torch.arange(T, dtype=DTYPE)
    inv_freq = torch.tensor([10000.0 ** (-2 * i / Dh) for i in range(Dh // 2)], dtype=DTYPE)
    theta = pos[:, None] * inv_freq[None, :]          # (T, Dh/2)
    cos, sin = torch.cos(theta), torch.sin(theta)
    a = x[..., 0::2]
    b = x[..., 1::2]
    new_a = a * cos - b * sin
    new_b = a * sin + b * cos
    return torch.stack([new_a, new_b], dim=-1).flatten(-2)   # re-interleave


def alibi_slopes(H):
    """Head slopes from the ALiBi paper (Press et al.), reference rule."""
    def power_of_2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    if math.log2(H).is_integer():
        return power_of_2(H)
    n = 2 ** math.floor(math.log2(H))
    return power_of_2(n) + power_of_2(2 * n)[0::2][: H - n]


def alibi_bias(H, T):
    """(H, T, T) additive bias: -slope_h * |i - j|."""
    slopes = torch.tensor(alibi_slopes(H), dtype=DTYPE)
    pos = torch.arange(T)
    dist = (pos[:, None] - pos[None, :]).abs().to(DTYPE)   # |i - j|
    return -slopes[:, None, None] * dist[None, :, :]


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------

def _uniform(gen, shape, fan_in):
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=gen, dtype=DTYPE) * 2.0 - 1.0) * bound


def _ln_weight(gen, D):
    return 1.0 + 0.1 * torch.randn(D, generator=gen, dtype=DTYPE)


def _ln_bias(gen, D):
    return 0.1 * torch.randn(D, generator=gen, dtype=DTYPE)


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
    def __init__(self, D, H, positional, causal, gen):
        super().__init__()
        self.D, self.H, self.Dh = D, H, D // H
        self.positional = positional
        self.causal = causal
        self.qkv = Linear(D, 3 * D, gen, bias=False)
        self.proj = Linear(D, D, gen, bias=True)

    def split_heads(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.H, self.Dh).transpose(1, 2)    # (B, H, T, Dh)

    def forward(self, x):
        B, T, D = x.shape
        qkv = self.qkv(x)
        q = self.split_heads(qkv[..., 0:D])
        k = self.split_heads(qkv[..., D:2 * D])
        v = self.split_heads(qkv[..., 2 * D:3 * D])

        if self.positional == "rope":
            q = rope_rotate(q)
            k = rope_rotate(k)

        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.Dh)   # (B, H, T, T)
        if self.positional == "alibi":
            scores = scores + alibi_bias(self.H, T)[None]
        if self.causal:
            future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)   # j > i
            scores = scores.masked_fill(future, float("-inf"))

        attn = torch.softmax(scores, dim=-1)
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
    def __init__(self, D, H, F_, positional, causal, gen):
        super().__init__()
        self.ln1 = LayerNorm(D, gen)
        self.attn = Attention(D, H, positional, causal, gen)
        self.ln2 = LayerNorm(D, gen)
        self.ff = FeedForward(D, F_, gen)

    def forward(self, x):
        a, attn = self.attn(self.ln1(x))
        x = x + a
        x = x + self.ff(self.ln2(x))
        return x, attn


class CopyTransformer(nn.Module):
    def __init__(self, V, T, D, H, L, F_, positional, causal, gen):
        super().__init__()
        assert positional in SCHEMES
        self.positional = positional
        self.tok_emb = nn.Parameter(torch.randn(V, D, generator=gen, dtype=DTYPE))
        # Always present (the C++ model always carries it); only used by "learned".
        self.pos_emb = nn.Parameter(torch.randn(T, D, generator=gen, dtype=DTYPE))
        self.blocks = nn.ModuleList(
            [Block(D, H, F_, positional, causal, gen) for _ in range(L)])
        self.ln_f = LayerNorm(D, gen)
        self.head = Linear(D, V, gen)

    def embed(self, tokens):
        T = tokens.shape[1]
        x = self.tok_emb[tokens]
        if self.positional == "sinusoidal":
            x = x + sinusoidal_table(T, x.shape[-1])
        elif self.positional == "learned":
            x = x + self.pos_emb[:T]
        return x

    def forward(self, tokens):
        x = self.embed(tokens)
        attns = []
        for block in self.blocks:
            x, attn = block(x)
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


def check_static():
    # ALiBi slopes.
    assert alibi_slopes(8) == [2.0 ** -(h + 1) for h in range(8)], alibi_slopes(8)
    assert alibi_slopes(2) == [2.0 ** -4, 2.0 ** -8]
    assert alibi_slopes(6) == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    b = alibi_bias(2, 4)
    assert b[0, 0, 3].item() == -3 * 2.0 ** -4 and b[0, 3, 0].item() == -3 * 2.0 ** -4
    assert torch.all(torch.diagonal(b, dim1=-2, dim2=-1) == 0)

    # Sinusoidal table.
    pe = sinusoidal_table(CONTEXT, EMBED)
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * (EMBED // 2)))
    assert abs(pe[1, 0].item() - math.sin(1.0)) < 1e-15
    assert abs(pe[1, 1].item() - math.cos(1.0)) < 1e-15
    assert abs(pe[3, 2].item() - math.sin(3.0 / 10000.0 ** (2 / EMBED))) < 1e-15
    assert abs(pe[3, 7].item() - math.cos(3.0 / 10000.0 ** (6 / EMBED))) < 1e-15

    # RoPE.
    g = torch.Generator().manual_seed(7)
    Dh = EMBED // HEADS
    x = torch.randn(3, HEADS, CONTEXT, Dh, generator=g, dtype=DTYPE)
    y = rope_rotate(x)
    assert close(x.norm(dim=-1), y.norm(dim=-1)), "rope must preserve norms"
    assert close(x[..., 0, :], y[..., 0, :], 0.0), "rope is identity at position 0"
    # Independent formulation: pairs as complex numbers times exp(i*theta).
    xc = torch.complex(x[..., 0::2], x[..., 1::2])
    pos = torch.arange(CONTEXT, dtype=DTYPE)[:, None]
    i = torch.arange(Dh // 2, dtype=DTYPE)[None, :]
    theta = pos * torch.pow(torch.tensor(10000.0, dtype=DTYPE), -2.0 * i / Dh)
    yc = xc * torch.polar(torch.ones_like(theta), theta)
    assert close(torch.stack([yc.real, yc.imag], -1).flatten(-2), y)
    # Relative-position property: <R_p q, R_s k> depends only on p - s.
    q = torch.randn(Dh, generator=g, dtype=DTYPE)
    k = torch.randn(Dh, generator=g, dtype=DTYPE)
    rq = rope_rotate(q.expand(CONTEXT, Dh))
    rk = rope_rotate(k.expand(CONTEXT, Dh))
    assert abs((rq[5] @ rk[2]) - (rq[3] @ rk[0])).item() < 1e-12
    assert abs((rq[1] @ rk[7]) - (rq[2] @ rk[8])).item() < 1e-12


def check_against_torch_layers(model, tokens, positional, causal):
    """Cross-check the hand-written blocks against nn.TransformerEncoderLayer
    (norm_first, relu, no dropout), with ALiBi/causal passed as a float mask.
    Not applicable to RoPE (q/k are rotated inside attention)."""
    if positional == "rope":
        return
    T = tokens.shape[1]
    H = HEADS
    mask = torch.zeros(H, T, T)
    if positional == "alibi":
        mask = mask + alibi_bias(H, T)
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
            mine, _ = blk(x)
            theirs = ref(x, src_mask=mask)
            assert close(mine, theirs, 1e-11), (positional, causal, (mine - theirs).abs().max())
            x = mine


def check_gradients(model, tokens, targets, grads, n_per_param=3, seed=0):
    """Central finite differences on a few random entries of every parameter."""
    g = torch.Generator().manual_seed(seed)
    eps = 1e-6
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.view(-1)
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


def check_model(model, tokens, targets, logits, attn, loss, grads, positional, causal):
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

    for name, gr in grads.items():
        if name == "pos_emb" and positional != "learned":
            assert torch.all(gr == 0), name
        else:
            assert gr.abs().max() > 0, f"zero gradient for {name}"

    # Without any positional information and without a mask, the model is
    # permutation equivariant over positions.
    if positional == "none" and not causal:
        perm = torch.tensor([3, 1, 4, 0, 9, 2, 6, 5, 8, 7])
        with torch.no_grad():
            lp, _ = model(tokens[:, perm])
        assert close(lp, logits[:, perm], 1e-11)

    check_against_torch_layers(model, tokens, positional, causal)
    check_gradients(model, tokens, targets, grads)


# ----------------------------------------------------------------------------
# Fixture generation
# ----------------------------------------------------------------------------

EXPECTED_SHAPES = {
    "tok_emb": (VOCAB, EMBED),
    "pos_emb": (CONTEXT, EMBED),
    "ln_f.weight": (EMBED,),
    "ln_f.bias": (EMBED,),
    "head.weight": (EMBED, VOCAB),
    "head.bias": (VOCAB,),
}
for _l in range(BLOCKS):
    EXPECTED_SHAPES.update({
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


def make_fixture(index, positional, causal):
    seed = BASE_SEED + index
    gen = torch.Generator().manual_seed(seed)
    model = CopyTransformer(VOCAB, CONTEXT, EMBED, HEADS, BLOCKS, HIDDEN, positional, causal, gen)
    tokens, targets = make_copy_batch(gen, BATCH, CONTEXT, VOCAB)

    names = [n for n, _ in model.named_parameters()]
    assert set(names) == set(EXPECTED_SHAPES), set(names) ^ set(EXPECTED_SHAPES)
    for n, p in model.named_parameters():
        assert tuple(p.shape) == EXPECTED_SHAPES[n], (n, p.shape)
        assert p.dtype == DTYPE

    model.zero_grad()
    logits, attn = model(tokens)
    loss = loss_fn(logits, targets)
    loss.backward()
    grads = {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p))
             for n, p in model.named_parameters()}
    logits, attn = logits.detach(), attn.detach()

    check_model(model, tokens, targets, logits, attn, loss.item(), grads, positional, causal)

    fixture = {
        "description": (
            f"Parity fixture for the copytask transformer: positional={positional}, "
            f"causal={str(causal).lower()}. Generated by tests/reference/make_parity_fixtures.py "
            f"(independent float64 PyTorch reference, seed {seed}). Weights are stored (in, out): "
            f"y = x @ W. Loss = mean cross-entropy over all B*T positions (padding included). "
            f"attention = softmax probabilities, shape [blocks, batch, heads, T, T]."),
        "config": {"vocab_size": VOCAB, "context": CONTEXT, "embed": EMBED, "heads": HEADS,
                   "blocks": BLOCKS, "hidden": HIDDEN, "positional": positional,
                   "causal": causal},
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
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    check_static()
    index = 0
    for positional in SCHEMES:
        for causal in (False, True):
            fx = make_fixture(index, positional, causal)
            name = f"parity_{positional}{'_causal' if causal else ''}.json"
            path = os.path.join(args.out, name)
            dump_json(fx, path)
            # Round-trip: the file must reproduce the exact float64 values.
            with open(path) as f:
                back = json.load(f)
            assert back["loss"] == fx["loss"]
            assert back["logits"]["data"] == fx["logits"]["data"]
            print(f"{name:32s} loss={fx['loss']:.17g}  size={os.path.getsize(path)} B")
            index += 1


if __name__ == "__main__":
    main()
