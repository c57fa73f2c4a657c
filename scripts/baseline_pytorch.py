#!/usr/bin/python3
"""Plain-PyTorch baseline for copytask's speed: the notebook way, and PyTorch 2's ensembles.

copytask trains many transformer "members" at once as stacked LibTorch tensors.  The
claim to check is that it is faster than the PyTorch notebooks it replaces.  This
script is that notebook, written plainly: eager ops, nn.Module with nn.Linear /
nn.Embedding / nn.LayerNorm, float32, dropout, torch.optim.Adam, and for M members
M separate models trained one after another.  The model and the training step are
copytask's (see python/copytask_ref/, the independent reference, for the architecture):
pre-LN encoder, positional scheme none | sinusoidal | learned | rope | alibi,
optional causal mask, mean cross-entropy over all B*T positions.

scripts/bench.sh runs it next to the copytask binary with the same sizes, e.g.

    /usr/bin/python3 scripts/baseline_pytorch.py --members 18 --positional mixed \\
        --batch-size 128 --lr 0.002 --steps 10 --warmup 3 --json out/pytorch.json

and compares the JSON numbers (seconds per member-step, member-steps, examples and
tokens per second, peak RSS).  Only the data's shapes and distribution matter here,
so the copy-task examples are drawn with torch random ops (duplicates allowed).

--form picks how the members train (PyTorch 2.x for the last two):
  eager         one model after another, as above (the default; PyTorch 1.13 too)
  vmap          what a PyTorch 2 user writes to train many small models at once: the
                members of each scheme stacked with torch.func.stack_module_state and
                trained together by vmap(grad_and_value(functional_call(...))) with
                randomness="different" (each member its own dropout), one Adam over the
                stacked parameters (elementwise, so each member's own Adam); members of
                different schemes run different code, so a mixed study is one such group
                per scheme, one after another
  vmap-compile  the same function under torch.compile (compiled in the untimed warm-up); on a
                CUDA device with mode="reduce-overhead" (CUDA graphs, what a GPU user picks for
                many small kernels), on the CPU with the default mode (--compile-mode to choose)
On a CUDA device the vmap forms call the step under torch.no_grad(): torch.func.grad differentiates
inside the step and no outer graph is needed (with grad mode on, torch.compile would also compile a
backward nobody calls, and CUDA graph trees would wait for it); the CPU keeps grad mode on, as its
measured numbers were taken.
The JSON says the form, the compile mode and the untimed warm-up's seconds (torch.compile's
compilation and CUDA graph recording included), apart from the timed steps.
"""

import argparse
import contextlib
import copy
import json
import math
import os
import resource
import statistics
import time

# libgomp's default wait policy stalls some 2-thread steps by 50-150 ms on small VMs,
# which would flatter copytask; PASSIVE avoids that.  Must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn as nn
import torch.nn.functional as F

SCHEMES = ["none", "sinusoidal", "learned", "rope", "alibi"]
# model.activation's values (src/config/layer_form.cpp): torch's own functions, as a user
# would write the model; gelu the exact (erf) form, torch's default.
ACTIVATIONS = {"relu": torch.relu, "gelu": F.gelu}
MIXED = ["none", "sinusoidal", "learned", "rope", "alibi", "alibi+causal"]  # the 6-scheme study


def sinusoidal_table(T, D):
    """PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D))."""
    n = D // 2
    pos = torch.arange(T, dtype=torch.float32)[:, None]
    denom = 10000.0 ** (2.0 * torch.arange(n, dtype=torch.float32) / D)
    pe = torch.zeros(T, D)
    pe[:, 0:2 * n:2] = torch.sin(pos / denom)
    pe[:, 1:2 * n:2] = torch.cos(pos / denom)
    return pe


def alibi_slopes(H):
    """Head slopes from the ALiBi paper (Press et al.)."""
    def power_of_2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]
    if math.log2(H).is_integer():
        return power_of_2(H)
    n = 2 ** math.floor(math.log2(H))
    return power_of_2(n) + power_of_2(2 * n)[0::2][: H - n]


