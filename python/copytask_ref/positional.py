"""The hooks through which a positional scheme acts on the model, and the base of the
options that attach to a scheme.

A scheme's module is one nn.Module for the whole model (its parameters are
positional.<name>); the base class Positional is the scheme "none" (no positions). An
option is a sub-module named after its key (positional.dape.<name>,
positional.length_scale.scale). Tables that need no parameter (sinusoidal, RoPE's angles,
xPos's scale) are computed in float64 and cast to the model's dtype where they meet the
activations: the float64 reference is unchanged by the cast, the float32 forward rounds
once.
"""

import math

import torch
import torch.nn as nn


def signed_distance(T, dtype=torch.float64):
    """(T, T) d[i, j] = i - j (query row i, key column j)."""
    pos = torch.arange(T)
    return (pos[:, None] - pos[None, :]).to(dtype)


class PositionalOption(nn.Module):
    """An option's hooks: a content term added to the logits, a multiplier of the logits."""

    def draw(self, gen):
        pass

    def content_term(self, block, a, q, scores, bias):
        return None

    def multiplier(self, block, T):
        return None


class Positional(nn.Module):
    """The "none" scheme, and the hooks every scheme may override."""

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype
        self.option_keys = []      # the attached options' sub-module names, in attach order

    # -- building ------------------------------------------------------------------------

    def attach(self, key, option):
        self.add_module(key, option)
        self.option_keys.append(key)

    def option(self, key):
        """The attached option `key`'s module, or None."""
        return getattr(self, key) if key in self.option_keys else None

    def draw_parameters(self, gen):
        """Draws the scheme's own parameters (none here)."""

    def draw(self, gen):
        """The scheme's draws, then each attached option's."""
        self.draw_parameters(gen)
        for key in self.option_keys:
            getattr(self, key).draw(gen)

    # -- the hooks a scheme overrides ------------------------------------------------------

    def add_to_embedding(self, x):   # x (B, T, D)
        return x

    def rotate(self, x):             # x (B, H, T, Dh): q or k
        return x

    def scale_query_key(self, x, side):   # x (B, H, T, Dh), side "q" or "k"; after rotate
        return x

    def attention_scores(self, q, k):   # q, k (B, H, T, Dh) after rotate and scale
        """S (B, H, T, T) = q k^T / sqrt(Dh); a scheme whose score replaces the dot product
        (PoPE) overrides it."""
        return (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])

    def score_bias(self, T):         # (H, T, T), added after the 1/sqrt(Dh) scaling
        return None

    def scheme_content_term(self, block, a, q, scores, bias):
        """The scheme's own C (B, H, T, T) of block `block`, or None. a (B, T, D) is the
        block's attention input, q (B, H, T, Dh) the rotated query,
        scores (B, H, T, T) = q k^T / sqrt(Dh), bias (H, T, T) or None."""
        return None

    # -- what the attention calls ----------------------------------------------------------

    def content_term(self, block, a, q, scores, bias):
        """C (B, H, T, T) added to the scores (and the bias), or None: the scheme's term and
        the attached options' terms."""
        term = self.scheme_content_term(block, a, q, scores, bias)
        for key in self.option_keys:
            extra = getattr(self, key).content_term(block, a, q, scores, bias)
            if extra is not None:
                term = extra if term is None else term + extra
        return term

    def length_multiplier(self, block, T):
        """m (H, T, 1) of block `block`, multiplying the whole logit, or None."""
        multiplier = None
        for key in self.option_keys:
            extra = getattr(self, key).multiplier(block, T)
            if extra is not None:
                multiplier = extra if multiplier is None else multiplier * extra
        return multiplier

    def is_fixed_bias(self):
        """Whether the whole positional term is an embedding or a score bias that does not
        depend on q, k or the block's input (so nn.TransformerEncoderLayer with the bias as
        a float mask computes the same block): no rotation, no qk scale, no score of its
        own, no content term, no option."""
        cls = type(self)
        return (cls.rotate is Positional.rotate and cls.scale_query_key is Positional.scale_query_key
                and cls.attention_scores is Positional.attention_scores
                and cls.scheme_content_term is Positional.scheme_content_term and not self.option_keys)
