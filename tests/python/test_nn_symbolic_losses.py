"""Every built-in loss object (and Keras's loss functions) called on symbolic tensors inside a
layer's call: its value given to add_loss, and each sample's values as a model output,
against Keras 3 on JAX with the same weights and data; fit's losses check the gradients."""

import numpy as np
import pytest

import tessera.nn as tn
from keras_check import close

N, F, C = 24, 5, 4


def _cases(lib):
    L = lib.losses
    return {
        "mape": (L.MeanAbsolutePercentageError(), "binary", "sigmoid"),
        "msle": (L.MeanSquaredLogarithmicError(), "binary", "sigmoid"),
        "log_cosh": (L.LogCosh(), "binary", None),
        "poisson": (L.Poisson(), "binary", "sigmoid"),
        "cosine": (L.CosineSimilarity(), "binary", None),
        "hinge": (L.Hinge(), "binary", "tanh"),
        "squared_hinge": (L.SquaredHinge(), "binary", "tanh"),
        "categorical_hinge": (L.CategoricalHinge(), "onehot", "softmax"),
        "binary_focal": (L.BinaryFocalCrossentropy(apply_class_balancing=True,
                                                    label_smoothing=0.1), "binary", "sigmoid"),
        "binary_focal_logits": (L.BinaryFocalCrossentropy(from_logits=True, gamma=1.5),
                                "binary", None),
        "dice": (L.Dice(), "binary", "sigmoid"),
        "dice_axis": (L.Dice(axis=1), "binary", "sigmoid"),
        "tversky": (L.Tversky(alpha=0.3, beta=0.7), "binary", "sigmoid"),
        "tversky_axis": (L.Tversky(axis=(1,)), "binary", "sigmoid"),
        "categorical_focal": (L.CategoricalFocalCrossentropy(alpha=[0.1, 0.2, 0.3, 0.4],
                                                             label_smoothing=0.1),
                              "onehot", "softmax"),
        "categorical_focal_logits": (L.CategoricalFocalCrossentropy(from_logits=True),
                                     "onehot", None),
        "generalized_ce": (L.CategoricalGeneralizedCrossEntropy(q=0.7), "int_flat", "softmax"),
        "circle": (L.Circle(gamma=8.0), "int", "unit"),
        "mse_sum": (L.MeanSquaredError(reduction="sum"), "binary", None),
    }


NAMES = list(_cases(tn))


def _data(kind, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, F)).astype("float32")
    if kind == "binary":
        y = (rng.random((N, C)) > 0.5).astype("float32")
    elif kind == "onehot":
        y = np.eye(C, dtype="float32")[rng.integers(0, C, N)]
    else:  # "int", "int_flat"
        y = rng.integers(0, 3, size=(N, 1)).astype("int32")
    return x, y


def _model(lib, loss, kind, act):
    # ("int_flat": (batch,) labels, as Keras's categorical_generalized_cross_entropy needs
    # them: it would broadcast (batch, 1) ones against the outputs)
    ints = kind.startswith("int")
    x_in = lib.Input((F,))
    y_in = lib.Input((1,) if ints else (C,), dtype="int32" if ints else None)
    p = lib.layers.Dense(C, activation=None if act == "unit" else act)(x_in)
    if act == "unit":
        p = lib.layers.UnitNormalization()(p)

    class AddLoss(lib.layers.Layer):
        def call(self, y, q):
            self.add_loss(loss(lib.ops.squeeze(y, -1) if kind == "int_flat" else y, q))
            return q

    out = AddLoss()(y_in, p)
    model = lib.Model([x_in, y_in], out)
    rng = np.random.default_rng(7)
    model.set_weights([rng.normal(0, 0.6, w.shape).astype("float32")
                       for w in model.get_weights()])
    return model


@pytest.mark.parametrize("name", NAMES)
def test_loss_object_in_a_layers_call_as_keras(keras, name):
    got = {}
    for tag, lib in (("k", keras), ("t", tn)):
        loss, kind, act = _cases(lib)[name]
        x, y = _data(kind)
        model = _model(lib, loss, kind, act)
        model.compile(optimizer=lib.optimizers.SGD(0.1))
        first = model.evaluate([x, y], verbose=0)
        hist = model.fit([x, y], epochs=3, batch_size=N, shuffle=False, verbose=0)
        got[tag] = (first, hist.history["loss"], model.get_weights())
    close(got["t"][0], got["k"][0], 2e-5)
    close(got["t"][1], got["k"][1], 5e-5)
    for a, b in zip(got["t"][2], got["k"][2]):
        close(a, b, 5e-5)


