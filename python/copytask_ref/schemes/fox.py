"""fox: the forgetting transformer (Lin et al. 2025) as a data-dependent bias: sums of
log forget gates between the key and the query."""

import math

import torch
import torch.nn.functional as F

from copytask_ref import draws
from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional


class FoX(Positional):
    """Per block l, from the attention input a (B, T, D):
    f^L_{t,h} = ln sigmoid(a_t . W_l[:, h] + b_l[h]), f^R_{t,h} the same with column H + h;
    C_ij = sum_{t=j+1..i} f^L_t (j <= i; 0 at j = i), sum_{t=i..j-1} f^R_t (j > i).
    gate_weight (L, D, sides*H), gate_bias (L, sides*H); sides = 1 causal, 2 bidirectional."""

    def __init__(self, L, D, H, causal, dtype):
        super().__init__(dtype)
        self.D, self.H, self.causal = D, H, causal
        sides = 1 if causal else 2
        self.gate_weight = draws.empty_parameter((L, D, sides * H), dtype)
        self.gate_bias = draws.empty_parameter((L, sides * H), dtype)

    def draw_parameters(self, gen):
        draws.assign(self.gate_weight, draws.uniform(gen, tuple(self.gate_weight.shape), self.D))
        draws.assign(self.gate_bias, draws.uniform_range(gen, tuple(self.gate_bias.shape), 0.5, 3.0))

    def log_gates(self, block, a):
        """(B, sides*H, T): ln sigmoid of the gates' pre-activations."""
        return F.logsigmoid(a @ self.gate_weight[block] + self.gate_bias[block]).transpose(1, 2)

    def scheme_content_term(self, block, a, q, scores, bias):
        f = self.log_gates(block, a)
        T = a.shape[1]
        at_or_left = torch.ones(T, T, dtype=torch.bool).tril()         # j <= i
        cum = f[:, :self.H].cumsum(-1)                                  # sum_{t <= i} f^L_t
        left = cum[..., :, None] - cum[..., None, :]                    # (B, H, T, T): t = j+1..i
        if self.causal:
            return left.masked_fill(~at_or_left, 0.0)
        fr = f[:, self.H:]
        before = fr.cumsum(-1) - fr                                     # sum_{t < i} f^R_t
        right = before[..., None, :] - before[..., :, None]             # t = i..j-1
        return torch.where(at_or_left, left, right)


def parameter_shapes(config):
    sides = 1 if config.causal else 2
    L, D, H = config.blocks, config.embed, config.heads
    return {"gate_weight": (L, D, sides * H), "gate_bias": (L, sides * H)}


def content_math(view):
    """C_ij from its closed form: the sums of ln sigmoid of the gates."""
    pos, l, c = view.positional, view.block, view.config
    H, D, T = c.heads, c.embed, c.context
    a = view.a
    Wg, bg = pos.gate_weight[l].tolist(), pos.gate_bias[l].tolist()
    sigmoid = lambda z: 1.0 / (1.0 + math.exp(-z))
    # f[b][side][t][h] = ln sigmoid(a_t . W[:, side*H + h] + b[side*H + h])
    f = [[[[math.log(sigmoid(sum(a[b][t][d] * Wg[d][s_ * H + h] for d in range(D)) + bg[s_ * H + h]))
            for h in range(H)]
           for t in range(T)] for s_ in range(1 if c.causal else 2)] for b in range(len(a))]

    def term(b, h, i, j):
        if j <= i:
            return sum(f[b][0][t][h] for t in range(j + 1, i + 1))
        return sum(f[b][1][t][h] for t in range(i, j))
    return term


def check_static():
    """With a zero input the gates are constant, so C is two-sided ALiBi with the slopes
    -ln sigmoid(b) (left) and -ln sigmoid(b_right)."""
    from copytask_ref.checks import close
    from copytask_ref.fixture_sizes import CONTEXT, EMBED, HEADS
    from copytask_ref.schemes.alibi import ALiBi

    fox = FoX(1, EMBED, HEADS, False, torch.float64)
    fox.draw(torch.Generator().manual_seed(1))
    term = fox.content_term(0, torch.zeros(1, CONTEXT, EMBED, dtype=torch.float64), None, None, None)[0]
    left = [-math.log(1 / (1 + math.exp(-b))) for b in fox.gate_bias[0, :HEADS].tolist()]
    right = [-math.log(1 / (1 + math.exp(-b))) for b in fox.gate_bias[0, HEADS:].tolist()]
    expect = ALiBi(HEADS, left, right, "two-sided", False, torch.float64).score_bias(CONTEXT)
    assert close(term, expect, 1e-14), (term - expect).abs().max()


def check_model(run):
    """Bidirectional, the mirror image: reversing the sequence and swapping the left and
    right gate parameters reverses the term along both axes; and the term is not symmetric."""
    from copytask_ref.checks import close

    if run.causal:
        return
    c, pos = run.config, run.positional
    H = c.heads
    with torch.no_grad():
        run.model(run.tokens)
    mirror = FoX(c.blocks, c.embed, H, False, torch.float64)
    with torch.no_grad():
        mirror.gate_weight.copy_(torch.cat([pos.gate_weight[..., H:], pos.gate_weight[..., :H]], -1))
        mirror.gate_bias.copy_(torch.cat([pos.gate_bias[..., H:], pos.gate_bias[..., :H]], -1))
        for l, block in enumerate(run.model.blocks):
            trace = block.attn.trace
            back = mirror.content_term(l, trace["a"].flip(1), None, None, None).flip(-1).flip(-2)
            assert close(back, trace["content"], 1e-13), (back - trace["content"]).abs().max()
            assert not close(trace["content"], trace["content"].transpose(-1, -2), 1e-3)


SCHEME = Scheme(
    name="fox",
    summary="content term: sums of ln sigmoid forget gates of the block's input between key and query",
    build=lambda config, dtype: FoX(config.blocks, config.embed, config.heads, config.causal, dtype),
    variants=(
        Variant("fox", 18),
        Variant("fox_length_scale", 28, {"length_scale": True}),
    ),
    parameter_shapes=parameter_shapes,
    content_math=content_math,
    check_static=check_static,
    check_model=check_model,
)
