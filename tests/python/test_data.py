"""tessera.data: the UCI HAR reader on a small dataset written here in the real
layout, the missing-dataset message, the synthetic HAR generator (shapes,
determinism, balance, learnability), Fashion-MNIST from the Debian package, and
seeded mini-batches."""

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from tessera import data

FASHION = Path("/usr/share/datasets/fashion-mnist")


def write_har(root: Path, split: str, x: np.ndarray, labels: np.ndarray) -> None:
    """Writes x (N, T, 9) and labels 1..6 as the UCI HAR files (fixed-width text
    like the originals: two spaces, then %.7e)."""
    base = root / "UCI HAR Dataset" / split
    (base / "Inertial Signals").mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(data.HAR_SIGNALS):
        rows = ["".join(f"{v:16.7e}" for v in row) for row in x[:, :, k]]
        (base / "Inertial Signals" / f"{name}_{split}.txt").write_text("\n".join(rows) + "\n")
    (base / f"y_{split}.txt").write_text("".join(f"{int(v)}\n" for v in labels))


@pytest.fixture
def har_root(tmp_path):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5, 128, 9)).astype(np.float32)
    labels = np.array([5, 1, 6, 2, 3])
    write_har(tmp_path, "train", x, labels)
    return tmp_path, x, labels


def test_load_har_reads_the_real_layout(har_root):
    root, x, labels = har_root
    got_x, got_y = data.load_har(root, "train")
    assert got_x.shape == (5, 128, 9) and got_x.dtype == np.float32
    assert got_y.dtype == np.int64
    np.testing.assert_allclose(got_x, x, rtol=1e-6)
    np.testing.assert_array_equal(got_y, labels - 1)
    # The "UCI HAR Dataset" folder itself also works as root, and so does the env variable.
    again, _ = data.load_har(root / "UCI HAR Dataset", "train")
    np.testing.assert_array_equal(again, got_x)


def test_load_har_from_environment(har_root, monkeypatch):
    root, x, _ = har_root
    monkeypatch.setenv("TESSERA_HAR_DIR", str(root))
    got_x, _ = data.load_har(split="train")
    np.testing.assert_allclose(got_x, x, rtol=1e-6)


def test_load_har_missing_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HAR_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(FileNotFoundError) as info:
        data.load_har(split="test")
    msg = str(info.value)
    assert "[load_har] the UCI HAR dataset (test split) was not found" in msg
    assert str(tmp_path / "nowhere" / "UCI HAR Dataset") in msg
    assert str(tmp_path / "home" / ".tessera" / "datasets") in msg
    assert "Human Activity Recognition Using Smartphones" in msg
    assert "synthetic_har" in msg


def test_load_har_partial_and_malformed(har_root):
    root, x, labels = har_root
    signal = root / "UCI HAR Dataset" / "train" / "Inertial Signals" / "body_gyro_y_train.txt"
    text = signal.read_text().splitlines()
    signal.write_text("\n".join(text[:2] + [text[2] + "  1.0"] + text[3:]) + "\n")
    with pytest.raises(ValueError, match=r"body_gyro_y_train.txt' line 3: expected 128 values"):
        data.load_har(root)
    signal.write_text("\n".join(text[:4]) + "\n")
    with pytest.raises(ValueError, match=r"holds 4 rows of 128 values, but .* holds 5 rows"):
        data.load_har(root)
    signal.write_text("\n".join(text) + "\n")
    (root / "UCI HAR Dataset" / "train" / "y_train.txt").write_text("1\n2\n7\n1\n1\n")
    with pytest.raises(ValueError, match=r"y_train.txt' line 3: label 7 is outside 1..6"):
        data.load_har(root)
    signal.unlink()
    with pytest.raises(FileNotFoundError, match=r"missing .*body_gyro_y_train.txt"):
        data.load_har(root)
    with pytest.raises(ValueError, match=r"split must be 'train' or 'test'"):
        data.load_har(root, "validation")


def test_synthetic_har_shapes_determinism_and_balance():
    x, y = data.synthetic_har(n=600, seed=3)
    assert x.shape == (600, 128, 9) and x.dtype == np.float32
    assert y.shape == (600,) and y.dtype == np.int64
    assert np.all(np.isfinite(x))
    np.testing.assert_array_equal(np.bincount(y, minlength=6), [100] * 6)
    x2, y2 = data.synthetic_har(n=600, seed=3)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    x3, _ = data.synthetic_har(n=600, seed=4)
    assert not np.array_equal(x, x3)
    xt, _ = data.synthetic_har(n=600, seed=3, split="test")
    assert not np.array_equal(x, xt)
    full_x, full_y = data.synthetic_har()
    assert full_x.shape == (7352, 128, 9)
    assert data.synthetic_har(split="test")[0].shape == (2947, 128, 9)
    assert data.synthetic_har(n=0)[0].shape == (0, 128, 9)
    with pytest.raises(ValueError, match=r"\[synthetic_har\] n must be >= 0"):
        data.synthetic_har(n=-1)
    with pytest.raises(ValueError, match=r"seed must be in"):
        data.synthetic_har(seed=-2)


