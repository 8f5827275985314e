"""A GPT that does not fit in one locality's memory limit without the mesh (docs/parallelism.md,
"A worked example").

A character-level GPT of 99,426,879 parameters (d_model 768, 14 pre-LayerNorm blocks of 12-head
causal attention and a GELU MLP of 3072, context 128, the 63 characters of the King James Bible)
trained for a few steps under a per-locality memory limit (default 2 GiB). Data parallelism keeps
16 bytes per parameter on every locality (4 the weight, 4 its gradient, 8 Adam's two moments):
1.48 GiB of model state before a single activation, and the step needs more than the limit. ZeRO-3
keeps a quarter of that state on each of 4 localities; tensor x pipeline parallelism (and the 3-D
mesh) gives each locality a quarter of the parameters. The mode comes from the launcher:

    tessera run -n 4 --mesh data=4 examples/gpt_mesh.py                # out of memory
    tessera run -n 4 --mesh data=4 --zero 3 examples/gpt_mesh.py
    tessera run -n 4 --mesh tensor=2,pipeline=2 examples/gpt_mesh.py
    tessera run -n 8 --mesh data=2,tensor=2,pipeline=2 examples/gpt_mesh.py
    tessera run -n 4 --mesh data=4 examples/gpt_mesh.py --small        # ~1 M parameters, for CI

With a tensor axis the attention is split by heads, the MLP by columns then rows, the embedding
and the logits by vocabulary (with the vocabulary-parallel cross-entropy); with a pipeline axis the
stages start at blocks (layer 'ln1_i'). A mesh that this tessera's fit refuses as "not supported
yet" is reported so on every locality (exit status 2).

The limit is `resource.setrlimit(RLIMIT_DATA)`: the size of the process's private writable memory
(the heap and anonymous private mappings, where numpy's arrays and tessera's C++ buffers live).
RLIMIT_AS would also count every shared library, the shared-memory segments of MPI and the address
space malloc reserves for its thread arenas without using it (one process here, after importing
tessera: 375 MiB of address space for 169 MiB of data), so it would limit something other than
the memory a model takes; RLIMIT_RSS is not enforced by Linux. RLIMIT_DATA counts what is
allocated, touched or not, so an allocation over the limit fails at once (numpy: MemoryError;
tessera: MemoryError from its std::bad_alloc) instead of the kernel's OOM killer ending the
process later. The limit covers the model and its training: it is set to the process's data size
once tessera is imported, its worker threads started and the text read (the same in every mode)
plus --memory-limit.

Every locality prints its model-state bytes (model.model_state_bytes(), during the first step),
its peak RSS (VmHWM: in the steps, and over fit, whose end gathers the whole model state back
under ZeRO) and the tokens per second of the job (steps after the first, which compiles).
When a locality runs out of memory it says so, with what the mode needs, and exits with status 3;
the launcher then ends the others.

Data: Debian's bible-kjv package (scripts/install-deps installs it), read as examples/char_gpt.py
reads it.
"""

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

import tessera
import tessera.distributed as dist
from tessera import nn, optim

GiB = 2**30
MiB = 2**20
BIBLE_RANGE = "Genesis 1:1-Revelation 22:21"
_REFERENCE = re.compile(r"^\S+?\d+:\d+ ")  # "Ge1:1 ", "1Sa3:10 ", "Rev22:21 "
OUT_OF_MEMORY = 3
NOT_SUPPORTED = 2


def size(n: float) -> str:
    """n bytes in GiB, or in MiB below 1 GiB."""
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.1f} MiB"


def status_bytes(field: str) -> int:
    """A field of /proc/self/status (VmData, VmRSS, VmHWM) in bytes."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"[gpt_mesh] {field} is not in /proc/self/status")


def reset_peak_rss():
    """Starts VmHWM (the peak RSS) again from the current RSS (Linux >= 4.0);
    a kernel without it keeps the peak since the start."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _no_thread(error: RuntimeError) -> bool:
    """Whether `error` is a thread that could not be started: under
    RLIMIT_DATA, no memory for its stack."""
    return "pthread_create" in str(error) or "Resource temporarily unavailable" in str(error)


