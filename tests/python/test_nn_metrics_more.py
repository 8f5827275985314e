"""The metric classes of issue 30 item 4 against Keras 3 on JAX: standalone
(update_state over two batches, with and without sample weights, result,
reset_state; also the built-in metrics that were compiled-only), and in
compile(metrics=[...]) (evaluate's values, with sample weights)."""

import numpy as np
import pytest

import tessera.nn as nn

RNG = np.random.default_rng(0)
P = RNG.uniform(0.05, 0.95, size=(8, 4)).astype(np.float32)
Y = (RNG.uniform(size=(8, 4)) > 0.5).astype(np.float32)
R = RNG.normal(size=(8, 4)).astype(np.float32)
ONEHOT = np.eye(4, dtype=np.float32)[RNG.integers(0, 4, 8)]
LAB, PLAB = RNG.integers(0, 4, 8), RNG.integers(0, 4, 8)
W = RNG.uniform(size=8).astype(np.float32)
WI = np.array([1, 2, 0, 3, 1, 1, 2, 1], np.float32)

CASES = [
    ("Hinge", {}, Y, P), ("SquaredHinge", {}, Y, P), ("CategoricalHinge", {}, ONEHOT, P),
    ("KLDivergence", {}, ONEHOT, P), ("LogCoshError", {}, R, P), ("Poisson", {}, Y, P),
    ("CosineSimilarity", {}, R, P), ("PearsonCorrelation", {}, R, P),
    ("ConcordanceCorrelation", {}, R, P), ("R2Score", {}, R, P + R),
    ("R2Score", {"class_aggregation": "variance_weighted_average", "num_regressors": 2}, R,
     P + R),
    ("R2Score", {"class_aggregation": None}, R, P + R),
    ("IoU", {"num_classes": 4, "target_class_ids": [0, 2]}, LAB, PLAB),
    ("MeanIoU", {"num_classes": 4}, LAB, PLAB),
    ("MeanIoU", {"num_classes": 4, "dtype": "float32", "ignore_class": 1}, LAB, PLAB),
    ("BinaryIoU", {"threshold": 0.4}, Y[:, 0], P[:, 0]),
    ("OneHotIoU", {"num_classes": 4, "target_class_ids": [1, 3]}, ONEHOT, P),
    ("OneHotMeanIoU", {"num_classes": 4}, ONEHOT, P),
    ("PrecisionAtRecall", {"recall": 0.5}, Y, P),
    ("RecallAtPrecision", {"precision": 0.6, "num_thresholds": 50}, Y, P),
    ("SensitivityAtSpecificity", {"specificity": 0.4}, Y, P),
    ("SpecificityAtSensitivity", {"sensitivity": 0.7, "class_id": 2}, Y, P),
    ("PrecisionAtRecall", {"recall": 0.3, "num_thresholds": 1}, Y, P),
    # built-in metrics that were compiled-only, now standalone too
    ("BinaryAccuracy", {}, Y, P), ("AUC", {}, Y, P), ("Precision", {}, Y, P),
    ("RootMeanSquaredError", {}, R, P), ("F1Score", {}, ONEHOT, P),
    ("SparseTopKCategoricalAccuracy", {"k": 2}, LAB, P),
]


@pytest.mark.parametrize("name,kwargs,y,p", CASES)
def test_standalone_metric_matches_keras(keras, name, kwargs, y, p):
    for sw in (None, W, WI):
        ours, theirs = getattr(nn.metrics, name)(**kwargs), getattr(keras.metrics, name)(**kwargs)
        assert float(np.sum(ours.result())) == 0.0  # before any update
        for k in (0, 4):
            part = None if sw is None else sw[k:k + 4]
            ours.update_state(y[k:k + 4], p[k:k + 4], sample_weight=part)
            theirs.update_state(y[k:k + 4], p[k:k + 4], sample_weight=part)
        np.testing.assert_allclose(np.asarray(ours.result(), np.float64),
                                   np.asarray(theirs.result(), np.float64), rtol=1e-4, atol=1e-5,
                                   err_msg=f"{name} weights={sw is not None}")
    ours.reset_state()
    ours.update_state(y[:4], p[:4])
    theirs.reset_state()
    theirs.update_state(y[:4], p[:4])
    np.testing.assert_allclose(np.asarray(ours.result(), np.float64),
                               np.asarray(theirs.result(), np.float64), rtol=1e-4, atol=1e-5)
    cfg = ours.get_config()
    again = nn.metrics.deserialize({"class_name": name, "config": cfg})
    assert again.get_config() == cfg
    assert ours.name == theirs.name.rsplit("_", 1)[0] if theirs.name[-1].isdigit() else \
        ours.name == theirs.name


