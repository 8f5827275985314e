"""The losses of issue 30 item 4 against Keras 3 on JAX: Dice, Tversky,
CategoricalFocalCrossentropy, CategoricalGeneralizedCrossEntropy and Circle, each
called on arrays (with sample weights), as a function, compiled (evaluate with and
without sample weights) and in a training step (the same weights after one SGD
step), with its config round trip."""

import numpy as np
import pytest

import tessera.nn as nn

RNG = np.random.default_rng(7)
X = RNG.normal(size=(6, 3)).astype(np.float32)
W0 = RNG.normal(size=(3, 4)).astype(np.float32)
SW = np.linspace(0.2, 2.0, 6).astype(np.float32)
LABELS = np.array([0, 3, 1, 2, 2, 0])


def _labels(kind):
    rng = np.random.default_rng(1)
    if kind == "binary":
        return (rng.uniform(size=(6, 4)) > 0.5).astype(np.float32)
    if kind == "onehot":
        return np.eye(4, dtype=np.float32)[LABELS]
    return LABELS


# (class, function, kwargs, labels, output activation: the model's last layer)
CASES = [
    ("Dice", "dice", {}, "binary", "sigmoid"),
    ("Dice", "dice", {"axis": (1,)}, "binary", "sigmoid"),
    ("Tversky", "tversky", {"alpha": 0.3, "beta": 0.7}, "binary", "sigmoid"),
    ("Tversky", "tversky", {"axis": 1}, "binary", "sigmoid"),
    ("CategoricalFocalCrossentropy", "categorical_focal_crossentropy", {}, "onehot", "softmax"),
    ("CategoricalFocalCrossentropy", "categorical_focal_crossentropy",
     {"alpha": [0.1, 0.2, 0.3, 0.4], "gamma": 1.5, "label_smoothing": 0.1, "from_logits": True},
     "onehot", None),
    ("CategoricalGeneralizedCrossEntropy", "categorical_generalized_cross_entropy", {"q": 0.3},
     "sparse", "softmax"),
    ("Circle", "circle", {}, "sparse", "unit"),
    ("Circle", "circle", {"gamma": 10.0, "remove_diagonal": False, "margin": 0.3}, "sparse",
     "unit"),
]


def _model(lib, activation):
    layers = [lib.layers.Dense(4, use_bias=False,
                               activation=None if activation == "unit" else activation)]
    if activation == "unit":
        layers.append(lib.layers.UnitNormalization())
    model = lib.Sequential([lib.Input((3,))] + layers)
    model.layers[0].set_weights([W0])
    return model