FUNCTIONS = [("mean_absolute_percentage_error", "binary", "sigmoid", {}),
             ("poisson", "binary", "sigmoid", {}), ("log_cosh", "binary", None, {}),
             ("hinge", "binary", "tanh", {}), ("categorical_hinge", "onehot", "softmax", {}),
             ("binary_focal_crossentropy", "binary", "sigmoid", {"gamma": 3.0}),
             ("categorical_focal_crossentropy", "onehot", "softmax", {}),
             ("cosine_similarity", "binary", None, {}), ("dice", "binary", "sigmoid", {"axis": 1}),
             ("tversky", "binary", "sigmoid", {"alpha": 0.2, "beta": 0.8, "axis": 1})]


@pytest.mark.parametrize("fn,kind,act,kw", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_loss_function_values_in_a_layers_call_as_keras(keras, fn, kind, act, kw):
    out = {}
    for tag, lib in (("k", keras), ("t", tn)):
        x, y = _data(kind, 3)
        x_in, y_in = lib.Input((F,)), lib.Input((C,))
        p = lib.layers.Dense(C, activation=act)(x_in)

        class Values(lib.layers.Layer):
            def call(self, y, q):
                return getattr(lib.losses, fn)(y, q, **kw)

        model = lib.Model([x_in, y_in], Values()(y_in, p))
        rng = np.random.default_rng(2)
        model.set_weights([rng.normal(0, 0.6, w.shape).astype("float32")
                           for w in model.get_weights()])
        out[tag] = model.predict([x, y], verbose=0)
    assert np.shape(out["t"]) == np.shape(out["k"])
    close(out["t"], out["k"], 2e-5)


def _unit(a):
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype("float32")


@pytest.mark.parametrize("kw", [{}, {"remove_diagonal": False, "gamma": 10.0},
                                {"margin": 0.2}], ids=["default", "diagonal_kept", "margin"])
def test_circle_against_reference_embeddings_as_keras(keras, kw):
    rng = np.random.default_rng(4)
    y, p = rng.integers(0, 3, 8), _unit(rng.normal(size=(8, 4)))
    ref_labels, refs = rng.integers(0, 3, 5), _unit(rng.normal(size=(5, 4)))
    want = np.asarray(keras.losses.circle(y, p, ref_labels, refs, **kw))
    got = tn.losses.circle(y, p, ref_labels, refs, **kw)
    close(got, want, 2e-6 * np.abs(want).max())
    # the references differ from the batch: another answer than without them
    assert np.abs(got - tn.losses.circle(y, p, **kw)).max() > 1e-2
    # on symbolic tensors, the references constants of the model
    out = {}
    for tag, lib in (("k", keras), ("t", tn)):
        x_in, y_in = lib.Input((4,)), lib.Input((), dtype="int32")

        class Values(lib.layers.Layer):
            def call(self, labels, e):
                return lib.losses.circle(labels, e, ref_labels, refs, **kw)

        model = lib.Model([x_in, y_in], Values()(y_in, lib.layers.UnitNormalization()(x_in)))
        out[tag] = model.predict([p, y], verbose=0)
    close(out["t"], out["k"], 2e-6 * np.abs(out["k"]).max())


def test_circle_reference_errors():
    rng = np.random.default_rng(4)
    y, p = rng.integers(0, 3, 8), _unit(rng.normal(size=(8, 4)))
    with pytest.raises(ValueError, match=r"\[circle\] ref_labels and ref_embeddings go together"):
        tn.losses.circle(y, p, ref_labels=y)
    with pytest.raises(ValueError, match=r"\[circle\] needs y_pred \(n, d\).*ref_embeddings \(5, 3\)"):
        tn.losses.circle(y, p, y[:5], _unit(rng.normal(size=(5, 3))))
