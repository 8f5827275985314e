"""Keras's losses called on arrays (issue 30): the loss objects as
`loss_fn(y_true, y_pred, sample_weight)` and the loss functions
(`keras.losses.mse(y, p)`, no reduction), against NumPy written from Keras's
definitions."""
import numpy as np
import pytest

import tessera
from tessera import nn

rng = np.random.default_rng(7)
EPS = 1e-7


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_regression_functions_and_objects():
    y = rng.normal(size=(6, 4)).astype(np.float32)
    p = rng.normal(size=(6, 4)).astype(np.float32)
    mse = np.mean((y - p) ** 2, axis=-1)
    np.testing.assert_allclose(nn.losses.mse(y, p), mse, rtol=1e-6)
    np.testing.assert_allclose(nn.losses.mean_absolute_error(y, p),
                               np.mean(np.abs(y - p), axis=-1), rtol=1e-6)
    e = p - y
    huber = np.mean(np.where(np.abs(e) <= 1.5, 0.5 * e ** 2, 1.5 * (np.abs(e) - 0.75)), axis=-1)
    np.testing.assert_allclose(nn.losses.huber(y, p, delta=1.5), huber, rtol=1e-6)
    # the object: Keras's sum_over_batch_size reduction, with and without weights
    loss = nn.losses.MeanSquaredError()
    out = loss(y, p)
    assert out.dtype == np.float32 and np.ndim(out) == 0
    np.testing.assert_allclose(out, mse.mean(), rtol=1e-6)
    w = rng.uniform(size=6)
    np.testing.assert_allclose(loss(y, p, sample_weight=w), np.sum(mse * w) / 6, rtol=1e-6)
    np.testing.assert_allclose(loss(y, p, sample_weight=w[:, None]), np.sum(mse * w) / 6,
                               rtol=1e-6)


def test_crossentropies():
    z = rng.normal(size=(5, 3)).astype(np.float32)
    probs = softmax(z)
    labels = np.array([0, 2, 1, 1, 0])
    onehot = np.eye(3, dtype=np.float32)[labels]
    clipped = np.clip(probs, EPS, 1 - EPS)
    want = -np.log(clipped[np.arange(5), labels])
    np.testing.assert_allclose(nn.losses.sparse_categorical_crossentropy(labels, probs), want,
                               rtol=1e-5)
    np.testing.assert_allclose(nn.losses.categorical_crossentropy(onehot, probs), want,
                               rtol=1e-5)
    logits_want = -np.log(softmax(z.astype(np.float64))[np.arange(5), labels])
    np.testing.assert_allclose(
        nn.losses.sparse_categorical_crossentropy(labels, z, from_logits=True), logits_want,
        rtol=1e-5)
    np.testing.assert_allclose(
        nn.losses.SparseCategoricalCrossentropy(from_logits=True)(labels[:, None], z),
        logits_want.mean(), rtol=1e-5)
    yb = (rng.uniform(size=(5, 2)) > 0.5).astype(np.float32)
    pb = rng.uniform(0.05, 0.95, size=(5, 2)).astype(np.float32)
    bce = -np.mean(yb * np.log(pb) + (1 - yb) * np.log(1 - pb), axis=-1)
    np.testing.assert_allclose(nn.losses.binary_crossentropy(yb, pb), bce, rtol=1e-5)
    np.testing.assert_allclose(nn.losses.BinaryCrossentropy()(yb, pb), bce.mean(), rtol=1e-5)


def test_function_losses_compile_and_errors():
    # keras.losses.get as Keras's: a function's name gives the function, a class's
    # name an object; compile takes either (its own loss object)
    assert nn.losses.get(nn.losses.mse) is nn.losses.mse
    assert nn.losses.get("mse") is nn.losses.mean_squared_error
    assert isinstance(nn.losses.get("MeanSquaredError"), nn.losses.MeanSquaredError)
    assert isinstance(nn.losses.loss_object(nn.losses.mse), nn.losses.MeanSquaredError)
    with pytest.raises(ValueError, match=r"unknown loss 'mean_sqared_error'; did you mean "
                                         r"'mean_squared_error'"):
        nn.losses.get("mean_sqared_error")
    x = rng.normal(size=(32, 4)).astype(np.float32)
    y = x @ rng.normal(size=(4, 2)).astype(np.float32)
    model = nn.Sequential([nn.Dense(2)], input_shape=(4,), seed=1)
    model.compile(tessera.optim.SGD(0.01), loss=nn.losses.mean_squared_error)
    before = model.evaluate(x, y, verbose=0)
    np.testing.assert_allclose(before, nn.losses.MeanSquaredError()(y, model.predict(x)),
                               rtol=1e-5)
    with pytest.raises(ValueError, match=r"\[MeanSquaredError\] y_true has shape \(3,\) and "
                                         r"y_pred \(4,\)"):
        nn.losses.MeanSquaredError()(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match=r"\[SparseCategoricalCrossentropy\] y_true must hold "
                                         r"integer class labels"):
        nn.losses.sparse_categorical_crossentropy(np.array([0.5]), np.ones((1, 2)))
    with pytest.raises(ValueError, match=r"\[categorical_crossentropy\] axis=0 is not supported"):
        nn.losses.categorical_crossentropy(np.ones((2, 2)), np.ones((2, 2)), axis=0)
    custom = nn.losses.get(lambda yt, yp: np.abs(yt - yp).max(axis=-1))
    np.testing.assert_allclose(custom(y, y + 1.0), 1.0, rtol=1e-6)


def test_lower_case_regularizers():
    r = nn.regularizers.l2(1e-4)
    assert isinstance(r, nn.regularizers.L2) and r.l2 == 1e-4
    assert nn.regularizers.l1_l2(l1=0.1, l2=0.2).get_config() == {"class": "L1L2", "l1": 0.1,
                                                                   "l2": 0.2}
