"""tessera.data.Dataset's tf.data transformations beyond the fixed plan:
per-sample map, filter, unbatch, padded_batch, range, zip, concatenate,
enumerate, cache (in memory and in files), as_numpy_iterator, cardinality;
each against the same pipeline written directly in NumPy, and fit on them."""

import json
import os

import numpy as np
import pytest

import tessera
from tessera import data, nn
from tessera.data import Dataset

RNG = np.random.default_rng(3)
X = RNG.normal(size=(23, 4)).astype(np.float32)
Y = RNG.integers(0, 3, size=23).astype(np.int64)


def _same(got, want):
    """Elements equal in structure, dtype and value."""
    got, want = list(got), list(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, tuple):
            assert isinstance(g, tuple) and len(g) == len(w)
            _same(g, w)
        elif isinstance(w, dict):
            assert sorted(g) == sorted(w)
            _same([g[k] for k in w], [w[k] for k in w])
        else:
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_array_equal(g, w)


def test_range_as_python_range():
    for args in [(7,), (2, 9), (10, 1, -3), (0,)]:
        ds = Dataset.range(*args)
        _same(ds.as_numpy_iterator(), [np.int64(i) for i in range(*args)])
        assert ds.cardinality() == len(range(*args))
    with pytest.raises(TypeError, match=r"\[Dataset.range\] takes 1 to 3 ints"):
        Dataset.range(1.5)
    with pytest.raises(ValueError, match=r"\[Dataset.range\] step must not be zero"):
        Dataset.range(0, 5, 0)


def test_per_sample_map_then_batch_as_numpy():
    def fn(x, y):
        return {"x": x * 2.0 + np.sum(x), "y": y + 1}

    ds = Dataset.from_tensor_slices((X, Y)).map(fn)
    assert ds.cardinality() == 23
    _same(ds, [fn(x, y) for x, y in zip(X, Y)])
    batched = ds.batch(5)
    want = [fn(X[i:i + 5], Y[i:i + 5]) for i in range(0, 23, 5)]
    want = [{"x": X[i:i + 5] * 2.0 + X[i:i + 5].sum(1, keepdims=True), "y": Y[i:i + 5] + 1}
            for i in range(0, 23, 5)]
    _same(batched, want)
    assert batched.num_batches() == 5 and len(batched) == 5
    assert [s.shape for s in batched.element_spec] == [(4,), ()]


def test_per_sample_map_shuffled_differs_by_epoch_and_matches_numpy():
    ds = Dataset.from_tensor_slices(X).shuffle(seed=4).map(lambda x: x[::-1])
    epochs = [np.stack(list(ds._elements(e))) for e in (0, 1)]
    plain = [np.stack(list(Dataset.from_tensor_slices(X).shuffle(seed=4)._elements(e)))
             for e in (0, 1)]
    for got, order in zip(epochs, plain):
        np.testing.assert_array_equal(got, order[:, ::-1])
    assert not np.array_equal(epochs[0], epochs[1])


def test_map_samples_of_different_shapes_cannot_be_batched():
    ds = Dataset.range(1, 5).map(lambda n: np.arange(n))
    with pytest.raises(ValueError, match=r"\[Dataset.batch\] the samples of batch 0 differ in "
                                         r"shape.*padded_batch"):
        list(ds.batch(2))


def test_filter_as_numpy():
    ds = Dataset.from_tensor_slices((X, Y)).filter(lambda x, y: y != 1)
    keep = Y != 1
    _same(ds, list(zip(X[keep], Y[keep])))
    assert ds.cardinality() == data.UNKNOWN_CARDINALITY
    _same(ds.batch(4), [(X[keep][i:i + 4], Y[keep][i:i + 4]) for i in range(0, keep.sum(), 4)])
    # on batches: whole batches kept or dropped
    b = Dataset.from_tensor_slices(X).batch(5).filter(lambda x: x[0, 0] > 0)
    _same(b, [X[i:i + 5] for i in range(0, 23, 5) if X[i, 0] > 0])
    with pytest.raises(TypeError, match=r"\[Dataset.filter\] .* must return one boolean"):
        list(Dataset.from_tensor_slices(X).filter(lambda x: x > 0))


def test_unbatch_as_numpy():
    ds = Dataset.from_tensor_slices((X, Y)).batch(6).map(lambda x, y: (x + 1, y)).unbatch()
    _same(ds, list(zip(X + 1, Y)))
    _same(ds.batch(10), [(X[i:i + 10] + 1, Y[i:i + 10]) for i in range(0, 23, 10)])


def _ragged():
    lengths = [3, 1, 4, 2, 5, 2, 1]
    seqs = [RNG.integers(1, 9, size=n).astype(np.int32) for n in lengths]
    return seqs, np.asarray(lengths, np.int64)


