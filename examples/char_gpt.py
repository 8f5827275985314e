"""A GPT-style character language model on the King James Bible, trained with tessera.nn.

Token embedding + learned position embedding, `--layers` pre-LayerNorm blocks
(causal MultiHeadAttention, then a GELU MLP of 4 * d_model, each added back to
the residual stream), a final LayerNormalization and a Dense to the vocabulary
(logits, one prediction per position: the model maps (batch, context) ids to
(batch, context, vocab) logits). AdamW with a linear warmup and cosine decay.

Data: Debian's bible-kjv package (scripts/install-deps installs it);
`bible -f "Genesis 1:1-Revelation 22:21"` prints one verse per line, each
starting with its reference ("Ge1:1 In the beginning ..."). The references are
stripped, so the text is the verses separated by newlines (4,137,850
characters, 63 distinct). The last 5% (from Colossians 1:11 on) is held out
for validation. A training sample is a window of `context` characters starting
at any position of the training text, its labels the same window moved on by
one character; each epoch draws a new permutation of the start positions.

It prints the validation loss and perplexity (per character), then a sample
generated from a prompt (temperature sampling; --temperature 0 is greedy).
Under `tessera run -n N` the training is data parallel (fit shares every batch
among the localities); only locality 0 prints and samples.

run: .venv/bin/python examples/char_gpt.py [--steps 2000] [--batch-size 32]
     .venv/bin/python examples/char_gpt.py --quick          # a CI-sized run, < 1 minute
     build/tessera run -n 2 examples/char_gpt.py --quick
"""

import argparse
import math
import re
import shutil
import subprocess
import time

import numpy as np

import tessera
from tessera import data, nn, optim

BIBLE_RANGE = "Genesis 1:1-Revelation 22:21"
_REFERENCE = re.compile(r"^\S+?\d+:\d+ ")  # "Ge1:1 ", "1Sa3:10 ", "Rev22:21 "


def load_kjv() -> str:
    """The King James Bible from Debian's bible-kjv: one verse per line,
    verse references stripped."""
    if shutil.which("bible") is None:
        raise FileNotFoundError("the 'bible' program was not found: install Debian's bible-kjv "
                                "package (scripts/install-deps does)")
    out = subprocess.run(["bible", "-f", BIBLE_RANGE], capture_output=True, text=True,
                         check=True).stdout
    lines = [_REFERENCE.sub("", line, count=1) for line in out.splitlines()]
    return "\n".join(lines) + "\n"


class PositionEmbedding(nn.Layer):
    """Adds a learned (length, dim) table to (batch, length, dim) inputs."""

    def __init__(self, length, dim, **kwargs):
        super().__init__(**kwargs)
        self.length, self.dim = length, dim

    def build(self, input_shape):
        self.positions = self.add_weight(shape=(self.length, self.dim), name="positions",
                                         initializer=nn.initializers.RandomNormal(stddev=0.02))

    def call(self, x):
        return x + self.positions


def build_model(vocab, context=128, d_model=256, layers=4, heads=4, dropout=0.0):
    ids = nn.Input(shape=(context,), dtype="int32", name="ids")
    x = nn.Embedding(vocab, d_model,
                     embeddings_initializer=nn.initializers.RandomNormal(stddev=0.02))(ids)
    x = PositionEmbedding(context, d_model)(x)
    for _ in range(layers):
        h = nn.LayerNormalization(epsilon=1e-5)(x)
        h = nn.MultiHeadAttention(heads, d_model // heads, dropout=dropout)(
            h, h, use_causal_mask=True)
        x = nn.Add()([x, h])
        h = nn.LayerNormalization(epsilon=1e-5)(x)
        h = nn.Dense(4 * d_model, activation="gelu")(h)
        h = nn.Dense(d_model)(h)
        if dropout:
            h = nn.Dropout(dropout)(h)
        x = nn.Add()([x, h])
    x = nn.LayerNormalization(epsilon=1e-5)(x)
    logits = nn.Dense(vocab, name="logits")(x)
    return nn.Model(ids, logits, name="char_gpt")


def windows(ids: np.ndarray, starts: np.ndarray, context: int):
    """(inputs, labels): the windows of `context` ids at `starts`, and the
    same windows one id later."""
    idx = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(context)
    return ids[idx], ids[idx + 1].astype(np.int64)


