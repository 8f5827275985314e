"""Keras 3 on JAX in the fair race (issue 30, "Speed"): tessera.nn against Keras-JAX
(XLA) and PyTorch at its best, on three models written as Keras's examples write them:

  transformer  keras-io examples/nlp/text_classification_with_transformer.py
               (TokenAndPositionEmbedding + TransformerBlock, maxlen 200, vocab 20000,
               embed 32, 2 heads, ff 32), batch 32
  lstm         keras-io examples/nlp/bidirectional_lstm_imdb.py (Embedding(20000, 128),
               two Bidirectional(LSTM(64))), length 100, batch 32
  convnet      keras-io examples/vision/mnist_convnet.py (Conv2D 32, MaxPooling2D,
               Conv2D 64, MaxPooling2D, Flatten, Dropout 0.5, Dense 10 softmax), batch 128

The model code is one function per model, called once with `keras` and once with
`tessera.nn` (only the module differs); tessera gets Keras's initial weights
(`set_weights(get_weights())`) and PyTorch the same weights in its layouts. Each side
trains on the same batch with Adam(1e-3): tessera and Keras by `fit` on one batch
(Keras also by `train_on_batch`; the faster is its time), PyTorch by a hand-written step,
eager and torch.compile'd (the faster is the peer). The first step (compilation:
tessera's program, XLA's, inductor's) is timed separately; then medians of interleaved
rounds (fair.interleave); tessera's compile cache is off unless TESSERA_CACHE_DIR is set,
so that its first step compiles as XLA's does. All sides run on all cores of the machine: tessera and
PyTorch with set_num_threads(cores), XLA with its default (one thread per core).

run: .venv/bin/python bench/bench_keras_race.py [--models transformer,lstm,convnet]
         [--rounds 7] [--no-compile] [--allocator tcmalloc|...] [--quick]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
# tessera's first step cold: no compiled loops from an earlier run (JAX keeps no XLA cache
# across processes by default; inductor's on-disk cache stays on, as users have it).
# TESSERA_CACHE_DIR=... overrides it.
os.environ.setdefault("TESSERA_CACHE_DIR", "0")

import numpy as np  # noqa: E402

import fair  # noqa: E402

TARGET = 0.8  # issue 30: tessera's step <= 0.8x Keras-JAX's and PyTorch's best


# ---- the models, written as Keras's examples write them, for either module

def transformer(keras, layers, ops, maxlen=200, vocab_size=20000, embed_dim=32, num_heads=2,
                ff_dim=32):
    class TransformerBlock(layers.Layer):
        def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
            super().__init__()
            self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"),
                                         layers.Dense(embed_dim)])
            self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
            self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
            self.dropout1 = layers.Dropout(rate)
            self.dropout2 = layers.Dropout(rate)

        def call(self, inputs):
            attn_output = self.dropout1(self.att(inputs, inputs))
            out1 = self.layernorm1(inputs + attn_output)
            return self.layernorm2(out1 + self.dropout2(self.ffn(out1)))

    class TokenAndPositionEmbedding(layers.Layer):
        def __init__(self, maxlen, vocab_size, embed_dim):
            super().__init__()
            self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, x):
            positions = self.pos_emb(ops.arange(start=0, stop=ops.shape(x)[-1], step=1))
            return self.token_emb(x) + positions

    inputs = layers.Input(shape=(maxlen,))
    x = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)(inputs)
    x = TransformerBlock(embed_dim, num_heads, ff_dim)(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    x = layers.Dense(20, activation="relu")(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    return model


def lstm(keras, layers, ops, max_features=20000):
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(max_features, 128)(inputs)
    x = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(x)
    x = layers.Bidirectional(layers.LSTM(64))(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy")
    return model


def convnet(keras, layers, ops):
    model = keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(10, activation="softmax"),
    ])
    model.compile(loss="categorical_crossentropy", optimizer=keras.optimizers.Adam(1e-3))
    return model


def data(name, rng):
    if name == "transformer":
        return rng.integers(1, 20000, (32, 200)).astype("int32"), rng.integers(0, 2, 32), 32
    if name == "lstm":
        return rng.integers(1, 20000, (32, 100)).astype("int32"), \
            rng.integers(0, 2, (32, 1)).astype("float32"), 32
    x = rng.random((128, 28, 28, 1)).astype("float32")
    return x, np.eye(10, dtype="float32")[rng.integers(0, 10, 128)], 128


# ---- the same networks in PyTorch, given Keras's weights

def torch_transformer(torch, w):
    """w: Keras's get_weights() of `transformer` (token emb, pos emb, q k v kernels and
    biases, output kernel and bias, ffn, layer norms, the two dense layers)."""
    F = torch.nn.functional
    P = [torch.nn.Parameter(torch.from_numpy(np.ascontiguousarray(a))) for a in w]
    (tok, pos, qk, qb, kk, kb, vk, vb, ok, ob, f1k, f1b, f2k, f2b, g1, b1, g2, b2,
     d1k, d1b, d2k, d2b) = P

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.params = torch.nn.ParameterList(P)

        def forward(self, ids):
            n, t = ids.shape
            x = tok[ids] + pos[:t]
            q = torch.einsum("btd,dhk->bhtk", x, qk) + qb[None, :, None, :]
            k = torch.einsum("btd,dhk->bhtk", x, kk) + kb[None, :, None, :]
            v = torch.einsum("btd,dhk->bhtk", x, vk) + vb[None, :, None, :]
            a = F.scaled_dot_product_attention(q, k, v)  # Keras's MultiHeadAttention: dropout 0
            att = torch.einsum("bhtk,hkd->btd", a, ok) + ob
            att = F.dropout(att, 0.1, self.training)
            h1 = F.layer_norm(x + att, (x.shape[-1],), g1, b1, 1e-6)
            ff = F.relu(h1 @ f1k + f1b) @ f2k + f2b
            h2 = F.layer_norm(h1 + F.dropout(ff, 0.1, self.training), (x.shape[-1],), g2, b2, 1e-6)
            h = F.dropout(h2.mean(1), 0.1, self.training)
            h = F.dropout(F.relu(h @ d1k + d1b), 0.1, self.training)
            return h @ d2k + d2b  # logits; softmax is in the loss

    return Net(), lambda out, y: F.cross_entropy(out, y)


def torch_lstm(torch, w):
    """w: Keras's get_weights() of `lstm`: embedding, then per Bidirectional (forward,
    backward) kernel, recurrent kernel, bias; then the dense layer. Keras's gate order
    (i, f, c, o) is PyTorch's (i, f, g, o)."""
    emb = torch.nn.Embedding(20000, 128)
    l1 = torch.nn.LSTM(128, 64, batch_first=True, bidirectional=True)
    l2 = torch.nn.LSTM(128, 64, batch_first=True, bidirectional=True)
    dense = torch.nn.Linear(128, 1)
    with torch.no_grad():
        emb.weight.copy_(torch.from_numpy(w[0]))
        for layer, off in ((l1, 1), (l2, 7)):
            for sfx, i in (("", off), ("_reverse", off + 3)):
                getattr(layer, "weight_ih_l0" + sfx).copy_(torch.from_numpy(w[i].T.copy()))
                getattr(layer, "weight_hh_l0" + sfx).copy_(torch.from_numpy(w[i + 1].T.copy()))
                getattr(layer, "bias_ih_l0" + sfx).copy_(torch.from_numpy(w[i + 2]))
                getattr(layer, "bias_hh_l0" + sfx).zero_()
        dense.weight.copy_(torch.from_numpy(w[13].T.copy()))
        dense.bias.copy_(torch.from_numpy(w[14]))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.l1, self.l2, self.dense = emb, l1, l2, dense

        def forward(self, ids):
            h, _ = self.l1(self.emb(ids))
            _, (hn, _) = self.l2(h)
            return self.dense(torch.cat([hn[0], hn[1]], 1))  # logit

    return Net(), lambda out, y: torch.nn.functional.binary_cross_entropy_with_logits(out, y)


