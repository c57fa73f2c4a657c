"""length_scale: scalable softmax (Nakanishi 2025), each block's logits times
s[l, h] ln(n_i), n_i the keys query i sees. An option of every scheme."""

import math

import torch

from copytask_ref import draws
from copytask_ref.declarations import Option
from copytask_ref.positional import PositionalOption


class LengthScale(PositionalOption):
    """m[l, h, i] = scale[l, h] * ln(n_i), n_i = i + 1 under the causal mask, T otherwise.
    scale (L, H)."""

    def __init__(self, L, H, causal, dtype):
        super().__init__()
        self.causal = causal
        self.scale = draws.empty_parameter((L, H), dtype)

    def draw(self, gen):
        draws.assign(self.scale, draws.uniform_range(gen, tuple(self.scale.shape), 0.3, 1.2))

    def forward(self, block, T):
        """(H, T, 1); ln(n) in float64, cast to the scale's dtype."""
        if self.causal:
            n = torch.arange(1, T + 1, dtype=torch.float64)
        else:
            n = torch.full((T,), float(T), dtype=torch.float64)
        return self.scale[block][:, None, None] * torch.log(n).to(self.scale.dtype)[None, :, None]

    def multiplier(self, block, T):
        return self(block, T)


def multiplier_math(view):
    """m(h, i) = s[l, h] ln(n_i), from math."""
    scale = view.positional.option("length_scale").scale[view.block].tolist()
    T = view.config.context
    return lambda h, i: scale[h] * math.log(i + 1 if view.causal else T)


def check_static():
    """scale * ln(i + 1) (causal), scale * ln T (bidirectional)."""
    from copytask_ref.fixture_sizes import HEADS

    for causal in (False, True):
        length = LengthScale(2, HEADS, causal, torch.float64)
        length.draw(torch.Generator().manual_seed(3))
        for l in range(2):
            m = length(l, 4)
            assert m.shape == (HEADS, 4, 1)
            for h in range(HEADS):
                for i in range(4):
                    n = i + 1 if causal else 4
                    assert abs(m[h, i, 0].item() - length.scale[l, h].item() * math.log(n)) < 1e-15


def check_model(run):
    """Under the causal mask row 0 sees one key: m = ln 1 = 0. Bidirectional, at
    scale = 1 / ln T (the training start at the trained context) the model is the model
    without the length scale."""
    from copytask_ref.checks import close

    pos, T = run.positional, run.config.context
    if run.causal:
        with torch.no_grad():
            run.model(run.tokens)
        for block in run.model.blocks:
            assert torch.all(block.attn.trace["multiplier"][:, 0] == 0), "row 0 sees one key: ln 1 = 0"
        return
    length = pos.option("length_scale")
    with torch.no_grad():
        saved = length.scale.clone()
        length.scale.fill_(1.0 / math.log(T))
        scaled, _ = run.model(run.tokens)
        attached = list(pos.option_keys)
        pos.option_keys = [key for key in attached if key != "length_scale"]
        plain, _ = run.model(run.tokens)
        pos.option_keys = attached
        length.scale.copy_(saved)
    assert close(scaled, plain, 1e-12), (scaled - plain).abs().max()


OPTION = Option(
    key="length_scale",
    summary="each block's logits times s_h ln n, n the keys a query sees",
    build=lambda config, dtype: LengthScale(config.blocks, config.heads, config.causal, dtype),
    # It multiplies the whole logit, whatever the scheme put in it.
    attaches_to=lambda scheme: True,
    requirement="a scheme",
    defaults={"length_scale": False},
    parameter_shapes=lambda config: {"scale": (config.blocks, config.heads)},
    multiplier_math=multiplier_math,
    check_static=check_static,
    check_model=check_model,
)
