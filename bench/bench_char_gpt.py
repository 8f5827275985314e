"""A GPT-style character language model: tessera against PyTorch at its best
(fair.py's rules), same process, interleaved.

The model (issue 16, examples/char_gpt.py's shape): token + position embedding,
4 pre-LayerNorm blocks of causal multi-head attention (4 heads, key_dim 64)
and a GELU MLP (4 d), d = 256, context 128, a final LayerNorm and a Dense to
the vocabulary (logits); AdamW (lr 3e-4, weight decay 0.01, eps 1e-8), batch
32. tessera: a functional nn.Model of Embedding, a position-embedding layer,
LayerNormalization(epsilon=1e-5), MultiHeadAttention(4, 64)(..., 
use_causal_mask=True), Dense(1024, "gelu"), Dense; PyTorch: the same blocks
hand-written (one fused q/k/v Linear, F.scaled_dot_product_attention(
is_causal=True), exact GELU, nn.LayerNorm(eps=1e-5)) with
torch.optim.AdamW(fused=True): the same FLOPs. PyTorch starts from tessera's
initial weights (copied from layer.get_weights(), Keras layouts converted).

  1. training step time and tokens/s (32 x 128 tokens per step), 1 and 2
     threads: tessera model.fit on one batch; PyTorch eager and torch.compile'd
  2. validation loss after the same training time: both train from the same
     weights on the same batches, one step each in turn, each until its own
     summed step time reaches --train-seconds; then the loss on the same
     held-out sequences (computed in NumPy from each side's logits)

Text: the King James Bible from Debian's bible-kjv (`bible -f "Genesis 1:1-
Revelation 22:21"`, the last 5% held out), or a synthetic text without it.
Target (issue 16): step time <= 0.8 x the best PyTorch.

run: .venv/bin/python bench/bench_char_gpt.py [--threads 1,2] [--rounds 5]
         [--train-seconds 60] [--train-threads 2] [--no-compile] [--no-default] [--quick]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

import fair

D, HEADS, KEY_DIM, LAYERS, CONTEXT, BATCH = 256, 4, 64, 4, 128, 32


# ---------------------------------------------------------------- data

def load_text() -> tuple:
    """(text, where it came from)."""
    if shutil.which("bible"):
        out = subprocess.run(["bible", "-f", "Genesis 1:1-Revelation 22:21"],
                             capture_output=True, text=True)
        if out.returncode == 0 and len(out.stdout) > 1_000_000:
            return out.stdout, "King James Bible (Debian bible-kjv), 4.4 MB"
    rng = np.random.default_rng(0)
    words = ("and the of to that in he shall unto for i his a lord they be is him not them it "
             "with all thou thy was god which my me said but ye their have will").split()
    text = " ".join(rng.choice(words, size=800_000))
    return text, "synthetic text (bible-kjv not installed: apt-get install bible-kjv)"


def make_corpus():
    text, source = load_text()
    chars = sorted(set(text))
    table = np.zeros(256, dtype=np.int32)
    for i, c in enumerate(chars):
        table[ord(c) & 255] = i
    ids = table[np.frombuffer(text.encode("latin-1", "replace"), dtype=np.uint8)]
    split = int(len(ids) * 0.95)
    return ids[:split], ids[split:], len(chars), source


def batches(ids, count, batch, seed):
    """`count` batches of (x, y): random windows of CONTEXT + 1 ids."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        starts = rng.integers(0, len(ids) - CONTEXT - 1, size=batch)
        w = np.stack([ids[s:s + CONTEXT + 1] for s in starts])
        out.append((w[:, :-1].astype(np.int32), w[:, 1:].astype(np.int32)))
    return out


# ---------------------------------------------------------------- models