def _warm_up(a):
    # independent products, run side by side on the worker threads and the caller
    return (np.tanh(a @ a) + np.tanh(a.T @ a) + np.tanh(a @ a.T) + np.tanh(a.T @ a.T)).sum()


def start_runtime():
    """Runs parallel products, so that tessera's worker threads (and their
    stacks and malloc arenas, part of RLIMIT_DATA) exist before the limit is
    set: a thread that cannot be started under the limit fails as a
    RuntimeError of the thread library, not as a MemoryError. The products
    also make the BLAS library's packing buffers (one set per product running
    at once, about 18 MiB each) before the limit, so that they are not taken
    from the model's budget (a product that cannot get them raises
    MemoryError)."""
    warm = tessera.jit(_warm_up)
    for dtype in (np.float32, np.float64):
        for _ in range(3):
            warm(np.ones((512, 512), dtype=dtype))


def set_memory_limit(budget: int) -> int:
    """Limits this process's private writable memory (RLIMIT_DATA) to what it
    holds now plus `budget` bytes; returns the limit."""
    limit = status_bytes("VmData") + budget
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY and limit > hard:
        raise SystemExit(f"[gpt_mesh] the memory limit {limit / GiB:.2f} GiB is above the hard "
                         f"RLIMIT_DATA of this process, {hard / GiB:.2f} GiB (--memory-limit)")
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    return limit


def load_kjv() -> str:
    """The King James Bible from Debian's bible-kjv: one verse per line,
    verse references stripped (as examples/char_gpt.py)."""
    if shutil.which("bible") is None:
        raise SystemExit("[gpt_mesh] the 'bible' program was not found: install Debian's "
                         "bible-kjv package (apt-get install bible-kjv; scripts/install-deps "
                         "does)")
    out = subprocess.run(["bible", "-f", BIBLE_RANGE], capture_output=True, text=True,
                         check=True).stdout
    lines = [_REFERENCE.sub("", line, count=1) for line in out.splitlines()]
    return "\n".join(lines) + "\n"


