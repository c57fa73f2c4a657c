"""A model from a trained member's checkpoint, in float32: what python/copytask_forward.py
computes with.

A member's model.pt is a dict of tensors, each with a leading member axis (size 1 for one
member), named as the model's parameters (tok_emb, blocks.0.attn.qkv.weight, ...,
positional.<name>), plus meta.* entries; result.json's "model" entry is its config, every
scheme's option keys included (a key that is absent or None takes its default).
"""

import dataclasses

import torch

from copytask_ref import registry
from copytask_ref.config import ModelConfig
from copytask_ref.transformer import CopyTransformer

DTYPE = torch.float32


def member_options(model):
    """The member's scheme and its options resolved; ValueError for an unknown scheme, a
    causal-only scheme without the mask or an option its scheme does not take -- before any
    parameter is read."""
    scheme = registry.scheme(model["positional"])
    options = registry.resolve_options(scheme.name, model, bool(model["causal"]), strict=False)
    return scheme, options


def member_parameters(params, scheme):
    """The first member's tensors by today's names, without meta.* entries."""
    found = {name: value[0] for name, value in params.items() if not name.startswith("meta.")}
    for old, new in scheme.checkpoint_names.items():
        if old in found and new not in found:
            found[new] = found.pop(old)
    return found


def model_from_checkpoint(params, model, T):
    """The float32 CopyTransformer of this member, its parameters from the checkpoint, no
    gradients. T is the input's length: the context when the config does not give one."""
    scheme, options = member_options(model)
    found = member_parameters(params, scheme)
    vocab, embed = found["tok_emb"].shape
    config = ModelConfig(vocab=vocab, context=model.get("context"), embed=embed, heads=model["heads"],
                         blocks=model["blocks"], hidden=found["blocks.0.ff.fc1.weight"].shape[1],
                         positional=scheme.name, causal=bool(model["causal"]), options=options,
                         activation=model.get("activation", "relu"))
    config = scheme.from_checkpoint(config, found)
    if config.context is None:
        config = dataclasses.replace(config, context=T)
    member = CopyTransformer(config, DTYPE)
    try:
        missing, unexpected = member.load_state_dict(found, strict=False)
    except RuntimeError as error:      # a shape that is not the config's
        raise ValueError("the checkpoint does not fit its %s config: %s" % (scheme.name, error)) from None
    problems = (["missing " + ", ".join(missing)] if missing else []) + \
               (["unexpected " + ", ".join(unexpected)] if unexpected else [])
    if problems:
        raise ValueError("the checkpoint does not fit its %s config: %s" % (scheme.name, "; ".join(problems)))
    member.requires_grad_(False)
    return member
