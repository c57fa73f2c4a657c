"""alibi: linear biases of the distance (Press et al.); symmetric, offset (Ruoss et al.)
or two-sided, fixed or learned slopes."""

import math

import torch

from copytask_ref import draws
from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional, signed_distance

DIRECTIONS = ("symmetric", "offset", "two-sided")


def alibi_slopes(H):
    """Head slopes from the ALiBi paper (Press et al.), reference rule."""
    def power_of_2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    if math.log2(H).is_integer():
        return power_of_2(H)
    n = 2 ** math.floor(math.log2(H))
    return power_of_2(n) + power_of_2(2 * n)[0::2][: H - n]


class ALiBi(Positional):
    """Linear biases; direction symmetric, offset or two-sided."""

    def __init__(self, H, slopes, right_slopes, direction, learned, dtype):
        super().__init__(dtype)
        if direction not in DIRECTIONS:
            raise ValueError("unknown alibi_direction %r; the reference knows %s" % (direction, ", ".join(DIRECTIONS)))
        self.H, self.direction, self.learned = H, direction, learned
        if learned:
            self.log_slopes = draws.empty_parameter((H,), dtype)
            if direction == "two-sided":
                self.log_right_slopes = draws.empty_parameter((H,), dtype)
        else:
            left = list(slopes) if slopes else alibi_slopes(H)
            right = list(right_slopes) if right_slopes else left
            if len(left) != H or len(right) != H:
                raise ValueError("alibi_slopes and alibi_right_slopes need one slope per head (%d)" % H)
            # Not parameters: the config's values (plain tensors, not in the state dict).
            self.fixed_slopes = torch.tensor(left, dtype=torch.float64).to(dtype)
            self.fixed_right_slopes = torch.tensor(right, dtype=torch.float64).to(dtype)

    def draw_parameters(self, gen):
        if self.learned:
            draws.assign(self.log_slopes, draws.log_rates(gen, self.H))
            if self.direction == "two-sided":
                draws.assign(self.log_right_slopes, draws.log_rates(gen, self.H))

    def slopes(self):
        """(left slopes s, right slopes r), (H) each."""
        if not self.learned:
            return self.fixed_slopes, self.fixed_right_slopes
        s = torch.exp(self.log_slopes)
        r = torch.exp(self.log_right_slopes) if self.direction == "two-sided" else s
        return s, r

    def score_bias(self, T):
        s, r = (v[:, None, None] for v in self.slopes())     # (H, 1, 1) each
        d = signed_distance(T, self.dtype)[None]             # (1, T, T)
        if self.direction == "symmetric":
            return -s * d.abs()
        if self.direction == "offset":
            return -s * (d.abs() - 0.5 * (d > 0).to(self.dtype))
        return torch.where(d >= 0, -s * d, -r * (-d))


def parameter_shapes(config):
    H = config.heads
    if not config.options["alibi_learned"]:
        return {}
    shapes = {"log_slopes": (H,)}
    if config.options["alibi_direction"] == "two-sided":
        shapes["log_right_slopes"] = (H,)
    return shapes


def zero_gradients(config):
    """With the causal mask, the right slopes of two-sided ALiBi only bias masked (j > i)
    scores."""
    o = config.options
    if config.causal and o["alibi_learned"] and o["alibi_direction"] == "two-sided":
        return {"positional.log_right_slopes"}
    return set()


def check_static():
    """The paper's slopes for H = 8, 2 and 6; a symmetric table's spot values."""
    assert alibi_slopes(8) == [2.0 ** -(h + 1) for h in range(8)], alibi_slopes(8)
    assert alibi_slopes(2) == [2.0 ** -4, 2.0 ** -8]
    assert alibi_slopes(6) == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    b = ALiBi(2, [], [], "symmetric", False, torch.float64).score_bias(4)
    assert b[0, 0, 3].item() == -3 * 2.0 ** -4 and b[0, 3, 0].item() == -3 * 2.0 ** -4
    assert torch.all(torch.diagonal(b, dim1=-2, dim2=-1) == 0)


def check_model(run):
    """The table against a loop over (h, i, j) with the direction's case written out."""
    from copytask_ref.checks import close

    o, pos, T, H = run.options, run.positional, run.config.context, run.config.heads
    with torch.no_grad():
        bias = pos.score_bias(T)
    if o["alibi_learned"]:
        s = [math.exp(v) for v in pos.log_slopes.tolist()]
        r = ([math.exp(v) for v in pos.log_right_slopes.tolist()]
             if o["alibi_direction"] == "two-sided" else s)
    else:
        s = list(o["alibi_slopes"]) or alibi_slopes(H)
        r = list(o["alibi_right_slopes"]) or s
    assert len(set(s)) == H and len(set(r)) == H
    expect = torch.zeros(H, T, T, dtype=torch.float64)
    for h in range(H):
        for i in range(T):
            for j in range(T):
                if o["alibi_direction"] == "symmetric":
                    v = -s[h] * abs(i - j)
                elif o["alibi_direction"] == "offset":
                    v = -s[h] * (abs(i - j) - 0.5) if j < i else -s[h] * abs(i - j)
                elif j <= i:                       # two-sided: left and the diagonal
                    v = -s[h] * (i - j)
                else:                              # two-sided: right
                    v = -r[h] * (j - i)
                expect[h, i, j] = v
    assert close(bias, expect, 1e-14), (run.variant, (bias - expect).abs().max())
    if run.variant == "alibi_offset":   # slopes [0.5, 0.125], query row 3, keys 0..5
        assert bias[0, 3, :6].tolist() == [-1.25, -0.75, -0.25, 0.0, -0.5, -1.0]
        assert bias[1, 3, :6].tolist() == [-0.3125, -0.1875, -0.0625, 0.0, -0.125, -0.25]
    if o["alibi_direction"] == "two-sided":   # left and right slopes differ
        assert not close(bias, bias.transpose(1, 2), 1e-3)


SCHEME = Scheme(
    name="alibi",
    summary="score bias -s_h |d| (symmetric), offset or two-sided; fixed or learned slopes",
    build=lambda config, dtype: ALiBi(config.heads, config.options["alibi_slopes"],
                                      config.options["alibi_right_slopes"], config.options["alibi_direction"],
                                      config.options["alibi_learned"], dtype),
    defaults={"alibi_slopes": [], "alibi_right_slopes": [], "alibi_direction": "symmetric",
              "alibi_learned": False},
    score_bias=True,
    variants=(
        Variant("alibi", 5),
        Variant("alibi_offset", 6, {"alibi_direction": "offset", "alibi_slopes": [0.5, 0.125]}),
        Variant("alibi_two_sided", 7, {"alibi_direction": "two-sided", "alibi_learned": True}),
        Variant("alibi_learned", 8, {"alibi_learned": True}),
        Variant("alibi_dape", 19, {"dape": True, "dape_hidden": 6}),
        Variant("alibi_coupled", 45, {"alibi_slopes": [0.5, 0.125]}, position_ids="coupled"),
    ),
    parameter_shapes=parameter_shapes,
    zero_gradients=zero_gradients,
    check_static=check_static,
    check_model=check_model,
)
