"""tessera.nn.metrics: every metric's expressions compiled in a small program,
run over several batches, summed and finalized, against NumPy
implementations of Keras 3's definitions (with and without sample weights)."""

import json

import numpy as np
import pytest

from tessera import _core
from tessera.nn import losses
from tessera.nn import metrics as M

EPS = 1e-7


def run_metric(metric, batches, weighted):
    """Sums the metric's expressions over the batches (as the fit loop does) and
    returns metric.result of the sums."""
    exprs = metric.expressions("y", "p", "w" if weighted else None)
    args = "y, p, w" if weighted else "y, p"
    prog = _core.Program(f"define(f, {args}, block(list({', '.join(exprs)})))\nf\n", "<t>")
    totals = None
    for y, p, w in batches:
        out = prog.run([y, p, w] if weighted else [y, p])
        assert len(out) == len(exprs)
        out = [np.asarray(o) for o in out]
        assert all(o.dtype == np.float64 for o in out)
        totals = out if totals is None else [a + b for a, b in zip(totals, out)]
    return metric.result(totals)


def weighted_mean(values_fn, batches, weighted):
    """Keras's Mean over per-sample values (any axes after the batch averaged)."""
    total = count = 0.0
    for y, p, w in batches:
        v = np.asarray(values_fn(y.astype(np.float64), p.astype(np.float64)), np.float64)
        v = v.reshape(len(v), -1).mean(axis=1)
        ww = w if weighted else np.ones(len(v))
        total += np.sum(v * ww)
        count += np.sum(ww)
    return total / count


def make_batches(rng, kind, sizes=(7, 5, 9)):
    out = []
    for n in sizes:
        w = rng.random(n) * 2
        if kind == "sparse":
            p = rng.random((n, 5)).astype(np.float32)
            y = rng.integers(0, 5, size=n)
        elif kind == "sparse_col":
            p = rng.random((n, 5)).astype(np.float32)
            y = rng.integers(0, 5, size=(n, 1))
        elif kind == "onehot":
            p = rng.random((n, 5)).astype(np.float32)
            y = np.eye(5)[rng.integers(0, 5, size=n)].astype(np.float32)
        elif kind in ("rounded", "rounded_flat", "rounded_wide"):
            p = np.rint(rng.random((n, 3 if kind == "rounded_wide" else 1)) * 2).astype(np.float32)
            y = rng.integers(0, 3, size=n if kind == "rounded_flat" else (n, 1))
        elif kind == "ties":  # rounded scores: ties straddling the top-k boundary
            p = np.round(rng.random((n, 6)) * 3) / 3
            y = rng.integers(0, 6, size=n)
        elif kind == "binary":
            p = rng.random((n, 1)).astype(np.float32)
            y = rng.integers(0, 2, size=(n, 1)).astype(np.float32)
        elif kind == "binary_flat":  # labels (n,), outputs (n, 1)
            p = rng.random((n, 1)).astype(np.float32)
            y = rng.integers(0, 2, size=n)
        elif kind == "multilabel":
            p = rng.random((n, 3)).astype(np.float32)
            y = rng.integers(0, 2, size=(n, 3)).astype(np.float32)
        elif kind == "regression":
            p = rng.normal(size=(n, 3)).astype(np.float32)
            y = rng.normal(size=(n, 3))
        elif kind == "positive":
            p = rng.random((n, 4)) + 0.1
            y = rng.random((n, 4)) + 0.1
        elif kind == "sequence":  # (batch, steps, classes)
            p = rng.random((n, 3, 4)).astype(np.float32)
            y = rng.integers(0, 4, size=(n, 3))
        out.append((y, p, w))
    return out


def softmax_log(p, logits):
    if logits:
        z = p - p.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return np.log(np.clip(p / p.sum(axis=-1, keepdims=True), EPS, 1 - EPS))


def in_top_k(p, target, k):
    """TensorFlow's in_top_k: fewer than k classes score strictly higher."""
    t = np.take_along_axis(p, target[..., None].astype(np.int64), -1)
    return (np.sum(p > t, axis=-1) < k).astype(np.float64)


def bce(y, p, logits=False, s=0.0):
    y = y.reshape(p.shape) * (1 - s) + 0.5 * s
    if logits:
        return np.mean(np.maximum(p, 0) - p * y + np.log1p(np.exp(-np.abs(p))), axis=-1)
    q = np.clip(p, EPS, 1 - EPS)
    return np.mean(-(y * np.log(q) + (1 - y) * np.log(1 - q)), axis=-1)


