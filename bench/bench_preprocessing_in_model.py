"""Preprocessing inside the model (issue 30): what compiling the numeric preprocessing
layers into the model's program costs or saves at predict time.

  lookup      IntegerLookup(vocabulary of 1000 ids) -> Embedding(1001, 8) -> Dense(16),
              16384 x 8 ids (10% out of the vocabulary): the lookup inside tessera's
              program, against the peer at its best outside it, NumPy's vectorized
              lookup (np.searchsorted on the sorted vocabulary) feeding the same model
              without the layer (and tessera's eager IntegerLookup, for reference).
  structured  keras-io's structured-data shape: Discretization(4 bins) ->
              CategoryEncoding(one_hot) and CategoryEncoding(multi_hot) of 8 codes,
              concatenated, Dense(32, relu), Dense(1, sigmoid); 16384 rows; tessera
              against Keras 3 on JAX (XLA), which runs the same layers inside its model,
              with the same weights.

Medians of interleaved rounds (fair.interleave), outputs checked equal first.

run: .venv/bin/python bench/bench_preprocessing_in_model.py [--rounds 7]
"""

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402

import fair  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import tessera  # noqa: E402
import tessera.nn as nn  # noqa: E402


def lookup_race(rounds):
    rng = np.random.default_rng(0)
    vocab = rng.choice(10 ** 6, 1000, replace=False)
    x = rng.choice(np.concatenate([vocab, rng.integers(0, 10 ** 6, 100)]), (16384, 8))
    x = x.astype("int64")
    look = nn.IntegerLookup(vocabulary=vocab)
    i = nn.Input((8,), dtype="int64")
    inside = nn.Model(i, nn.Dense(16)(nn.Embedding(1001, 8)(look(i))))
    j = nn.Input((8,), dtype="int64")
    outside = nn.Model(j, nn.Dense(16)(nn.Embedding(1001, 8)(j)))
    outside.set_weights(inside.get_weights())
    order = np.argsort(vocab)
    keys, values = vocab[order], order + 1

    def numpy_lookup(a):
        at = np.minimum(np.searchsorted(keys, a), len(keys) - 1)
        return np.where(keys[at] == a, values[at], 0)

    np.testing.assert_array_equal(numpy_lookup(x), look(x))
    np.testing.assert_allclose(inside.predict(x, batch_size=16384, verbose=0),
                               outside.predict(numpy_lookup(x), batch_size=16384, verbose=0),
                               rtol=1e-6)
    times = fair.interleave({
        "inside": lambda: inside.predict(x, batch_size=16384, verbose=0),
        "numpy": lambda: outside.predict(numpy_lookup(x), batch_size=16384, verbose=0),
        "eager": lambda: outside.predict(look(x), batch_size=16384, verbose=0),
    }, rounds)
    t, peer, eager = (fair.med(times[k]) for k in ("inside", "numpy", "eager"))
    print(f"lookup: inside the program {t * 1e3:.1f} ms {fair.spread(times['inside'])}; "
          f"NumPy lookup + model {peer * 1e3:.1f} ms; tessera's eager IntegerLookup + model "
          f"{eager * 1e3:.1f} ms; tessera/NumPy = {t / peer:.2f}")


def structured(lib):
    age = lib.Input((1,))
    codes = lib.Input((8,), dtype="int32")
    a = lib.layers.CategoryEncoding(4, "one_hot")(
        lib.layers.Discretization([30.0, 45.0, 60.0])(age))
    c = lib.layers.CategoryEncoding(20, "multi_hot")(codes)
    h = lib.layers.Dense(32, activation="relu")(lib.layers.Concatenate()([a, c]))
    return lib.Model([age, codes], lib.layers.Dense(1, activation="sigmoid")(h))


def structured_race(rounds):
    import keras

    rng = np.random.default_rng(1)
    data = [rng.uniform(18, 80, (16384, 1)).astype("float32"),
            rng.integers(0, 20, (16384, 8)).astype("int32")]
    k, t = structured(keras), structured(nn)
    t.set_weights(k.get_weights())
    np.testing.assert_allclose(t.predict(data, batch_size=16384, verbose=0),
                               k.predict(data, batch_size=16384, verbose=0), rtol=1e-5,
                               atol=1e-6)
    times = fair.interleave({
        "tessera": lambda: t.predict(data, batch_size=16384, verbose=0),
        "keras": lambda: k.predict(data, batch_size=16384, verbose=0),
    }, rounds)
    tt, kk = fair.med(times["tessera"]), fair.med(times["keras"])
    print(f"structured: tessera {tt * 1e3:.1f} ms {fair.spread(times['tessera'])}; "
          f"Keras-JAX {kk * 1e3:.1f} ms {fair.spread(times['keras'])}; "
          f"tessera/Keras-JAX = {tt / kk:.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    cores = os.cpu_count()
    tessera.set_num_threads(cores)
    fair.header("preprocessing layers inside the model: predict of 16384 rows", threads=cores,
                extra=["Keras 3 on JAX (XLA, its default threads) for the structured race"],
                allocator=False)
    lookup_race(args.rounds)
    structured_race(args.rounds)


if __name__ == "__main__":
    main()