def _numpy_padded(seqs, size, value=0, width=None):
    out = []
    for i in range(0, len(seqs), size):
        group = seqs[i:i + size]
        w = width or max(len(s) for s in group)
        a = np.full((len(group), w), value, dtype=group[0].dtype)
        for r, s in enumerate(group):
            a[r, :len(s)] = s
        out.append(a)
    return out


def test_padded_batch_as_numpy():
    seqs, lengths = _ragged()
    ds = Dataset.range(len(seqs)).map(lambda i: (seqs[int(i)], lengths[i]))
    pb = ds.padded_batch(3)
    want = _numpy_padded(seqs, 3)
    _same(pb, [(w, lengths[i * 3:i * 3 + 3]) for i, w in enumerate(want)])
    assert pb.batch_size == 3 and pb.num_batches() == 3 and pb.cardinality() == 3
    assert pb.element_spec[0].shape == want[0].shape[1:]  # the first batch's
    fixed = ds.padded_batch(2, padded_shapes=((6,), ()), padding_values=(-1, 0),
                            drop_remainder=True)
    want = _numpy_padded(seqs[:6], 2, value=-1, width=6)
    _same(fixed, [(w, lengths[i * 2:i * 2 + 2]) for i, w in enumerate(want)])
    assert fixed.cardinality() == 3
    with pytest.raises(ValueError, match=r"longer than its padded shape \(4,\)"):
        list(ds.padded_batch(3, padded_shapes=((4,), ())))
    with pytest.raises(ValueError, match=r"padded_shapes of component 0 must be 1 ints"):
        ds.padded_batch(3, padded_shapes=((4, 4), ()))
    with pytest.raises(ValueError, match=r"already batched"):
        ds.batch(2).padded_batch(2)


def test_zip_concatenate_enumerate_as_numpy():
    a = Dataset.from_tensor_slices(X)
    b = Dataset.from_tensor_slices(Y).take(10)
    z = Dataset.zip(a, b)
    _same(z, list(zip(X[:10], Y[:10])))
    assert z.cardinality() == 10
    _same(Dataset.zip({"x": a, "y": b}), [{"x": x, "y": y} for x, y in zip(X[:10], Y[:10])])
    c = a.take(5).concatenate(a.skip(20) if hasattr(a, "skip") else
                              Dataset.from_tensor_slices(X[20:]))
    _same(c, list(X[:5]) + list(X[20:]))
    assert c.cardinality() == 8
    with pytest.raises(ValueError, match=r"\[Dataset.concatenate\] the datasets' elements"):
        a.concatenate(b)
    e = b.enumerate(start=3)
    _same(e, [(np.int64(3 + i), y) for i, y in enumerate(Y[:10])])
    zb = Dataset.zip(a.batch(6), Dataset.from_tensor_slices(Y).batch(6))
    assert zb.batch_size == 6 and zb.num_batches() == 4
    _same(zb, [(X[i:i + 6], Y[i:i + 6]) for i in range(0, 23, 6)])
    _same([b.arrays for b in zb.epoch_batches(0, num_shards=2, shard_index=1)],
          [(X[i + 3:i + 6], Y[i + 3:i + 6]) if i < 18 else (X[i + 2:i + 5], Y[i + 2:i + 5])
           for i in range(0, 23, 6)])
    with pytest.raises(TypeError, match=r"\[Dataset.zip\] takes Datasets"):
        Dataset.zip(a, X)


def test_cardinality():
    ds = Dataset.from_tensor_slices(X)
    assert ds.cardinality() == 23
    assert ds.batch(5).cardinality() == 5
    assert ds.batch(5, drop_remainder=True).repeat(3).cardinality() == 12
    assert ds.repeat().cardinality() == data.INFINITE_CARDINALITY == -1
    gen = Dataset.from_generator(lambda: iter(X))
    assert gen.cardinality() == data.UNKNOWN_CARDINALITY == -2


def test_cache_in_memory_replays_the_first_pass():
    calls = []

    def noisy(x):
        calls.append(1)
        return x + np.float32(RNG.normal())  # differs at every call

    ds = Dataset.from_tensor_slices(X).map(noisy).cache().batch(5)
    n = len(calls)  # (the element spec maps the first sample)
    first = list(ds)
    assert len(calls) == n + 23
    second = list(ds)
    assert len(calls) == n + 23  # not mapped again
    _same(second, first)
    # a pass left unfinished is not kept
    part = Dataset.from_tensor_slices(X).map(noisy).cache()
    n = len(calls)
    next(iter(part))
    list(part)
    list(part)
    assert len(calls) == n + 1 + 23


