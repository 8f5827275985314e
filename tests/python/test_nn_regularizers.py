"""tessera.nn.regularizers: Keras's penalties as expressions of the language,
evaluated (and differentiated) through tessera.Program against NumPy."""

import json

import numpy as np
import pytest

from tessera import Program
from tessera.nn import regularizers as reg


def keras_orthogonal(w, factor, mode):
    x = w if mode == "rows" else w.T
    x = x / np.sqrt(np.maximum(np.sum(x * x, axis=1, keepdims=True), 1e-12))
    p = x @ x.T
    n = x.shape[0]
    return factor * 0.5 * np.sum(np.abs(p * (1 - np.eye(n)))) / (n * (n - 1) / 2)


W = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.5], [2.0, 0.25, 1.0], [-1.0, 1.0, 1.0]])


@pytest.mark.parametrize("r,expected", [
    (reg.L1(), 0.01 * np.sum(np.abs(W))),
    (reg.L2(), 0.01 * np.sum(W * W)),
    (reg.L1(0.5), 0.5 * np.sum(np.abs(W))),
    (reg.L2(1e-4), 1e-4 * np.sum(W * W)),
    (reg.L1L2(0.1, 0.2), 0.1 * np.sum(np.abs(W)) + 0.2 * np.sum(W * W)),
    (reg.L1L2(), 0.0),
    (reg.OrthogonalRegularizer(), keras_orthogonal(W, 0.01, "rows")),
    (reg.OrthogonalRegularizer(0.3, "columns"), keras_orthogonal(W, 0.3, "columns")),
], ids=repr)
def test_penalties_against_numpy(r, expected):
    value = Program(f"lambda(w, {r.expression('w')})", "<t>").run([W])
    assert float(value) == pytest.approx(expected, rel=1e-12)
    assert r(W) == pytest.approx(expected, rel=1e-12)
    assert r(W.astype(np.float32)) == pytest.approx(expected, rel=1e-5)


def test_expressions_and_gradients():
    assert reg.L2(0.01).expression("w") == "0.01 * sum(square(w))"
    assert reg.L1(0.01).expression("k") == "0.01 * sum(abs(k))"
    assert reg.L1L2(0.1, 0.2).expression("w") == "0.1 * sum(abs(w)) + 0.2 * sum(square(w))"
    # The model differentiates the penalty with the loss.
    w = np.array([1.0, -2.0, 0.5])
    grad = Program(f"lambda(w, grad(lambda(w, {reg.L1L2(0.1, 0.2).expression('w')}))(w))")
    np.testing.assert_allclose(grad.run([w]), 0.1 * np.sign(w) + 0.4 * w, rtol=1e-12)


@pytest.mark.parametrize("r", [reg.L1(0.3), reg.L2(), reg.L1L2(0.1, 0.0),
                               reg.OrthogonalRegularizer(0.2, "columns")], ids=repr)
def test_config_round_trip(r):
    config = r.get_config()
    back = reg.deserialize(json.loads(json.dumps(config)))
    assert type(back) is type(r) and back.get_config() == config
    assert back.expression("w") == r.expression("w")
    assert reg.get(config).get_config() == config


def test_get_and_errors():
    assert type(reg.get("l1")) is reg.L1 and reg.get("l1").l1 == 0.01
    assert type(reg.get("L2")) is reg.L2 and reg.get("l2").l2 == 0.01
    both = reg.get("l1_l2")
    assert type(both) is reg.L1L2 and (both.l1, both.l2) == (0.01, 0.01)
    assert type(reg.get("orthogonal_regularizer")) is reg.OrthogonalRegularizer
    r = reg.L2()
    assert reg.get(r) is r and reg.get(None) is None
    with pytest.raises(ValueError, match=r"unknown regularizer 'l22'; did you mean 'l2'\?"):
        reg.get("l22")
    with pytest.raises(ValueError, match=r"\[L2\] l2 must be a finite number >= 0, got -1"):
        reg.L2(-1)
    with pytest.raises(ValueError, match=r"\[OrthogonalRegularizer\] mode must be"):
        reg.OrthogonalRegularizer(mode="diagonal")
    with pytest.raises(TypeError, match=r"\[regularizers.get\] expected"):
        reg.get(0.1)
