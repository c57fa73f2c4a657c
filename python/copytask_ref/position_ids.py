"""Position IDs (model.position_ids): the position each token carries, and the model's hooks
read at those IDs instead of at 0..T-1.

The IDs of one example (written from their definitions, Ruoss et al. 2023, McLeish et al.
2024, Cho et al. 2024):
    random     T distinct IDs of 0..L-1, sorted
    offset     s, s+1, .., s+T-1 with s in 0..L-T
    coupled    s + the token's place: output j of a copy (the j-th position after <copy>)
               takes the place of the j-th content token, every other token its own;
               under Cho et al.'s convention (next-token, cho_places) each answer token at
               its input token's place, '=' one before the first, the end and padding at 0

AtPositionIds reads a scheme's hooks at the IDs without changing any scheme module: each
hook is evaluated at P positions from its own definition and each example takes its
entries at its IDs. The embedding's added rows (P, D) are the hook applied to zeros; the
rotation and the q/k scale are linear maps of each position's (Dh) vector, found by
applying the hook to unit vectors; the score bias's entry (i, j) is the (H, P, P) bias at
(ID_i, ID_j). A score that reads positions itself (PoPE) is given the IDs
(attention_scores_at). A content term (cope, fox) reads no positions and has none to move.

Shapes: B batch, T positions, P table positions, H heads, Dh head dimension, D embed.
"""

import torch


def random_ids(gen, B, T, L):
    """(B, T): a sorted random T-subset of 0..L-1 per example."""
    return torch.stack([torch.randperm(L, generator=gen)[:T].sort().values for _ in range(B)])


def offset_ids(gen, B, T, L):
    """(B, T): s + 0..T-1, s uniform in 0..L-T per example."""
    starts = torch.randint(0, L - T + 1, (B, 1), generator=gen)
    return starts + torch.arange(T)[None, :]


def copy_coupled_places(tokens, copy_token):
    """(B, T) the copy task's coupled places: the outputs after <copy> take their source's
    place (output j, at c + 1 + j, copies the content token at j), every other token its
    own place t. tokens (B, T)."""
    B, T = tokens.shape
    places = torch.arange(T).repeat(B, 1)
    for b in range(B):
        row = tokens[b].tolist()
        if copy_token not in row:
            continue
        c = row.index(copy_token)           # k content tokens before it
        for j in range(c):
            if c + 1 + j < T:
                places[b, c + 1 + j] = j
    return places


def coupled_ids(gen, tokens, copy_token, L):
    """(B, T): s + the coupled places, s uniform in 0..L-T per example."""
    B, T = tokens.shape
    starts = torch.randint(0, L - T + 1, (B, 1), generator=gen)
    return starts + copy_coupled_places(tokens, copy_token)


def cho_places(tokens, copy_token):
    """(B, T) the places of Cho et al.'s coupling of a next-token copy (their CopyDataset
    with coupled positions, written from the paper's description): the input digits at
    1..k after the '=' sign's 0, the answer's digit i at its input digit's place, the end
    token and the padding apart; here shifted by one so that the apart ID is 0 and every
    token of the example is at least 1: '=' (<copy>) 1, input i (1-based) i + 1, answer i
    i + 1, the end and the padding 0. tokens (B, T) with <copy> at k, the answer at
    k+1..2k, the end at 2k+1."""
    B, T = tokens.shape
    places = torch.zeros(B, T, dtype=torch.int64)
    for b in range(B):
        k = tokens[b].tolist().index(copy_token)
        places[b, k] = 1
        for i in range(1, k + 1):
            places[b, i - 1] = i + 1          # input i
            places[b, k + i] = i + 1          # answer i
    return places


def cho_ids(gen, tokens, copy_token, L):
    """(B, T): s + Cho's places, s uniform in 0..L-T per example; the apart tokens at 0."""
    B, T = tokens.shape
    starts = torch.randint(0, L - T + 1, (B, 1), generator=gen)
    places = cho_places(tokens, copy_token)
    return torch.where(places > 0, starts + places, torch.zeros_like(places))


def make_ids(kind, gen, tokens, copy_token, L, convention=""):
    """The IDs of a fixture's batch under `kind` (random, offset, coupled) and the task's
    convention ("" or "cho")."""
    B, T = tokens.shape
    if convention == "cho":
        assert kind == "coupled", kind
        return cho_ids(gen, tokens, copy_token, L)
    if kind == "random":
        return random_ids(gen, B, T, L)
    if kind == "offset":
        return offset_ids(gen, B, T, L)
    if kind == "coupled":
        return coupled_ids(gen, tokens, copy_token, L)
    raise ValueError("unknown position IDs %r" % kind)


class AtPositionIds:
    """A scheme's module (positional.Positional) read at each example's IDs (B, T), its
    tables made for P positions (P > every ID)."""

    def __init__(self, positional, ids, P):
        assert int(ids.min()) >= 0 and int(ids.max()) < P, (ids.min(), ids.max(), P)
        self.positional, self.ids, self.P = positional, ids, P

    def add_to_embedding(self, x):                       # x (B, T, D)
        zeros = torch.zeros(1, self.P, x.shape[2], dtype=x.dtype)
        rows = self.positional.add_to_embedding(zeros)[0]   # (P, D): the rows the hook adds
        return x + rows[self.ids]                           # (B, T, D)

    def _linear_at_ids(self, hook, x):
        """hook(x) for a hook linear in each position's vector: x (B, H, T, Dh)."""
        B, H, T, Dh = x.shape
        units = torch.eye(Dh, dtype=x.dtype)[:, None, None, :].expand(Dh, H, self.P, Dh)   # (Dh_in, H, P, Dh)
        maps = hook(units.contiguous()).permute(1, 2, 3, 0)     # (H, P, Dh_out, Dh_in): column c = hook(e_c)
        at_ids = maps[:, self.ids]                              # (H, B, T, Dh_out, Dh_in)
        return torch.einsum("hbtoi,bhti->bhto", at_ids, x)      # (B, H, T, Dh)

    def rotate(self, x):
        return self._linear_at_ids(self.positional.rotate, x)

    def scale_query_key(self, x, side):
        return self._linear_at_ids(lambda units: self.positional.scale_query_key(units, side), x)

    def attention_scores(self, q, k):
        """A score that reads positions itself (PoPE's attention_scores_at) at the IDs; the
        plain q k^T / sqrt(Dh) reads none."""
        at_ids = getattr(self.positional, "attention_scores_at", None)
        return at_ids(q, k, self.ids) if at_ids else self.positional.attention_scores(q, k)

    def score_bias(self, T):
        full = self.positional.score_bias(self.P)               # (H, P, P) or None
        if full is None:
            return None
        at_ids = full[:, self.ids[:, :, None], self.ids[:, None, :]]   # (H, B, T, T)
        return at_ids.permute(1, 0, 2, 3)                       # (B, H, T, T)

    def content_term(self, block, a, q, scores, bias):
        return self.positional.content_term(block, a, q, scores, bias)

    def length_multiplier(self, block, T):
        return self.positional.length_multiplier(block, T)