@pytest.mark.parametrize("cls,fn,kwargs,kind,activation", CASES)
def test_loss_matches_keras(keras, cls, fn, kwargs, kind, activation):
    y = _labels(kind)
    theirs_model = _model(keras, activation)
    p = np.asarray(theirs_model(X))
    ours, theirs = getattr(nn.losses, cls)(**kwargs), getattr(keras.losses, cls)(**kwargs)
    np.testing.assert_allclose(ours(y, p), float(theirs(y, p)), rtol=1e-5, atol=1e-6)
    if not (cls in ("Dice", "Tversky") and "axis" not in kwargs):  # one value for the batch
        np.testing.assert_allclose(ours(y, p, sample_weight=SW),
                                   float(theirs(y, p, sample_weight=SW)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(getattr(nn.losses, fn)(y, p, **kwargs),
                               np.asarray(getattr(keras.losses, fn)(y, p, **kwargs)),
                               rtol=1e-5, atol=1e-6)
    # compiled: evaluate, then one SGD step on the whole batch
    model = _model(nn, activation)
    model.compile(nn.optimizers.SGD(learning_rate=0.1), getattr(nn.losses, cls)(**kwargs))
    theirs_model.compile(keras.optimizers.SGD(learning_rate=0.1), theirs)
    np.testing.assert_allclose(model.evaluate(X, y, verbose=0),
                               theirs_model.evaluate(X, y, verbose=0), rtol=1e-5, atol=1e-6)
    if not (cls in ("Dice", "Tversky") and "axis" not in kwargs):
        np.testing.assert_allclose(
            model.evaluate(X, y, sample_weight=SW, verbose=0),
            theirs_model.evaluate(X, y, sample_weight=SW, verbose=0), rtol=1e-5, atol=1e-6)
    model.fit(X, y, batch_size=6, epochs=1, shuffle=False, verbose=0)
    theirs_model.fit(X, y, batch_size=6, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(model.layers[0].get_weights()[0],
                               np.asarray(theirs_model.layers[0].get_weights()[0]),
                               rtol=1e-4, atol=1e-5)
    assert not np.allclose(model.layers[0].get_weights()[0], W0)  # it trained
    cfg = ours.get_config()
    assert type(ours).from_config(cfg).get_config() == cfg
    assert nn.losses.deserialize(nn.losses.serialize(ours)).get_config() == cfg
    assert cfg["name"] == theirs.get_config()["name"]


def test_loss_arguments_are_checked():
    with pytest.raises(ValueError, match=r"\[CategoricalGeneralizedCrossEntropy\] q must be in "
                                         r"the interval \(0, 1\), got 1.5"):
        nn.losses.CategoricalGeneralizedCrossEntropy(q=1.5)
    with pytest.raises(ValueError, match=r"\[Dice\] axis must be None, an int or a tuple"):
        nn.losses.Dice(axis="rows")
    with pytest.raises(ValueError, match=r"\[CategoricalFocalCrossentropy\] gamma must be"):
        nn.losses.CategoricalFocalCrossentropy(gamma=-1)
    with pytest.raises(ValueError, match=r"\[circle\] ref_labels and ref_embeddings go together"):
        nn.losses.circle(LABELS, np.ones((6, 4), np.float32), ref_labels=LABELS)
    assert isinstance(nn.losses.get("Tversky"), nn.losses.Tversky)
    assert nn.losses.get("tversky") is nn.losses.tversky


def test_circle_takes_labels_beyond_the_embedding_size(keras):
    """Circle's labels are any integers (not class indices of the output)."""
    labels = np.array([10, 42, 10, 42, 7, 7])
    model = _model(nn, "unit")
    model.compile("sgd", nn.losses.Circle(gamma=5.0))
    theirs = _model(keras, "unit")
    theirs.compile("sgd", keras.losses.Circle(gamma=5.0))
    np.testing.assert_allclose(model.evaluate(X, labels, verbose=0),
                               theirs.evaluate(X, labels, verbose=0), rtol=1e-5)


def test_ctc_matches_keras_and_trains(keras):
    """keras.losses.CTC / ctc: labels (batch, length) padded with the blank 0, logits
    (batch, time, classes); the loss compiled into a training step."""
    rng = np.random.default_rng(4)
    y = np.array([[1, 2, 2], [3, 1, 0], [2, 0, 0], [1, 3, 1]], np.int32)
    p = rng.normal(size=(4, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(nn.losses.ctc(y, p), np.asarray(keras.losses.ctc(y, p)),
                               rtol=1e-5)
    np.testing.assert_allclose(nn.losses.CTC()(y, p), float(keras.losses.CTC()(y, p)), rtol=1e-5)
    assert nn.losses.CTC().get_config() == {k: v for k, v in keras.losses.CTC().get_config()
                                            .items() if k in ("name", "reduction")} | {
                                                "dtype": None}
    x = rng.normal(size=(8, 5, 3)).astype(np.float32)
    labels = np.concatenate([y, y])
    kernel = rng.normal(size=(3, 4)).astype(np.float32)
    models = []
    for lib in (nn, keras):
        m = lib.Sequential([lib.Input((5, 3)), lib.layers.Dense(4)])
        m.layers[0].set_weights([kernel, np.zeros(4, np.float32)])
        m.compile(lib.optimizers.SGD(0.05), lib.losses.CTC())
        models.append(m)
    for m in models:  # one step on the whole batch, then the loss after it
        m.fit(x, labels, batch_size=8, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(models[0].evaluate(x, labels, batch_size=8, verbose=0),
                               models[1].evaluate(x, labels, batch_size=8, verbose=0), rtol=1e-5)
    for u, v in zip(models[0].layers[0].get_weights(), models[1].layers[0].get_weights()):
        np.testing.assert_allclose(u, np.asarray(v), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"\[ctc\] y_pred must be logits"):
        nn.losses.ctc(y, p[:, 0])
