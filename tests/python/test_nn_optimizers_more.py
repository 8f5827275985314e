"""Adafactor, Muon and ScheduleFreeAdamW against Keras 3 on JAX: the same model,
weights and batches give the same losses and weights after a few steps."""

import numpy as np
import pytest

import tessera.nn as nn

CASES = [
    ("Adafactor", {"learning_rate": 0.01}),
    ("Adafactor", {"learning_rate": 0.05, "beta_2_decay": -0.6, "clip_threshold": 0.5,
                   "epsilon_2": 1e-2, "weight_decay": 0.1}),
    ("Muon", {"learning_rate": 0.01}),
    ("Muon", {"learning_rate": 0.02, "nesterov": False, "rms_rate": None, "ns_steps": 3,
              "exclude_layers": ["last"], "adam_lr_ratio": 0.5, "weight_decay": None}),
    ("ScheduleFreeAdamW", {}),
    ("ScheduleFreeAdamW", {"learning_rate": 0.01, "beta_1": 0.8, "warmup_steps": 3,
                           "weight_decay": 0.05}),
]


def _models(keras, rng):
    w = [rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32) * .1,
         rng.normal(size=(8, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32) * .1]
    ours = nn.Sequential([nn.Input((4,)), nn.Dense(8, activation="tanh"),
                          nn.Dense(3, name="last")])
    theirs = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                               keras.layers.Dense(3, name="last")])
    ours.set_weights(w)
    theirs.set_weights(w)
    return ours, theirs, w


@pytest.mark.parametrize("name,kwargs", CASES)
def test_optimizer_steps_match_keras(keras, name, kwargs):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 4)).astype(np.float32)
    y = rng.normal(size=(24, 3)).astype(np.float32)
    ours, theirs, w = _models(keras, rng)
    ours.compile(getattr(nn.optimizers, name)(**kwargs), "mse")
    theirs.compile(getattr(keras.optimizers, name)(**kwargs), "mse")
    h1 = ours.fit(x, y, batch_size=6, epochs=3, shuffle=False, verbose=0)
    h2 = theirs.fit(x, y, batch_size=6, epochs=3, shuffle=False, verbose=0)
    np.testing.assert_allclose(h1.history["loss"], h2.history["loss"], rtol=2e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert not np.allclose(ours.get_weights()[0], w[0])  # it did move
    opt = getattr(nn.optimizers, name)(**kwargs)
    again = nn.optimizers.get(opt.get_config())
    assert type(again) is type(opt) and again.get_config() == opt.get_config()
    assert type(nn.optimizers.get(name.lower())) is type(opt)


@pytest.mark.parametrize("name,kwargs", [("Adafactor", {"learning_rate": 0.02}),
                                         ("Muon", {"learning_rate": 0.01}),
                                         ("Muon", {"exclude_embeddings": False})])
def test_kernels_of_three_axes_and_embeddings_as_keras(keras, name, kwargs):
    """Adafactor factors a 3-axis convolution kernel over its last two axes; Muon
    gives Adam's step to it and to the embedding (unless exclude_embeddings=False)."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 7, size=(12, 5))
    y = rng.normal(size=(12, 2)).astype(np.float32)
    ours = nn.Sequential([nn.Input((5,), dtype="int32"), nn.Embedding(7, 4),
                          nn.Conv1D(3, 2), nn.Flatten(), nn.Dense(2)])
    theirs = keras.Sequential([keras.Input((5,), dtype="int32"), keras.layers.Embedding(7, 4),
                               keras.layers.Conv1D(3, 2), keras.layers.Flatten(),
                               keras.layers.Dense(2)])
    w = [rng.normal(size=a.shape).astype(np.float32) * 0.5 for a in theirs.get_weights()]
    ours.set_weights(w)
    theirs.set_weights(w)
    ours.compile(getattr(nn.optimizers, name)(**kwargs), "mse")
    theirs.compile(getattr(keras.optimizers, name)(**kwargs), "mse")
    h1 = ours.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    h2 = theirs.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(h1.history["loss"], h2.history["loss"], rtol=2e-5)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    if name == "Adafactor":  # a row and a column vector for the kernel, not its shape
        shapes = sorted(np.shape(v) for k, v in ours._opt_state.items() if "l1_kernel" in k)
        assert shapes == [(2, 3), (2, 4)]


def test_bad_arguments_name_the_optimizer():
    with pytest.raises(ValueError, match=r"\[Adafactor\] beta_2_decay must be < 0, got 0.5"):
        nn.optimizers.Adafactor(beta_2_decay=0.5)
    with pytest.raises(ValueError, match=r"\[Muon\] ns_steps must be an int >= 0, got 2.5"):
        nn.optimizers.Muon(ns_steps=2.5)
    with pytest.raises(TypeError, match=r"\[Muon\] exclude_layers must be a list of strings"):
        nn.optimizers.Muon(exclude_layers="dense")
    with pytest.raises(ValueError, match=r"\[Muon\] exclude_layers: '\(' is not a valid"):
        nn.optimizers.Muon(exclude_layers=["("])
    with pytest.raises(ValueError, match=r"\[ScheduleFreeAdamW\] beta_1 must be in \(0, 1\)"):
        nn.optimizers.ScheduleFreeAdamW(beta_1=0.0)
    with pytest.raises(ValueError, match=r"\[ScheduleFreeAdamW\] warmup_steps must be an int"):
        nn.optimizers.ScheduleFreeAdamW(warmup_steps=-1)


@pytest.mark.parametrize("name", ["Adafactor", "Muon"])
def test_shape_reading_optimizers_refuse_zero_slices(name):
    """Under ZeRO each locality holds flat slices: Adafactor and Muon, which need
    whole weights, are refused by name; ScheduleFreeAdamW (elementwise) runs."""
    from tessera.nn.zero import ZeroPlan

    def program(opt):
        m = nn.Sequential([nn.Dense(6, activation="tanh"), nn.Dense(3)], input_shape=(4,))
        m.compile(opt, "mse")
        P, S = m._params(True), m._params(False)
        zp = ZeroPlan(1, 2, 2, m._bucket_plan(P), {v: m.weights[v].shape for v in P},
                      "float32")
        m._zero_plans = {zp.key: zp}
        m._train_program(P, S, data_parallel=True, zero=zp)
        return m.train_code

    with pytest.raises(ValueError, match=rf"\[{name}\] needs each weight whole.*'zp_0'.*ZeRO"):
        program(getattr(nn.optimizers, name)())
    assert "sf_lr" in program(nn.optimizers.ScheduleFreeAdamW())


def test_update_code_outside_a_model_is_refused_by_name():
    from tessera import optim

    with pytest.raises(ValueError, match=r"\[Adafactor\] needs each weight whole.*'w'"):
        optim.Adafactor().update_code(["w"], ["g"])
    code = optim.ScheduleFreeAdamW().update_code(["w"], ["g"])
    assert [s.name for s in code.state] == ["opt_w_momentum", "opt_w_velocity"]
