"""HashedCrossing and SpectralNormalization against Keras 3 (on JAX where Keras
runs them; HashedCrossing needs TensorFlow in Keras, so its bins are checked
against the values Keras's own docs and tests give)."""

import importlib.util

import numpy as np
import pytest

import tessera.nn as nn


def test_hashed_crossing_bins_are_keras():
    # keras/src/layers/preprocessing/hashed_crossing_test.py's values
    feat1 = np.array(["A", "B", "A", "B", "A"])
    feat2 = np.array([101, 101, 101, 102, 102])
    out = nn.layers.HashedCrossing(num_bins=5)((feat1, feat2))
    assert out.dtype == np.int64 and out.tolist() == [1, 4, 1, 1, 3]
    hot = nn.layers.HashedCrossing(num_bins=5, output_mode="one_hot")((feat1, feat2))
    assert hot.dtype == np.float32 and hot.shape == (5, 5)
    np.testing.assert_array_equal(hot, np.eye(5, dtype=np.float32)[[1, 4, 1, 1, 3]])
    assert int(nn.layers.HashedCrossing(num_bins=10)((np.array("A"), np.array(101)))) == 1
    # shapes and dtypes as Keras's: (batch, 1) kept, a scalar stays a scalar
    col = nn.layers.HashedCrossing(5, dtype="int32")((feat1[:, None], feat2[:, None]))
    assert col.shape == (5, 1) and col.dtype == np.int32 and col[:, 0].tolist() == out.tolist()
    assert nn.layers.HashedCrossing(5, output_mode="one_hot")(
        (np.array("A"), np.array(101))).shape == (5,)
    # order matters (a cross is not symmetric), three features chain
    assert nn.layers.HashedCrossing(1000)((feat2, feat2, feat2)).shape == (5,)
    assert nn.layers.HashedCrossing(2**31 - 1)((feat1, feat2)).tolist() != \
        nn.layers.HashedCrossing(2**31 - 1)((feat2, feat1)).tolist()


def test_hashed_crossing_errors_name_the_layer():
    layer = nn.layers.HashedCrossing(num_bins=10)
    with pytest.raises(ValueError, match=r"\[HashedCrossing\] must be called on a list or tuple"):
        layer(np.array(1))
    with pytest.raises(ValueError, match=r"\[HashedCrossing\] must be called on at least two"):
        layer([np.array(1)])
    with pytest.raises(ValueError, match=r"shape \(\), \(batch_size,\) or \(batch_size, 1\), "
                                         r"got \(1, 1, 1\)"):
        layer((np.ones((1, 1, 1), int), np.ones((1, 1, 1), int)))
    with pytest.raises(ValueError, match=r"integer or string dtype, got \['float64'"):
        layer((np.array([1.0]), np.array([1.0])))
    with pytest.raises(ValueError, match=r"the same shape"):
        layer((np.array([1, 2]), np.array([1])))
    with pytest.raises(ValueError, match=r"\[HashedCrossing\] num_bins must be a positive int"):
        nn.layers.HashedCrossing(0)
    with pytest.raises(ValueError, match=r"output_mode"):
        nn.layers.HashedCrossing(4, output_mode="multi_hot")
    with pytest.raises(ValueError, match=r"\[HashedCrossing\] in a model every input must have "
                                         r"an integer dtype"):
        x = nn.Input((1,))
        layer((x, x))


