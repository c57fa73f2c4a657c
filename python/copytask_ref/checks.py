"""The self-checks that hold for every scheme, and the calls to each scheme's and option's
own (their check_static, check_model, content_math and multiplier_math hooks).

check_static(): every scheme's and option's closed forms, before any fixture.
check_declarations(): the modules' declarations agree with each other.
check_model(run): one fixture's model, before its file is written.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn

from copytask_ref import registry, variants
from copytask_ref.draws import DTYPE
from copytask_ref.layers import LN_EPS
from copytask_ref.transformer import loss_fn


def close(a, b, tol=1e-12):
    return torch.allclose(a, b, rtol=tol, atol=tol)


@dataclass
class FixtureRun:
    """One fixture's model and what it computed, for the checks."""
    variant: str
    config: object          # ModelConfig, options resolved
    model: object           # CopyTransformer, float64
    tokens: torch.Tensor
    targets: torch.Tensor
    logits: torch.Tensor    # (B, T, V), detached
    attn: torch.Tensor      # (L, B, H, T, T), detached
    loss: float
    grads: dict             # name -> gradient of the loss

    @property
    def options(self):
        return self.config.options

    @property
    def causal(self):
        return self.config.causal

    @property
    def positional(self):
        return self.model.positional


class BlockView:
    """One block's last forward as Python lists (index [b][h][i][j] ...), for the loops from
    math: a (B, T, D) the attention input, q_in / k_in before and q / k after the rotation
    and scale (B, H, T, Dh), S the scores (B, H, T, T), bias the score bias (H, T, T) or None."""

    def __init__(self, run, block, bias):
        trace = run.model.blocks[block].attn.trace
        self.run, self.block, self.trace = run, block, trace
        self.config, self.options, self.causal = run.config, run.options, run.causal
        self.positional = run.positional
        self.a = trace["a"].tolist()
        self.q, self.k, self.S = trace["q"].tolist(), trace["k"].tolist(), trace["scores"].tolist()
        self.bias = bias.tolist() if bias is not None else None


def seen_keys(i, T, causal):
    return range(i + 1) if causal else range(T)


# ----------------------------------------------------------------------------
# Before any fixture
# ----------------------------------------------------------------------------

def check_static():
    for scheme in registry.schemes().values():
        scheme.check_static()
    for option in registry.options().values():
        option.check_static()


def check_declarations():
    """A key read by two modules (rope_base by rope and xpos) has one default; an option's
    first key turns it on; every variant's options resolve strictly for each causal flag
    its scheme takes (no key its scheme and options do not read)."""
    owners = {}
    declared = [(s.name, s.defaults) for s in registry.schemes().values()]
    declared += [("option " + o.key, o.defaults) for o in registry.options().values()]
    for owner, defaults in declared:
        for key, value in defaults.items():
            if key in owners:
                first, first_value = owners[key]
                assert first_value == value, (key, first, first_value, owner, value)
            owners[key] = (owner, value)
    for key, option in registry.options().items():
        assert next(iter(option.defaults)) == key, ("an option's first key turns it on", key)
    for variant in variants.variants():
        for causal in variants.causal_flags(variant.scheme):
            registry.resolve_options(variant.scheme, variant.options, causal, strict=True)


# ----------------------------------------------------------------------------
# One fixture's model
# ----------------------------------------------------------------------------

def check_outputs(run):
    """Shapes, the loss, rows summing to 1, causality, and which gradients are zero."""
    c = run.config
    L, B, H, T = c.blocks, run.tokens.shape[0], c.heads, c.context
    assert run.logits.shape == (B, T, c.vocab)
    assert run.attn.shape == (L, B, H, T, T)
    assert math.isfinite(run.loss) and 0.5 < run.loss < 10.0, run.loss
    assert torch.isfinite(run.logits).all() and torch.isfinite(run.attn).all()
    assert close(run.attn.sum(-1), torch.ones(L, B, H, T, dtype=DTYPE)), "attention rows sum to 1"

    t2 = run.tokens.clone()
    t2[:, -1] = (t2[:, -1] + 3) % c.vocab
    with torch.no_grad():
        l2, _ = run.model(t2)
    if run.causal:
        assert torch.all(run.attn.triu(diagonal=1) == 0), "no attention to the future"
        assert torch.all(run.attn[..., 0, 0] == 1.0)
        # Changing the last token must not change logits at earlier positions.
        assert torch.equal(l2[:, :-1], run.logits[:, :-1]), "causal leak"
        assert not torch.equal(l2[:, -1], run.logits[:, -1])
    else:
        assert not torch.equal(l2[:, 0], run.logits[:, 0]), "bidirectional model sees the future"

    zero = registry.scheme(c.positional).zero_gradients(c)
    for name, gr in run.grads.items():
        if name in zero:
            assert torch.all(gr == 0), name
        else:
            assert gr.abs().max() > 0, f"zero gradient for {name}"


