"""The small MLP of a distance that dynamic and FIRE share: parameters mlp<k>_weight
(in, out) and mlp<k>_bias (out) for consecutive sizes, drawn uniform(+-1/sqrt(fan_in))."""

from copytask_ref import draws


def register_mlp(module, sizes, dtype):
    for k, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        setattr(module, f"mlp{k}_weight", draws.empty_parameter((fan_in, fan_out), dtype))
        setattr(module, f"mlp{k}_bias", draws.empty_parameter((fan_out,), dtype))


def draw_mlp(module, sizes, gen):
    for k, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        draws.assign(getattr(module, f"mlp{k}_weight"), draws.uniform(gen, (fan_in, fan_out), fan_in))
        draws.assign(getattr(module, f"mlp{k}_bias"), draws.uniform(gen, (fan_out,), fan_in))
