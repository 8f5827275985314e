"""tessera.data.Dataset: every source and transformation against plain NumPy
slicing, shuffling equal to data.batches, the shard split of each global batch,
resuming at a batch, memory-mapped .npy files read row by row, prefetching in a
thread (and its errors), maps (jit and Python), generator sources with a seeded
shuffle buffer, validate's chunks, and every error branch."""

import threading

import numpy as np
import pytest

import tessera
from tessera import data
from tessera.data import Batch, Dataset, Spec


@tessera.jit
def jit_scale(x, y):
    return x * 2.0, y + 1


def py_scale(x, y):
    return x * 2.0, y + 1


@tessera.jit
def jit_step(x):
    return np.sum(x * x)


def make_xyw(n=23, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3, 2)).astype(np.float32)
    y = np.arange(n, dtype=np.int64)
    w = rng.uniform(size=n)
    return x, y, w


def expected_batches(n, batch_size, shuffle=False, seed=0, epoch=0, drop=False):
    """The row indices of each global batch, from data.batches itself."""
    rows = np.arange(n)
    return [list(b) for b in data.batches(rows, None, batch_size, shuffle=shuffle, seed=seed,
                                          epoch=epoch, drop_last=drop)]


def run_with_timeout(fn, seconds=60):
    """Runs fn in a thread; fails (instead of hanging) if it does not finish."""
    result = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            result["error"] = e

    t = threading.Thread(target=target)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the dataset hung"
    if "error" in result:
        raise result["error"]
    return result["value"]


def prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "tessera-prefetch"]


# --------------------------------------------------------------------------- from_tensor_slices


def test_single_array_batches_and_samples():
    x, _, _ = make_xyw()
    ds = Dataset.from_tensor_slices(x)
    assert len(ds) == 23 and ds.batch_size is None
    samples = list(ds)
    assert len(samples) == 23
    np.testing.assert_array_equal(np.stack(samples), x)
    batched = ds.batch(5)
    assert len(batched) == 5 and batched.num_batches() == 5 and batched.batch_size == 5
    got = list(batched)
    assert [len(b) for b in got] == [5, 5, 5, 5, 3]
    for k, b in enumerate(got):
        np.testing.assert_array_equal(b, x[5 * k:5 * k + 5])
    assert ds.element_spec == (Spec((3, 2), np.dtype(np.float32)),)


def test_tuple_and_weights():
    x, y, w = make_xyw()
    for elements in ((x, y), (x, y, w)):
        ds = Dataset.from_tensor_slices(elements).batch(4, drop_remainder=True)
        assert len(ds) == 5
        got = list(ds)
        assert len(got) == 5
        for k, b in enumerate(got):
            assert isinstance(b, tuple) and len(b) == len(elements)
            for a, full in zip(b, elements):
                np.testing.assert_array_equal(a, full[4 * k:4 * k + 4])
        batches = list(ds.epoch_batches(0))
        assert [b.index for b in batches] == list(range(5))
        assert all(b.global_size == 4 and len(b.arrays) == len(elements) for b in batches)
    spec = Dataset.from_tensor_slices((x, y, w)).element_spec
    assert spec == (Spec((3, 2), np.dtype(np.float32)), Spec((), np.dtype(np.int64)),
                    Spec((), np.dtype(np.float64)))


def test_nested_dict_and_list_structures():
    x, y, w = make_xyw(10)
    ds = Dataset.from_tensor_slices({"features": (x, w), "label": y}).batch(4)
    first = next(iter(ds))
    assert set(first) == {"features", "label"}
    np.testing.assert_array_equal(first["features"][0], x[:4])
    np.testing.assert_array_equal(first["features"][1], w[:4])
    np.testing.assert_array_equal(first["label"], y[:4])
    # Batch.arrays is flat, in the order the structure lists them.
    b = next(ds.epoch_batches(0))
    assert len(b.arrays) == 3
    for a, full in zip(b.arrays, (x, w, y)):
        np.testing.assert_array_equal(a, full[:4])
    # A list of arrays is a structure; a list of numbers is one array.
    lst = next(iter(Dataset.from_tensor_slices([x, y]).batch(3)))
    assert isinstance(lst, list) and len(lst) == 2
    np.testing.assert_array_equal(lst[1], y[:3])
    nums = list(Dataset.from_tensor_slices([[1, 2], [3, 4], [5, 6]]).batch(2))
    np.testing.assert_array_equal(nums[0], [[1, 2], [3, 4]])
    np.testing.assert_array_equal(nums[1], [[5, 6]])
    samples = list(Dataset.from_tensor_slices((x, y)))
    assert len(samples) == 10
    np.testing.assert_array_equal(samples[3][0], x[3])
    assert samples[3][1] == 3


