"""The copytask transformer: embedding, pre-LN blocks, final LayerNorm and head; its loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from copytask_ref import draws, registry
from copytask_ref.attention import Attention
from copytask_ref.layers import FeedForward, LayerNorm, Linear
from copytask_ref.position_ids import AtPositionIds


def build_positional(config, dtype):
    """The scheme's module, with each option that is on attached as its sub-module."""
    scheme = registry.scheme(config.positional)
    on = registry.options_on(config)
    registry.refuse_unsupported(scheme, [option.key for option in on], config.causal)
    positional = scheme.build(config, dtype)
    for option in on:
        positional.attach(option.key, option.build(config, dtype))
    return positional


class Block(nn.Module):
    def __init__(self, D, H, hidden, causal, dtype, index=0, activation="relu"):
        super().__init__()
        self.ln1 = LayerNorm(D, dtype)
        self.attn = Attention(D, H, causal, dtype, index)
        self.ln2 = LayerNorm(D, dtype)
        self.ff = FeedForward(D, hidden, dtype, activation)

    def draw(self, gen):
        self.ln1.draw(gen)
        self.attn.draw(gen)
        self.ln2.draw(gen)
        self.ff.draw(gen)

    def forward(self, x, positional, bias):
        a, attn = self.attn(self.ln1(x), positional, bias)
        x = x + a
        x = x + self.ff(self.ln2(x))
        return x, attn


class CopyTransformer(nn.Module):
    """The model of a ModelConfig, its parameters allocated in `dtype`: draw() fills them
    (the fixtures), or load_state_dict (a checkpoint)."""

    def __init__(self, config, dtype):
        super().__init__()
        self.config = config
        D = config.embed
        self.tok_emb = draws.empty_parameter((config.vocab, D), dtype)
        # One module for the whole model: its parameters are "positional.<name>".
        self.positional = build_positional(config, dtype)
        self.blocks = nn.ModuleList([Block(D, config.heads, config.hidden, config.causal, dtype, l, config.activation)
                                     for l in range(config.blocks)])
        self.ln_f = LayerNorm(D, dtype)
        self.head = Linear(D, config.vocab, dtype)

    def draw(self, gen):
        """Every parameter from the generator, in the order of the model's parts."""
        draws.assign(self.tok_emb, draws.normal(gen, tuple(self.tok_emb.shape)))
        self.positional.draw(gen)
        for block in self.blocks:
            block.draw(gen)
        self.ln_f.draw(gen)
        self.head.draw(gen)

    def place_at_ids(self, ids, P):
        """Every later forward reads the positions at these IDs (B, T) (model.position_ids),
        the tables made for P positions; None: at 0..T-1."""
        self.ids = None if ids is None else (ids, P)

    def positional_at_ids(self):
        """The scheme's hooks as the forward reads them: at 0..T-1, or at the IDs."""
        ids = getattr(self, "ids", None)
        return self.positional if ids is None else AtPositionIds(self.positional, *ids)

    def embed(self, tokens):
        return self.positional_at_ids().add_to_embedding(self.tok_emb[tokens])

    def forward(self, tokens):
        positional = self.positional_at_ids()
        x = positional.add_to_embedding(self.tok_emb[tokens])
        bias = positional.score_bias(tokens.shape[1])   # (H, T, T) shared by the blocks, (B, H, T, T) at IDs, or None
        attns = []
        for block in self.blocks:
            x, attn = block(x, positional, bias)
            attns.append(attn)
        logits = self.head(self.ln_f(x))
        return logits, torch.stack(attns)      # (B, T, V), (L, B, H, T, T)


def loss_fn(logits, targets):
    """The mean cross-entropy over all B*T positions; a target of -1 (out of the loss, Cho et
    al.'s convention) adds nothing but still counts in the B*T."""
    V = logits.shape[-1]
    if bool((targets < 0).any()):
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1,
                               reduction="sum") / targets.numel()
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="mean")
