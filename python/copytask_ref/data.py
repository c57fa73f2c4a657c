"""The fixtures' batch of the copy task."""

import torch


def make_copy_batch(gen, B, T, V):
    """Copy task: k content tokens, <copy>, pad.  Target repeats the content
    after <copy>, truncated at T.  Distinct k per example, one with k = 8."""
    copy_tok = V - 1
    others = (torch.randperm(7, generator=gen) + 1)[: B - 1].tolist()   # from 1..7
    ks = others + [8]
    perm = torch.randperm(B, generator=gen).tolist()
    ks = [ks[i] for i in perm]
    tokens, targets = [], []
    for k in ks:
        content = torch.randint(1, V - 1, (k,), generator=gen).tolist()   # 1..V-2
        inp = content + [copy_tok]
        tgt = content + [copy_tok] + content
        inp = (inp + [0] * T)[:T]
        tgt = (tgt + [0] * T)[:T]
        tokens.append(inp)
        targets.append(tgt)
    return torch.tensor(tokens, dtype=torch.int64), torch.tensor(targets, dtype=torch.int64)