def test_standalone_errors_name_the_metric():
    m = nn.metrics.Hinge()
    with pytest.raises(ValueError, match=r"\[Hinge.update_state\] y_true and y_pred must hold the "
                                         r"same number of samples"):
        m.update_state(Y[:3], P)
    with pytest.raises(ValueError, match=r"\[Hinge.update_state\] sample_weight must hold one "
                                         r"weight per sample \(8\)"):
        m.update_state(Y, P, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match=r"\[IoU\] target_class_ids must be class ids in "
                                         r"\[0, 3\)"):
        nn.metrics.IoU(3, [0, 3])
    with pytest.raises(ValueError, match=r"\[PrecisionAtRecall\] recall must be a number in "
                                         r"\[0, 1\], got 1.5"):
        nn.metrics.PrecisionAtRecall(1.5)


X = RNG.normal(size=(24, 5)).astype(np.float32)
SW = RNG.uniform(0.1, 2.0, size=24).astype(np.float32)


def _models(keras, activation, units, loss, metrics):
    """tessera's and Keras's models with the metrics unweighted (metrics=), then both
    with them weighted by sample_weight (weighted_metrics=, as Keras's)."""
    rng = np.random.default_rng(1)
    kernel = rng.normal(size=(5, units)).astype(np.float32)
    models = []
    for lib, key in ((nn, "metrics"), (keras, "metrics"), (nn, "weighted_metrics"),
                     (keras, "weighted_metrics")):
        m = lib.Sequential([lib.Input((5,)), lib.layers.Dense(units, activation=activation)])
        m.layers[0].set_weights([kernel, np.zeros(units, np.float32)])
        m.compile("sgd", loss, **{key: [getattr(lib.metrics, n)(**kw) for n, kw in metrics]})
        models.append(m)
    return models


COMPILED = [
    ("linear", 4, "mse", "real", [("R2Score", {}), ("LogCoshError", {}),
                                  ("CosineSimilarity", {}), ("PearsonCorrelation", {}),
                                  ("ConcordanceCorrelation", {})]),
    ("softmax", 4, "categorical_crossentropy", "onehot",
     [("CategoricalHinge", {}), ("KLDivergence", {}), ("Poisson", {}), ("Hinge", {}),
      ("SquaredHinge", {}), ("OneHotIoU", {"num_classes": 4, "target_class_ids": [0, 1]}),
      ("OneHotMeanIoU", {"num_classes": 4}), ("PrecisionAtRecall", {"recall": 0.4}),
      ("RecallAtPrecision", {"precision": 0.3}),
      ("SensitivityAtSpecificity", {"specificity": 0.5}),
      ("SpecificityAtSensitivity", {"sensitivity": 0.5})]),
    ("softmax", 4, "sparse_categorical_crossentropy", "sparse",
     [("IoU", {"num_classes": 4, "target_class_ids": [1, 2], "sparse_y_pred": False}),
      ("MeanIoU", {"num_classes": 4, "sparse_y_pred": False})]),
    ("sigmoid", 1, "binary_crossentropy", "binary",
     [("BinaryIoU", {"threshold": 0.3}), ("BinaryIoU", {"target_class_ids": [1], "name": "b1"})]),
]


@pytest.mark.parametrize("activation,units,loss,kind,metrics", COMPILED)
def test_compiled_metrics_match_keras(keras, activation, units, loss, kind, metrics):
    rng = np.random.default_rng(2)
    y = {"real": rng.normal(size=(24, 4)).astype(np.float32),
         "onehot": np.eye(4, dtype=np.float32)[rng.integers(0, 4, 24)],
         "sparse": rng.integers(0, 4, 24),
         "binary": rng.integers(0, 2, (24, 1)).astype(np.float32)}[kind]
    ours_plain, unweighted, ours_weighted, weighted = _models(keras, activation, units, loss,
                                                              metrics)
    for sw, ours, theirs in ((None, ours_plain, unweighted), (SW, ours_weighted, weighted)):
        a = ours.evaluate(X, y, sample_weight=sw, batch_size=8, verbose=0, return_dict=True)
        b = theirs.evaluate(X, y, sample_weight=sw, batch_size=8, verbose=0, return_dict=True)
        assert len(a) == len(b) == len(metrics) + 1
        for (ka, va), (kb, vb) in zip(sorted(a.items()), sorted(b.items())):
            np.testing.assert_allclose(va, vb, rtol=1e-4, atol=1e-5, err_msg=f"{ka} / {kb}")
