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

The model (DESIGN.md sections 1 and 2): token embedding (+ sinusoidal or learned
positions), pre-LN blocks of attention (q/k/v without bias, RoPE on q and k, ALiBi bias,
causal mask) and a ReLU feed-forward, a final LayerNorm and the head. Weights are stored
(in, out): y = x @ W + b. Shapes: B batch, T positions, D embed, H heads, Dh = D / H.
"""

import math

import torch


def _sinusoidal(T, D):
    position = torch.arange(T, dtype=torch.float64)[:, None]
    frequency = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    table = torch.zeros(T, D, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)[:, : D // 2]
    return table.float()


def _rope(x):
    """Rotates the pairs (2i, 2i+1) of x (B, H, T, Dh) by p * 10000^(-2i/Dh)."""
    T, Dh = x.shape[-2], x.shape[-1]
    angle = torch.arange(T, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)
    cos, sin = angle.cos().float(), angle.sin().float()
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def _alibi(H, T):
    """(H, T, T) bias -slope_h * |i - j| with the ALiBi paper's slopes."""
    def powers(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    lower = 2 ** int(math.floor(math.log2(H)))
    slopes = powers(lower) + powers(2 * lower)[0::2][: H - lower]
    distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs().float()
    return -torch.tensor(slopes)[:, None, None] * distance


def forward(params, model, tokens):
    """logits (B, T, V) and each block's attention (B, H, T, T) for tokens (B, T)."""
    p = {name: value[0] for name, value in params.items() if not name.startswith("meta.")}
    B, T = tokens.shape
    D, H = p["tok_emb"].shape[1], model["heads"]
    Dh = D // H
    x = p["tok_emb"][tokens]                                          # (B, T, D)
    if model["positional"] == "sinusoidal":
        x = x + _sinusoidal(T, D)
    elif model["positional"] == "learned":
        x = x + p["pos_emb"][:T]
    layer_norm = lambda y, name: torch.nn.functional.layer_norm(y, (D,), p[name + ".weight"], p[name + ".bias"], 1e-5)
    attention = []
    for block in range(model["blocks"]):
        prefix = "blocks.%d." % block
        h = layer_norm(x, prefix + "ln1")
        q, k, v = (h @ p[prefix + "attn.qkv.weight"]).split(D, dim=-1)  # (B, T, D) each
        q, k, v = (t.view(B, T, H, Dh).transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
        if model["positional"] == "rope":
            q, k = _rope(q), _rope(k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(Dh)                 # (B, H, T, T)
        if model["positional"] == "alibi":
            scores = scores + _alibi(H, T)
        if model["causal"]:
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        weights = scores.softmax(-1)
        attention.append(weights)
        out = (weights @ v).transpose(1, 2).reshape(B, T, D)              # (B, T, D)
        x = x + out @ p[prefix + "attn.proj.weight"] + p[prefix + "attn.proj.bias"]
        h = layer_norm(x, prefix + "ln2")
        h = torch.relu(h @ p[prefix + "ff.fc1.weight"] + p[prefix + "ff.fc1.bias"])
        x = x + h @ p[prefix + "ff.fc2.weight"] + p[prefix + "ff.fc2.bias"]
    logits = layer_norm(x, "ln_f") @ p["head.weight"] + p["head.bias"]  # (B, T, V)
    return logits, attention
