"""The metrics of an output that carries a mask, against Keras 3 on JAX:
its mean metrics ('accuracy', 'mae', a plain function) are weighted by the
mask, and the others (Precision, Recall, AUC, ...) are not, as Keras 3's
confusion metrics ignore masks (only its MeanMetricWrapper reads them)."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn  # noqa: E402

RNG = np.random.default_rng(21)


def _padded(n, length, vocab=12):
    x = np.zeros((n, length), dtype=np.int32)
    for i in range(n):
        k = int(RNG.integers(1, length + 1))
        x[i, :k] = RNG.integers(1, vocab, size=k)
    return x


def _abs_error(y_true, y_pred):
    return abs(y_true - y_pred)[..., 0]


def _metrics(lib):
    m = lib.metrics
    # (named: Keras numbers the default names of later instances, auc_1, ...)
    return [m.Precision(name="precision"), m.Recall(thresholds=[0.3, 0.6], name="recall"),
            "accuracy", m.AUC(num_thresholds=50, name="auc"), m.AUC(curve="PR", name="pr"),
            _abs_error, m.FalseNegatives(name="false_negatives"),
            m.BinaryAccuracy(name="bacc")]


def _both(weighted):
    def build(lib):
        inp = lib.Input((None,), dtype="int32")
        h = lib.layers.Embedding(12, 4, mask_zero=True)(inp)
        h = lib.layers.GRU(3, return_sequences=True)(h)
        m = lib.Model(inp, lib.layers.Dense(1, activation="sigmoid")(h))
        kw = {"weighted_metrics" if weighted else "metrics": _metrics(lib)}
        m.compile(optimizer=lib.optimizers.SGD(0.2), loss="binary_crossentropy", **kw)
        return m

    t, k = build(nn), build(keras)
    t.set_weights([RNG.normal(size=w.shape).astype(np.float32) for w in t.get_weights()])
    k.set_weights(t.get_weights())
    return t, k


def _close(got: dict, want: dict):
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], np.asarray(want[name]), rtol=2e-4, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize("weighted", [False, True])
def test_masked_output_metrics_evaluate_as_keras(weighted):
    t, k = _both(weighted)
    x = _padded(20, 7)
    y = RNG.integers(0, 2, size=(20, 7, 1)).astype(np.float32)
    sw = (RNG.random(20) + 0.5).astype(np.float32) if weighted else None
    # (one weight per sample of the steps' losses: (n, 1), as Keras takes it; (n,) raises)
    got = t.evaluate(x, y, sample_weight=None if sw is None else sw[:, None], verbose=0,
                     return_dict=True)
    if not weighted:
        _close(got, k.evaluate(x, y, verbose=0, return_dict=True))
    else:
        # Keras 3.15 fails to broadcast per-sample weights against a
        # sequence output (in its loss and its confusion metrics): its
        # metric objects get each sample's weight on each step
        p = np.asarray(k.predict(x, verbose=0))
        for name, metric in zip(("precision", "recall", "auc", "pr", "false_negatives"),
                                [_metrics(keras)[i] for i in (0, 1, 3, 4, 6)]):
            metric.update_state(y, p, sample_weight=sw[:, None, None])
            np.testing.assert_allclose(got[name], np.asarray(metric.result()), rtol=2e-4,
                                       err_msg=name)
    # the mask does weigh the mean metrics, and not the others (so the check can fail)
    p = t.predict(x, verbose=0)[..., 0]
    mask = x != 0
    hit = ((p > 0.5) == (y[..., 0] > 0.5)).astype(np.float64)
    w = mask * (1.0 if sw is None else sw[:, None])
    np.testing.assert_allclose(got["accuracy"], np.sum(hit * w) / np.sum(w), rtol=1e-6)
    pos = p > 0.5
    every = np.ones_like(p) * (1.0 if sw is None else sw[:, None])  # padded steps too
    tp = np.sum((pos & (y[..., 0] > 0.5)) * every)
    allp = np.sum(pos * every)
    np.testing.assert_allclose(got["precision"], tp / allp, rtol=1e-5)


def test_masked_output_metrics_fit_as_keras():
    t, k = _both(False)
    x = _padded(16, 6)
    y = RNG.integers(0, 2, size=(16, 6, 1)).astype(np.float32)
    ht = t.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    hk = k.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    # Keras on JAX loses the outputs' masks in its training step's metrics
    # (its evaluate keeps them), so fit's loss and unmasked metrics are compared
    assert sorted(ht.history) == sorted(hk.history), (sorted(ht.history), sorted(hk.history))
    for name in ("loss", "precision", "recall", "auc", "pr", "false_negatives"):
        np.testing.assert_allclose(ht.history[name], hk.history[name], rtol=2e-4, atol=1e-6,
                                   err_msg=name)
    for a, b in zip(t.get_weights(), k.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-3, atol=2e-5)