@pytest.mark.parametrize("inner,shape,iters", [
    (lambda lib: lib.layers.Dense(3, name="inner"), (4,), 1),
    (lambda lib: lib.layers.Conv1D(3, 2, name="inner"), (5, 2), 2),
])
def test_spectral_normalization_trains_as_keras(keras, inner, shape, iters):
    """Training divides the kernel by sigma (power iteration from vector_u,
    which each step updates); the optimizer updates the kernel itself; predict
    uses the kernel as it is (Keras on JAX)."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(12,) + shape).astype(np.float32)
    theirs = keras.Sequential([keras.Input(shape), keras.layers.SpectralNormalization(
        inner(keras), power_iterations=iters, name="sn"), keras.layers.Flatten(),
        keras.layers.Dense(2, name="out")], name="net")
    ours = nn.Sequential([nn.Input(shape), nn.SpectralNormalization(
        inner(nn), power_iterations=iters, name="sn"), nn.Flatten(), nn.Dense(2, name="out")],
        name="net")
    assert [w.path for w in ours.weights] == [w.path for w in theirs.weights]
    w = [rng.normal(size=a.shape).astype(np.float32) for a in theirs.get_weights()]
    ours.set_weights(w)
    theirs.set_weights(w)
    y = rng.normal(size=(12, 2)).astype(np.float32)
    ours.compile(nn.optimizers.SGD(0.05), "mse")
    theirs.compile(keras.optimizers.SGD(0.05), "mse")
    h1 = ours.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    h2 = theirs.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(h1.history["loss"], h2.history["loss"], rtol=2e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert not np.allclose(ours.get_weights()[1], w[1])  # vector_u moved
    np.testing.assert_allclose(ours.predict(x, verbose=0), theirs.predict(x, verbose=0),
                               rtol=2e-4, atol=2e-5)


def test_spectral_normalization_errors_name_the_layer():
    with pytest.raises(ValueError, match=r"\[SpectralNormalization\] power_iterations must be "
                                         r"an int > 0, got 0"):
        nn.SpectralNormalization(nn.Dense(2), power_iterations=0)
    with pytest.raises(TypeError, match=r"\[SpectralNormalization\] wraps a built-in layer"):
        nn.SpectralNormalization("dense")
    with pytest.raises(ValueError, match=r"has no weight 'kernel' nor 'embeddings'"):
        nn.Sequential([nn.Input((3,)), nn.SpectralNormalization(nn.LayerNormalization())])


def _scoped_paths(lib):
    out = []
    with lib.name_scope("outer"):
        out.append(lib.Variable(np.zeros(2), name="v").path)
        with lib.name_scope("inner"):
            out.append(lib.Variable(np.zeros(2), name="w").path)
        with lib.name_scope("other", override_parent="top/mid"):
            out.append(lib.Variable(np.zeros(2), name="x").path)
        d = lib.layers.Dense(2, name="d")  # made here, built by the model below
    m = lib.Sequential([lib.Input((3,)), d, lib.layers.Dense(1, name="e")], name="net")
    out += [x.path for x in m.weights]
    d2 = lib.layers.Dense(2, name="d2")
    with lib.name_scope("blk"):
        d2.build((None, 3))  # built in the scope
    out += [x.path for x in d2.weights]
    with lib.name_scope("blk2"):
        m2 = lib.Sequential([lib.Input((3,)), lib.layers.Dense(1, name="f")], name="net2")
    out += [x.path for x in m2.weights]
    me = object()
    with lib.name_scope("s", caller=me):
        with lib.name_scope("s", caller=me):  # the same caller and name: deduplicated
            out.append(lib.Variable(np.zeros(1), name="y").path)
        with lib.name_scope("s", caller=me, deduplicate=False):
            out.append(lib.Variable(np.zeros(1), name="z").path)
    out.append(lib.Variable(np.zeros(1), name="after").path)
    return out


def test_name_scope_paths_as_keras(keras):
    assert _scoped_paths(nn) == _scoped_paths(keras)
    with pytest.raises(ValueError, match=r"\[name_scope\] name must be a string without '/', "
                                         r"got 'a/b'"):
        nn.name_scope("a/b")


@pytest.mark.parametrize("name", ["SKLearnClassifier", "SKLearnRegressor", "SKLearnTransformer"])
def test_sklearn_wrappers_need_scikit_learn_as_keras(keras, name):
    model = nn.Sequential([nn.Input((2,)), nn.Dense(1)])
    if importlib.util.find_spec("sklearn") is None:  # as Keras: an ImportError naming it
        with pytest.raises(ImportError, match="scikit-learn"):
            getattr(keras.wrappers, name)(model=lambda: None)
        with pytest.raises(ImportError, match=rf"\[{name}\] requires scikit-learn"):
            getattr(nn.wrappers, name)(model)
    else:
        with pytest.raises(NotImplementedError, match=rf"\[{name}\] tessera's scikit-learn"):
            getattr(nn.wrappers, name)(model)