def test_from_tensor_slices_errors():
    x, y, _ = make_xyw()
    with pytest.raises(ValueError, match=r"\[Dataset.from_tensor_slices\] all components must "
                                         r"have the same number of samples \(first axis\), got "
                                         r"23 \(\[0\]\), 22 \(\[1\]\)"):
        Dataset.from_tensor_slices((x, y[:-1]))
    with pytest.raises(ValueError, match=r"23 \(\['x'\]\), 5 \(\['y'\]\)"):
        Dataset.from_tensor_slices({"x": x, "y": y[:5]})
    with pytest.raises(ValueError, match=r"component \[1\] is a scalar"):
        Dataset.from_tensor_slices((x, 3))
    with pytest.raises(ValueError, match=r"component elements is a scalar"):
        Dataset.from_tensor_slices(3.0)
    with pytest.raises(ValueError, match=r"elements holds no arrays"):
        Dataset.from_tensor_slices(())
    with pytest.raises(TypeError, match=r"component \[1\] is not an array of numbers"):
        Dataset.from_tensor_slices((x, [object()] * 23))
    with pytest.raises(TypeError, match=r"\[Dataset\] make a Dataset with"):
        Dataset(x)


# --------------------------------------------------------------------------- shuffle


@pytest.mark.parametrize("drop", [False, True])
def test_shuffle_matches_data_batches(drop):
    x, y, _ = make_xyw(37)
    ds = Dataset.from_tensor_slices((x, y)).shuffle(seed=7).batch(8, drop_remainder=drop)
    for epoch in range(3):
        mine = list(ds.epoch_batches(epoch))
        theirs = list(data.batches(x, y, 8, shuffle=True, seed=7, epoch=epoch, drop_last=drop))
        assert len(mine) == len(theirs) == ds.num_batches()
        for b, (xb, yb) in zip(mine, theirs):
            np.testing.assert_array_equal(b.arrays[0], xb)
            np.testing.assert_array_equal(b.arrays[1], yb)
    # Reproducible: a second dataset of the same seed gives the same order; epochs differ.
    again = Dataset.from_tensor_slices((x, y)).shuffle(100, seed=7).batch(8, drop)
    for e in range(2):
        a = np.concatenate([b.arrays[1] for b in ds.epoch_batches(e)])
        b = np.concatenate([b.arrays[1] for b in again.epoch_batches(e)])
        np.testing.assert_array_equal(a, b)
    e0 = np.concatenate([b.arrays[1] for b in ds.epoch_batches(0)])
    e1 = np.concatenate([b.arrays[1] for b in ds.epoch_batches(1)])
    assert not np.array_equal(e0, e1)
    if not drop:
        assert sorted(e0) == list(range(37))
    # Iteration is epoch 0.
    for (xb, yb), b in zip(ds, ds.epoch_batches(0)):
        np.testing.assert_array_equal(yb, b.arrays[1])


def test_unbatched_shuffle_yields_the_permutation():
    _, y, _ = make_xyw(12)
    got = [int(v) for v in Dataset.from_tensor_slices(y).shuffle(seed=3)]
    want = [int(v) for b in data.batches(y, None, 12, seed=3) for v in b]
    assert got == want


# --------------------------------------------------------------------------- sharding


@pytest.mark.parametrize("num_shards", [1, 2, 3])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop", [False, True])
def test_shards_make_up_each_global_batch(num_shards, shuffle, drop):
    x, y, w = make_xyw(29)
    ds = Dataset.from_tensor_slices((x, y, w))
    if shuffle:
        ds = ds.shuffle(seed=11)
    ds = ds.batch(7, drop_remainder=drop)
    for epoch in range(2):
        want = expected_batches(29, 7, shuffle, seed=11, epoch=epoch, drop=drop)
        shards = [list(ds.epoch_batches(epoch, num_shards=num_shards, shard_index=i))
                  for i in range(num_shards)]
        assert all(len(s) == len(want) for s in shards)
        for k, rows in enumerate(want):
            parts = [s[k] for s in shards]
            assert all(p.index == k and p.global_size == len(rows) for p in parts)
            n = len(rows)
            for i, p in enumerate(parts):
                # The rows of model.py's _shard.
                lo, hi = i * n // num_shards, (i + 1) * n // num_shards
                np.testing.assert_array_equal(p.arrays[1], y[rows[lo:hi]])
            for c, full in enumerate((x, y, w)):
                np.testing.assert_array_equal(np.concatenate([p.arrays[c] for p in parts]),
                                              full[rows])