def build_model(vocab, context, d_model, layers, heads, group):
    """Token and position embeddings, `layers` pre-LayerNorm blocks, a final
    LayerNorm and the logits; split over the tensor group `group` when it is
    not None (attention by heads, the MLP by columns then rows, the embedding
    and the logits by vocabulary). Block i starts at the layer 'ln1_i', where
    a pipeline cuts."""
    split = group is not None

    class PositionEmbedding(nn.Layer):
        def build(self, input_shape):
            self.table = self.add_weight(shape=tuple(input_shape[-2:]), name="positions",
                                         initializer=nn.initializers.RandomNormal(stddev=0.02))

        def call(self, x):
            return x + self.table

    init = nn.initializers.RandomNormal(stddev=0.02)
    ids = nn.Input(shape=(context,), dtype="int32", name="ids")
    if split:
        h = nn.VocabParallelEmbedding(vocab, d_model, group=group, name="tokens",
                                      embeddings_initializer=init)(ids)
    else:
        h = nn.Embedding(vocab, d_model, name="tokens", embeddings_initializer=init)(ids)
    h = PositionEmbedding(name="positions")(h)
    for i in range(layers):
        a = nn.LayerNormalization(epsilon=1e-5, name=f"ln1_{i}")(h)
        if split:
            attention = nn.ParallelMultiHeadAttention(heads, d_model // heads, group=group,
                                                      name=f"attention_{i}")
        else:
            attention = nn.MultiHeadAttention(heads, d_model // heads, name=f"attention_{i}")
        h = nn.Add()([h, attention(a, a, use_causal_mask=True)])
        m = nn.LayerNormalization(epsilon=1e-5, name=f"ln2_{i}")(h)
        if split:
            m = nn.ColumnParallelDense(4 * d_model, activation="gelu", group=group,
                                       name=f"fc1_{i}")(m)
            m = nn.RowParallelDense(d_model, group=group, name=f"fc2_{i}")(m)
        else:
            m = nn.Dense(4 * d_model, activation="gelu", name=f"fc1_{i}")(m)
            m = nn.Dense(d_model, name=f"fc2_{i}")(m)
        h = nn.Add()([h, m])
    h = nn.LayerNormalization(epsilon=1e-5, name="ln_f")(h)
    if split:
        logits = nn.ColumnParallelDense(vocab, group=group, name="logits")(h)
    else:
        logits = nn.Dense(vocab, name="logits")(h)
    return nn.Model(ids, logits, name="gpt_mesh", seed=0)


def count_params(vocab, context, d, layers):
    """The parameters of build_model's model, by formula (the model is never
    built whole under tensor parallelism)."""
    block = 2 * 2 * d + 4 * (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    return vocab * d + context * d + layers * block + 2 * d + d * vocab + vocab


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memory-limit", type=float, default=None,
                   help="GiB of private writable memory each locality may take for the model "
                        "and its training (RLIMIT_DATA; 2, --small: 2 scaled by the parameters, "
                        "0.0204)")
    p.add_argument("--steps", type=int, default=3, help="training steps (3)")
    p.add_argument("--batch-size", type=int, default=8, help="global batch (8)")
    p.add_argument("--small", action="store_true",
                   help="a ~1 M-parameter model (d_model 128, 5 blocks, context 64) and a "
                        "proportionally small limit, for CI")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        p.error(f"--steps and --batch-size must be positive, got {args.steps} and "
                f"{args.batch_size}")
    if args.small:
        d_model, layers, heads, context = 128, 5, 4, 64
    else:
        d_model, layers, heads, context = 768, 14, 12, 128
    budget_gib = args.memory_limit if args.memory_limit is not None else (
        2.0 * count_params(63, 64, 128, 5) / count_params(63, 128, 768, 14) if args.small
        else 2.0)
    if not budget_gib > 0:
        p.error(f"--memory-limit must be a positive number of GiB, got {budget_gib}")

    rank = dist.rank()
    mesh = dist.mesh()
    d, t, pp = mesh.size("data"), mesh.size("tensor"), mesh.size("pipeline")
    # the ZeRO stage fit reads (tessera run --zero); fit itself refuses a bad one
    zero = os.environ.get("TESSERA_ZERO", "0").strip()
    zero = int(zero) if zero in ("0", "1", "2", "3") else 0

    def report(*a):
        if rank == 0:
            print(*a, flush=True)

    text = load_kjv()
    chars = sorted(set(text))
    vocab = len(chars)
    table = np.zeros(256, dtype=np.int32)
    table[[ord(c) for c in chars]] = np.arange(vocab, dtype=np.int32)
    ids = table[np.frombuffer(text.encode("latin-1"), dtype=np.uint8)]
    del text
    rng = np.random.default_rng(args.seed)
    starts = rng.integers(0, len(ids) - context - 1, size=args.steps * args.batch_size)
    window = starts[:, None] + np.arange(context)
    x, y = ids[window], ids[window + 1].astype(np.int64)
    del ids, window

    P = count_params(vocab, context, d_model, layers)
    mode = (f"mesh data={d},tensor={t},pipeline={pp}, ZeRO stage {zero}, "
            f"{dist.size()} localities")
    if t * pp == 1:
        kind = "data parallelism" + (f" with ZeRO-{zero}" if zero else "")
    else:
        kind = f"the mesh data={d},tensor={t},pipeline={pp}" + (f" with ZeRO-{zero}" if zero
                                                              else "")
    # the model state per locality, docs/parallelism.md "Memory formulas"
    share = P / (t * pp)
    state = {0: 16 * share, 1: (8 + 8 / d) * share, 2: (4 + 12 / d) * share,
             3: 16 * share / d}.get(zero, 16 * share)
    start_runtime()
    limit = set_memory_limit(int(budget_gib * GiB))
    report(f"GPT: {P:,} parameters (d_model {d_model}, {layers} blocks, {heads} heads, context "
           f"{context}, vocabulary {vocab}); Adam; global batch {args.batch_size}, "
           f"{args.steps} steps")
    report(f"{mode}: model state {size(state)} per locality by the formulas")
    report(f"memory limit per locality: RLIMIT_DATA = {size(budget_gib * GiB)} for the model and "
           f"its training + {size(limit - budget_gib * GiB)} the runtime and the text took = "
           f"{size(limit)}")

    def out_of_memory(where):
        if zero == 3 or t * pp > 1:
            advice = "a smaller model or batch, a larger --memory-limit, or more localities"
        else:
            advice = "use a tensor/pipeline mesh (e.g. --mesh tensor=2,pipeline=2)"
        print(f"[gpt_mesh] out of memory {where} on locality {rank}: {kind} on {dist.size()} "
              f"localities needs ~{size(state)} per locality for weights, gradients and Adam "
              f"state ({state / P:.3g} B/param x {P / 1e6:.1f} M) + activations; the limit is "
              f"{size(budget_gib * GiB)} (--memory-limit, RLIMIT_DATA): {advice}", flush=True)
        os._exit(OUT_OF_MEMORY)

    group = mesh.group("tensor") if t > 1 else None
    try:
        model = build_model(vocab, context, d_model, layers, heads, group)
        loss = (nn.VocabParallelSparseCategoricalCrossentropy(vocab, group=group) if group
                else nn.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.compile(optim.Adam(3e-4), loss)
    except MemoryError:
        out_of_memory("building the model")
    except RuntimeError as error:
        if not _no_thread(error):
            raise
        out_of_memory("building the model (no memory for a thread's stack)")
    built_peak = status_bytes("VmHWM")
    reset_peak_rss()
    tessera.reset_peak_memory()

    ends, held = [], {}

    class Probe(nn.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ends.append(time.perf_counter())
            # the steps' peak, before fit's end gathers the whole state back (ZeRO)
            held["steps_peak"] = status_bytes("VmHWM")
            if batch == 0:
                held.update(self.model.model_state_bytes())

    split = [f"ln1_{layers * s // pp}" for s in range(1, pp)] if pp > 1 else None
    start = time.perf_counter()
    try:
        history = model.fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=False,
                            verbose=0, callbacks=[Probe()], pipeline_split=split)
    except MemoryError:
        out_of_memory("training")
    except RuntimeError as error:
        if not _no_thread(error):
            raise
        out_of_memory("training (no memory for a thread's stack)")
    except ValueError as error:
        if "not supported yet" not in str(error):
            raise
        print(f"[gpt_mesh] {mode}: not supported yet (locality {rank}): {error}", flush=True)
        return NOT_SUPPORTED
    # tokens/s of the job: the steps after the first (which compiles the programs)
    timed = ends[-1] - (ends[0] if len(ends) > 1 else start)
    tokens = (len(ends) - 1 if len(ends) > 1 else len(ends)) * args.batch_size * context
    print(f"locality {rank}: model state {held['total'] / MiB:.1f} MiB (parameters "
          f"{held['parameters'] / MiB:.1f}, gradients {held['gradients'] / MiB:.1f}, "
          f"optimizer {held['optimizer'] / MiB:.1f}); peak RSS {built_peak / MiB:,.0f} MiB "
          f"building, {held['steps_peak'] / MiB:,.0f} MiB in the steps, "
          f"{status_bytes('VmHWM') / MiB:,.0f} MiB training (tessera's arrays at most "
          f"{tessera.memory_stats()['peak_live_bytes'] / MiB:,.0f} MiB); "
          f"{tokens / timed:,.0f} tokens/s; loss {history.history['loss'][-1]:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
