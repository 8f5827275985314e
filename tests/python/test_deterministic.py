"""Deterministic training on one process: fit(deterministic=...) gives the same
bits with any number of threads, trains like the normal mode up to rounding,
rejects bad settings, and leaves the tiling mode as it found it. (Several
localities: tests/distributed/dp_fit_deterministic.py.)"""

import numpy as np
import pytest

import tessera
from tessera import nn


def _data():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(1028, 64, 4)).astype(np.float32)
    y = (x[:, :, 0].mean(axis=1) > 0).astype(np.int64) + (x[:, 3, 1] > 0.5)
    return x, y


def _model(random_layers=True):
    extra = [nn.Dropout(0.25), nn.BatchNormalization()] if random_layers else []
    model = nn.Sequential([nn.Conv1D(16, 3, activation="relu"), nn.MaxPool1D(2), nn.Flatten(),
                           nn.Dense(128, activation="tanh")] + extra
                          + [nn.Dense(3, activation="softmax")], input_shape=(64, 4), seed=2)
    model.compile(tessera.optim.Adam(0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


@pytest.fixture
def threads():
    before = tessera.num_threads()
    yield
    tessera.set_num_threads(before)


def test_bitwise_equal_with_any_number_of_threads(threads):
    x, y = _data()
    results = []
    # Chunks of 64 rows: the dense layer's product on 1 thread differs in the
    # last bits from 2 or more threads unless tiles are fixed.
    for n in (1, 2, 3):
        tessera.set_num_threads(n)
        model = _model()
        h = model.fit(x, y, batch_size=512, epochs=2, seed=1, verbose=0, deterministic=True)
        results.append((model.weights, h.history["loss"]))
    for weights, loss in results[1:]:
        assert loss == results[0][1]
        for k in weights.keys():
            np.testing.assert_array_equal(weights[k], results[0][0][k], err_msg=k)


def test_trains_like_the_normal_mode():
    x, y = _data()
    normal, det = _model(random_layers=False), _model(random_layers=False)
    hn = normal.fit(x, y, batch_size=200, epochs=2, seed=1, verbose=0)
    hd = det.fit(x, y, batch_size=200, epochs=2, seed=1, verbose=0, deterministic=5)
    # Compared per array, relative to its norm: Adam turns rounding noise in a
    # gradient that is close to zero into steps of up to the learning rate, so
    # single elements may move apart by ~1e-3 while the arrays agree.
    for k in normal.weights.keys():
        a, b = det.weights[k], normal.weights[k]
        assert np.linalg.norm(a - b) <= 2e-3 * np.linalg.norm(b) + 1e-6, (
            k, np.linalg.norm(a - b), np.linalg.norm(b))
    np.testing.assert_allclose(hd.history["loss"], hn.history["loss"], rtol=1e-5)
    np.testing.assert_allclose(hd.history["accuracy"], hn.history["accuracy"], rtol=1e-12)


def test_bad_settings_and_the_tiling_mode_is_restored():
    x, y = _data()
    model = _model()
    for bad in (0, -2, 2.5, "yes"):
        with pytest.raises(ValueError, match=r"\[fit\] deterministic must be True, False or a "
                                             r"number of chunks"):
            model.fit(x[:16], y[:16], batch_size=8, verbose=0, deterministic=bad)
    assert not tessera.deterministic()
    with pytest.raises(ValueError, match=r"y\[0\] \(sample 0\) holds the label"):
        model.fit(x[:16], y[:16] + 7, batch_size=8, verbose=0, deterministic=True)
    assert not tessera.deterministic()

    def fail(batch, logs):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        model.fit(x[:16], y[:16], batch_size=8, verbose=0, deterministic=True,
                  callbacks=[nn.callbacks.LambdaCallback(on_batch_end=fail)])
    assert not tessera.deterministic()
    tessera.set_deterministic(True)
    try:
        model.fit(x[:16], y[:16], batch_size=8, verbose=0)
        assert tessera.deterministic()
    finally:
        tessera.set_deterministic(False)


def test_more_chunks_than_rows():
    # A batch of 3 rows in 8 chunks: 5 chunks are empty and contribute nothing.
    x, y = _data()
    det, normal = _model(random_layers=False), _model(random_layers=False)
    hd = det.fit(x[:3], y[:3], batch_size=3, epochs=2, seed=1, verbose=0, deterministic=True)
    hn = normal.fit(x[:3], y[:3], batch_size=3, epochs=2, seed=1, verbose=0)
    # Compared per array, relative to its norm: Adam turns rounding noise in a
    # gradient that is close to zero into steps of up to the learning rate, so
    # single elements may move apart by ~1e-3 while the arrays agree.
    for k in normal.weights.keys():
        a, b = det.weights[k], normal.weights[k]
        assert np.linalg.norm(a - b) <= 2e-3 * np.linalg.norm(b) + 1e-6, (
            k, np.linalg.norm(a - b), np.linalg.norm(b))
    np.testing.assert_allclose(hd.history["loss"], hn.history["loss"], rtol=1e-5)