MEAN_CASES = [
    (M.Accuracy(), "rounded", lambda y, p: y == p),
    (M.Accuracy(), "rounded_flat", lambda y, p: y[:, None] == p),  # (n,) labels, (n, 1) outputs
    (M.Accuracy(), "rounded_wide", lambda y, p: y == p),  # (n, 1) labels broadcast on (n, 3)
    (M.BinaryAccuracy(), "binary", lambda y, p: y == (p > 0.5)),
    (M.BinaryAccuracy(threshold=0.3), "binary_flat", lambda y, p: y[:, None] == (p > 0.3)),
    (M.BinaryAccuracy(), "multilabel", lambda y, p: y == (p > 0.5)),
    (M.CategoricalAccuracy(), "onehot", lambda y, p: np.argmax(y, -1) == np.argmax(p, -1)),
    (M.SparseCategoricalAccuracy(), "sparse", lambda y, p: y == np.argmax(p, -1)),
    (M.SparseCategoricalAccuracy(), "sparse_col", lambda y, p: y[:, 0] == np.argmax(p, -1)),
    (M.SparseCategoricalAccuracy(), "sequence", lambda y, p: y == np.argmax(p, -1)),
    (M.TopKCategoricalAccuracy(), "onehot", lambda y, p: in_top_k(p, np.argmax(y, -1), 5)),
    (M.TopKCategoricalAccuracy(k=2), "onehot", lambda y, p: in_top_k(p, np.argmax(y, -1), 2)),
    (M.SparseTopKCategoricalAccuracy(k=2), "sparse", lambda y, p: in_top_k(p, y, 2)),
    (M.SparseTopKCategoricalAccuracy(k=1), "ties", lambda y, p: in_top_k(p, y, 1)),
    (M.SparseTopKCategoricalAccuracy(k=3), "ties", lambda y, p: in_top_k(p, y, 3)),
    (M.SparseTopKCategoricalAccuracy(k=2), "sparse_col", lambda y, p: in_top_k(p, y[:, 0], 2)),
    (M.MeanAbsoluteError(), "regression", lambda y, p: np.mean(np.abs(y - p), -1)),
    (M.MeanSquaredError(), "regression", lambda y, p: np.mean((y - p) ** 2, -1)),
    (M.MeanAbsolutePercentageError(), "regression",
     lambda y, p: 100 * np.mean(np.abs((y - p) / np.maximum(np.abs(y), EPS)), -1)),
    (M.MeanSquaredLogarithmicError(), "positive",
     lambda y, p: np.mean((np.log(np.maximum(p, EPS) + 1) - np.log(np.maximum(y, EPS) + 1)) ** 2,
                          -1)),
    (M.BinaryCrossentropy(), "binary", lambda y, p: bce(y, p)),
    (M.BinaryCrossentropy(), "multilabel", lambda y, p: bce(y, p)),
    (M.BinaryCrossentropy(from_logits=True, label_smoothing=0.2), "regression",
     lambda y, p: bce((y > 0).astype(float), p, True, 0.2)),
    (M.CategoricalCrossentropy(), "onehot", lambda y, p: -np.sum(y * softmax_log(p, False), -1)),
    (M.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1), "onehot",
     lambda y, p: -np.sum((y * 0.9 + 0.1 / 5) * softmax_log(p, True), -1)),
    (M.SparseCategoricalCrossentropy(), "sparse",
     lambda y, p: -np.take_along_axis(softmax_log(p, False), y[:, None].astype(int), -1)[:, 0]),
    (M.SparseCategoricalCrossentropy(from_logits=True), "sequence",
     lambda y, p: -np.take_along_axis(softmax_log(p, True), y[..., None].astype(int), -1)[..., 0]),
]


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("metric,kind,values", MEAN_CASES,
                         ids=[f"{repr(c[0])}-{c[1]}" for c in MEAN_CASES])