def test_synthetic_har_is_learnable_and_splits_share_classes():
    x, y = data.synthetic_har(n=3000, seed=0)
    xt, yt = data.synthetic_har(n=1200, seed=0, split="test")

    def nearest_mean(features, test_features):
        scale = features.std(0) + 1e-9
        means = np.stack([features[y == c].mean(0) for c in range(6)])
        d = (((test_features[:, None, :] - means[None]) / scale) ** 2).sum(-1)
        return (np.argmin(d, 1) == yt).mean()

    def stats(a):
        return np.concatenate([a.mean(1), a.std(1)], 1)

    def spectrum(a):
        return np.abs(np.fft.rfft(a, axis=1))[:, 1:12].reshape(len(a), -1)

    # Per-channel mean and deviation are informative, the frequencies decisive.
    assert nearest_mean(stats(x), stats(xt)) > 0.6
    assert nearest_mean(spectrum(x), spectrum(xt)) > 0.95


def test_fashion_mnist_from_the_debian_package():
    # scripts/install-deps installs Debian's dataset-fashion-mnist.
    assert FASHION.is_dir(), f"{FASHION} is missing: run scripts/install-deps"
    x, y = data.load_fashion_mnist("train")
    assert x.shape == (60000, 28, 28, 1) and x.dtype == np.float32
    assert y.shape == (60000,) and y.dtype == np.int64
    assert x.min() == 0.0 and x.max() == 1.0
    np.testing.assert_array_equal(np.bincount(y), [6000] * 10)
    xt, yt = data.load_fashion_mnist("test")
    assert xt.shape == (10000, 28, 28, 1) and yt.shape == (10000,)
    assert 0 <= yt.min() and yt.max() == 9
    # The first test image against the raw bytes read with Python's gzip.
    with gzip.open(FASHION / "t10k-images-idx3-ubyte.gz") as f:
        raw = f.read(16 + 784)
    assert struct.unpack(">4i", raw[:16]) == (2051, 10000, 28, 28)
    expected = np.frombuffer(raw[16:], np.uint8).reshape(28, 28) / np.float32(255)
    np.testing.assert_allclose(xt[0, :, :, 0], expected, rtol=1e-6)


def write_idx(path: Path, array: np.ndarray, compress: bool) -> None:
    header = struct.pack(">2B2B", 0, 0, 0x08, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape)
    payload = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(payload) if compress else payload)


def test_fashion_mnist_from_a_folder_and_errors(tmp_path):
    images = (np.arange(3 * 28 * 28) % 256).reshape(3, 28, 28)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", images, compress=False)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.array([9, 0, 4]), compress=True)
    x, y = data.load_fashion_mnist("test", root=tmp_path)
    np.testing.assert_allclose(x[..., 0], images / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(y, [9, 0, 4])
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.array([9, 0]), compress=True)
    with pytest.raises(ValueError, match=r"holds labels of shape \(2,\), expected \(3,\)"):
        data.load_fashion_mnist("test", root=tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(
        gzip.compress(struct.pack(">4B1I", 0, 0, 8, 1, 3) + b"\x01"))
    with pytest.raises(ValueError, match=r"\[file_read_idx\] .*truncated: the header says shape"):
        data.load_fashion_mnist("test", root=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"apt-get install dataset-fashion-mnist"):
        data.load_fashion_mnist("train", root=tmp_path)


def test_batches_cover_every_sample_once_per_epoch():
    x = np.arange(50, dtype=np.float64).reshape(25, 2)
    y = np.arange(25)
    seen = []
    sizes = []
    for xb, yb in data.batches(x, y, batch_size=7, seed=1, epoch=0):
        np.testing.assert_array_equal(xb[:, 0], 2 * yb)  # rows stay paired with labels
        seen += list(yb)
        sizes.append(len(yb))
    assert sorted(seen) == list(range(25)) and sizes == [7, 7, 7, 4]
    assert seen != list(range(25))  # shuffled


def test_batches_are_deterministic_per_seed_and_epoch():
    x = np.arange(100)

    def order(**kw):
        return np.concatenate(list(data.batches(x, batch_size=16, **kw)))

    np.testing.assert_array_equal(order(seed=0, epoch=0), order(seed=0, epoch=0))
    assert not np.array_equal(order(seed=0, epoch=0), order(seed=0, epoch=1))
    assert not np.array_equal(order(seed=0, epoch=0), order(seed=1, epoch=0))
    np.testing.assert_array_equal(order(shuffle=False), x)
    assert [len(b) for b in data.batches(x, batch_size=30, drop_last=True)] == [30, 30, 30]


def test_batches_errors():
    with pytest.raises(ValueError, match=r"\[batches\] x and y must have the same number of "
                                         r"samples, got 4 and 3"):
        data.batches(np.zeros(4), np.zeros(3), 2)
    with pytest.raises(ValueError, match=r"batch_size must be >= 1"):
        data.batches(np.zeros(4), None, 0)
    with pytest.raises(ValueError, match=r"x must have at least one dimension"):
        data.batches(np.float64(1.0), None, 1)
    with pytest.raises(ValueError, match=r"seed and epoch must be >= 0"):
        data.batches(np.zeros(4), None, 2, seed=-1)
