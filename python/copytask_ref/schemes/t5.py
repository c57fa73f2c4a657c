"""t5: a learned scalar per (bucket of the distance, head), T5's bidirectional buckets."""

import math

import torch

from copytask_ref import draws
from copytask_ref.declarations import Scheme, Variant
from copytask_ref.positional import Positional

# T5 buckets for d = -9..9, written out by hand from the bucket definition.
# 8 buckets, max distance 20: half 4, max_exact 2; n = 2..6 -> 2, n = 7..9 -> 3
# (2 + floor(2 log(n/2) / log 10), and 2 log10(n/2) is 0.954... at n = 6, 1.088... at n = 7).
T5_BUCKETS_8_20 = [7, 7, 7, 6, 6, 6, 6, 6, 5, 0, 1, 2, 2, 2, 2, 2, 3, 3, 3]
# Defaults, 32 buckets, max distance 128: half 16, max_exact 8; bucket 8 + m starts at
# n = 8 * 16^(m/8): 11.3, 16 (exact), 22.6, 32 (exact), 45.3, 64 (exact), 90.5; 15 is the cap.
T5_BUCKETS_DEFAULT = {0: 0, 1: 1, 7: 7, 8: 8, 11: 8, 12: 9, 15: 9, 16: 10, 22: 10, 23: 11,
                      31: 11, 32: 12, 45: 12, 46: 13, 63: 13, 64: 14, 90: 14, 91: 15,
                      127: 15, 128: 15, 1000: 15,
                      -1: 17, -7: 23, -8: 24, -16: 26, -32: 28, -128: 31, -1000: 31}


def t5_bucket(d, num_buckets, max_distance):
    """T5's bidirectional bucket of the signed distance d = i - j (a Python int)."""
    half = num_buckets // 2
    bucket = half if d < 0 else 0          # keys to the right use the upper half
    n = abs(d)
    max_exact = half // 2
    if n < max_exact:
        return bucket + n
    log_part = math.log(n / max_exact) / math.log(max_distance / max_exact) * (half - max_exact)
    return bucket + min(half - 1, max_exact + math.floor(log_part + 1e-9))


class T5Bias(Positional):
    """A learned scalar per (bucket of d, head)."""

    def __init__(self, H, num_buckets, max_distance, dtype):
        super().__init__(dtype)
        num_buckets = int(num_buckets)
        assert num_buckets % 2 == 0 and num_buckets >= 4
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bucket_bias = draws.empty_parameter((num_buckets, H), dtype)

    def draw_parameters(self, gen):
        draws.assign(self.bucket_bias, 0.5 * draws.normal(gen, tuple(self.bucket_bias.shape)))

    def buckets(self, T):
        """(T, T) the bucket of each (i, j)."""
        return torch.tensor([[t5_bucket(i - j, self.num_buckets, self.max_distance) for j in range(T)]
                             for i in range(T)])

    def score_bias(self, T):
        return self.bucket_bias[self.buckets(T)].permute(2, 0, 1)   # (T, T, H) -> (H, T, T)


def check_static():
    """The buckets against the hand-written lists."""
    assert [t5_bucket(d, 8, 20) for d in range(-9, 10)] == T5_BUCKETS_8_20
    for d, bucket in T5_BUCKETS_DEFAULT.items():
        assert t5_bucket(d, 32, 128) == bucket, (d, t5_bucket(d, 32, 128), bucket)


def check_model(run):
    """Each (i, j) reads its hand-written bucket's row; a bucket's row has a gradient
    exactly when some unmasked score uses it."""
    o, pos, T = run.options, run.positional, run.config.context
    assert (o["t5_buckets"], o["t5_max_distance"]) == (8, 20)
    with torch.no_grad():
        bias = pos.score_bias(T)
    for i in range(T):
        for j in range(T):
            bucket = T5_BUCKETS_8_20[(i - j) + 9]
            assert torch.equal(bias[:, i, j], pos.bucket_bias[bucket]), (i, j)
    grad = run.grads["positional.bucket_bias"]
    used = {T5_BUCKETS_8_20[d + 9] for d in range(-(T - 1), T) if d >= 0 or not run.causal}
    rows = {b for b in range(grad.shape[0]) if grad[b].abs().max() > 0}
    assert rows == used, (rows, used)


SCHEME = Scheme(
    name="t5",
    summary="score bias bucket_bias[bucket(d), h]",
    build=lambda config, dtype: T5Bias(config.heads, config.options["t5_buckets"],
                                       config.options["t5_max_distance"], dtype),
    defaults={"t5_buckets": 32, "t5_max_distance": 128},
    score_bias=True,
    variants=(
        Variant("t5", 9, {"t5_buckets": 8, "t5_max_distance": 20}),
        Variant("t5_dape", 20, {"t5_buckets": 8, "t5_max_distance": 20, "dape": True, "dape_hidden": 6}),
        Variant("t5_length_scale", 26, {"t5_buckets": 8, "t5_max_distance": 20, "length_scale": True}),
        Variant("t5_coupled", 46, {"t5_buckets": 8, "t5_max_distance": 20}, position_ids="coupled"),
        Variant("t5_dape_coupled", 50, {"t5_buckets": 8, "t5_max_distance": 20, "dape": True, "dape_hidden": 6},
                position_ids="coupled"),
    ),
    parameter_shapes=lambda config: {"bucket_bias": (config.options["t5_buckets"], config.heads)},
    check_static=check_static,
    check_model=check_model,
)