def test_mean_metrics_against_keras(metric, kind, values, weighted, rng):
    batches = make_batches(rng, kind)
    if isinstance(metric, M.BinaryCrossentropy) and kind == "regression":
        batches = [((y > 0).astype(np.float32), p, w) for y, p, w in batches]
    got = run_metric(metric, batches, weighted)
    expected = weighted_mean(values, batches, weighted)
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_root_mean_squared_error(rng):
    batches = make_batches(rng, "regression")
    for weighted in (False, True):
        mse = weighted_mean(lambda y, p: np.mean((y - p) ** 2, -1), batches, weighted)
        got = run_metric(M.RootMeanSquaredError(), batches, weighted)
        assert got == pytest.approx(np.sqrt(mse), rel=1e-5)


# --------------------------------------------------------------------------- confusion counts


def keras_confusion(batches, thresholds, weighted, top_k=None, class_id=None, logits=False):
    """Keras's update_confusion_matrix_variables (direct comparisons)."""
    t = np.asarray(thresholds, np.float64)[:, None]
    tp = fp = tn = fn = 0.0
    for y, p, w in batches:
        p = p.astype(np.float64)
        if logits:
            p = 1 / (1 + np.exp(-p))
        y = np.asarray(y, np.float64).reshape(p.shape)
        if top_k is not None:
            idx = np.argsort(-p, axis=-1, kind="stable")[..., :top_k]
            mask = np.zeros(p.shape, bool)
            np.put_along_axis(mask, idx, True, -1)
            p = np.where(mask, p, -1e10)
        ww = (w if weighted else np.ones(len(p)))
        ww = np.broadcast_to(ww.reshape((-1,) + (1,) * (p.ndim - 1)), p.shape)
        if class_id is not None:
            p, y, ww = p[..., class_id], y[..., class_id], ww[..., class_id]
        pos = (p.ravel()[None, :] > t).astype(float)
        lab = (y.ravel() != 0).astype(float)[None, :]
        ww = ww.ravel()[None, :]
        tp = tp + np.sum(pos * lab * ww, 1)
        fp = fp + np.sum(pos * (1 - lab) * ww, 1)
        tn = tn + np.sum((1 - pos) * (1 - lab) * ww, 1)
        fn = fn + np.sum((1 - pos) * lab * ww, 1)
    return tp, fp, tn, fn


def nan0(a, b):
    return np.where(b > 0, a / np.where(b > 0, b, 1), 0.0)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("kwargs,kind", [
    (dict(), "binary"), (dict(), "binary_flat"), (dict(thresholds=0.3), "binary"),
    (dict(thresholds=[0.2, 0.5, 0.9]), "multilabel"), (dict(top_k=2), "onehot"),
    (dict(top_k=1), "ties"), (dict(class_id=2), "onehot"),
    (dict(top_k=2, class_id=1), "multilabel"),
])
def test_precision_recall_against_keras(kwargs, kind, weighted, rng):
    batches = make_batches(rng, kind)
    if kind == "ties":
        batches = [(np.eye(6)[y], p, w) for y, p, w in batches]
    thresholds = kwargs.get("thresholds", 0.5 if "top_k" not in kwargs else -1e10)
    thresholds = np.atleast_1d(thresholds)
    tp, fp, tn, fn = keras_confusion(batches, thresholds, weighted, kwargs.get("top_k"),
                                     kwargs.get("class_id"))
    for cls, expected in ((M.Precision, nan0(tp, tp + fp)), (M.Recall, nan0(tp, tp + fn))):
        got = run_metric(cls(**kwargs), batches, weighted)
        if len(thresholds) == 1:
            assert isinstance(got, float)
            got = [got]
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)