def test_cache_file_written_then_read(tmp_path):
    calls = []

    def fn(x, y):
        calls.append(1)
        return x * 3, y

    path = tmp_path / "cache"
    ds = Dataset.from_tensor_slices((X, Y)).batch(4).map(fn).cache(str(path))
    want = [(X[i:i + 4] * 3, Y[i:i + 4]) for i in range(0, 23, 4)]
    _same(ds, want)
    assert sorted(os.listdir(path))[0] == "manifest.json"
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]  # renamed into place
    n = len(calls)
    again = Dataset.from_tensor_slices((X, Y)).batch(4).map(fn).cache(str(path))
    _same(again, want)
    assert len(calls) == n + 1  # (the spec's first batch only): read from the files
    assert again.num_batches() == 6


def test_cache_file_refuses_what_it_did_not_write(tmp_path):
    path = tmp_path / "cache"
    ds = Dataset.from_tensor_slices((X, Y)).cache(str(path))
    list(ds)
    manifest = json.loads((path / "manifest.json").read_text())
    # a header claiming more than the file holds
    bad = tmp_path / "bad"
    os.mkdir(bad)
    (bad / "manifest.json").write_text(json.dumps(manifest))
    arr = np.load(path / "s0_c0.npy")
    np.save(bad / "s0_c0.npy", arr)
    np.save(bad / "s0_c1.npy", np.load(path / "s0_c1.npy"))
    raw = (bad / "s0_c0.npy").read_bytes()
    (bad / "s0_c0.npy").write_bytes(raw[:-8])
    with pytest.raises(ValueError, match=r"is not a cache tessera wrote: s0_c0.npy is"):
        list(Dataset.from_tensor_slices((X, Y)).cache(str(bad)))
    # a planted link
    os.remove(bad / "s0_c0.npy")
    os.symlink(path / "s0_c0.npy", bad / "s0_c0.npy")
    with pytest.raises(ValueError, match=r"s0_c0.npy cannot be opened"):
        list(Dataset.from_tensor_slices((X, Y)).cache(str(bad)))
    # an object array (a pickle) is refused
    os.remove(bad / "s0_c0.npy")
    np.save(bad / "s0_c0.npy", np.array([object()] * 23), allow_pickle=True)
    with pytest.raises(ValueError, match=r"is not a cache tessera wrote"):
        list(Dataset.from_tensor_slices((X, Y)).cache(str(bad)))
    # another dataset's cache
    with pytest.raises(ValueError, match=r"does not describe this dataset's elements"):
        list(Dataset.from_tensor_slices(X).cache(str(path)))


def test_fit_on_a_per_sample_pipeline_matches_fit_on_arrays():
    def build():
        m = nn.Sequential([nn.Input((4,)), nn.layers.Dense(3, activation="softmax")])
        m.compile(optimizer=nn.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
        m.set_weights([np.full((4, 3), 0.1, np.float32), np.zeros(3, np.float32)])
        return m

    ds = Dataset.from_tensor_slices((X, Y)).map(lambda x, y: (x * 2, y)).cache().batch(5)
    a, b = build(), build()
    ha = a.fit(ds, epochs=2, verbose=0, shuffle=False)
    hb = b.fit(X * 2, Y, batch_size=5, epochs=2, verbose=0, shuffle=False)
    np.testing.assert_allclose(ha.history["loss"], hb.history["loss"], rtol=1e-5)


def test_fit_on_padded_batches_of_sequences():
    seqs = [RNG.integers(1, 9, size=n).astype(np.int32) for n in [3, 1, 4, 2, 5, 2, 6, 3]]
    labels = np.asarray([s[0] % 2 for s in seqs], np.float32)
    ds = Dataset.range(len(seqs)).map(lambda i: (seqs[int(i)], labels[i])).padded_batch(4)

    def build():
        inp = nn.Input((None,), dtype="int32")
        h = nn.layers.Embedding(9, 4, mask_zero=True)(inp)
        h = nn.layers.GRU(3)(h)
        m = nn.Model(inp, nn.layers.Dense(1, activation="sigmoid")(h))
        m.compile(optimizer=nn.optimizers.SGD(0.2), loss="binary_crossentropy")
        return m

    t = build()
    w = [RNG.normal(size=v.shape).astype(np.float32) * 0.3 for v in t.get_weights()]
    t.set_weights(w)
    h = t.fit(ds, epochs=2, verbose=0)
    # the same steps on the same padded arrays given batch by batch
    u = build()
    u.set_weights(w)
    losses = []
    for _ in range(2):
        losses.append(np.mean([u.train_on_batch(x, y) for x, y in ds]))
    np.testing.assert_allclose(h.history["loss"], losses, rtol=1e-4)
