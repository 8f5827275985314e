"""tessera.nn.constraints (issue 30 item 4) against Keras 3 on JAX: each
constraint on arrays and its config; the layers' constraint arguments applied
after each optimizer step inside the compiled training step (the same weights
as Keras after several steps), in deterministic (chunked) mode too, saved and
loaded with the model; what tessera cannot apply is an error, never ignored."""

import numpy as np
import pytest

import tessera.nn as nn

RNG = np.random.default_rng(11)
W = RNG.normal(size=(3, 2, 4)).astype(np.float32)


@pytest.mark.parametrize("cls,kwargs", [
    ("MaxNorm", {}), ("MaxNorm", {"max_value": 0.7, "axis": 1}),
    ("MaxNorm", {"max_value": 1.5, "axis": [0, 1]}),
    ("MinMaxNorm", {}), ("MinMaxNorm", {"min_value": 0.5, "max_value": 0.9, "rate": 0.3,
                                        "axis": -1}),
    ("NonNeg", {}), ("UnitNorm", {}), ("UnitNorm", {"axis": 2}), ("Constraint", {})])
def test_constraint_matches_keras(keras, cls, kwargs):
    ours, theirs = getattr(nn.constraints, cls)(**kwargs), getattr(keras.constraints, cls)(**kwargs)
    np.testing.assert_allclose(ours(W), np.asarray(theirs(W)), rtol=1e-6, atol=1e-7)
    assert ours.get_config() == theirs.get_config()
    again = nn.constraints.deserialize(nn.constraints.serialize(ours))
    assert type(again) is type(ours) and again.get_config() == ours.get_config()
    assert nn.constraints.get(keras.constraints.serialize(theirs)).get_config() == \
        ours.get_config()


def test_names_and_aliases_as_keras(keras):
    for alias in ("max_norm", "min_max_norm", "non_neg", "unit_norm"):
        assert getattr(nn.constraints, alias).__name__ == \
            getattr(keras.constraints, alias).__name__
        assert type(nn.constraints.get(alias)).__name__ == \
            type(keras.constraints.get(alias)).__name__
    assert nn.constraints.get(None) is None
    with pytest.raises(ValueError, match=r"\[constraints.get\] unknown constraint 'max_nrm'; "
                                         r"did you mean 'max_norm'\?"):
        nn.constraints.get("max_nrm")
    with pytest.raises(ValueError, match=r"\[MinMaxNorm\] max_value must be >= min_value"):
        nn.constraints.MinMaxNorm(2.0, 1.0)
    with pytest.raises(ValueError, match=r"\[Dense\] kernel_constraint: \[constraints.get\] "
                                         r"unknown constraint 'nonneg'"):
        nn.layers.Dense(2, kernel_constraint="nonneg")


X = RNG.normal(size=(16, 6, 2)).astype(np.float32)
IDS = RNG.integers(0, 10, size=(16, 6))
Y = RNG.normal(size=(16, 3)).astype(np.float32)


def _model(lib, seed=0):
    """Every kind of constrained layer tessera takes, in one functional model."""
    c = lib.constraints
    x = lib.Input((6, 2))
    ids = lib.Input((6,), dtype="int32")
    h = lib.layers.Conv1D(4, 3, kernel_constraint=c.UnitNorm(axis=[0, 1]),
                          bias_constraint=c.NonNeg(), name="conv")(x)
    h = lib.layers.LayerNormalization(gamma_constraint=c.MaxNorm(0.8),
                                      beta_constraint="non_neg", name="ln")(h)
    h = lib.layers.SeparableConv1D(4, 2, depthwise_constraint=c.MaxNorm(0.5),
                                   pointwise_constraint=c.MinMaxNorm(0.2, 0.6, rate=0.5),
                                   name="sep")(h)
    e = lib.layers.Embedding(10, 4, embeddings_constraint=c.MaxNorm(0.3, axis=1),
                             name="emb")(ids)
    h = lib.layers.Concatenate(axis=1)([h, e])
    h = lib.layers.Flatten()(h)
    h = lib.layers.PReLU(alpha_constraint=c.NonNeg(), name="prelu")(h)
    out = lib.layers.Dense(3, kernel_constraint=c.MaxNorm(0.4), bias_constraint=c.NonNeg(),
                           name="dense")(h)
    model = lib.Model([x, ids], out)
    rng = np.random.default_rng(seed)
    for name in NAMES:
        layer = model.get_layer(name)
        layer.set_weights([rng.normal(size=np.shape(w)).astype(np.float32)
                           for w in layer.get_weights()])
    return model