def keras_auc(tp, fp, tn, fn, curve, method):
    if curve == "PR" and method == "interpolation":
        dtp = tp[:-1] - tp[1:]
        p = tp + fp
        dp = p[:-1] - p[1:]
        slope = nan0(dtp, np.maximum(dp, 0))
        intercept = tp[1:] - slope * p[1:]
        ratio = np.where((p[:-1] > 0) & (p[1:] > 0), nan0(p[:-1], np.maximum(p[1:], 0)), 1.0)
        return np.sum(nan0(slope * (dtp + intercept * np.log(ratio)),
                           np.maximum(tp[1:] + fn[1:], 0)))
    recall = nan0(tp, tp + fn)
    x, y = (nan0(fp, fp + tn), recall) if curve == "ROC" else (recall, nan0(tp, tp + fp))
    heights = {"interpolation": (y[:-1] + y[1:]) / 2, "minoring": np.minimum(y[:-1], y[1:]),
               "majoring": np.maximum(y[:-1], y[1:])}[method]
    return np.sum((x[:-1] - x[1:]) * heights)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("kwargs,kind", [
    (dict(), "binary"), (dict(curve="PR"), "binary"),
    (dict(summation_method="minoring"), "multilabel"),
    (dict(curve="PR", summation_method="majoring"), "binary_flat"),
    (dict(num_thresholds=7), "binary"), (dict(num_thresholds=7, curve="PR"), "multilabel"),
    (dict(thresholds=[0.25, 0.5, 0.75]), "binary"),  # evenly spread: Keras's buckets
    (dict(thresholds=[0.1, 0.45, 0.5, 0.9]), "binary"),  # not: direct comparisons
    (dict(thresholds=[0.1, 0.45, 0.5, 0.9], curve="PR"), "multilabel"),
    (dict(from_logits=True), "regression"),
])
def test_auc_against_keras(kwargs, kind, weighted, rng):
    batches = make_batches(rng, kind, sizes=(40, 25, 33))
    if kind == "regression":
        batches = [((y > 0).astype(np.float32), p, w) for y, p, w in batches]
    if "thresholds" in kwargs:
        thresholds = [-EPS] + sorted(kwargs["thresholds"]) + [1 + EPS]
    else:
        n = kwargs.get("num_thresholds", 200)
        thresholds = [-EPS] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1 + EPS]
    counts = keras_confusion(batches, thresholds, weighted, logits=kwargs.get("from_logits"))
    expected = keras_auc(*counts, kwargs.get("curve", "ROC"),
                         kwargs.get("summation_method", "interpolation"))
    got = run_metric(M.AUC(**kwargs), batches, weighted)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_auc_extremes(rng):
    perfect = [(np.array([0, 0, 1, 1.0]), np.array([0.1, 0.2, 0.8, 0.9]), np.ones(4))]
    assert run_metric(M.AUC(), perfect, False) == pytest.approx(1.0, abs=1e-2)
    inverted = [(1 - y, p, w) for y, p, w in perfect]
    assert run_metric(M.AUC(), inverted, False) == pytest.approx(0.0, abs=1e-2)
    assert run_metric(M.Precision(), [(np.zeros(3), np.zeros(3), np.ones(3))], False) == 0.0


# --------------------------------------------------------------------------- names, configs


def test_get_names_and_accuracy_resolution():
    assert type(M.get("mae")) is M.MeanAbsoluteError and M.get("mae").name == "mae"
    assert M.MeanAbsoluteError().name == "mean_absolute_error"
    for name, cls in [("mse", M.MeanSquaredError), ("mape", M.MeanAbsolutePercentageError),
                      ("auc", M.AUC), ("precision", M.Precision), ("recall", M.Recall),
                      ("top_k_categorical_accuracy", M.TopKCategoricalAccuracy),
                      ("sparse_top_k_categorical_accuracy", M.SparseTopKCategoricalAccuracy),
                      ("binary_crossentropy", M.BinaryCrossentropy),
                      ("root_mean_squared_error", M.RootMeanSquaredError),
                      ("SparseCategoricalAccuracy", M.SparseCategoricalAccuracy)]:
        assert type(M.get(name)) is cls
    by_loss = [("sparse_categorical_crossentropy", M.SparseCategoricalAccuracy),
               (losses.SparseCategoricalCrossentropy(from_logits=True),
                M.SparseCategoricalAccuracy),
               ("binary_crossentropy", M.BinaryAccuracy),
               (losses.CategoricalCrossentropy(), M.CategoricalAccuracy),
               ("categorical_crossentropy", M.CategoricalAccuracy), ("mse", M.Accuracy)]
    for loss, cls in by_loss:
        m = M.get("accuracy", loss=loss)
        assert type(m) is cls and m.name == "accuracy"
    assert M.get("acc", loss="binary_crossentropy").name == "acc"
    # Keras 3's rule from the shapes (with the batch axis).
    assert type(M.get("accuracy", "mse", (32, 1), (32, 1))) is M.BinaryAccuracy
    assert type(M.get("accuracy", "mse", (32,), (32, 10))) is M.SparseCategoricalAccuracy
    assert type(M.get("accuracy", "mse", (32, 1), (32, 10))) is M.SparseCategoricalAccuracy
    assert type(M.get("accuracy", "mse", (32, 10), (32, 10))) is M.CategoricalAccuracy
    m = M.AUC()
    assert M.get(m) is m
    with pytest.raises(ValueError, match=r"unknown metric 'acuracy'; did you mean 'accuracy'\?"):
        M.get("acuracy")
    with pytest.raises(ValueError, match=r"unknown metric 'percision'; did you mean "
                                         r"'precision'\?"):
        M.get("percision")
    with pytest.raises(TypeError, match=r"wrap an expression builder with MeanMetricWrapper"):
        M.get(lambda y, p: y)
    with pytest.raises(ValueError, match=r"\[AUC\] curve must be 'ROC' or 'PR'"):
        M.AUC(curve="XY")
    with pytest.raises(ValueError, match=r"\[AUC\] num_thresholds must be an int > 1"):
        M.AUC(num_thresholds=1)
    with pytest.raises(ValueError, match=r"\[Precision\] thresholds must be numbers in \[0, 1\]"):
        M.Precision(thresholds=[0.5, 2.0])
    with pytest.raises(ValueError, match=r"\[TopKCategoricalAccuracy\] k must be an int >= 1"):
        M.TopKCategoricalAccuracy(k=0)


