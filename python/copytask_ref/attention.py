"""One block's multi-head attention, with the positional hooks in the order of the spec."""

import torch
import torch.nn as nn

from copytask_ref.layers import Linear


class Attention(nn.Module):
    def __init__(self, D, H, causal, dtype, index=0):
        super().__init__()
        self.D, self.H, self.Dh = D, H, D // H
        self.causal = causal
        self.index = index          # the block's l, for the per-block positional parameters
        self.qkv = Linear(D, 3 * D, dtype, bias=False)
        self.proj = Linear(D, D, dtype, bias=True)
        self.trace = {}             # the last forward's intermediates, for the self-checks

    def draw(self, gen):
        self.qkv.draw(gen)
        self.proj.draw(gen)

    def split_heads(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.H, self.Dh).transpose(1, 2)    # (B, H, T, Dh)

    def forward(self, x, positional, bias):
        """x (B, T, D) is the attention input a = LN1(x) of the block; bias (H, T, T), per
        example (B, H, T, T) at position IDs, or None."""
        B, T, D = x.shape
        qkv = self.qkv(x)
        q_in = self.split_heads(qkv[..., 0:D])
        k_in = self.split_heads(qkv[..., D:2 * D])
        v = self.split_heads(qkv[..., 2 * D:3 * D])
        q = positional.scale_query_key(positional.rotate(q_in), "q")   # rotation, then qk scale
        k = positional.scale_query_key(positional.rotate(k_in), "k")

        scores = positional.attention_scores(q, k)   # S (B, H, T, T): q k^T / sqrt(Dh), or PoPE's
        logits = scores
        if bias is not None:
            logits = logits + bias                                    # (H, T, T) or per example (B, H, T, T)
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
        out = out.transpose(1, 2).reshape(B, T, D)                    # (B, T, D), heads in order
        return self.proj(out), attn