def check_score_bias_flag(run):
    """The scheme's score_bias flag (what DAPE's schemes are derived from) says what its
    module does: a finite (H, T, T) float64 bias, or none."""
    scheme = registry.scheme(run.config.positional)
    T, H = run.config.context, run.config.heads
    with torch.no_grad():
        bias = run.positional.score_bias(T)
    if scheme.score_bias:
        assert bias is not None, (scheme.name, "declares a score bias and adds none")
        assert bias.shape == (H, T, T) and bias.dtype == DTYPE and torch.isfinite(bias).all()
    else:
        assert bias is None, (scheme.name, "adds a score bias without declaring it")


def check_logits_from_math(run):
    """Every block's logits Z' (before the mask) against the spec's formula computed a
    second way, with explicit Python loops from math over (b, h, i, j):

        Z'_ij = m_i * (S_ij + B_ij + C_ij),   S_ij = q_i . k_j / sqrt(Dh)

    (S_ij the scheme's score_math where its score replaces the dot product: PoPE's), with
    C the content term from its closed form (each scheme's and option's content_math:
    CoPE's gate sums and interpolation, FoX's sums of ln sigmoid, DAPE's MLP per (i, j)), m
    the option's multiplier_math (the length scale's s[l, h] ln(n_i); 1 when off), B the
    score bias as the model adds it (its own closed form is its scheme's check_model), and
    the attention probabilities against a softmax of the seen logits written out. Together
    these fix the order: B and C added to S, m times all of it, the mask after."""
    c = run.config
    B, H, T, Dh = run.tokens.shape[0], c.heads, c.context, c.head_dim
    scheme = registry.scheme(c.positional)
    on = registry.options_on(c)
    with torch.no_grad():
        run.model(run.tokens)
        bias = run.positional.score_bias(T)
    for l in range(c.blocks):
        view = BlockView(run, l, bias)
        q, k, S = view.q, view.k, view.S
        got = view.trace["logits"].tolist()
        probs = run.attn[l].tolist()
        contents = [term for term in [scheme.content_math(view)] + [o.content_math(view) for o in on]
                    if term is not None]
        multipliers = [m for m in (o.multiplier_math(view) for o in on) if m is not None]
        score_math = scheme.score_math(view)
        for b in range(B):
            for h in range(H):
                for i in range(T):
                    seen = seen_keys(i, T, c.causal)
                    row = []
                    for j in seen:
                        if score_math is not None:
                            s_ij = score_math(b, h, i, j)
                        else:
                            s_ij = sum(q[b][h][i][d] * k[b][h][j][d] for d in range(Dh)) / math.sqrt(Dh)
                        assert abs(S[b][h][i][j] - s_ij) < 1e-12 * (1 + abs(s_ij))
                        bias_ij = view.bias[h][i][j] if bias is not None else 0.0
                        c_ij = sum(term(b, h, i, j) for term in contents)
                        m = 1.0
                        for multiplier in multipliers:
                            m *= multiplier(h, i)
                        z = m * (s_ij + bias_ij + c_ij)
                        assert abs(got[b][h][i][j] - z) < 1e-12 * (1 + abs(z)), \
                            (run.variant, l, b, h, i, j, got[b][h][i][j], z)
                        row.append(z)
                    top = max(row)
                    total = sum(math.exp(z - top) for z in row)
                    for j, z in zip(seen, row):
                        assert abs(probs[b][h][i][j] - math.exp(z - top) / total) < 1e-13


def check_against_torch_layers(run):
    """Cross-check the hand-written blocks against nn.TransformerEncoderLayer
    (norm_first, relu, no dropout), with the score bias and the causal mask
    passed as a float mask.  Only where the positional term is an embedding or a fixed
    bias (Positional.is_fixed_bias): not RoPE, xPos (q/k are rotated and scaled inside
    attention), CoPE, FoX, DAPE (content terms, computed from q, k or the block's input)
    nor the length scale (it multiplies q k^T too)."""
    model, tokens, causal = run.model, run.tokens, run.causal
    if not model.positional.is_fixed_bias():
        return
    T = tokens.shape[1]
    H, D, hidden = run.config.heads, run.config.embed, run.config.hidden
    with torch.no_grad():
        bias = model.positional.score_bias(T)
    mask = torch.zeros(H, T, T, dtype=DTYPE) if bias is None else bias.clone()
    if causal:
        mask = mask.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    B = tokens.shape[0]
    mask = mask.repeat(B, 1, 1)            # (B*H, T, T), batch-major like MHA expects

    with torch.no_grad():
        x = model.embed(tokens)
        for blk in model.blocks:
            ref = nn.TransformerEncoderLayer(D, H, hidden, dropout=0.0, activation="relu",
                                             layer_norm_eps=LN_EPS, batch_first=True,
                                             norm_first=True, dtype=DTYPE)
            ref.train()   # avoid the fused inference fast path
            ref.norm1.weight.copy_(blk.ln1.weight)
            ref.norm1.bias.copy_(blk.ln1.bias)
            ref.norm2.weight.copy_(blk.ln2.weight)
            ref.norm2.bias.copy_(blk.ln2.bias)
            ref.self_attn.in_proj_weight.copy_(blk.attn.qkv.weight.t())
            ref.self_attn.in_proj_bias.zero_()
            ref.self_attn.out_proj.weight.copy_(blk.attn.proj.weight.t())
            ref.self_attn.out_proj.bias.copy_(blk.attn.proj.bias)
            ref.linear1.weight.copy_(blk.ff.fc1.weight.t())
            ref.linear1.bias.copy_(blk.ff.fc1.bias)
            ref.linear2.weight.copy_(blk.ff.fc2.weight.t())
            ref.linear2.bias.copy_(blk.ff.fc2.bias)
            mine, _ = blk(x, model.positional, bias)
            theirs = ref(x, src_mask=mask)
            assert close(mine, theirs, 1e-11), (run.variant, causal, (mine - theirs).abs().max())
            x = mine


