"""learned: a learned table of (context, D) added to the token embedding."""

import dataclasses

import torch

from copytask_ref import draws
from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional


class Learned(Positional):
    def __init__(self, rows, D, dtype):
        super().__init__(dtype)
        self.table = draws.empty_parameter((rows, D), dtype)

    def draw_parameters(self, gen):
        draws.assign(self.table, draws.normal(gen, tuple(self.table.shape)))   # N(0, 1)

    def add_to_embedding(self, x):
        return x + self.table[: x.shape[1]]


def from_checkpoint(config, params):
    """The table has the rows it was trained with, whatever the input's length."""
    if "positional.table" not in params:
        return config          # the load names what is missing
    return dataclasses.replace(config, context=params["positional.table"].shape[0])


def check_model(run):
    """Adding the table to zeros gives the table."""
    pos = run.positional
    x = torch.zeros(1, run.config.context, run.config.embed, dtype=torch.float64)
    assert torch.equal(pos.add_to_embedding(x)[0], pos.table)


SCHEME = Scheme(
    name="learned",
    summary="x + positional.table (T, D)",
    build=lambda config, dtype: Learned(config.context, config.embed, dtype),
    variants=(Variant("learned", 2),),
    parameter_shapes=lambda config: {"table": (config.context, config.embed)},
    checkpoint_names={"pos_emb": "positional.table"},   # before schemes owned their parameters
    from_checkpoint=from_checkpoint,
    check_model=check_model,
)