def rope(x, cos, sin):
    """Rotate the pairs (2i, 2i+1) of x (B, H, T, Dh) by theta = p * 10000^(-2i/Dh)."""
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, D, H, F_, p, positional, causal, T, activation="relu"):
        super().__init__()
        self.H, self.Dh, self.positional = H, D // H, positional
        self.activation = ACTIVATIONS[activation]
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.proj = nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, F_), nn.Linear(F_, D)
        self.drop = nn.Dropout(p)
        bias = torch.zeros(H, T, T)
        if positional == "alibi":
            dist = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs().float()
            bias = -torch.tensor(alibi_slopes(H))[:, None, None] * dist
        if causal:
            bias = bias.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        self.register_buffer("bias", bias if (positional == "alibi" or causal) else None)
        if positional == "rope":
            inv_freq = 10000.0 ** (-torch.arange(0, self.Dh, 2, dtype=torch.float32) / self.Dh)
            theta = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]
            self.register_buffer("cos", theta.cos())
            self.register_buffer("sin", theta.sin())

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (t.view(B, T, self.H, self.Dh).transpose(1, 2) for t in (q, k, v))
        if self.positional == "rope":
            q, k = rope(q, self.cos, self.sin), rope(k, self.cos, self.sin)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.Dh)
        if self.bias is not None:
            scores = scores + self.bias[:, :T, :T]
        attn = self.drop(torch.softmax(scores, dim=-1))
        out = (attn @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.drop(self.proj(out))
        return x + self.drop(self.fc2(self.drop(self.activation(self.fc1(self.ln2(x))))))


class CopyTransformer(nn.Module):
    def __init__(self, V, T, D, H, L, F_, p, positional, causal, activation="relu"):
        super().__init__()
        assert positional in SCHEMES, positional
        self.positional = positional
        self.tok_emb = nn.Embedding(V, D)
        self.pos_emb = nn.Embedding(T, D)  # always there, as in copytask; used by "learned"
        self.register_buffer("pe", sinusoidal_table(T, D))
        self.blocks = nn.ModuleList([Block(D, H, F_, p, positional, causal, T, activation) for _ in range(L)])
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)

    def forward(self, tokens):
        T = tokens.shape[1]
        x = self.tok_emb(tokens)
        if self.positional == "sinusoidal":
            x = x + self.pe[:T]
        elif self.positional == "learned":
            x = x + self.pos_emb.weight[:T]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def copy_data(N, T, V, min_len, max_len):
    """N copy-task examples: k content tokens (1..V-2), <copy> = V-1, padding 0;
    the target repeats the content after <copy>, cut at T."""
    k = torch.randint(min_len, max_len + 1, (N, 1))
    content = torch.randint(1, V - 1, (N, T))
    pos = torch.arange(T)[None, :]
    tokens = torch.where(pos < k, content, torch.zeros_like(content))
    tokens = torch.where(pos == k, torch.full_like(content, V - 1), tokens)
    repeat = content.gather(1, (pos - k - 1).clamp(min=0).expand(N, T))
    targets = torch.where((pos > k) & (pos <= 2 * k), repeat, tokens)
    return tokens, targets


def member_scheme(args, m):
    scheme = MIXED[m % len(MIXED)] if args.positional == "mixed" else args.positional
    return scheme.split("+")[0], args.causal or scheme.endswith("+causal")


def new_member(args, m, device):
    torch.manual_seed(args.seed + 1 + m)
    positional, causal = member_scheme(args, m)
    model = CopyTransformer(args.vocab, args.context, args.embed, args.heads, args.blocks, args.hidden,
                            args.dropout, positional, causal, args.activation).to(device)
    model.train()
    return model