def test_shard_transformation_and_empty_shards():
    x, y, _ = make_xyw(10)
    ds = Dataset.from_tensor_slices((x, y)).shuffle(seed=2).batch(4)
    for i in range(3):
        sharded = ds.shard(3, i)
        via_epoch = list(ds.epoch_batches(0, num_shards=3, shard_index=i))
        via_shard = list(sharded.epoch_batches(0))
        via_iter = list(sharded)
        assert len(via_epoch) == len(via_shard) == len(via_iter) == 3
        for a, b, (xb, yb) in zip(via_epoch, via_shard, via_iter):
            np.testing.assert_array_equal(a.arrays[1], b.arrays[1])
            np.testing.assert_array_equal(a.arrays[1], yb)
    # The last batch has 2 rows: with 3 shards, shard 0 gets none (an empty array, not a
    # missing batch, so that every locality takes part in every step).
    last = list(ds.epoch_batches(0, num_shards=3, shard_index=0))[-1]
    assert last.global_size == 2 and last.arrays[0].shape == (0, 3, 2)
    assert last.arrays[1].shape == (0,)


def test_start_batch_resumes_without_reading_skipped(monkeypatch):
    x, y, _ = make_xyw(31)
    ds = Dataset.from_tensor_slices((x, y)).shuffle(seed=5).batch(4)
    full = list(ds.epoch_batches(2, num_shards=2, shard_index=1))
    reads = []
    gather = data.dataset._gather
    monkeypatch.setattr(data.dataset, "_gather", lambda a, rows: reads.append(rows) or gather(a, rows))
    for k in (0, 1, 5, 7, 8, 20):
        reads.clear()
        tail = list(ds.epoch_batches(2, num_shards=2, shard_index=1, start_batch=k))
        assert [b.index for b in tail] == [b.index for b in full[k:]]
        for a, b in zip(tail, full[k:]):
            assert a.global_size == b.global_size
            for u, v in zip(a.arrays, b.arrays):
                np.testing.assert_array_equal(u, v)
        # Two components per batch read, and only for the batches yielded.
        assert len(reads) == 2 * len(full[k:])


# --------------------------------------------------------------------------- take, repeat


def test_take_rows_shuffled_rows_and_batches():
    x, y, _ = make_xyw(20)
    # Before shuffle: the first 9 rows, then shuffled among themselves.
    ds = Dataset.from_tensor_slices(y).take(9).shuffle(seed=1).batch(4)
    got = np.concatenate(list(ds))
    assert sorted(got) == list(range(9)) and len(ds) == 3
    np.testing.assert_array_equal(got, np.concatenate(list(data.batches(y[:9], None, 4,
                                                                        seed=1))))
    # After shuffle: the first 9 rows of the permutation of all 20.
    ds = Dataset.from_tensor_slices(y).shuffle(seed=1).take(9).batch(4)
    perm = np.concatenate(list(data.batches(y, None, 20, seed=1)))
    np.testing.assert_array_equal(np.concatenate(list(ds)), perm[:9])
    # After batch: batches.
    ds = Dataset.from_tensor_slices((x, y)).batch(6).take(2)
    assert len(ds) == 2 and ds.num_batches() == 2
    np.testing.assert_array_equal(np.concatenate([b[1] for b in ds]), y[:12])
    assert len(Dataset.from_tensor_slices(y).batch(6).take(10)) == 4
    assert list(Dataset.from_tensor_slices(y).take(0)) == []
    assert list(Dataset.from_tensor_slices(y).take(5).take(3)) == [0, 1, 2]


def test_repeat_goes_through_epochs():
    _, y, _ = make_xyw(10)
    ds = Dataset.from_tensor_slices(y).shuffle(seed=4).batch(4).repeat(3)
    assert len(ds) == 9 and ds.num_batches() == 3
    got = list(ds)
    assert len(got) == 9
    for e in range(3):
        want = [b.arrays[0] for b in ds.epoch_batches(e)]
        for a, b in zip(got[3 * e:3 * e + 3], want):
            np.testing.assert_array_equal(a, b)
    forever = Dataset.from_tensor_slices(y).batch(4).repeat()
    it = iter(forever)
    assert len([next(it) for _ in range(10)]) == 10
    with pytest.raises(TypeError, match=r"\[Dataset.__len__\] the dataset repeats forever"):
        len(forever)
    assert len(list(Dataset.from_tensor_slices(y).repeat(2))) == 20


# --------------------------------------------------------------------------- from_npy


def write_npy(tmp_path, n=50):
    x, y, w = make_xyw(n)
    paths = [tmp_path / "x.npy", tmp_path / "y.npy", tmp_path / "w.npy"]
    for p, a in zip(paths, (x, y, w)):
        np.save(p, a)
    return (x, y, w), paths