def torch_convnet(torch, w):
    """Keras's (kh, kw, in, out) kernels -> (out, in, kh, kw); the Dense kernel's
    rows follow Keras's (h, w, c) flatten order, PyTorch flattens (c, h, w)."""
    c1, c2 = torch.nn.Conv2d(1, 32, 3), torch.nn.Conv2d(32, 64, 3)
    d = torch.nn.Linear(1600, 10)
    with torch.no_grad():
        c1.weight.copy_(torch.from_numpy(w[0].transpose(3, 2, 0, 1).copy()))
        c1.bias.copy_(torch.from_numpy(w[1]))
        c2.weight.copy_(torch.from_numpy(w[2].transpose(3, 2, 0, 1).copy()))
        c2.bias.copy_(torch.from_numpy(w[3]))
        k = w[4].reshape(5, 5, 64, 10).transpose(2, 0, 1, 3).reshape(1600, 10)
        d.weight.copy_(torch.from_numpy(k.T.copy()))
        d.bias.copy_(torch.from_numpy(w[5]))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2, self.d = c1, c2, d

        def forward(self, x):  # (N, 1, 28, 28)
            h = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
            h = torch.nn.functional.max_pool2d(torch.relu(self.c2(h)), 2)
            h = torch.nn.functional.dropout(h.flatten(1), 0.5, self.training)
            return self.d(h)  # logits

    return Net(), lambda out, y: torch.nn.functional.cross_entropy(out, y.argmax(1))


