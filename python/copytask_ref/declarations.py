"""What a scheme module (schemes/<name>.py, SCHEME) and an option module
(options/<key>.py, OPTION) declare. The registry reads nothing else from them: the
variant list, DAPE's schemes, the option keys, the self-checks and the forward's checkpoint
reading are all derived from these declarations.

The check hooks take a checks.FixtureRun (run: one fixture's model, batch, outputs and
gradients) or a checks.BlockView (view: one block's forward as Python lists, for the loops
from math).
"""

from dataclasses import dataclass, field
from typing import Callable


def _nothing(*_):
    return None


def _no_parameters(_config):
    return {}


def _no_zero_gradients(_config):
    return set()


def _config_as_is(config, _params):
    return config


@dataclass(frozen=True)
class Variant:
    """One fixture variant: parity_<name>.json and parity_<name>_causal.json (only the
    second for a causal-only scheme)."""
    name: str
    row: int                 # fixes the seeds: variants.BASE_SEED + 2 row (+ 1 with the mask);
                             # a new variant takes the next free row (make_parity_fixtures.py --list)
    options: dict = field(default_factory=dict)   # as written to the fixture, in this key order
    scheme: str = ""         # filled in by the registry: the declaring module's scheme
    # model.position_ids of the fixture ("" = sequential): random, offset or coupled, its IDs
    # drawn for the fixture's batch over 0..fixture_sizes.POSITION_RANGE-1 and written with it.
    position_ids: str = ""
    # The task's convention ("" = copytask's, the placeholders copy batch): "cho", a next-token
    # copy batch with an end token of its own, only the outputs and the end in the loss (the
    # other targets -1), and under coupled IDs Cho et al.'s places (position_ids.cho_places).
    convention: str = ""
    # The layer forms it takes other than the defaults (layer_forms.KEYS): {"activation":
    # "gelu"}; written to the fixture's config. Every value of every key has a fixture.
    layer: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Scheme:
    name: str                # the module's name and the config's model.positional
    summary: str
    build: Callable          # (ModelConfig, dtype) -> positional.Positional, parameters allocated
    defaults: dict = field(default_factory=dict)   # the option keys it reads, with their defaults
    score_bias: bool = False     # adds a (H, T, T) bias to the scores: what DAPE reads
    causal_only: bool = False    # refused without the causal mask; its fixtures are _causal only
    variants: tuple = ()
    # {name: shape} of its parameters (positional.<name>), written from the spec: checks
    # the module's parameters.
    parameter_shapes: Callable = _no_parameters
    # Older checkpoints' parameter names -> today's.
    checkpoint_names: dict = field(default_factory=dict)
    # (config, params) -> config: what the forward reads from a checkpoint (params without
    # the member axis; config.context is the member's "context", or None when not given).
    from_checkpoint: Callable = _config_as_is
    # config -> the parameter names whose gradient is exactly zero (cannot reach the loss).
    zero_gradients: Callable = _no_zero_gradients
    # view -> (b, h, i, j) -> its content term C_ij from math, or None.
    content_math: Callable = _nothing
    # view -> (b, h, i, j) -> S_ij from math for a scheme whose score replaces
    # q_i . k_j / sqrt(Dh) (PoPE's polar score), or None.
    score_math: Callable = _nothing
    check_static: Callable = _nothing    # () -> None: closed forms, no fixture model
    check_model: Callable = _nothing     # run -> None: the fixture model's table and terms


# Options turned on in the same model attach in the order of their module names; their
# draws and parameters come in that order, after the scheme's.
@dataclass(frozen=True)
class Option:
    key: str                 # the config key that turns it on, and its sub-module's name
    summary: str
    build: Callable          # (ModelConfig, dtype) -> positional.PositionalOption
    attaches_to: Callable    # Scheme -> bool: the schemes it is an option of
    requirement: str         # in words, what attaches_to asks of a scheme (for refusals)
    defaults: dict = field(default_factory=dict)   # its keys, the on/off key first
    parameter_shapes: Callable = _no_parameters    # {name: shape}: positional.<key>.<name>
    content_math: Callable = _nothing              # view -> (b, h, i, j) -> C_ij, or None
    multiplier_math: Callable = _nothing           # view -> (h, i) -> m, or None
    check_static: Callable = _nothing
    check_model: Callable = _nothing
