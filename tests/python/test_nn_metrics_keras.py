"""Metrics of issue 30 against Keras 3 on JAX: a user's Metric subclass
(update_state/result/reset_state) used in compile and reported in fit and
evaluate logs, Mean and Sum, the confusion counts and F1Score."""


import numpy as np
import pytest

import tessera.nn as nn


class CategoricalTruePositives(nn.metrics.Metric):
    """The keras-io guide's metric ("Training & evaluation with the built-in
    methods"), written with NumPy functions."""

    def __init__(self, name="categorical_true_positives", **kwargs):
        super().__init__(name=name, **kwargs)
        self.true_positives = self.add_variable(shape=(), name="ctp", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = np.reshape(np.argmax(y_pred, axis=1), (-1, 1))
        values = np.reshape(y_true, (-1, 1)).astype("int32") == y_pred.astype("int32")
        values = values.astype("float32")
        if sample_weight is not None:
            values = values * np.reshape(sample_weight, (-1, 1))
        self.true_positives.assign_add(np.sum(values))

    def result(self):
        return self.true_positives

    def reset_state(self):
        self.true_positives.assign(0.0)


class Assigning(nn.metrics.Metric):
    def __init__(self, name="last_max", **kwargs):
        super().__init__(name=name, **kwargs)
        self.v = self.add_variable(shape=(), name="v")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.v.assign(np.max(y_pred))

    def result(self):
        return self.v


def _keras_ctp(keras):
    ops = keras.ops

    class KCTP(keras.metrics.Metric):
        def __init__(self, name="categorical_true_positives", **kwargs):
            super().__init__(name=name, **kwargs)
            self.true_positives = self.add_variable(shape=(), name="ctp",
                                                    initializer="zeros")

        def update_state(self, y_true, y_pred, sample_weight=None):
            y_pred = ops.reshape(ops.argmax(y_pred, axis=1), (-1, 1))
            values = ops.cast(ops.reshape(y_true, (-1, 1)), "int32") == ops.cast(y_pred,
                                                                                 "int32")
            values = ops.cast(values, "float32")
            if sample_weight is not None:
                values = ops.multiply(values, ops.reshape(sample_weight, (-1, 1)))
            self.true_positives.assign_add(ops.sum(values))

        def result(self):
            # (Keras 3.15 on JAX cannot trace a returned Variable in fit: its value)
            return self.true_positives.value

        def reset_state(self):
            self.true_positives.assign(0.0)

    return KCTP


def test_user_metric_eager_like_keras(keras):
    y, p = np.array([0, 1, 2, 1]), np.eye(3)[[0, 2, 2, 1]]
    ours, theirs = CategoricalTruePositives(), _keras_ctp(keras)()
    ours.update_state(y, p)
    theirs.update_state(y, p)
    assert float(ours.result()) == float(theirs.result()) == 3.0
    ours.update_state(y, p, sample_weight=np.array([1.0, 0.0, 2.0, 0.5]))
    theirs.update_state(y, p, sample_weight=np.array([1.0, 0.0, 2.0, 0.5]))
    assert float(ours.result()) == float(theirs.result())
    ours.reset_state()
    assert float(ours.result()) == 0.0
    assert ours.variables == [ours.true_positives]
    assert ours.true_positives.path == "categorical_true_positives/ctp"


def test_user_metric_in_compile_fit_and_evaluate_like_keras(keras):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    w = [rng.normal(size=(4, 3)).astype(np.float32), np.zeros(3, np.float32)]
    ours = nn.Sequential([nn.Dense(3, input_shape=(4,))])
    theirs = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    ours.set_weights(w)
    theirs.set_weights(w)
    ours.compile(nn.optimizers.SGD(0.1), nn.losses.SparseCategoricalCrossentropy(from_logits=True),
                 metrics=[CategoricalTruePositives()])
    theirs.compile(keras.optimizers.SGD(0.1),
                   keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   metrics=[_keras_ctp(keras)()])
    e1, e2 = ours.evaluate(x, y, batch_size=8, verbose=0), theirs.evaluate(x, y, batch_size=8,
                                                                            verbose=0)
    np.testing.assert_allclose(e1, e2, rtol=1e-5)
    h1 = ours.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    h2 = theirs.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    assert set(h1.history) == set(h2.history)
    for k in h2.history:
        np.testing.assert_allclose(h1.history[k], h2.history[k], rtol=1e-5, err_msg=k)
    # weighted_metrics are weighted by sample_weight (metrics= are not), in both
    ours.compile(nn.optimizers.SGD(0.1), nn.losses.SparseCategoricalCrossentropy(from_logits=True),
                 weighted_metrics=[CategoricalTruePositives()])
    theirs.compile(keras.optimizers.SGD(0.1),
                   keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                   weighted_metrics=[_keras_ctp(keras)()])
    sw = rng.uniform(size=40).astype(np.float32)
    e1 = ours.evaluate(x, y, sample_weight=sw, batch_size=8, verbose=0)
    e2 = theirs.evaluate(x, y, sample_weight=sw, batch_size=8, verbose=0)
    np.testing.assert_allclose(e1, e2, rtol=1e-5)


def test_metric_assigning_state_is_refused_in_compile():
    model = nn.Sequential([nn.Dense(3, input_shape=(4,))])
    model.compile("sgd", "mse", metrics=[Assigning()])
    with pytest.raises(ValueError, match=r"\[last_max\] Assigning.update_state assigns the state "
                                         r"variable 'v'.*assign_add/assign_sub"):
        model.evaluate(np.zeros((4, 4), np.float32), np.zeros((4, 3), np.float32), verbose=0)


def test_mean_and_sum_like_keras(keras):
    rng = np.random.default_rng(1)
    for values, sw in ((rng.normal(size=5), None), (rng.normal(size=5), rng.uniform(size=5)),
                       (rng.normal(size=(4, 3)), rng.uniform(size=4)),
                       (rng.normal(size=(4, 3)), None)):
        for name in ("Mean", "Sum"):
            ours, theirs = getattr(nn.metrics, name)(), getattr(keras.metrics, name)()
            for _ in range(2):
                ours.update_state(values, sample_weight=sw)
                theirs.update_state(values, sample_weight=sw)
            np.testing.assert_allclose(float(ours.result()), float(theirs.result()), rtol=1e-5,
                                       err_msg=f"{name} {np.shape(values)} {sw is None}")
            ours.reset_state()
            assert float(ours.result()) == 0.0


@pytest.mark.parametrize("name,kwargs", [
    ("TruePositives", {}), ("FalsePositives", {}), ("TrueNegatives", {}),
    ("FalseNegatives", {}), ("TruePositives", {"thresholds": [0.3, 0.6]}),
    ("FalseNegatives", {"thresholds": 0.7}),
    ("F1Score", {}), ("F1Score", {"average": "micro"}), ("F1Score", {"average": "macro"}),
    ("F1Score", {"average": "weighted", "threshold": 0.4}),
    ("FBetaScore", {"beta": 2.0, "average": "macro"}),
])
def test_confusion_counts_and_f1_in_evaluate_like_keras(keras, name, kwargs):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(30, 5)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 30)]
    w = [rng.normal(size=(5, 3)).astype(np.float32), np.zeros(3, np.float32)]
    ours = nn.Sequential([nn.Dense(3, activation="sigmoid", input_shape=(5,))])
    theirs = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3, activation="sigmoid")])
    ours.set_weights(w)
    theirs.set_weights(w)
    ours.compile("sgd", "binary_crossentropy",
                 metrics=[getattr(nn.metrics, name)(name="m", **kwargs)])
    theirs.compile("sgd", "binary_crossentropy",
                   metrics=[getattr(keras.metrics, name)(name="m", **kwargs)])
    r1 = ours.evaluate(x, y, batch_size=7, verbose=0, return_dict=True)
    r2 = theirs.evaluate(x, y, batch_size=7, verbose=0, return_dict=True)
    assert set(r1) == set(r2)
    for k in r2:
        np.testing.assert_allclose(np.asarray(r1[k], np.float64).ravel(),
                                   np.asarray(r2[k], np.float64).ravel(), rtol=1e-5, atol=1e-6,
                                   err_msg=k)
    # weighted_metrics are weighted by sample_weight (metrics= are not), in both
    ours.compile("sgd", "binary_crossentropy",
                 weighted_metrics=[getattr(nn.metrics, name)(**kwargs)])
    theirs.compile("sgd", "binary_crossentropy",
                   weighted_metrics=[getattr(keras.metrics, name)(**kwargs)])
    sw = rng.uniform(size=30).astype(np.float32)
    r1 = ours.evaluate(x, y, sample_weight=sw, batch_size=7, verbose=0, return_dict=True)
    r2 = theirs.evaluate(x, y, sample_weight=sw, batch_size=7, verbose=0, return_dict=True)
    assert len(r1) == len(r2) == 2  # (Keras names a second instance name_1)
    pairs = [(r1.pop("loss"), r2.pop("loss")), (*r1.values(), *r2.values())]
    for a, b in pairs:
        np.testing.assert_allclose(np.asarray(a, np.float64).ravel(),
                                   np.asarray(b, np.float64).ravel(), rtol=1e-5, atol=1e-6)
    m = getattr(nn.metrics, name)(**kwargs)
    assert type(m).from_config(m.get_config()).get_config() == m.get_config()


def test_user_metric_refused_where_the_batch_is_split():
    model = nn.Sequential([nn.Dense(3, input_shape=(4,))])
    model.compile("sgd", "sparse_categorical_crossentropy", metrics=[CategoricalTruePositives()])
    x, y = np.ones((8, 4), np.float32), np.zeros(8, np.int64)
    with pytest.raises(ValueError, match=r"\[fit\] the metric 'categorical_true_positives'.*"
                                         r"deterministic=True"):
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, deterministic=True)
    h = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert "categorical_true_positives" in h.history


def test_f1_with_sparse_labels_names_the_metric():
    model = nn.Sequential([nn.Dense(3, activation="softmax", input_shape=(4,))])
    model.compile("sgd", "sparse_categorical_crossentropy", metrics=[nn.metrics.F1Score()])
    with pytest.raises(ValueError, match=r"\[f1_score\] F1Score needs labels shaped like the "
                                         r"output.*\(None,\).*\(None, 3\)"):
        model.evaluate(np.ones((4, 4), np.float32), np.zeros(4, np.int64), verbose=0)
