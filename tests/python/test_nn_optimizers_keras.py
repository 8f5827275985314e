"""Adadelta, Adamax, Ftrl and Lion against Keras 3 on JAX: the same model,
weights and batches give the same weights after a few steps."""


import numpy as np
import pytest

import tessera.nn as nn


def fit_both_as_keras(ours, theirs, x, y, batch_size, epochs):
    """Fits tessera's model and Keras's (compiled, with the same weights) on the
    same batches in order; their losses and then their weights agree."""
    h1 = ours.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    h2 = theirs.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    np.testing.assert_allclose(h1.history["loss"], h2.history["loss"], rtol=2e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


CASES = [
    ("Adadelta", {"learning_rate": 1.0}),
    ("Adadelta", {"learning_rate": 0.5, "rho": 0.9, "epsilon": 1e-6}),
    ("Adamax", {"learning_rate": 0.01}),
    ("Adamax", {"learning_rate": 0.02, "beta_1": 0.8, "beta_2": 0.99}),
    ("Lion", {"learning_rate": 0.003}),
    ("Lion", {"learning_rate": 0.001, "beta_1": 0.95, "beta_2": 0.98}),
    ("Ftrl", {"learning_rate": 0.1}),
    ("Ftrl", {"learning_rate": 0.05, "l1_regularization_strength": 0.01,
              "l2_regularization_strength": 0.02, "l2_shrinkage_regularization_strength": 0.01,
              "beta": 0.1, "learning_rate_power": -0.4}),
]


@pytest.mark.parametrize("name,kwargs", CASES)
def test_optimizer_steps_match_keras(keras, name, kwargs):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 4)).astype(np.float32)
    y = rng.normal(size=(24, 3)).astype(np.float32)
    w = [rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32) * .1,
         rng.normal(size=(8, 3)).astype(np.float32), np.zeros(3, np.float32)]
    ours = nn.Sequential([nn.Dense(8, activation="tanh", input_shape=(4,)), nn.Dense(3)])
    theirs = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                               keras.layers.Dense(3)])
    ours.set_weights(w)
    theirs.set_weights(w)
    ours.compile(getattr(nn.optimizers, name)(**kwargs), "mse")
    theirs.compile(getattr(keras.optimizers, name)(**kwargs), "mse")
    fit_both_as_keras(ours, theirs, x, y, batch_size=6, epochs=3)
    assert not np.allclose(ours.get_weights()[0], w[0])  # it did move
    opt = getattr(nn.optimizers, name)(**kwargs)
    # (Keras's round trip: get of serialize's dict; get_config's names no class)
    again = nn.optimizers.get(nn.optimizers.serialize(opt))
    assert type(again) is type(opt) and again.get_config() == opt.get_config()
    assert type(nn.optimizers.get(name.lower())) is type(opt)


def test_bad_arguments_name_the_optimizer():
    with pytest.raises(ValueError, match=r"\[Adadelta\] rho must be in \[0, 1\), got 1.5"):
        nn.optimizers.Adadelta(rho=1.5)
    with pytest.raises(ValueError, match=r"\[Ftrl\] learning_rate_power must be a number <= 0"):
        nn.optimizers.Ftrl(learning_rate_power=0.5)
    with pytest.raises(ValueError, match=r"\[Lion\] beta_1"):
        nn.optimizers.Lion(beta_1=-0.1)


# Keras 3 decouples weight decay for every optimizer (w -= w * weight_decay * lr before
# the step): keras.optimizers.SGD/Adam(weight_decay=) and AdamW's default (0.004) as Keras's,
# and exclude_from_weight_decay by Variable or by name.
DECAY_CASES = [
    ("SGD", {"learning_rate": 0.05, "weight_decay": 0.1}, None),
    ("SGD", {"learning_rate": 0.05, "momentum": 0.9, "weight_decay": 0.1}, None),
    ("Adam", {"learning_rate": 0.01, "weight_decay": 0.2}, None),
    ("AdamW", {"learning_rate": 0.01}, None),
    ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.3}, {"var_names": ["bias"]}),
    ("Adam", {"learning_rate": 0.01, "weight_decay": 0.3}, {"var_list": 0}),
    ("Nadam", {"learning_rate": 0.01, "weight_decay": 0.3}, {"var_names": ["ker"]}),
]


@pytest.mark.parametrize("name,kwargs,exclude", DECAY_CASES)
def test_weight_decay_as_keras(keras, name, kwargs, exclude):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(24, 4)).astype(np.float32)
    y = rng.normal(size=(24, 3)).astype(np.float32)
    w = [rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32),
         rng.normal(size=(8, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)]
    ours = nn.Sequential([nn.Input((4,)), nn.Dense(8, activation="tanh"), nn.Dense(3)])
    theirs = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                               keras.layers.Dense(3)])
    ours.set_weights(w)
    theirs.set_weights(w)
    opts = []
    for lib, model in ((nn, ours), (keras, theirs)):
        opt = getattr(lib.optimizers, name)(**kwargs)
        if exclude is not None and "var_list" in exclude:  # the first layer's weights
            opt.exclude_from_weight_decay(var_list=model.layers[0].weights)
        elif exclude is not None:
            opt.exclude_from_weight_decay(**exclude)
        model.compile(opt, "mse")
        opts.append(opt)
    fit_both_as_keras(ours, theirs, x, y, batch_size=6, epochs=2)
    assert float(opts[0].weight_decay) == pytest.approx(float(opts[1].weight_decay))
    # the config keeps Keras's meaning
    again = nn.optimizers.get(nn.optimizers.serialize(opts[0]))
    assert again.get_config() == opts[0].get_config()
    with pytest.raises(ValueError, match=r"can only be called before the optimizer is built"):
        opts[0].exclude_from_weight_decay(var_names=["bias"])


def test_weight_decay_differs_from_l2_and_names_are_keras():
    """The Keras namespace's decay is not tessera.optim's (PyTorch's L2) for Adam;
    "adamw" by name is Keras's AdamW; bad var_names are named errors."""
    assert nn.optimizers.get("adamw").weight_decay == 0.004
    assert type(nn.optimizers.get("adam")) is nn.optimizers.Adam
    m = nn.Sequential([nn.Input((2,)), nn.Dense(1)])
    m.compile("adamw", "mse")
    assert m.optimizer.weight_decay == 0.004
    with pytest.raises(ValueError, match=r"\[AdamW.exclude_from_weight_decay\] var_names .* "
                                         "is not a valid regular expression"):
        nn.optimizers.AdamW().exclude_from_weight_decay(var_names=["("])
    with pytest.raises(TypeError, match=r"var_names must be a list of strings"):
        nn.optimizers.AdamW().exclude_from_weight_decay(var_names="bias")
