"""learned: a learned table of (R, D) added to the token embedding, R = learned_positions,
or the context when 0."""

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
    x = torch.zeros(1, rows(run.config), run.config.embed, dtype=torch.float64)
    assert torch.equal(pos.add_to_embedding(x)[0], pos.table)


def rows(config):
    """R: learned_positions, or the context when 0."""
    return config.options.get("learned_positions") or config.context


SCHEME = Scheme(
    name="learned",
    summary="x + positional.table (R, D)",
    build=lambda config, dtype: Learned(rows(config), config.embed, dtype),
    defaults={"learned_positions": 0},
    variants=(Variant("learned", 2),
              Variant("learned_random", 41, {"learned_positions": 24}, position_ids="random"),
              Variant("learned_cho", 52, {"learned_positions": 24}, position_ids="coupled", convention="cho")),
    parameter_shapes=lambda config: {"table": (rows(config), config.embed)},
    checkpoint_names={"pos_emb": "positional.table"},   # before schemes owned their parameters
    from_checkpoint=from_checkpoint,
    check_model=check_model,
)