def test_from_npy_values_and_memory_map(tmp_path):
    (x, y, w), (px, py, pw) = write_npy(tmp_path)
    ds = Dataset.from_npy(px, py, pw).shuffle(seed=3).batch(8)
    assert all(isinstance(a, np.memmap) for a in ds._source.arrays)
    ref = Dataset.from_tensor_slices((x, y, w)).shuffle(seed=3).batch(8)
    for i in range(3):
        for a, b in zip(ds.epoch_batches(1, num_shards=3, shard_index=i),
                        ref.epoch_batches(1, num_shards=3, shard_index=i)):
            for u, v in zip(a.arrays, b.arrays):
                np.testing.assert_array_equal(u, v)
                # A copy of the rows, not a view of the file.
                assert type(u) is np.ndarray and u.flags.owndata
                assert len(u) == len(v) < 50
    # Without shuffling too (a slice of the map is copied).
    b = next(Dataset.from_npy(px).batch(8).epoch_batches(0, num_shards=2, shard_index=1))
    np.testing.assert_array_equal(b.arrays[0], x[4:8])
    assert type(b.arrays[0]) is np.ndarray and b.arrays[0].flags.owndata
    assert not isinstance(next(iter(Dataset.from_npy(px))), np.memmap)
    assert Dataset.from_npy(px, py).element_spec == (Spec((3, 2), np.dtype(np.float32)),
                                                     Spec((), np.dtype(np.int64)))
    loaded = Dataset.from_npy(px, mmap_mode=None)
    assert not isinstance(loaded._source.arrays[0], np.memmap)
    np.testing.assert_array_equal(np.concatenate(list(loaded.batch(20))), x)


def test_from_npy_reads_only_the_shards_rows(tmp_path, monkeypatch):
    (x, y, _), (px, py, _) = write_npy(tmp_path, 60)
    ds = Dataset.from_npy(px, py).shuffle(seed=9).batch(12)
    reads = []
    gather = data.dataset._gather
    monkeypatch.setattr(data.dataset, "_gather", lambda a, rows: reads.append(rows) or gather(a, rows))
    order = np.concatenate(expected_batches(60, 12, True, seed=9, epoch=0))
    got = list(ds.epoch_batches(0, num_shards=4, shard_index=2))
    # Per batch, each of x and y is read at exactly this shard's 3 rows.
    assert len(reads) == 2 * 5
    for k, b in enumerate(got):
        rows = order[12 * k + 6:12 * k + 9]
        for c in range(2):
            np.testing.assert_array_equal(reads[2 * k + c], rows)
        np.testing.assert_array_equal(b.arrays[0], x[rows])
    # validate reads consecutive rows, chunk by chunk.
    reads.clear()
    monkeypatch.setattr(data.dataset, "_CHUNK_ROWS", 25)
    assert ds.validate(lambda c, start, a: None)
    assert [(r.start, r.stop) for r in reads] == [(0, 25), (0, 25), (25, 50), (25, 50),
                                                  (50, 60), (50, 60)]


def test_from_npy_errors(tmp_path):
    (x, y, _), (px, py, pw) = write_npy(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"\[Dataset.from_npy\] '.*nope.npy' does not "
                                                r"exist"):
        Dataset.from_npy(tmp_path / "nope.npy")
    short = tmp_path / "short.npy"
    np.save(short, y[:7])
    with pytest.raises(ValueError, match=r"same number of samples \(first axis\), got 50 "
                                         r"\('.*x.npy'\), 7 \('.*short.npy'\)"):
        Dataset.from_npy(px, short)
    with pytest.raises(ValueError, match=r"sample_weight_path needs y_path"):
        Dataset.from_npy(px, sample_weight_path=pw)
    scalar = tmp_path / "scalar.npy"
    np.save(scalar, np.float64(3.0))
    with pytest.raises(ValueError, match=r"'.*scalar.npy' holds a scalar"):
        Dataset.from_npy(scalar)
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not a numpy file at all")
    with pytest.raises(ValueError, match=r"'.*bad.npy' cannot be read as a .npy array"):
        Dataset.from_npy(bad)
    npz = tmp_path / "arrays.npz"
    np.savez(npz, x=x)
    with pytest.raises(ValueError, match=r"'.*arrays.npz' is a .npz archive"):
        Dataset.from_npy(npz)
    empty = tmp_path / "empty.npy"
    np.save(empty, np.zeros((0, 3), np.float32))
    ds = Dataset.from_npy(empty).batch(4)
    assert len(ds) == 0 and list(ds) == []


# --------------------------------------------------------------------------- map