NAMES = ("conv", "ln", "sep", "emb", "prelu", "dense")


@pytest.fixture(scope="module")
def trained(keras):
    theirs = _model(keras)
    theirs.compile(keras.optimizers.SGD(0.05), "mse")
    theirs.fit([X, IDS], Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return theirs


def _compare(ours, theirs):
    for name in NAMES:
        a, b = ours.get_layer(name).get_weights(), theirs.get_layer(name).get_weights()
        assert len(a) == len(b)
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, np.asarray(v), rtol=1e-4, atol=2e-5, err_msg=name)


@pytest.mark.parametrize("deterministic", [False, True])
def test_constraints_applied_after_each_step_like_keras(trained, deterministic):
    ours = _model(nn)
    ours.compile(nn.optimizers.SGD(0.05), "mse")
    kw = {"deterministic": True} if deterministic else {}
    ours.fit([X, IDS], Y, batch_size=8, epochs=2, shuffle=False, verbose=0, **kw)
    _compare(ours, trained)
    kernel = ours.get_layer("dense").get_weights()[0]
    assert np.linalg.norm(kernel, axis=0).max() <= 0.4 + 1e-5


def test_constraints_saved_and_loaded(tmp_path, trained):
    ours = _model(nn)
    path = str(tmp_path / "m.keras")
    ours.save(path)
    back = nn.load_model(path)
    dense = back.get_layer("dense")
    assert type(dense.constraint_of(dense.params[0])).__name__ == "MaxNorm"
    # (Keras's config holds the constraint serialized, as in test_nn_keras_config.py)
    assert dense.get_config()["kernel_constraint"]["config"] == {"max_value": 0.4, "axis": 0}
    back.compile(nn.optimizers.SGD(0.05), "mse")
    back.fit([X, IDS], Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    _compare(back, trained)


def test_add_weight_constraint_and_refusals():
    class Scale(nn.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones",
                                     constraint=nn.constraints.MaxNorm(1.0))

        def call(self, x):
            return x * self.w

    model = nn.Sequential([nn.Input((4,)), Scale()])
    model.compile(nn.optimizers.SGD(1.0), "mse")
    x = np.ones((8, 4), np.float32)
    model.fit(x, 10 * x, epochs=2, verbose=0)
    w = model.layers[0].get_weights()[0]
    assert np.linalg.norm(w) == pytest.approx(1.0, rel=1e-5)  # pushed up, held at the norm

    class Custom(nn.constraints.Constraint):
        def __call__(self, w):
            return w * 0.5

    # a user's __call__ is traced into the step (Keras's form; tests/python/
    # test_nn_user_ops_programs.py compares one with Keras): with a zero rate, each step
    # only halves the kernel
    m2 = nn.Sequential([nn.Input((4,)), nn.layers.Dense(2, kernel_constraint=Custom())])
    m2.compile(nn.optimizers.SGD(0.0), "mse")
    w0 = m2.get_weights()[0]
    m2.fit(x, np.ones((8, 2), np.float32), batch_size=4, verbose=0)
    np.testing.assert_allclose(m2.get_weights()[0], 0.25 * w0, rtol=1e-6)
    with pytest.raises(TypeError, match=r"\[MultiHeadAttention\] the Keras argument "
                                        r"'kernel_constraint' is not supported"):
        nn.layers.MultiHeadAttention(2, 4, kernel_constraint="max_norm")


def test_tensor_parallel_layers_refuse_constraints():
    """A split weight's norms span the tensor group: refused rather than applied per slice."""
    with pytest.raises(TypeError, match=r"the Keras argument 'kernel_constraint' is not "
                                        r"supported"):
        nn.RowParallelDense(4, kernel_constraint="max_norm")
