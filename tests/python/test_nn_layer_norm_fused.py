"""The fused layer normalization primitive (one pass over the rows forward,
one backward for x, gamma and beta): values against NumPy, gradients against
central differences in float64, bits independent of the thread count;
LayerNormalization on it against Keras 3 on JAX (the oracle, same weights) and
against the composed path (FUSED_LAYER_NORM = False), outputs and gradients;
the cases that keep the composed path; the primitive's errors."""

import csv
import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera  # noqa: E402
from tessera import nn  # noqa: E402
from tessera.nn.layers import normalization as norm_module  # noqa: E402
from test_nn_attention_fused import _grads  # noqa: E402  (the same SGD-step gradients)

RNG = np.random.default_rng(47)


def _reference(x, gamma, beta, eps):
    """NumPy: the row's mean and biased variance over gamma's (the last) axes."""
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    c = x - x.mean(axis=axes, keepdims=True)
    return c / np.sqrt((c * c).mean(axis=axes, keepdims=True) + eps) * gamma + beta


def _layer_norm(x, gamma, beta, eps=1e-3):
    return tessera.call_primitive("layer_norm", [x, gamma, beta], {"epsilon": eps})


def _grad(g, x, gamma, eps=1e-3):
    return tessera.call_primitive("layer_norm_grad", [g, x, gamma], {"epsilon": eps})


# (x's shape, number of normalized axes): a row shorter than a vector, a row
# of 8 lanes and a remainder, two normalized axes, many bands of rows (the
# backward's partial sums), one long row, a single row.
SHAPES = [((4, 3, 5), 1), ((6, 21), 1), ((3, 4, 2, 6), 2), ((3000, 12), 1), ((2, 20000), 1),
          ((7,), 1)]
IDS = ["short", "lanes", "two_axes", "bands", "long_row", "one_row"]


def _inputs(shape, k, dtype=np.float64):
    x = RNG.normal(size=shape) * 3 + 1.5
    gamma = RNG.normal(size=shape[len(shape) - k:])
    beta = RNG.normal(size=gamma.shape)
    return [a.astype(dtype) for a in (x, gamma, beta)]


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_values_match_numpy(shape):
    x, gamma, beta = _inputs(*shape)
    want = _reference(x, gamma, beta, 1e-3)
    got = _layer_norm(x, gamma, beta)
    assert got.dtype == np.float64 and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    got32 = _layer_norm(*[a.astype(np.float32) for a in (x, gamma, beta)])
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("shape", SHAPES[:4], ids=IDS[:4])
def test_gradients_match_finite_differences(shape):
    x, gamma, beta = _inputs(*shape)
    g = RNG.normal(size=x.shape)
    grads = _grad(g, x, gamma, 0.01)
    assert len(grads) == 3
    eps = 1e-6
    args = [x, gamma, beta]
    for i, (a, da) in enumerate(zip(args, grads)):
        assert da.shape == a.shape and da.dtype == np.float64
        for idx in RNG.choice(a.size, size=min(a.size, 8), replace=False):
            pos = np.unravel_index(idx, a.shape)
            up, down = [b.copy() for b in args], [b.copy() for b in args]
            up[i][pos] += eps
            down[i][pos] -= eps
            num = (np.sum(_reference(*up, 0.01) * g) -
                   np.sum(_reference(*down, 0.01) * g)) / (2 * eps)
            np.testing.assert_allclose(da[pos], num, rtol=1e-6, atol=1e-7,
                                       err_msg=f"{['x', 'gamma', 'beta'][i]}{pos}")


def test_bits_do_not_depend_on_the_thread_count():
    x, gamma, beta = _inputs((5000, 24), 1, np.float32)
    g = RNG.normal(size=x.shape).astype(np.float32)
    results = []
    try:
        for threads in (1, 2, 3):
            tessera.set_num_threads(threads)
            results.append([_layer_norm(x, gamma, beta)] + list(_grad(g, x, gamma)))
    finally:
        tessera.set_num_threads(os.cpu_count())
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert np.array_equal(a, b)


def test_float16_computes_in_float32_and_stores_float16():
    x, gamma, beta = _inputs((4, 9), 1, np.float16)
    got = _layer_norm(x, gamma, beta)
    assert got.dtype == np.float16
    want = _reference(*[a.astype(np.float64) for a in (x, gamma, beta)], 1e-3)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=3e-3, atol=3e-3)
    assert _layer_norm(x, gamma.astype(np.float32), beta).dtype == np.float32


