"""fit, evaluate and predict reading an iterable of batches again at each epoch,
as Keras reads a PyTorch DataLoader: a DataLoader itself (against Keras on JAX
with the same weights) and a plain Python iterable class; the last batch
smaller; what is not such an iterable still reads as data."""

import numpy as np
import pytest

import tessera.nn as nn

RNG = np.random.default_rng(5)
X = RNG.random((44, 6)).astype("float32")
Y = RNG.integers(0, 3, 44)


class Batches:
    """An iterable (not an iterator) of (x, y) batches, with a length."""

    def __init__(self, x, y, size):
        self.x, self.y, self.size = x, y, size
        self.passes = 0

    def __len__(self):
        return -(-len(self.x) // self.size)

    def __iter__(self):
        self.passes += 1
        for i in range(0, len(self.x), self.size):
            yield self.x[i:i + self.size], self.y[i:i + self.size]


def _model(k, weights=None):
    inp = k.Input((6,))
    m = k.Model(inp, k.layers.Dense(3, activation="softmax")(k.layers.Dense(5)(inp)))
    if weights is not None:
        m.set_weights(weights)
    m.compile(k.optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def _run(k, train, val, weights):
    m = _model(k, weights)
    h = m.fit(train, epochs=3, validation_data=val, verbose=0)
    return ({key: np.round(v, 5).tolist() for key, v in h.history.items()},
            np.round(m.evaluate(val, verbose=0), 5).tolist(), m.predict(val, verbose=0))


def test_a_plain_iterable_is_read_again_each_epoch():
    train = Batches(X, Y, 10)  # 5 batches, the last of 4
    m = _model(nn)
    w = m.get_weights()
    h = m.fit(train, epochs=3, verbose=0)
    assert train.passes == 3 and len(h.history["loss"]) == 3
    ref = _model(nn, w)
    h2 = ref.fit(X, Y, batch_size=10, epochs=3, shuffle=False, verbose=0)
    np.testing.assert_allclose(h.history["loss"], h2.history["loss"], rtol=1e-6)
    assert m.predict(Batches(X, Y, 8), verbose=0).shape == (44, 3)
    with pytest.raises(ValueError, match="yields no batches"):
        m.fit(Batches(X[:0], Y[:0], 4), verbose=0)


def test_a_torch_dataloader_as_keras_reads_it(keras):
    torch = pytest.importorskip("torch")
    data = torch.utils.data
    train = data.DataLoader(data.TensorDataset(torch.from_numpy(X), torch.from_numpy(Y)),
                            batch_size=8, shuffle=False)
    val = data.DataLoader(data.TensorDataset(torch.from_numpy(X[:20]),
                                             torch.from_numpy(Y[:20])), batch_size=8)
    weights = [np.asarray(w) for w in _model(keras).get_weights()]
    got, want = _run(nn, train, val, weights), _run(keras, train, val, weights)
    assert got[0].keys() == want[0].keys()
    for key in want[0]:
        np.testing.assert_allclose(got[0][key], want[0][key], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=2e-4, atol=2e-6)
