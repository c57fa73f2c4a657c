"""copytask_ref: an independent PyTorch reference of the copytask transformer.

It is written from the model specification (and the positional schemes' written
definitions) the plain PyTorch way -- ``nn.Module``s with explicit, readable ops -- and
is deliberately NOT derived from (or a transliteration of) the C++ code. Three programs
compute through it:

  * tests/reference/make_parity_fixtures.py: float64, parameters drawn at random, writes
    tests/fixtures/parity_<variant>[_causal].json after its self-checks;
  * python/copytask_forward.py: float32, a trained member's forward from its checkpoint;
  * tests/reference/check_forward_against_fixtures.py: the second against the first.

Model (pre-LN transformer encoder, no dropout):

    x = tok_emb[tokens]   (+ sinusoidal PE | + positional.table, for those schemes)
    for each block l:
        x = x + Attn_l(LN1(x))  # see below
        x = x + FF(LN2(x))      # MLP, its activation model.activation (layer_forms.py)
    logits = LN_f(x) @ W_head + b_head
    loss = mean cross-entropy over all B*T positions

Attention of block l, in the order of the spec (a = LN1(x), the attention input):

    q, k, v = a @ Wqkv, split per head              (no bias)
    q, k    = rotate(q), rotate(k)                  (RoPE, xPos)
    q, k    = q * exp(u_q), k * exp(u_k)            (xPos's qk scale)
    S       = q k^T / sqrt(Dh)                      ("scores"; PoPE replaces them with
                                                     its polar score)
    Z       = S (+ bias[h, i, j]) (+ C)             (score bias: ALiBi, T5, dynamic,
                                                     KERPLE, FIRE; content term C:
                                                     CoPE, FoX or DAPE)
    Z'      = m[l, h, i] * Z                        (length scale, when on)
    then the causal -inf mask (j > i), applied last, softmax over j, @ v.

d = i - j is the signed distance (d > 0: the key is to the left of the query).
All weight matrices are stored in the (in, out) layout, i.e. ``y = x @ W``; a scheme's
parameters are ``positional.<name>``, the options' ``positional.<option>.<name>``
(``positional.dape.weight1``, ``positional.length_scale.scale``). Per-block parameters
(CoPE, FoX, DAPE, length scale) have a leading L (blocks) axis.

Readings of the spec where it leaves a choice:
  * xPos's R2: the spec writes floor(fraction * Dh / 2); it is RoPE's rule, so this
    reference takes RoPE's max(1, floor(fraction * Dh / 2)) (the same at the
    fixtures' Dh = 4, fraction 0.5 or 1).  xPos's centre c = floor(P / 2) with
    P = T (the table covers the input's positions); c cancels in q_i . k_j.
  * CoPE: g_it = sigmoid(S_it) of the scores before any bias (and before the
    length multiplier); p_ii = g_ii on both sides (both sums include t = i).
    npos = cope_positions, or the context T when 0.  Under the causal mask only
    left_embedding exists and the term of j > i is not computed (masked anyway).
  * FoX: the gates' input is the block's attention input a = LN1(x); f^L_0 (and
    f^R_{T-1}) never enter a sum.
  * DAPE: u = [S^(0..H-1), B^(0..H-1)] in this order (heads of S, then heads of B);
    the same bias B (shared by the blocks) is the input of every block's MLP.
  * Length scale: n_i = i + 1 (causal) or T (bidirectional); under the causal mask
    row 0 has m = 0 (ln 1), which leaves its one unmasked weight at 1.
  * PoPE: theta_c = base^(-c / Dh) for c = 0 .. Dh-1 (one frequency per dimension),
    base = rope_base; the phase bias delta is the key's, clamped to [-2 pi, 0]:
    S_ij = sum_c softplus(q_ic) softplus(k_jc) cos((i - j) theta_c - delta_hc) / sqrt(Dh).

Layout (README.md beside this file has it in full, and how to add a scheme):
  schemes/<name>.py   one positional scheme each: its module, option defaults, fixture
                      variants, flags (score bias, causal only), self-checks and what a
                      checkpoint needs; declares SCHEME
  options/<key>.py    one option each (dape, length_scale); declares OPTION
  declarations.py     Scheme, Option and Variant: what those modules declare
  registry.py         finds the schemes and options by listing their folders
  variants.py         the fixture variants, derived from the scheme modules; seeds, names
  config.py, positional.py, layers.py, attention.py, transformer.py, bias_mlp.py
                      the model; data.py the copy batch; draws.py the fixtures' draws
  checks.py           the self-checks that hold for every scheme
  fixture_sizes.py, fixtures.py, fixture_json.py   the fixtures
  checkpoint.py       a model from a trained member's checkpoint (the forward's)
"""
