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


def make_cho_copy_batch(gen, B, T, V):
    """Next-token copy under Cho et al.'s convention: k content tokens, <copy>, the k
    outputs, the end token E, pad; the target is the next token from <copy> to the last
    output (output 0 .. output k-1, then E), -1 (out of the loss) everywhere else. Token
    ids: 0 pad, 1..V-3 content, V-2 E, V-1 <copy>. Distinct k per example, 1..B, so the
    longest (2B + 2 tokens) fills the context when T = 2B + 2."""
    copy_tok, end_tok = V - 1, V - 2
    assert 2 * B + 2 <= T, (B, T)
    ks = [k + 1 for k in torch.randperm(B, generator=gen).tolist()]
    tokens, targets = [], []
    for k in ks:
        content = torch.randint(1, V - 2, (k,), generator=gen).tolist()   # 1..V-3
        sequence = content + [copy_tok] + content + [end_tok]
        target = [-1] * k + content + [end_tok]                            # position k (<copy>) .. 2k
        tokens.append(sequence + [0] * (T - len(sequence)))
        targets.append(target + [-1] * (T - len(target)))
    return torch.tensor(tokens, dtype=torch.int64), torch.tensor(targets, dtype=torch.int64)