def generate(model, prompt_ids, n, context, temperature, rng):
    """Extends prompt_ids by n ids, one model.predict per id on the last
    `context` ids. A shorter context is padded on the right: the attention is
    causal, so the padding does not change the logits at the last real id."""
    out = list(prompt_ids)
    for _ in range(n):
        window = out[-context:]
        x = np.zeros((1, context), dtype=np.int32)
        x[0, :len(window)] = window
        logits = model.predict(x, verbose=0)[0, len(window) - 1].astype(np.float64)
        if temperature <= 0:
            nxt = int(np.argmax(logits))
        else:
            z = logits / temperature
            p = np.exp(z - z.max())
            nxt = int(rng.choice(len(p), p=p / p.sum()))
        out.append(nxt)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=None, help="training steps (2000; quick: 250)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--d-model", type=int, default=None, help="width (256; quick: 64)")
    p.add_argument("--layers", type=int, default=None, help="blocks (4; quick: 2)")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--context", type=int, default=None, help="window (128; quick: 64)")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--learning-rate", type=float, default=None, help="peak (1e-3; quick 3e-3)")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=None, help="warmup steps (5%% of --steps)")
    p.add_argument("--epochs", type=int, default=None,
                   help="validation points: the steps are split into this many epochs (10; "
                        "quick: 2)")
    p.add_argument("--val-windows", type=int, default=None,
                   help="validation windows (all non-overlapping ones; quick: 128)")
    p.add_argument("--sample", type=int, default=None, help="characters to generate (400)")
    p.add_argument("--prompt", default="In the beginning ")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--quick", action="store_true",
                   help="a CI-sized run: d_model 64, 2 layers, context 64, 250 steps")
    p.add_argument("--max-loss-ratio", type=float, default=None,
                   help="exit with status 1 unless the final validation loss is below this "
                        "fraction of the uniform prediction's loss log(vocab) (the CI test: "
                        "0.65)")
    p.add_argument("--save", default=None, help="save the trained model to this .tsm file")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    quick = args.quick
    steps = args.steps or (250 if quick else 2000)
    d_model = args.d_model or (64 if quick else 256)
    n_layers = args.layers or (2 if quick else 4)
    context = args.context or (64 if quick else 128)
    lr = args.learning_rate or (3e-3 if quick else 1e-3)
    epochs = min(args.epochs or (2 if quick else 10), steps)
    warmup = args.warmup if args.warmup is not None else max(1, steps // 20)
    n_sample = args.sample if args.sample is not None else (200 if quick else 400)

    rank, size = tessera.distributed.rank(), tessera.distributed.size()

    def report(*a):
        if rank == 0:
            print(*a, flush=True)

    text = load_kjv()
    chars = sorted(set(text))
    vocab = len(chars)
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in text], dtype=np.int32)
    cut = int(len(ids) * 0.95)
    train_ids, val_ids = ids[:cut], ids[cut:]

    # Training: every start position of the training text, reshuffled each
    # epoch; a batch of starts becomes its windows in the dataset's map (on
    # each locality, for its own rows only).
    starts = np.arange(len(train_ids) - context, dtype=np.int64)
    train = (data.Dataset.from_tensor_slices(starts).shuffle(seed=args.seed)
             .batch(args.batch_size, drop_remainder=True)
             .map(lambda s: windows(train_ids, s, context)))
    val_starts = np.arange(0, len(val_ids) - context, context)
    if args.val_windows or quick:
        val_starts = val_starts[:args.val_windows or 128]
    xv, yv = windows(val_ids, val_starts, context)

    report(f"text: {len(text):,} characters of the King James Bible, vocabulary {vocab}; "
           f"train {len(train_ids):,}, validation {len(val_ids):,} ({len(xv)} windows of "
           f"{context}); {size} localit{'y' if size == 1 else 'ies'} x "
           f"{tessera.num_threads()} threads")

    model = build_model(vocab, context, d_model, n_layers, args.heads, args.dropout)
    schedule = optim.CosineDecay(0.0, decay_steps=steps - warmup, alpha=0.1,
                                 warmup_target=lr, warmup_steps=warmup)
    model.compile(optim.AdamW(schedule, weight_decay=args.weight_decay, clipnorm=1.0),
                  nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.summary(print_fn=report)
    report(f"uniform prediction: loss {math.log(vocab):.3f} (perplexity {vocab})")

    per_epoch = steps // epochs
    start = time.perf_counter()
    history = model.fit(train, epochs=epochs, steps_per_epoch=per_epoch,
                        validation_data=(xv, yv), validation_batch_size=args.batch_size,
                        check_inputs=False, verbose=1 if rank == 0 else 0)
    train_time = time.perf_counter() - start
    val_loss = model.evaluate(xv, yv, batch_size=args.batch_size, verbose=0)
    tokens = per_epoch * epochs * args.batch_size * context
    report(f"validation loss {val_loss:.4f} nats/char, perplexity {math.exp(val_loss):.3f}, "
           f"{val_loss / math.log(2):.3f} bits/char  (uniform: {math.log(vocab):.3f})")
    report(f"training: {per_epoch * epochs} steps of {args.batch_size} x {context} characters "
           f"in {train_time:.1f} s ({tokens / train_time:,.0f} characters/s)")
    if args.save and rank == 0:
        model.save(args.save)
    if rank == 0 and n_sample > 0:
        prompt = [index[c] for c in args.prompt if c in index]
        rng = np.random.default_rng(args.seed)
        t = time.perf_counter()
        out = generate(model, prompt, n_sample, context, args.temperature, rng)
        sample = "".join(chars[i] for i in out)
        print(f"sample (temperature {args.temperature}, {n_sample} characters in "
              f"{time.perf_counter() - t:.1f} s):\n{sample}", flush=True)
    bound = None if args.max_loss_ratio is None else args.max_loss_ratio * math.log(vocab)
    ok = bound is None or val_loss < bound
    if bound is not None:
        report(f"{'ok' if ok else 'FAILED'}: validation loss {val_loss:.4f} "
               f"{'<' if ok else '>='} {args.max_loss_ratio} * log({vocab}) = {bound:.4f}")
    return {"val_loss": val_loss, "vocab": vocab, "history": history.history, "ok": ok}


if __name__ == "__main__":
    raise SystemExit(0 if main()["ok"] else 1)
