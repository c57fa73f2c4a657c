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

It computes through python/copytask_ref, the independent reference the parity fixtures come
from, in float32 (tests/reference/check_forward_against_fixtures.py checks it against every
fixture). An unknown scheme, a bidirectional xpos member, an option on a scheme that does not
take it (dape without a score bias) and a checkpoint that does not fit its config raise
ValueError.

The model (docs/design.md sections 1 and 2): token embedding (+ sinusoidal or learned
positions), pre-LN blocks of attention and a feed-forward (its activation model["activation"]:
relu, the default, or gelu; python/copytask_ref/layer_forms.py), a final LayerNorm and the
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

Position IDs (model["position_ids"], L = model["position_range"]): by default this script
places every token at 0..T-1, which is where copytask evaluates an `offset` member. A
`coupled` member is evaluated with each output at its source's ID and a `random` one at a
sorted random subset of 0..L-1: give those IDs (B, T) as `ids` (copytask eval and predict
compute them), or its logits are not copytask's.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # copytask_ref beside this file

from copytask_ref.checkpoint import model_from_checkpoint  # noqa: E402


def forward(params, model, tokens, ids=None):
    """logits (B, T, V) and each block's attention (B, H, T, T) for tokens (B, T), each token
    at its position ID ids (B, T) when given (all below model["position_range"])."""
    member = model_from_checkpoint(params, model, tokens.shape[1])
    if ids is not None:
        member.place_at_ids(ids, int(model["position_range"]))
    logits, attention = member(tokens)                 # (B, T, V), (L, B, H, T, T)
    return logits, list(attention.unbind(0))