def test_mean_metric_wrapper(rng):
    m = M.MeanMetricWrapper(lambda y, p: f"abs({y} - {p}) ** 3", name="cubic")
    assert m.name == "cubic"
    batches = make_batches(rng, "regression")
    for weighted in (False, True):
        expected = weighted_mean(lambda y, p: np.abs(y - p) ** 3, batches, weighted)
        assert run_metric(m, batches, weighted) == pytest.approx(expected, rel=1e-5)
    scaled = M.MeanMetricWrapper(lambda y, p, scale: f"{scale} * ({p} - {y})", scale=2.0)
    assert scaled.name == "<lambda>"
    with pytest.raises(TypeError, match=r"cannot be serialized"):
        m.get_config()


ALL = [M.Accuracy(), M.BinaryAccuracy(threshold=0.3), M.CategoricalAccuracy(name="cat"),
       M.SparseCategoricalAccuracy(), M.TopKCategoricalAccuracy(k=3),
       M.SparseTopKCategoricalAccuracy(k=2, name="top2"), M.Precision(thresholds=[0.2, 0.7]),
       M.Recall(top_k=2, class_id=1), M.AUC(num_thresholds=50, curve="PR"),
       M.AUC(thresholds=[0.1, 0.3], summation_method="minoring", from_logits=True),
       M.MeanAbsoluteError(), M.MeanSquaredError(), M.RootMeanSquaredError(),
       M.MeanAbsolutePercentageError(), M.MeanSquaredLogarithmicError(),
       M.BinaryCrossentropy(from_logits=True, label_smoothing=0.1),
       M.CategoricalCrossentropy(label_smoothing=0.2),
       M.SparseCategoricalCrossentropy(from_logits=True)]


@pytest.mark.parametrize("metric", ALL, ids=repr)
def test_config_round_trip(metric):
    config = metric.get_config()
    assert config["class"] == type(metric).__name__ and config["name"] == metric.name
    back = M.deserialize(json.loads(json.dumps(config)))
    assert type(back) is type(metric) and back.get_config() == config
    assert back.expressions("y", "p", "w") == metric.expressions("y", "p", "w")
    assert M.get(config).get_config() == config


@pytest.mark.parametrize("metric", ALL, ids=repr)
def test_empty_batch_gives_zero_sums(metric):
    n_out = 1 if isinstance(metric, (M.AUC, M.BinaryAccuracy, M.BinaryCrossentropy)) else 4
    sparse = isinstance(metric, (M.SparseCategoricalAccuracy, M.SparseTopKCategoricalAccuracy,
                                 M.SparseCategoricalCrossentropy))
    y = np.zeros(0, np.int64) if sparse else np.zeros((0, n_out))
    p = np.zeros((0, n_out), np.float32)
    for w in (None, np.zeros(0)):
        exprs = metric.expressions("y", "p", None if w is None else "w")
        out = _core.Program(f"lambda(y, p, w, list({', '.join(exprs)}))").run([y, p, w])
        assert all(np.all(np.asarray(o) == 0) and np.asarray(o).dtype == np.float64
                   for o in out)