MODELS = {"transformer": (transformer, torch_transformer),
          "lstm": (lstm, torch_lstm),
          "convnet": (convnet, torch_convnet)}


def race(name, args, threads):
    import keras
    import torch

    import tessera
    import tessera.nn as tnn

    build, torch_build = MODELS[name]
    keras.utils.set_random_seed(0)
    km = build(keras, keras.layers, keras.ops)
    tm = build(tnn, tnn.layers, tnn.ops)
    kw = km.get_weights()
    tshapes = [tuple(np.shape(a)) for a in tm.get_weights()]
    tw = kw  # the same order: a user layer's own weights, then its sublayers' as assigned
    if [a.shape for a in tw] != tshapes:
        sys.exit(f"{name}: Keras's and tessera's weights differ in order or shape:\n"
                 f"  keras   {[a.shape for a in kw]}\n  tessera {tshapes}")
    tm.set_weights(tw)
    x, y, batch = data(name, np.random.default_rng(0))
    net, loss_fn = torch_build(torch, [np.asarray(a, dtype=np.float32) for a in kw])
    xt = torch.from_numpy(x.transpose(0, 3, 1, 2).copy() if name == "convnet" else
                          x.astype("int64"))
    yt = torch.from_numpy(y.astype("float32") if name != "transformer" else y.astype("int64"))

    # the same function before any update: inference outputs of the three
    kp = np.asarray(km.predict(x, batch_size=batch, verbose=0))
    tp = np.asarray(tm.predict(x, batch_size=batch, verbose=0))
    net.eval()
    with torch.inference_mode():
        po = net(xt)
        pp = (torch.sigmoid(po) if name == "lstm" else torch.softmax(po, 1)).numpy()
    diffs = (float(np.abs(tp - kp).max()), float(np.abs(pp - kp).max()))
    net.train()

    def k_fit():
        km.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)

    def k_tob():
        km.train_on_batch(x, y)

    def t_fit():
        tm.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)

    opt = torch.optim.Adam(net.parameters(), 1e-3, fused=True)

    def p_step_with(model):
        def step():
            opt.zero_grad()
            loss_fn(model(xt), yt).backward()
            opt.step()
        return step

    first = {"tessera": fair.first_call(t_fit, "tessera's first step"),
             "keras fit": fair.first_call(k_fit, "Keras's first fit step"),
             "keras train_on_batch": fair.first_call(k_tob, "Keras's train_on_batch"),
             "torch eager": fair.first_call(p_step_with(net), "PyTorch's first eager step")}
    fns = {"tessera": t_fit, "keras_fit": k_fit, "keras_tob": k_tob, "eager": p_step_with(net)}
    if not args.no_compile:
        torch._dynamo.reset()
        cnet = fair.try_compile(torch, net, f"the {name} network")
        if cnet is not None:
            s = fair.first_call(p_step_with(cnet), "PyTorch's compiled step")
            if s is not None:
                fns["compiled"] = p_step_with(cnet)
                first["torch compiled"] = s
    times = fair.interleave(fns, args.rounds, warmup=1)
    return times, first, diffs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="transformer,lstm,convnet")
    p.add_argument("--rounds", type=int, default=7, help="timed interleaved rounds (default 7)")
    p.add_argument("--allocator", default=fair.BEST_ALLOCATOR, choices=list(fair.ALLOCATORS))
    p.add_argument("--no-compile", action="store_true", help="PyTorch eager only")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 round, no torch.compile")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.no_compile = 1, True
    names = args.models.split(",")
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model {n!r}: one of {', '.join(MODELS)}")
    fair.ensure_allocator(args.allocator)
    import jax
    import keras
    import torch

    import tessera

    threads = os.cpu_count()
    torch.set_num_threads(threads)
    tessera.set_num_threads(threads)
    fair.header("Keras 3 on JAX, tessera.nn, PyTorch at its best: training steps of Keras's "
                "examples", threads=threads, extra=[
                    f"Keras {keras.__version__}, JAX {jax.__version__} (XLA CPU, its default "
                    f"threads: one per core, {threads}); tessera {tessera.__version__}",
                    f"medians of {args.rounds} interleaved rounds after 1 warm-up round; each "
                    "side's first step (compilation) timed apart",
                    "Keras: the faster of fit(one batch) and train_on_batch; tessera: "
                    "fit(one batch); PyTorch: Adam(fused=True), eager and torch.compile, "
                    "the faster"])
    rows = []
    for name in names:
        times, first, diffs = race(name, args, threads)
        med = {k: fair.med(v) for k, v in times.items()}
        keras_best = min(med["keras_fit"], med["keras_tob"])
        torch_best = min(med["eager"], med.get("compiled", float("inf")))
        rows.append((name, med, keras_best, torch_best))
        print(f"\n{name}: first step (compile) s: "
              + ", ".join(f"{k} {v:.2f}" if v is not None else f"{k} failed"
                          for k, v in first.items())
              + f"; predictions before training differ from Keras's by "
                f"{diffs[0]:.1e} (tessera), {diffs[1]:.1e} (PyTorch)")
        print("  step medians s: " + ", ".join(f"{k} {v:.4f} ({fair.spread(times[k])})"
                                               for k, v in med.items()))
        sys.stdout.flush()
    print(f"\n{'model':<12} {'tessera s':>10} {'Keras-JAX s':>12} {'PyTorch s':>10} "
          f"{'t/Keras':>8} {'t/PyTorch':>10}  target <= {TARGET}")
    for name, med, kb, pb in rows:
        rk, rp = med["tessera"] / kb, med["tessera"] / pb
        ok = "met" if rk <= TARGET and rp <= TARGET else "NOT met"
        print(f"{name:<12} {med['tessera']:>10.4f} {kb:>12.4f} {pb:>10.4f} {rk:>8.2f} "
              f"{rp:>10.2f}  {ok}")
    print(f"load average at end: {fair.load_average()}")


if __name__ == "__main__":
    sys.exit(main())