def train_eager(args, tokens, targets, device, sync):
    """Each member alone, one after another: (timed member-step seconds, untimed warm-up seconds,
    first loss, last loss)."""
    N, V = tokens.shape[0], args.vocab
    times, warmup_seconds, first_loss, loss = [], 0.0, None, None
    for m in range(args.members):
        model = new_member(args, m, device)
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        for step in range(args.warmup + args.steps):
            if args.batch_size == 0:
                x, y = tokens, targets
            else:
                idx = torch.randint(0, N, (args.batch_size,), device=device)
                x, y = tokens[idx], targets[idx]
            sync()
            t0 = time.perf_counter()
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sync()
            t1 = time.perf_counter()
            if step >= args.warmup:
                times.append(t1 - t0)
            else:
                warmup_seconds += t1 - t0
            if first_loss is None:
                first_loss = loss.item()
    return times, warmup_seconds, first_loss, loss.item()


def train_vmap(args, tokens, targets, device, sync, compile_mode):
    """The members of each scheme as one torch.func ensemble: (per member-step seconds, untimed
    warm-up seconds, first loss, last loss). A timed step of a group of G members counts as G
    member-steps. compile_mode: None (not compiled) or torch.compile's mode."""
    from torch.func import functional_call, grad_and_value, stack_module_state, vmap
    N, V = tokens.shape[0], args.vocab
    groups = {}
    for m in range(args.members):
        groups.setdefault(member_scheme(args, m), []).append(m)
    times, warmup_seconds, first_loss, last_loss = [], 0.0, None, None
    cuda = device.type == "cuda"
    graphs = cuda and compile_mode in ("reduce-overhead", "max-autotune")  # CUDA graph trees
    outer = torch.no_grad if cuda else contextlib.nullcontext  # see the top of this file
    for members in groups.values():
        models = [new_member(args, m, device) for m in members]
        params, buffers = stack_module_state(models)  # [G, ...] leaves that require grad
        base = copy.deepcopy(models[0]).to("meta")

        def loss_of(p, b, x, y):
            logits = functional_call(base, (p, b), (x,))
            return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))

        per_member_data = args.batch_size != 0  # each member draws its own minibatch
        step_fn = vmap(grad_and_value(loss_of), in_dims=(0, 0, 0 if per_member_data else None,
                                                         0 if per_member_data else None),
                       randomness="different")
        if compile_mode is not None:
            step_fn = torch.compile(step_fn, mode=None if compile_mode == "default" else compile_mode)
        opt = torch.optim.Adam(list(params.values()), lr=args.lr)
        G = len(members)
        for step in range(args.warmup + args.steps):
            if per_member_data:
                idx = torch.randint(0, N, (G, args.batch_size), device=device)
                x, y = tokens[idx], targets[idx]  # [G, B, T]
            else:
                x, y = tokens, targets
            sync()
            t0 = time.perf_counter()
            if graphs:
                torch.compiler.cudagraph_mark_step_begin()  # last step's outputs may be overwritten
            with outer():
                grads, losses = step_fn(params, buffers, x, y)
            for name, value in params.items():
                value.grad = grads[name]
            opt.step()
            sync()
            t1 = time.perf_counter()
            if step >= args.warmup:
                times.extend([(t1 - t0) / G] * G)
            else:
                warmup_seconds += t1 - t0
            if first_loss is None:
                first_loss = losses[0].item()
        last_loss = losses[-1].item()
    return times, warmup_seconds, first_loss, last_loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--members", type=int, default=1)
    ap.add_argument("--positional", default="sinusoidal", choices=SCHEMES + ["mixed"])
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--batch-size", type=int, default=0, help="0 = full batch")
    ap.add_argument("--train-examples", type=int, default=9000)
    ap.add_argument("--vocab", type=int, default=11)
    ap.add_argument("--context", type=int, default=10)
    ap.add_argument("--min-len", type=int, default=1)
    ap.add_argument("--max-len", type=int, default=8)
    ap.add_argument("--embed", type=int, default=20)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--activation", default="relu", choices=sorted(ACTIVATIONS),
                    help="model.activation: the feed-forward's nonlinearity")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps per member")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per member")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the GPU machine's bench)")
    ap.add_argument("--form", default="eager", choices=["eager", "vmap", "vmap-compile"],
                    help="how the members train (see the top of this file)")
    ap.add_argument("--compile-mode", default="auto",
                    choices=["auto", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                    help="torch.compile's mode for --form vmap-compile; auto: reduce-overhead (CUDA "
                         "graphs) on a CUDA device, default on the CPU")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    if args.max_len >= args.context or args.embed % args.heads or args.steps < 1:
        ap.error("need max-len < context, heads dividing embed, steps >= 1")
    if args.form != "eager" and not hasattr(torch, "func"):
        ap.error(f"--form {args.form} needs PyTorch 2 (torch.func); this is {torch.__version__}: "
                 "run it with the PyTorch 2.11 that scripts/cuda_build.sh fetches")
    if args.form == "vmap-compile":
        args.warmup = max(args.warmup, 2)  # the first calls compile (and record the CUDA graph)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    T, V = args.context, args.vocab
    device = torch.device(args.device)
    tokens, targets = copy_data(args.train_examples, T, V, args.min_len, args.max_len)
    tokens, targets = tokens.to(device), targets.to(device)
    # A step's time must include its device work: wait for it before reading the clock.
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    per_step = tokens.shape[0] if args.batch_size == 0 else args.batch_size

    compile_mode = None
    if args.form == "vmap-compile":
        compile_mode = args.compile_mode
        if compile_mode == "auto":
            compile_mode = "reduce-overhead" if device.type == "cuda" else "default"
    if args.form == "eager":
        times, warmup_seconds, first_loss, last_loss = train_eager(args, tokens, targets, device, sync)
    else:
        times, warmup_seconds, first_loss, last_loss = train_vmap(args, tokens, targets, device, sync, compile_mode)

    total = sum(times)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    result = {
        "tool": "pytorch-" + args.form,
        "form": args.form,
        "compile_mode": compile_mode,  # None: not compiled
        # The untimed warm-up steps, all members (or groups) together: torch.compile's
        # compilation and CUDA graph recording for vmap-compile.
        "warmup_seconds": warmup_seconds,
        "timed_seconds": total,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
        "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
        "members": args.members,
        "batch_size": args.batch_size,
        "examples_per_step": per_step,
        "step_seconds_min": min(times),
        "step_seconds_median": statistics.median(times),
        "member_steps_per_second": len(times) / total,
        "examples_per_second": len(times) * per_step / total,
        "tokens_per_second": len(times) * per_step * T / total,
        "peak_rss_mib": rss_mib,
        "first_loss": first_loss,
        "last_loss": last_loss,
        "config": vars(args),
    }
    print(f"{result['tool']} (torch {result['torch']}, {result['threads']} threads, "
          f"OMP_WAIT_POLICY={result['omp_wait_policy']}): "
          f"{args.members} member(s) x {args.steps} timed steps, {per_step} examples/step, "
          f"positional={args.positional}{' causal' if args.causal else ''}")
    print(f"  member-step: min {result['step_seconds_min'] * 1e3:.3f} ms, "
          f"median {result['step_seconds_median'] * 1e3:.3f} ms")
    print(f"  {result['member_steps_per_second']:.1f} member-steps/s, "
          f"{result['examples_per_second']:.0f} examples/s, {result['tokens_per_second']:.0f} tokens/s")
    if compile_mode is not None and device.type == "cuda":
        from torch._dynamo.utils import counters
        # Where torch.compile could not use CUDA graphs (it runs on without them, slower).
        result["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"]
    print(f"  warm-up (untimed{', compile included, mode ' + compile_mode if compile_mode else ''}): "
          f"{warmup_seconds:.2f} s")
    print(f"  peak RSS {rss_mib:.1f} MiB; loss first {first_loss:.4f}, last {last_loss:.4f} "
          f"(last member)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
