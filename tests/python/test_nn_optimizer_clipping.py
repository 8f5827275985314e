"""Keras's clipping arguments of every optimizer (clipnorm: each weight's
gradient to that norm; global_clipnorm: all together; clipvalue: each
element), `name`, and the arguments tessera refuses, against Keras 3 on JAX
(the oracle): the same model, weights and data, a few steps of fit, the
same weights after them. tessera.optim's own clipnorm stays the global one."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn, optim  # noqa: E402

RNG = np.random.default_rng(8)
X = RNG.normal(size=(16, 5)).astype(np.float32)
Y = (RNG.normal(size=(16, 2)) * 3).astype(np.float32)


def _model(lib, seed):
    inp = lib.Input(shape=(5,))
    h = lib.layers.Dense(6, activation="tanh")(inp)
    return lib.Model(inp, lib.layers.Dense(2)(h))


def _train(lib, make_opt, weights):
    m = _model(lib, 0)
    m.set_weights(weights)
    m.compile(make_opt(lib), "mse")
    m.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    return m.get_weights()


CASES = {
    # (Adam's step barely depends on the gradients' scale but through epsilon and the
    # moments' history: a larger epsilon lets clipping show, and keeps the comparison
    # off float noise that Adam amplifies in gradients near zero)
    "adam clipnorm": lambda L: L.optimizers.Adam(0.05, epsilon=0.01, clipnorm=0.5),
    "adam global_clipnorm": lambda L: L.optimizers.Adam(0.05, epsilon=0.01,
                                                        global_clipnorm=0.5),
    "adam clipvalue": lambda L: L.optimizers.Adam(0.05, epsilon=0.01, clipvalue=0.05),
    "sgd clipnorm": lambda L: L.optimizers.SGD(0.1, momentum=0.9, clipnorm=0.3),
    "sgd clipvalue": lambda L: L.optimizers.SGD(0.1, clipvalue=0.02),
    "rmsprop clipnorm": lambda L: L.optimizers.RMSprop(0.01, clipnorm=0.2),
    "adamw global_clipnorm": lambda L: L.optimizers.AdamW(0.01, epsilon=0.01,
                                                          global_clipnorm=0.2),
    "adagrad clipvalue": lambda L: L.optimizers.Adagrad(0.1, clipvalue=0.1),
}

# Keras's formulas themselves (epsilon inside the root), without clipping
PLAIN = {
    "rmsprop": lambda L: L.optimizers.RMSprop(0.01),
    "rmsprop momentum centered": lambda L: L.optimizers.RMSprop(0.01, momentum=0.5,
                                                                centered=True),
    "adagrad": lambda L: L.optimizers.Adagrad(0.1, initial_accumulator_value=0.0),
    # Keras's Adam adds epsilon to sqrt(v) before the bias correction ("epsilon hat")
    "adam epsilon": lambda L: L.optimizers.Adam(0.05, epsilon=0.1),
    "adamw epsilon": lambda L: L.optimizers.AdamW(0.05, epsilon=0.1, weight_decay=0.1),
    # Keras's gradient accumulation: an update every 2 (3) steps with the gradients' mean
    "adam accumulate 2": lambda L: L.optimizers.Adam(0.05, gradient_accumulation_steps=2),
    "sgd momentum accumulate 3 clipnorm": lambda L: L.optimizers.SGD(
        0.1, momentum=0.9, gradient_accumulation_steps=3, clipnorm=0.5),
    "nadam accumulate 2": lambda L: L.optimizers.Nadam(0.01, gradient_accumulation_steps=2),
    # Keras's moving averages of the weights (fit ends with the averages put in)
    "adam ema": lambda L: L.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.8),
    "sgd ema overwrite 2": lambda L: L.optimizers.SGD(0.1, momentum=0.5, use_ema=True,
                                                      ema_momentum=0.5,
                                                      ema_overwrite_frequency=2),
}


@pytest.mark.parametrize("case", sorted(PLAIN))
def test_optimizer_trains_as_keras(case):
    start = _start(case)
    for a, b in zip(_train(nn, PLAIN[case], start), _train(keras, PLAIN[case], start)):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-4)


def _start(case):
    """Initial weights of its own per case (the same whatever order tests run in)."""
    rng = np.random.default_rng(sum(map(ord, case)))
    return [(rng.normal(size=w.shape) * 0.5).astype(np.float32)
            for w in _model(nn, 0).get_weights()]


@pytest.mark.parametrize("case", sorted(CASES))
def test_clipping_trains_as_keras(case):
    start = _start(case)
    got = _train(nn, CASES[case], start)
    want = _train(keras, CASES[case], start)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=3e-4)  # (Adam: float noise x lr)
    # and the clipping mattered: without it the weights end elsewhere
    clipped = CASES[case](nn)
    unclipped = clipped.get_config()
    for k in ("clipnorm", "global_clipnorm", "clipvalue"):
        unclipped[k] = None
    plain = _train(nn, lambda L: type(clipped).from_config(unclipped), start)
    assert max(np.abs(a - b).max() for a, b in zip(got, plain)) > 1e-3


def test_config_round_trip_keeps_the_meaning(tmp_path):
    opt = nn.optimizers.Adam(0.01, clipnorm=0.5, name="my_adam")
    assert opt.name == "my_adam"
    for cls in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Nadam", "Lion"):
        ours, theirs = getattr(nn.optimizers, cls)().name, getattr(keras.optimizers, cls)().name
        assert ours.rstrip("0123456789").rstrip("_") == theirs.rstrip("0123456789").rstrip("_")
    again = nn.optimizers.get(opt.tessera_config())  # (tessera's form: "class" named)
    assert again.weight_clipnorm == 0.5 and again.clipnorm is None
    again = type(opt).from_config(opt.get_config())  # Keras's form
    assert again.weight_clipnorm == 0.5 and again.clipnorm is None and again.name == "my_adam"
    steps = nn.optimizers.Nadam.from_config(
        nn.optimizers.Nadam(gradient_accumulation_steps=4).get_config())
    assert steps.gradient_accumulation_steps == 4
    ema = nn.optimizers.get(nn.optimizers.SGD(use_ema=True, ema_overwrite_frequency=3)
                            .tessera_config())
    assert ema.use_ema and ema.ema_momentum == 0.99 and ema.ema_overwrite_frequency == 3
    m = _model(nn, 0)
    m.compile(nn.optimizers.SGD(0.1, clipvalue=0.25), "mse")
    m.fit(X, Y, epochs=1, verbose=0)
    m.save(tmp_path / "m.tsm")
    loaded = nn.models.load_model(tmp_path / "m.tsm")
    assert loaded.optimizer.clipvalue == 0.25 and loaded.optimizer.weight_clipnorm is None
    # tessera.optim's clipnorm is the global norm (PyTorch's clip_grad_norm_)
    assert optim.Adam(clipnorm=1.0).clipnorm == 1.0
    assert optim.Adam(clipnorm=1.0).get_config().get("weight_clipnorm") is None


def test_unsupported_and_conflicting_arguments_are_errors():
    with pytest.raises(ValueError, match=r"\[Adam\] loss_scale_factor=2.0 is not supported"):
        nn.optimizers.Adam(loss_scale_factor=2.0)
    with pytest.raises(ValueError, match=r"\[Adam\] ema_momentum must be in \[0, 1\], got 1.5"):
        nn.optimizers.Adam(use_ema=True, ema_momentum=1.5)
    with pytest.raises(ValueError, match=r"\[RMSprop\] gradient_accumulation_steps must be an "
                                         r"int >= 2 or None, got 1"):
        nn.optimizers.RMSprop(gradient_accumulation_steps=1)
    with pytest.raises(ValueError, match=r"only one of clipnorm, clipvalue and global_clipnorm"):
        nn.optimizers.SGD(clipnorm=1.0, global_clipnorm=1.0)
    with pytest.raises(TypeError, match=r"\[Nadam\] .*unexpected keyword argument 'clip'"):
        nn.optimizers.Nadam(clip=1.0)
    with pytest.raises(ValueError, match=r"clipvalue"):
        nn.optimizers.Adam(clipvalue=-1.0)
    nn.optimizers.Adam(loss_scale_factor=None, amsgrad=False)  # Keras's defaults: accepted


@pytest.mark.parametrize("make", [
    lambda L: L.optimizers.Adam(0.01, clipnorm=0.5),
    lambda L: L.optimizers.SGD(0.1, momentum=0.9, global_clipnorm=1.0),
    lambda L: L.optimizers.RMSprop(0.01, momentum=0.5, centered=True, clipvalue=0.3),
    lambda L: L.optimizers.Nadam(0.002),
    lambda L: L.optimizers.Lamb(weight_decay=0.01),
    lambda L: L.optimizers.Adagrad(),
])
def test_keras_serialized_optimizers_load_with_keras_meaning(make):
    """keras.optimizers.serialize's dict (Keras's names: clipnorm per weight)
    gives the same optimizer as the same call on tessera.nn."""
    got = nn.optimizers.get(keras.optimizers.serialize(make(keras)))
    want = make(nn)
    assert type(got) is type(want)
    mine, theirs = got.get_config(), want.get_config()
    assert mine.pop("name").rstrip("0123456789_") == theirs.pop("name").rstrip("0123456789_")
    # (Keras keeps its learning rate as a float32 variable)
    assert mine.pop("learning_rate") == pytest.approx(theirs.pop("learning_rate"), rel=1e-7)
    assert mine == theirs


@pytest.mark.parametrize("swap_on_epoch", [False, True])
def test_swap_ema_weights_as_keras(swap_on_epoch):
    """SwapEMAWeights: validation on the moving averages (and, swapping on
    epochs, the weights between epochs): the same validation losses and final
    weights as Keras's."""
    start = _start(f"swap{swap_on_epoch}")
    out = {}
    for lib in (nn, keras):
        m = _model(lib, 0)
        m.set_weights(start)
        m.compile(lib.optimizers.SGD(0.1, momentum=0.5, use_ema=True, ema_momentum=0.7), "mse")
        h = m.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0,
                  validation_data=(X[:8], Y[:8]),
                  callbacks=[lib.callbacks.SwapEMAWeights(swap_on_epoch=swap_on_epoch)])
        out[lib] = (h.history["val_loss"], m.get_weights())
    np.testing.assert_allclose(out[nn][0], out[keras][0], rtol=1e-4)
    for a, b in zip(out[nn][1], out[keras][1]):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-5)


def test_swap_ema_weights_needs_use_ema():
    m = _model(nn, 0)
    m.compile(nn.optimizers.SGD(0.1), "mse")
    with pytest.raises(ValueError, match=r"\[SwapEMAWeights\] must be used when `use_ema=True`"):
        m.fit(X, Y, epochs=1, verbose=0, validation_data=(X, Y),
              callbacks=[nn.callbacks.SwapEMAWeights()])