def check_gradients(run, n_per_param=3, n_positional=8, seed=0):
    """Central finite differences on random entries of every parameter: 3 of each
    model parameter, up to 8 distinct ones of each positional.* parameter."""
    model, tokens, targets, grads = run.model, run.tokens, run.targets, run.grads
    g = torch.Generator().manual_seed(seed)
    eps = 1e-6
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.view(-1)
            if name.startswith("positional."):
                idx = torch.randperm(flat.numel(), generator=g)[:n_positional].tolist()
            else:
                idx = torch.randint(0, flat.numel(), (n_per_param,), generator=g).tolist()
            for j in idx:
                old = flat[j].item()
                flat[j] = old + eps
                lp = loss_fn(model(tokens)[0], targets).item()
                flat[j] = old - eps
                lm = loss_fn(model(tokens)[0], targets).item()
                flat[j] = old
                fd = (lp - lm) / (2 * eps)
                an = grads[name].view(-1)[j].item()
                assert abs(fd - an) <= 1e-7 + 1e-6 * abs(an), (name, j, fd, an)


def check_model(run):
    """Every check of one fixture's model; none changes its parameters."""
    check_outputs(run)
    check_score_bias_flag(run)
    check_logits_from_math(run)
    registry.scheme(run.config.positional).check_model(run)
    for option in registry.options_on(run.config):
        option.check_model(run)
    check_against_torch_layers(run)
    check_gradients(run)


# ----------------------------------------------------------------------------
# One fixture's model at position IDs (model.position_ids)
# ----------------------------------------------------------------------------

def check_ids(kind, ids, tokens, copy_token, P, convention=""):
    """The IDs are what their kind says: in 0..P-1; random sorted and distinct; offset
    consecutive; coupled consecutive but for the outputs, each at its source's ID; under
    Cho's convention the input consecutive from '=' (<copy>) one before it, each answer
    token at its input token's ID, and the rest 0."""
    B, T = ids.shape
    assert int(ids.min()) >= 0 and int(ids.max()) < P, (ids.min(), ids.max(), P)
    for b in range(B):
        row = ids[b].tolist()
        if kind == "random":
            assert row == sorted(set(row)), row
            continue
        if convention == "cho":
            k = tokens[b].tolist().index(copy_token)
            assert row[k] >= 1, row
            assert row[:k] == [row[k] + 1 + i for i in range(k)], row
            assert row[k + 1:2 * k + 1] == row[:k], row
            assert all(r == 0 for r in row[2 * k + 1:]), row
            continue
        s = row[0]
        copy_at = tokens[b].tolist().index(copy_token)
        for t in range(T):
            output = kind == "coupled" and copy_at < t <= 2 * copy_at
            expected = row[t - copy_at - 1] if output else s + t
            assert row[t] == expected, (kind, b, t, row)


def check_model_at_ids(run, kind, ids, P, convention=""):
    """A fixture with position IDs: its IDs, the outputs and the gradients at them (finite
    differences through the gathers), and the reading at IDs 0..T-1 equal to the model's at
    its own positions. The scheme's formulas are its sequential fixtures' checks."""
    check_ids(kind, ids, run.tokens, run.config.vocab - 1, P, convention)
    check_outputs(run)
    check_gradients(run)
    model, tokens = run.model, run.tokens
    B, T = tokens.shape
    with torch.no_grad():
        model.place_at_ids(torch.arange(T).repeat(B, 1), P)
        at_sequential_ids, attn_ids = model(tokens)
        model.place_at_ids(None, P)
        plain, attn_plain = model(tokens)
        model.place_at_ids(ids, P)
    assert close(at_sequential_ids, plain, 1e-12) and close(attn_ids, attn_plain, 1e-12), \
        (run.variant, (at_sequential_ids - plain).abs().max())