@pytest.mark.parametrize("fn", [jit_scale, py_scale], ids=["jit", "python"])
def test_map_per_batch(fn):
    x, y, _ = make_xyw(11)
    ds = Dataset.from_tensor_slices((x.astype(np.float64), y)).batch(4).map(fn)
    got = list(ds)
    assert len(got) == 3
    for k, (xb, yb) in enumerate(got):
        np.testing.assert_allclose(xb, 2.0 * x[4 * k:4 * k + 4])
        np.testing.assert_array_equal(yb, y[4 * k:4 * k + 4] + 1)
    for k, b in enumerate(ds.epoch_batches(0, num_shards=2, shard_index=1)):
        rows = np.arange(11)[4 * k:4 * k + 4]
        rows = rows[len(rows) // 2:]
        np.testing.assert_array_equal(b.arrays[1], y[rows] + 1)
        assert b.global_size == min(4, 11 - 4 * k)
    assert ds.element_spec == (Spec((3, 2), np.dtype(np.float64)), Spec((), np.dtype(np.int64)))


def test_map_single_array_dict_and_chains():
    x, y, _ = make_xyw(8)
    ds = Dataset.from_tensor_slices(x).batch(3).map(lambda a: (a.sum(axis=(1, 2)), a[:, 0]))
    assert ds.element_spec == (Spec((), np.dtype(np.float32)), Spec((2,), np.dtype(np.float32)))
    s, first = next(iter(ds))
    np.testing.assert_allclose(s, x[:3].sum(axis=(1, 2)), rtol=1e-6)
    chained = ds.map(lambda s, f: s + 1)
    np.testing.assert_allclose(next(iter(chained)), s + 1)
    assert next(chained.epoch_batches(0)).arrays[0].shape == (3,)
    d = Dataset.from_tensor_slices({"x": x, "y": y}).batch(5).map(lambda b: (b["x"], b["y"]))
    xb, yb = list(d)[1]
    np.testing.assert_array_equal(yb, y[5:])


def test_map_errors():
    x, y, _ = make_xyw(8)
    ds = Dataset.from_tensor_slices((x, y))
    # (before batch, map applies to each sample: test_dataset_pipelines.py)
    with pytest.raises(TypeError, match=r"\[Dataset.map\] fn must be callable, got int"):
        ds.batch(2).map(3)
    bad = ds.batch(3).map(lambda x, y: (x, object()))
    with pytest.raises(TypeError, match=r"returned a non-array \[1\]"):
        list(bad)

    def boom(x, y):
        if y[0] >= 6:
            raise ZeroDivisionError("no")
        return x, y

    with pytest.raises(ZeroDivisionError) as info:
        list(ds.batch(3).map(boom).epoch_batches(1))
    assert "[Dataset] in map, for batch 2 of epoch 1" in info.value.__notes__


# --------------------------------------------------------------------------- prefetch


def test_prefetch_gives_the_same_batches():
    x, y, w = make_xyw(45)
    ds = Dataset.from_tensor_slices((x, y, w)).shuffle(seed=8).batch(6).map(py_scale_w)
    fetched = ds.prefetch(3)
    for e in range(2):
        for i in range(2):
            a = list(ds.epoch_batches(e, num_shards=2, shard_index=i, start_batch=1))
            b = run_with_timeout(lambda: list(fetched.epoch_batches(
                e, num_shards=2, shard_index=i, start_batch=1)))
            assert len(a) == len(b) == 7
            for u, v in zip(a, b):
                assert (u.index, u.global_size) == (v.index, v.global_size)
                for p, q in zip(u.arrays, v.arrays):
                    np.testing.assert_array_equal(p, q)
    a = list(ds.repeat(2))
    b = run_with_timeout(lambda: list(fetched.repeat(2)))
    assert len(a) == len(b) == 16
    for u, v in zip(a, b):
        for p, q in zip(u, v):
            np.testing.assert_array_equal(p, q)
    assert not prefetch_threads()


def py_scale_w(x, y, w):
    return x * 2.0, y, w


def test_prefetch_runs_ahead_in_a_thread_and_stops():
    _, y, _ = make_xyw(40)
    seen = []

    def note(b):
        seen.append(threading.current_thread().name)
        return b

    ds = Dataset.from_tensor_slices(y).batch(4).map(note).prefetch(2)
    it = ds.epoch_batches(0)
    first = next(it)
    np.testing.assert_array_equal(first.arrays[0], y[:4])
    assert seen and set(seen) == {"tessera-prefetch"}
    assert len(prefetch_threads()) == 1
    it.close()  # stopping early ends the thread
    assert not prefetch_threads()
    # prefetch(0) turns it off.
    seen.clear()
    list(ds.prefetch(0).epoch_batches(0))
    assert set(seen) == {threading.current_thread().name}


def test_prefetch_jit_map_beside_a_step_in_the_main_thread():
    # The prefetch thread runs a jit map while the consumer runs tessera programs.
    x, y, _ = make_xyw(200)
    x = x.astype(np.float64)
    ds = Dataset.from_tensor_slices((x, y)).shuffle(seed=1).batch(8).map(jit_scale).prefetch(3)

    def train():
        out = []
        for b in ds.epoch_batches(0):
            out.append((b.arrays[1] - 1, float(jit_step(b.arrays[0]))))
        return out

    got = run_with_timeout(train)
    order = expected_batches(200, 8, True, seed=1)
    assert len(got) == len(order) == 25
    for (labels, total), rows in zip(got, order):
        np.testing.assert_array_equal(labels, y[rows])
        assert total == pytest.approx(float(np.sum((2.0 * x[rows]) ** 2)))


def test_prefetch_error_is_raised_in_the_consumer():
    def fail_at_3(b):
        if b[0] == 12:
            raise ValueError("bad batch")
        return b

    ds = Dataset.from_tensor_slices(np.arange(30)).batch(4).map(fail_at_3).prefetch(2)
    got = []

    def consume():
        for b in ds.epoch_batches(0):
            got.append(b.index)

    with pytest.raises(ValueError, match="bad batch") as info:
        run_with_timeout(consume)
    assert got == [0, 1, 2]
    notes = "\n".join(info.value.__notes__)
    assert "batch 3 of epoch 0" in notes and "prefetch thread" in notes
    assert not prefetch_threads()

    # From a generator too: its exception arrives at the batch it broke.
    def gen():
        for i in range(20):
            if i == 9:
                raise KeyError("sample 9")
            yield np.float32(i)

    gds = Dataset.from_generator(gen).batch(4).prefetch(1)
    with pytest.raises(KeyError) as info:
        run_with_timeout(lambda: list(gds.epoch_batches(0)))
    assert "reading the samples of batch 2 of epoch 0" in "\n".join(info.value.__notes__)


# --------------------------------------------------------------------------- generators


def gen_xy(n=17):
    def gen():
        for i in range(n):
            yield np.full((2,), i, np.float32), i
    return gen


def test_generator_batches_match_stacking():
    ds = Dataset.from_generator(gen_xy()).batch(5)
    got = list(ds)
    assert [len(b[1]) for b in got] == [5, 5, 5, 2]
    for k, (xb, yb) in enumerate(got):
        want = np.arange(5 * k, min(5 * k + 5, 17))
        np.testing.assert_array_equal(yb, want)
        np.testing.assert_array_equal(xb, np.repeat(want[:, None], 2, 1).astype(np.float32))
    assert ds.element_spec == (Spec((2,), np.dtype(np.float32)), Spec((), np.dtype(np.int64)))
    assert ds.num_batches() is None
    with pytest.raises(TypeError, match=r"the length of a generator dataset is unknown"):
        len(ds)
    assert [int(s[1]) for s in Dataset.from_generator(gen_xy(4))] == [0, 1, 2, 3]
    assert len(list(Dataset.from_generator(gen_xy()).batch(5, drop_remainder=True))) == 3
    assert len(list(ds.take(2))) == 2
    np.testing.assert_array_equal(
        np.concatenate([b[1] for b in Dataset.from_generator(gen_xy()).take(7).batch(5)]),
        np.arange(7))
    # A single-array generator with a given element_spec (converted to its dtype).
    spec_ds = Dataset.from_generator(lambda: iter(range(6)), element_spec=[((), "float32")])
    b = next(iter(spec_ds.batch(4)))
    assert b.dtype == np.float32 and list(b) == [0, 1, 2, 3]


def test_generator_shuffle_buffer_is_seeded():
    ds = Dataset.from_generator(gen_xy(50)).shuffle(8, seed=3).batch(7)
    e0 = [np.concatenate([b.arrays[1] for b in ds.epoch_batches(e)]) for e in (0, 0, 1)]
    np.testing.assert_array_equal(e0[0], e0[1])  # the same (seed, epoch), the same order
    assert not np.array_equal(e0[0], e0[2])     # another epoch, another order
    assert sorted(e0[0]) == list(range(50)) and not np.array_equal(e0[0], np.arange(50))
    other = Dataset.from_generator(gen_xy(50)).shuffle(8, seed=4).batch(7)
    assert not np.array_equal(np.concatenate([b.arrays[1] for b in other.epoch_batches(0)]),
                              e0[0])
    # A buffer of 8 moves a sample at most 7 places earlier.
    assert all(v <= i + 7 for i, v in enumerate(e0[0]))
    # Shards and start_batch work on generators too (every shard runs the generator).
    full = list(ds.epoch_batches(1))
    for n in (2, 3):
        parts = [list(ds.epoch_batches(1, num_shards=n, shard_index=i)) for i in range(n)]
        for k, b in enumerate(full):
            np.testing.assert_array_equal(np.concatenate([p[k].arrays[1] for p in parts]),
                                          b.arrays[1])
            assert all(p[k].global_size == b.global_size for p in parts)
    tail = list(ds.epoch_batches(1, start_batch=4))
    assert [b.index for b in tail] == [4, 5, 6, 7]
    for a, b in zip(tail, full[4:]):
        np.testing.assert_array_equal(a.arrays[0], b.arrays[0])
    # Unbatched, the shuffled samples come one by one.
    samples = [int(s[1]) for s in Dataset.from_generator(gen_xy(50)).shuffle(8, seed=3)]
    np.testing.assert_array_equal(samples, e0[0])


def test_generator_errors():
    gen = gen_xy()
    with pytest.raises(TypeError, match=r"got a generator: pass the generator function"):
        Dataset.from_generator(gen())
    with pytest.raises(TypeError, match=r"fn must be a function returning an iterator"):
        Dataset.from_generator(3)
    with pytest.raises(TypeError, match=r"fn\(\) must return an iterator"):
        list(Dataset.from_generator(lambda: 5).batch(2))
    with pytest.raises(ValueError, match=r"\[Dataset.shuffle\] a generator dataset needs "
                                         r"buffer_size"):
        Dataset.from_generator(gen).shuffle()
    with pytest.raises(TypeError, match=r"element_spec must be a sequence of \(shape, dtype\)"):
        Dataset.from_generator(gen, element_spec=[(2, "float32")])
    with pytest.raises(ValueError, match=r"element_spec is empty"):
        Dataset.from_generator(gen, element_spec=[])
    with pytest.raises(ValueError, match=r"the generator yielded no samples"):
        Dataset.from_generator(lambda: iter(())).element_spec

    def ragged():
        yield np.zeros(2), 0
        yield np.zeros(2), 1
        yield np.zeros(3), 2

    with pytest.raises(ValueError, match=r"component 0 of sample 2 has shape \(3,\), expected "
                                         r"\(2,\)"):
        list(Dataset.from_generator(ragged).batch(2))

    def changing():
        yield np.zeros(2), 0
        yield np.zeros(2)

    with pytest.raises(ValueError, match=r"sample 1 is one array, but the samples are a tuple of "
                                         r"2 arrays"):
        list(Dataset.from_generator(changing))

    def floats():
        yield 0
        yield 1.5

    with pytest.raises(ValueError, match=r"component 0 of sample 1 has dtype float64, which does "
                                         r"not convert to int64 safely"):
        list(Dataset.from_generator(floats).batch(2))
    assert Dataset.from_generator(gen).validate(lambda *a: None) is False


# --------------------------------------------------------------------------- validate


def test_validate_chunks_and_offsets(monkeypatch):
    x, y, w = make_xyw(23)
    monkeypatch.setattr(data.dataset, "_CHUNK_ROWS", 10)
    calls = []
    ds = Dataset.from_tensor_slices((x, y, w)).shuffle(seed=1).batch(4)
    assert ds.validate(lambda c, start, a: calls.append((c, start, a.copy()))) is True
    assert [(c, s, len(a)) for c, s, a in calls] == [
        (0, 0, 10), (1, 0, 10), (2, 0, 10), (0, 10, 10), (1, 10, 10), (2, 10, 10),
        (0, 20, 3), (1, 20, 3), (2, 20, 3)]
    for c, start, a in calls:
        np.testing.assert_array_equal(a, (x, y, w)[c][start:start + len(a)])
    # The check names a sample by start + offset.
    bad = y.copy()
    bad[13] = -1

    def check(c, start, a):
        if c == 1 and (a < 0).any():
            raise ValueError(f"label of sample {start + int(np.flatnonzero(a < 0)[0])}")

    with pytest.raises(ValueError, match="label of sample 13"):
        Dataset.from_tensor_slices((x, bad)).validate(check)
    # Chunks also stay under _CHUNK_BYTES.
    monkeypatch.setattr(data.dataset, "_CHUNK_ROWS", 65536)
    monkeypatch.setattr(data.dataset, "_CHUNK_BYTES", 7 * (24 + 8 + 8))
    calls.clear()
    ds.validate(lambda c, start, a: calls.append((c, start, len(a))))
    assert [s for c, s, n in calls if c == 0] == [0, 7, 14, 21]


def test_validate_take_shards_and_maps():
    x, y, _ = make_xyw(23)
    calls = []
    ds = Dataset.from_tensor_slices((x, y)).take(20).batch(4)
    ds.validate(lambda c, s, a: calls.append((c, s, len(a))), num_shards=3, shard_index=1)
    assert calls == [(0, 6, 7), (1, 6, 7)]
    calls.clear()
    mapped = ds.map(py_scale)
    assert mapped.validate(lambda c, s, a: calls.append((c, s, a)))
    np.testing.assert_array_equal(calls[1][2], y[:20] + 1)  # what training sees
    dropper = ds.map(lambda x, y: (x[:1], y[:1]))
    assert dropper.validate(lambda c, s, a: None) is False
    with pytest.raises(TypeError, match=r"\[Dataset.validate\] check must be callable"):
        ds.validate(None)
    with pytest.raises(ValueError, match=r"shard_index must be in \[0, 2\)"):
        ds.validate(print, num_shards=2, shard_index=2)


# --------------------------------------------------------------------------- errors, repr


def test_argument_errors():
    x, y, _ = make_xyw(8)
    ds = Dataset.from_tensor_slices((x, y))
    with pytest.raises(ValueError, match=r"^\[Dataset.batch\] batch_size must be a positive int, "
                                         r"got 0$"):
        ds.batch(0)
    with pytest.raises(TypeError, match=r"\[Dataset.batch\] batch_size must be a positive int, "
                                        r"got True"):
        ds.batch(True)
    with pytest.raises(TypeError, match=r"got 2.5"):
        ds.batch(2.5)
    with pytest.raises(ValueError, match=r"\[Dataset.shuffle\] seed must be an int >= 0, got -1"):
        ds.shuffle(seed=-1)
    with pytest.raises(ValueError, match=r"buffer_size must be a positive int, got 0"):
        ds.shuffle(0)
    with pytest.raises(ValueError, match=r"\[Dataset.take\] count must be an int >= 0, got -2"):
        ds.take(-2)
    with pytest.raises(ValueError, match=r"\[Dataset.prefetch\] buffer_size must be an int >= 0"):
        ds.prefetch(-1)
    with pytest.raises(ValueError, match=r"\[Dataset.repeat\] count must be a positive int or "
                                         r"None, got 0"):
        ds.repeat(0)
    b = ds.batch(4)
    with pytest.raises(ValueError, match=r"\[Dataset.shard\] num_shards must be a positive int"):
        b.shard(0, 0)
    with pytest.raises(ValueError, match=r"\[Dataset.shard\] shard_index must be in \[0, 2\) for "
                                         r"num_shards=2, got 2"):
        b.shard(2, 2)
    with pytest.raises(ValueError, match=r"\[Dataset.epoch_batches\] epoch must be an int >= 0"):
        b.epoch_batches(-1)
    with pytest.raises(TypeError, match=r"\[Dataset.epoch_batches\] start_batch must be an int"):
        b.epoch_batches(0, start_batch=1.0)
    with pytest.raises(ValueError, match=r"\[Dataset.epoch_batches\] num_shards must be a "
                                         r"positive int, got 0"):
        b.epoch_batches(0, num_shards=0)
    with pytest.raises(ValueError, match=r"already sharded \(2 shards\); num_shards must be 1, "
                                         r"got 2"):
        b.shard(2, 0).epoch_batches(0, num_shards=2, shard_index=1)
    assert list(b.epoch_batches(0, start_batch=9)) == []


def test_order_errors():
    x, y, _ = make_xyw(8)
    ds = Dataset.from_tensor_slices((x, y))
    b = ds.batch(4)
    with pytest.raises(ValueError, match=r"\[Dataset.batch\] the dataset is already batched \(by "
                                         r"4\); batch once"):
        b.batch(2)
    # shuffle after batch shuffles whole batches, as tf.data's: it needs a buffer size
    with pytest.raises(ValueError, match=r"\[Dataset.shuffle\] after batch\(\) shuffle needs "
                                         r"buffer_size"):
        b.shuffle(seed=1)
    with pytest.raises(ValueError, match=r"already shuffled; shuffle once"):
        ds.shuffle().shuffle()
    with pytest.raises(ValueError, match=r"\[Dataset.shard\] call batch\(\) first"):
        ds.shard(2, 0)
    with pytest.raises(ValueError, match=r"already sharded; shard once"):
        b.shard(2, 0).shard(2, 1)
    r = b.repeat(2)  # (map after repeat maps every pass, as tf.data's: test_nn_keras_io_fifteenth)
    with pytest.raises(ValueError, match=r"\[Dataset.take\] call take before repeat\(\)"):
        r.take(1)
    with pytest.raises(ValueError, match=r"\[Dataset.shard\] call shard before repeat\(\)"):
        r.shard(2, 0)
    with pytest.raises(ValueError, match=r"already repeated; repeat once"):
        r.repeat()
    with pytest.raises(ValueError, match=r"\[Dataset.batch\] call batch before repeat\(\)"):
        ds.repeat().batch(2)
    assert len(list(r.prefetch(2))) == 4  # prefetch may come last
    for fn in ("epoch_batches", "num_batches"):
        with pytest.raises(ValueError, match=rf"\[Dataset.{fn}\] the dataset is not batched: "
                                             r"call batch\(batch_size\) first"):
            getattr(ds, fn)(*((0,) if fn == "epoch_batches" else ()))


def test_repr_and_batch_type():
    x, y, _ = make_xyw(8)
    ds = (Dataset.from_tensor_slices((x, y)).shuffle(seed=2).batch(4).map(py_scale).take(1)
          .shard(2, 1).prefetch(2))
    assert repr(ds) == ("<Dataset.arrays(8 rows).shuffle(buffer_size=None, seed=2)"
                        ".batch(4, drop_remainder=False).map(py_scale).take(1).shard(2, 1)"
                        ".prefetch(2)>")
    b = Batch((x,), 8, 0)
    assert b.arrays[0] is x and b.global_size == 8 and b.index == 0
