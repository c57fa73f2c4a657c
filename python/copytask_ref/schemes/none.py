"""none: no positional information at all."""

import torch

from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional


def check_model(run):
    """Without any positional information and without a mask, the model is permutation
    equivariant over positions."""
    from copytask_ref.checks import close

    if run.causal:
        return
    perm = torch.tensor([3, 1, 4, 0, 9, 2, 6, 5, 8, 7])
    with torch.no_grad():
        permuted, _ = run.model(run.tokens[:, perm])
    assert close(permuted, run.logits[:, perm], 1e-11)


SCHEME = Scheme(
    name="none",
    summary="no positions",
    build=lambda config, dtype: Positional(dtype),
    variants=(
        Variant("none", 0),
        Variant("none_length_scale", 24, {"length_scale": True}),
    ),
    check_model=check_model,
)