def tessera_model(vocab, seed=0):
    import tessera
    from tessera import nn

    class PositionEmbedding(nn.Layer):
        """Adds a learned (context, d) table to its input."""

        def build(self, input_shape):
            self.table = self.add_weight(shape=tuple(input_shape[-2:]),
                                         initializer=nn.initializers.RandomUniform(-0.05, 0.05),
                                         name="embeddings")

        def call(self, x):
            return x + self.table

    inp = nn.Input((CONTEXT,), dtype="int32")
    h = nn.Embedding(vocab, D, name="tok")(inp)
    h = PositionEmbedding(name="pos")(h)
    for i in range(LAYERS):
        a = nn.LayerNormalization(epsilon=1e-5, name=f"ln1_{i}")(h)
        a = nn.MultiHeadAttention(HEADS, KEY_DIM, name=f"mha_{i}")(a, a, use_causal_mask=True)
        h = nn.Add()([h, a])
        m = nn.LayerNormalization(epsilon=1e-5, name=f"ln2_{i}")(h)
        m = nn.Dense(4 * D, activation="gelu", name=f"fc1_{i}")(m)
        m = nn.Dense(D, name=f"fc2_{i}")(m)
        h = nn.Add()([h, m])
    h = nn.LayerNormalization(epsilon=1e-5, name="ln_f")(h)
    out = nn.Dense(vocab, name="head")(h)
    model = nn.Model(inp, out, seed=seed)
    model.compile(tessera.optim.AdamW(3e-4, weight_decay=0.01, epsilon=1e-8),
                  nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def torch_model(torch, vocab):
    F = torch.nn.functional

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = torch.nn.LayerNorm(D, eps=1e-5)
            self.qkv = torch.nn.Linear(D, 3 * HEADS * KEY_DIM)
            self.o = torch.nn.Linear(HEADS * KEY_DIM, D)
            self.ln2 = torch.nn.LayerNorm(D, eps=1e-5)
            self.fc1 = torch.nn.Linear(D, 4 * D)
            self.fc2 = torch.nn.Linear(4 * D, D)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, KEY_DIM).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, HEADS * KEY_DIM))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(vocab, D)
            self.pos = torch.nn.Parameter(torch.zeros(CONTEXT, D))
            self.blocks = torch.nn.ModuleList([Block() for _ in range(LAYERS)])
            self.ln_f = torch.nn.LayerNorm(D, eps=1e-5)
            self.head = torch.nn.Linear(D, vocab)

        def forward(self, ids):
            h = self.tok(ids) + self.pos
            for blk in self.blocks:
                h = blk(h)
            return self.head(self.ln_f(h))

    return GPT()


def copy_weights(model, net, torch):
    """tessera's weights (Keras layouts) into the PyTorch GPT."""
    def w(name):
        return [np.asarray(a) for a in model.get_layer(name).get_weights()]

    def put(param, a):
        param.copy_(torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)))

    def dense(lin, name):
        k, b = w(name)
        put(lin.weight, k.T)
        put(lin.bias, b)

    def norm(ln, name):
        g, b = w(name)
        put(ln.weight, g)
        put(ln.bias, b)

    hk = HEADS * KEY_DIM
    with torch.no_grad():
        put(net.tok.weight, w("tok")[0])
        put(net.pos, w("pos")[0])
        for i, blk in enumerate(net.blocks):
            norm(blk.ln1, f"ln1_{i}")
            qk, qb, kk, kb, vk, vb, ok, ob = w(f"mha_{i}")
            put(blk.qkv.weight, np.concatenate([a.reshape(D, hk) for a in (qk, kk, vk)], 1).T)
            put(blk.qkv.bias, np.concatenate([a.reshape(hk) for a in (qb, kb, vb)]))
            put(blk.o.weight, ok.reshape(hk, D).T)
            put(blk.o.bias, ob)
            norm(blk.ln2, f"ln2_{i}")
            dense(blk.fc1, f"fc1_{i}")
            dense(blk.fc2, f"fc2_{i}")
        norm(net.ln_f, "ln_f")
        dense(net.head, "head")


def loss_of_logits(logits, y):
    """Mean cross-entropy (nats per character), in float64 NumPy."""
    z = logits.astype(np.float64)
    z -= z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(-np.take_along_axis(logp, y[..., None].astype(np.int64), -1).mean())


# ---------------------------------------------------------------- races

def setup(args, vocab, default_config=False):
    import torch

    tm = tessera_model(vocab)
    torch.manual_seed(0)
    net = torch_model(torch, vocab)
    copy_weights(tm, net, torch)
    opt = torch.optim.AdamW(net.parameters(), 3e-4, weight_decay=0.01, eps=1e-8,
                            **({} if default_config else {"fused": True}))
    return tm, net, opt


def torch_step(torch, model, opt):
    def step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 y.reshape(-1).long())
        loss.backward()
        opt.step()
        return loss
    return step


