"""The fixtures' model sizes and batch, and a variant's ModelConfig at those sizes."""

from copytask_ref import registry
from copytask_ref.config import ModelConfig

VOCAB = 11      # 0 = pad, 1..9 = content, 10 = <copy>
CONTEXT = 10
EMBED = 8
HEADS = 2
BLOCKS = 2
HIDDEN = 12
BATCH = 4
POSITION_RANGE = 24   # L of the variants with position IDs (model.position_range)


def fixture_config(variant, causal):
    """The variant's model at the fixtures' sizes; its options strictly resolved (a key its
    scheme and options do not read is an error)."""
    options = registry.resolve_options(variant.scheme, variant.options, causal, strict=True)
    return ModelConfig(vocab=VOCAB, context=CONTEXT, embed=EMBED, heads=HEADS, blocks=BLOCKS,
                       hidden=HIDDEN, positional=variant.scheme, causal=causal, options=options,
                       **variant.layer)