def test_primitive_errors_name_the_operation_and_the_values():
    x, gamma, beta = _inputs((2, 3, 4), 1)
    with pytest.raises(ValueError, match=r"\[layer_norm\] gamma's shape must be x's last "
                                         r"dimensions \(the normalized ones\), got x of shape "
                                         r"\(2, 3, 4\) and gamma of shape \(3,\)"):
        _layer_norm(x, np.ones(3), beta)
    with pytest.raises(ValueError, match=r"\[layer_norm\] argument 'beta' must have gamma's "
                                         r"shape \(4,\), got \(5,\)"):
        _layer_norm(x, gamma, np.ones(5))
    with pytest.raises(ValueError, match=r"\[layer_norm\] argument 'epsilon' must be a finite "
                                         r"number > 0, got 0"):
        _layer_norm(x, gamma, beta, 0.0)
    with pytest.raises(ValueError, match=r"\[layer_norm_grad\] g has shape \(2, 3\) but "
                                         r"layer_norm's result has shape \(2, 3, 4\)"):
        _grad(np.ones((2, 3)), x, gamma)


# ---- LayerNormalization on the primitive

@pytest.fixture
def composed():
    """Runs the body with the composed path (the reference), then restores."""
    def switch(on):
        norm_module.FUSED_LAYER_NORM = not on
    yield switch
    norm_module.FUSED_LAYER_NORM = True


def _model(lib, shape, dtype=None, **kw):
    L = lib.layers if lib is keras else lib
    x = lib.Input(shape)
    out = L.LayerNormalization(**kw)(L.Dense(shape[-1])(x))
    return lib.Model(x, out) if dtype is None else lib.Model(x, out, dtype=dtype)


def _weights(model, dtype=np.float32):
    return [(RNG.normal(size=w.shape) * 0.7 + 0.2).astype(dtype) for w in model.get_weights()]


@pytest.mark.parametrize("kw", [{}, {"epsilon": 1e-6}, {"axis": [-2, -1]}],
                         ids=["default", "eps", "two_axes"])
def test_layer_matches_keras(kw):
    t, k = _model(nn, (4, 6), **kw), _model(keras, (4, 6), **kw)
    w = _weights(t)
    t.set_weights(w)
    k.set_weights(w)
    x = RNG.normal(size=(3, 4, 6)).astype(np.float32)
    np.testing.assert_allclose(t.predict(x, verbose=0), np.asarray(k(x)), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("kw", [{}, {"axis": [-2, -1]}], ids=["last", "two_axes"])
def test_fused_equals_composed_with_gradients(kw, composed):
    x = RNG.normal(size=(3, 4, 6))
    r = RNG.normal(size=(3, 4, 6))
    results = []
    for ref in (False, True):
        composed(ref)
        m = _model(nn, (4, 6), dtype="float64", **kw)
        if not results:
            w = _weights(m, np.float64)
        m.set_weights(w)
        results.append((m.predict(x, verbose=0), _grads(m, x, r)))
    (out, grads), (ref_out, ref_grads) = results
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-12)
    for g, e in zip(grads, ref_grads):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)
    assert all(np.abs(g).max() > 0 for g in grads)


def _step_calls_layer_norm(model, x):
    """Whether a training step evaluated the fused primitive (the trace's counters)."""
    model.compile(tessera.optim.SGD(0.0), "mse")
    with tempfile.TemporaryDirectory() as folder:
        with tessera.trace(folder) as tr:
            model.fit(x, np.zeros_like(x), epochs=1, batch_size=len(x), verbose=0)
        tr.csv(os.path.join(folder, "c.csv"))
        with open(os.path.join(folder, "c.csv")) as fh:
            names = {r["name"] for r in csv.DictReader(fh)}
    return "layer_norm" in names and "layer_norm_grad" in names


def test_other_layer_norms_keep_the_composed_path():
    x = RNG.normal(size=(2, 4, 6)).astype(np.float32)
    assert _step_calls_layer_norm(_model(nn, (4, 6)), x)
    assert not _step_calls_layer_norm(_model(nn, (4, 6), center=False), x)
    assert not _step_calls_layer_norm(_model(nn, (4, 6), scale=False), x)
    assert not _step_calls_layer_norm(_model(nn, (4, 6), axis=1), x)
