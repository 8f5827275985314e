"""Keras's metric functions (keras.metrics.binary_accuracy & co, issue 30 item 4)
against Keras 3 on JAX: every function Keras lists in keras.metrics is in
tessera.nn.metrics and gives Keras's values."""

import numpy as np
import pytest

import tessera.nn as nn

RNG = np.random.default_rng(3)
P = RNG.uniform(0.05, 0.95, size=(8, 5)).astype(np.float32)
P[1, 2] = P[1, 4]  # a tie
ONEHOT = np.eye(5, dtype=np.float32)[RNG.integers(0, 5, 8)]
LABELS = RNG.integers(0, 5, 8)
BINARY = (RNG.uniform(size=(8, 5)) > 0.5).astype(np.float32)
REAL = RNG.normal(size=(8, 5)).astype(np.float32)


def _cases():
    return [
        ("binary_accuracy", (BINARY, P), {}),
        ("binary_accuracy", (BINARY, P), {"threshold": 0.3}),
        ("binary_accuracy", (BINARY[:, :1], P[:, 0]), {}),
        ("categorical_accuracy", (ONEHOT, P), {}),
        ("sparse_categorical_accuracy", (LABELS, P), {}),
        ("sparse_categorical_accuracy", (LABELS[:, None], P), {}),
        ("top_k_categorical_accuracy", (ONEHOT, P), {"k": 2}),
        ("sparse_top_k_categorical_accuracy", (LABELS, P), {"k": 3}),
        ("sparse_top_k_categorical_accuracy",
         (LABELS, np.argsort(-P, axis=-1).astype(np.int32)), {"k": 2, "from_sorted_ids": True}),
        ("pearson_correlation", (REAL, P), {}),
        ("pearson_correlation", (REAL, P), {"axis": 0}),
        ("concordance_correlation", (REAL, P), {}),
        ("concordance_correlation", (REAL, P), {"axis": 0}),
        ("sparse_categorical_crossentropy", (LABELS, P), {}),
        ("categorical_focal_crossentropy", (ONEHOT, P), {}),
    ] + [(n, (BINARY, P), {}) for n in (
        "binary_crossentropy", "binary_focal_crossentropy", "categorical_crossentropy",
        "categorical_hinge", "hinge", "huber", "kl_divergence", "log_cosh",
        "mean_absolute_error", "mean_absolute_percentage_error", "mean_squared_error",
        "mean_squared_logarithmic_error", "poisson", "squared_hinge")]


def test_every_keras_metric_function_is_there(keras):
    funcs = [n for n in dir(keras.metrics) if not n.startswith("_") and n[0].islower()
             and callable(getattr(keras.metrics, n))
             and n not in ("get", "serialize", "deserialize")]
    missing = [n for n in funcs if not callable(getattr(nn.metrics, n, None))]
    assert missing == []
    assert {c[0] for c in _cases()} == set(funcs)  # each is tested below


@pytest.mark.parametrize("name,args,kwargs", _cases())
def test_metric_function_matches_keras(keras, name, args, kwargs):
    ours = np.asarray(getattr(nn.metrics, name)(*args, **kwargs))
    theirs = np.asarray(getattr(keras.metrics, name)(*args, **kwargs))
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_metric_function_errors_name_the_function():
    with pytest.raises(ValueError, match=r"\[top_k_categorical_accuracy\] k must be an int >= 1"
                                         r", got 0"):
        nn.metrics.top_k_categorical_accuracy(ONEHOT, P, k=0)
    with pytest.raises(ValueError, match=r"\[sparse_categorical_accuracy\] y_true has shape "
                                         r"\(3,\); for y_pred of shape \(8, 5\)"):
        nn.metrics.sparse_categorical_accuracy(LABELS[:3], P)
    with pytest.raises(ValueError, match=r"\[binary_accuracy\] y_true of shape \(8, 5\) and "
                                         r"y_pred of shape \(8, 4\) do not broadcast"):
        nn.metrics.binary_accuracy(BINARY, P[:, :4])
