"""Keras features met by the keras-io scripts of issue 30's sixth pass (tests/keras_io:
image_classification_from_scratch, eanet, pointnet, memory_efficient_embeddings,
eeg_signal_classification, multi_label_classification), against Keras 3 on JAX with the
same weights and data."""

import numpy as np
import pytest

import tessera.nn as tn


def test_constant_initializer_takes_an_array_as_keras(keras):
    """PointNet's T-net starts its bias at the identity: Constant(np.eye(k).flatten())."""
    value = np.arange(6, dtype="float64").reshape(2, 3)
    for shape in [(2, 3), (4, 2, 3)]:
        want = np.asarray(keras.initializers.Constant(value)(shape, "float32"))
        got = tn.initializers.Constant(value)(shape, "float32")
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    eye = np.eye(3).flatten()
    got = [tn.layers.Dense(9, bias_initializer=tn.initializers.Constant(eye))
           for _ in range(1)][0]
    m = tn.Sequential([tn.Input((4,)), got])
    np.testing.assert_array_equal(m.get_weights()[1], eye.astype("float32"))
    # a config holds the array as a list, and rebuilds the same initializer
    config = tn.initializers.serialize(tn.initializers.Constant(value))
    again = tn.initializers.deserialize(config)
    np.testing.assert_array_equal(again((2, 3)), value.astype("float32"))
    # a scalar stays a number
    assert tn.initializers.Constant(2).get_config()["value"] == 2.0
    with pytest.raises(ValueError, match=r"\[Constant\] a value of shape \(2, 3\) does not "
                                         r"broadcast to the weight's shape \(3, 2\)"):
        tn.initializers.Constant(value)((3, 2))
    with pytest.raises(ValueError, match=r"\[Constant\] value must be a finite number"):
        tn.initializers.Constant([1.0, np.nan])
    with pytest.raises(ValueError, match=r"\[Constant\] value must be a finite number"):
        tn.initializers.Constant(["a", "b"])


def _orthogonal(lib, k):
    """PointNet's regularizer: a Regularizer subclass computing with ops."""
    ops = lib.ops

    class Orthogonal(lib.regularizers.Regularizer):
        def __init__(self, num_features, l2reg=0.01):
            self.num_features, self.l2reg = num_features, l2reg
            self.eye = ops.eye(num_features)

        def __call__(self, x):
            x = ops.reshape(x, (-1, self.num_features, self.num_features))
            xxt = ops.tensordot(x, x, axes=(2, 2))
            xxt = ops.reshape(xxt, (-1, self.num_features, self.num_features))
            return ops.sum(self.l2reg * ops.square(xxt - self.eye))

    return Orthogonal(k)


def _regularized_model(lib, regularizer, w):
    inp = lib.Input((5,))
    h = lib.layers.Dense(4, activation="tanh", activity_regularizer=regularizer)(inp)
    out = lib.layers.Dense(3, activation="softmax")(h)
    m = lib.Model(inp, out)
    m.set_weights(w)
    m.compile(lib.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    return m


@pytest.mark.parametrize("which", ["l2", "l1_l2_object", "user_subclass", "function"])
def test_activity_regularizer_adds_its_penalty_over_the_batch_as_keras(keras, which):
    """Dense(activity_regularizer=...): the penalty of the output, divided by the batch
    size (Keras 3), is added to the loss of fit and evaluate; built-in, a user's
    Regularizer subclass written with ops (PointNet's), or a plain function."""
    rng = np.random.default_rng(1)
    w = [rng.normal(size=(5, 4)), rng.normal(size=(4,)), rng.normal(size=(4, 3)),
         np.zeros(3)]
    w = [a.astype("float32") for a in w]
    x = rng.normal(size=(24, 5)).astype("float32")
    y = rng.integers(0, 3, 24)
    got = {}
    for name, lib in (("tessera", tn), ("keras", keras)):
        reg = {"l2": "l2", "l1_l2_object": lib.regularizers.L1L2(l1=0.02, l2=0.05),
               "user_subclass": _orthogonal(lib, 2),
               "function": lambda t: 0.3 * lib.ops.sum(lib.ops.abs(t))}[which]
        m = _regularized_model(lib, reg, w)
        before = m.evaluate(x, y, batch_size=8, verbose=0)
        plain = _regularized_model(lib, None, w).evaluate(x, y, batch_size=8, verbose=0)
        h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
        got[name] = (before, plain, h.history["loss"], m.get_weights())
    t, k = got["tessera"], got["keras"]
    assert k[0] > k[1] + 0.005  # the penalty counts (the test can fail)
    np.testing.assert_allclose(t[0], k[0], rtol=1e-5)
    np.testing.assert_allclose(t[1], k[1], rtol=1e-5)
    np.testing.assert_allclose(t[2], k[2], rtol=1e-4)
    for a, b in zip(t[3], k[3]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_activity_regularizer_argument_checked():
    with pytest.raises(ValueError, match=r"\[Dense\] activity_regularizer: .*unknown "
                                         r"regularizer 'l3'"):
        tn.layers.Dense(2, activity_regularizer="l3")
    with pytest.raises(TypeError, match=r"\[Dense\] activity_regularizer: .*expected a "
                                        r"regularizer"):
        tn.layers.Dense(2, activity_regularizer=3)
