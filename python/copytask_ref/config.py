"""A model's configuration: its sizes, its positional scheme and the scheme's options, its layer form."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    vocab: int
    context: int        # the T the model is made for: the learned table's rows, and CoPE's
                        # npos and FIRE's L0 when their options are 0 (None only while a
                        # checkpoint whose config gives none is read: checkpoint.py)
    embed: int
    heads: int
    blocks: int
    hidden: int
    positional: str     # the scheme's name
    causal: bool
    options: dict       # every key the scheme and its options read, over their defaults
    activation: str = "relu"   # model.activation: the feed-forward's nonlinearity (layer_forms.py)

    @property
    def head_dim(self):
        return self.embed // self.heads