def step_race(threads, args, train, vocab, default_config=False):
    import torch

    import tessera

    torch.set_num_threads(threads)
    tessera.set_num_threads(threads)
    tm, net, opt = setup(args, vocab, default_config)
    x, y = train[0]
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    check = {}
    with torch.inference_mode():
        check["diff"] = float(np.abs(tm.predict(x, batch_size=len(x), verbose=0)
                                     - net(xt).numpy()).max())
    step = torch_step(torch, net, opt)
    fns = {"tessera": lambda: tm.fit(x, y, batch_size=len(x), epochs=1, verbose=0, shuffle=False),
           "eager": lambda: step(xt, yt)}
    if not (default_config or args.no_compile):
        torch._dynamo.reset()
        cnet = fair.try_compile(torch, net, "the GPT")
        if cnet is not None:
            cstep = torch_step(torch, cnet, opt)
            s = fair.first_call(lambda: cstep(xt, yt), "compiled GPT step")
            if s is not None:
                fns["compiled"] = lambda: cstep(xt, yt)
                check["compile_s"] = s
    times = fair.interleave(fns, args.rounds, warmup=1)
    times["_check"] = check
    return times


def loss_race(args, train, val, vocab, use_compiled):
    """Both train in turn, one step each, until each side's summed step time
    reaches args.train_seconds (the first, compiling step not counted); returns
    each side's steps and validation loss."""
    import torch

    import tessera

    torch.set_num_threads(args.train_threads)
    tessera.set_num_threads(args.train_threads)
    tm, net, opt = setup(args, vocab)
    model = net
    if use_compiled:
        torch._dynamo.reset()
        model = torch.compile(net)
    step = torch_step(torch, model, opt)
    tt = [torch.from_numpy(x) for x, _ in train], [torch.from_numpy(y) for _, y in train]
    xv = np.concatenate([x for x, _ in val])
    yv = np.concatenate([y for _, y in val])

    def val_loss_tessera():
        return loss_of_logits(tm.predict(xv, batch_size=BATCH, verbose=0), yv)

    def val_loss_torch():
        net.eval()
        with torch.inference_mode():
            out = np.concatenate([net(torch.from_numpy(xv[i:i + BATCH])).numpy()
                                  for i in range(0, len(xv), BATCH)])
        net.train()
        return loss_of_logits(out, yv)

    start = {"tessera": val_loss_tessera(), "PyTorch": val_loss_torch()}
    # The first step of each side (tessera compiles its training program,
    # torch.compile its kernels) trains on the first batch but is not counted.
    used = {"tessera": 0.0, "PyTorch": 0.0}
    steps = {"tessera": 0, "PyTorch": 0}
    first = {}
    each = {"tessera": [], "PyTorch": []}
    i = 0
    while min(used.values()) < args.train_seconds and i < len(train):
        for side in ("tessera", "PyTorch") if i % 2 == 0 else ("PyTorch", "tessera"):
            if used[side] >= args.train_seconds:
                continue
            k = steps[side]
            t = time.perf_counter()
            if side == "tessera":
                tm.fit(train[k][0], train[k][1], batch_size=BATCH, epochs=1, verbose=0,
                       shuffle=False)
            else:
                step(tt[0][k], tt[1][k])
            dt = time.perf_counter() - t
            if k == 0:
                first[side] = dt
            else:
                used[side] += dt
                each[side].append(dt)
            steps[side] += 1
        i += 1
    end = {"tessera": val_loss_tessera(), "PyTorch": val_loss_torch()}
    return {"start": start, "end": end, "steps": steps, "seconds": used, "first": first,
            "median_step": {k: fair.med(v) for k, v in each.items() if v}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--train-seconds", type=float, default=60.0,
                   help="training time of each side in the loss race (default 60; 0: skip)")
    p.add_argument("--train-threads", type=int, default=2, help="threads in the loss race")
    p.add_argument("--allocator", default=fair.BEST_ALLOCATOR, choices=list(fair.ALLOCATORS))
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--no-default", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 thread, 1 round, no compile, no child, 3 s of training")
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--default-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.threads, args.rounds, args.train_threads = "1", 1, 1
        args.train_seconds = min(args.train_seconds, 3.0)
        args.no_compile = args.no_default = True
    threads = [int(t) for t in args.threads.split(",")]
    train_ids, val_ids, vocab, source = make_corpus()
    train = batches(train_ids, 2000, BATCH, seed=1)
    if args.default_child:
        print(json.dumps({str(t): step_race(t, args, train, vocab, True) for t in threads}))
        return
    fair.ensure_allocator(args.allocator)
    import torch  # noqa: F401

    fair.header("char-GPT training step, tessera vs PyTorch at its best", args.threads, [
        f"model: d={D}, {LAYERS} pre-LN blocks, {HEADS} heads x key_dim {KEY_DIM}, GELU MLP "
        f"{4 * D}, context {CONTEXT}, vocab {vocab}; batch {BATCH} ({BATCH * CONTEXT} tokens); "
        f"AdamW; text: {source}",
        f"step: medians of {args.rounds} interleaved rounds after 1 warm-up round",
        "PyTorch: hand-written blocks (fused qkv Linear, F.scaled_dot_product_attention "
        "is_causal), AdamW(fused=True); eager and torch.compile (inductor, default mode), the "
        "faster is the peer",
        "PyTorch default configuration: a child under stock glibc malloc, eager, AdamW(), "
        "interleaved with tessera there"])
    results = {str(t): step_race(t, args, train, vocab) for t in threads}
    default = {}
    if not args.no_default:
        default = fair.run_default_child(os.path.abspath(__file__),
                                         ["--threads", args.threads, "--rounds", str(args.rounds)])
    tokens = BATCH * CONTEXT
    print(f"\n{'thr':>3} {'tessera s':>10} {'eager s':>8} {'compiled s':>11} {'best':>9} "
          f"{'ratio':>6} {'target':>12} {'tessera tok/s':>14} {'PyTorch tok/s':>14} "
          f"{'default s':>10} {'vs default':>10}")
    summary = {}
    for t in threads:
        r = results[str(t)]
        x = fair.race(r, default.get(str(t)))
        tt, pe, pc, best, ratio = x["tessera"], x["eager"], x["compiled"], x["best"], x["ratio"]
        ds = f"{x['default']:.3f}" if x["default"] else "-"
        dr = f"{x['default_ratio']:.2f}" if x["default"] else "-"
        met = "met" if ratio <= 0.8 else "NOT met"
        print(f"{t:>3} {tt:>10.3f} {pe:>8.3f} {(f'{pc:.3f}' if pc else '-'):>11} "
              f"{x['best_name']:>9} {ratio:>6.2f} "
              f"{'<=0.8 ' + met:>12} {tokens / tt:>14.0f} {tokens / best:>14.0f} {ds:>10} {dr:>10}")
        print(f"    initial logits differ by {r['_check']['diff']:.1e}"
              + (f"; compiled step's first call {r['_check']['compile_s']:.1f} s"
                 if "compile_s" in r["_check"] else ""))
        summary[f"{t}t"] = {"tessera": tt, "eager": pe, "compiled": pc, "ratio": ratio,
                            "default": x["default"]}
    print(f"load average after the steps: {fair.load_average()}")
    race = None
    if args.train_seconds > 0:
        t2 = str(args.train_threads)
        use_c = t2 in results and "compiled" in results[t2] and \
            fair.med(results[t2]["compiled"]) < fair.med(results[t2]["eager"])
        val = batches(val_ids, 8, BATCH, seed=2)
        race = loss_race(args, train, val, vocab, use_c)
        print(f"\nvalidation loss after {args.train_seconds:.0f} s of training each "
              f"({args.train_threads} threads, PyTorch {'compiled' if use_c else 'eager'}, "
              f"same initial weights and batches, one step each in turn; {len(val) * BATCH} "
              f"held-out sequences of {CONTEXT}; uniform prediction: {np.log(vocab):.3f}):")
        for side in ("tessera", "PyTorch"):
            print(f"  {side:<8} {race['steps'][side]:>4} steps (the first uncounted) in "
                  f"{race['seconds'][side]:.1f} s: "
                  f"validation loss {race['start'][side]:.3f} -> {race['end'][side]:.3f} nats/char "
                  f"(median step {race['median_step'].get(side, float('nan')):.3f} s; first, "
                  f"uncounted, {race['first'][side]:.1f} s)")
        print(f"load average at end: {fair.load_average()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": fair.machine_line(), "allocator": args.allocator,
                       "date": time.strftime("%Y-%m-%d %H:%M"), "summary": summary,
                       "raw": results, "default_raw": default, "loss_race": race}, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
