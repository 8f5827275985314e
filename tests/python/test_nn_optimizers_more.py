"""Adafactor, Muon and ScheduleFreeAdamW against Keras 3 on JAX: the same model,
weights and batches give the same losses and weights after a few steps."""

import numpy as np
import pytest

import tessera.nn as nn
from tessera.nn.zero import ZeroPlan

from test_nn_optimizers_keras import fit_both_as_keras

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
    # Keras's common arguments with them
    ("Adafactor", {"learning_rate": 0.01, "gradient_accumulation_steps": 2}),
    ("Muon", {"learning_rate": 0.01, "use_ema": True, "ema_overwrite_frequency": 3,
              "global_clipnorm": 0.5}),
    ("ScheduleFreeAdamW", {"learning_rate": 0.01, "gradient_accumulation_steps": 3,
                           "clipvalue": 0.1}),
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
    fit_both_as_keras(ours, theirs, x, y, batch_size=6, epochs=3)
    assert not np.allclose(ours.get_weights()[0], w[0])  # it did move
    opt = getattr(nn.optimizers, name)(**kwargs)
    again = nn.optimizers.get(nn.optimizers.serialize(opt))  # (Keras's round trip)
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
    fit_both_as_keras(ours, theirs, x, y, batch_size=4, epochs=2)
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


def _zero_program(opt, stage=1, layers=None):
    """The text of a ZeRO training step of a small model (one process)."""
    m = nn.Sequential(layers or [nn.Dense(6, activation="tanh"), nn.Dense(3)], input_shape=(4,))
    m.compile(opt, "mse")
    P, S = m._params(True), m._params(False)
    zp = ZeroPlan(stage, 2, 2, m._bucket_plan(P), {v: m.weights[v].shape for v in P}, "float32")
    m._zero_plans = {zp.key: zp}
    m._train_program(P, S, data_parallel=True, zero=zp)
    return m.train_code


@pytest.mark.parametrize("name", ["Adafactor", "Muon", "MultiOptimizer"])
def test_whole_weight_optimizers_refuse_zero_slices(name):
    """Under ZeRO each locality holds flat slices: Adafactor, Muon and
    MultiOptimizer, which need whole weights, are refused by name;
    ScheduleFreeAdamW (elementwise) runs."""
    opt = nn.optimizers.MultiOptimizer(nn.optimizers.OptimizerMap(nn.optimizers.SGD())) \
        if name == "MultiOptimizer" else getattr(nn.optimizers, name)()
    with pytest.raises(ValueError, match=rf"\[{name}\] needs each weight whole.*'zp_0'.*ZeRO"):
        _zero_program(opt)
    assert "sf_lr" in _zero_program(nn.optimizers.ScheduleFreeAdamW())


@pytest.mark.parametrize("name", ["Adafactor", "Muon"])
def test_whole_weight_optimizers_refuse_split_weights(name):
    """Weights split over a tensor group (update_code's sum_squares) are refused."""
    model = nn.Sequential([nn.Input((3,)), nn.Dense(2)])
    opt = getattr(nn.optimizers, name)()
    opt._variable_of = lambda v: model.layers[0].kernel  # a whole 2-d weight
    with pytest.raises(ValueError, match=rf"\[{name}\] weights split over a tensor group"):
        opt.update_code(["w"], ["g"], sum_squares=lambda i, e, n: ([], "1.0"))


def test_spectral_normalization_is_refused_under_zero_3():
    layers = [nn.SpectralNormalization(nn.Dense(6)), nn.Dense(3)]
    with pytest.raises(ValueError, match=r"\[fit\] SpectralNormalization 'spectral_normaliza.*"
                                         r"updates vector_u .* which ZeRO 3 does not hold"):
        _zero_program(nn.optimizers.SGD(), stage=3, layers=layers)
    assert "vector_u" in _zero_program(nn.optimizers.SGD(), stage=2,
                                       layers=[nn.SpectralNormalization(nn.Dense(6)),
                                               nn.Dense(3)])


def test_update_code_outside_a_model_is_refused_by_name():
    from tessera import optim

    with pytest.raises(ValueError, match=r"\[Adafactor\] needs each weight whole.*'w'"):
        optim.Adafactor().update_code(["w"], ["g"])
    code = optim.ScheduleFreeAdamW().update_code(["w"], ["g"])
    assert [s.name for s in code.state] == ["opt_w_momentum", "opt_w_velocity"]


def _multi(lib, selector=False):
    schedule = lib.optimizers.schedules.ExponentialDecay(0.05, 2, 0.5)
    adam, sgd = lib.optimizers.Adam(0.01), lib.optimizers.SGD(schedule, momentum=0.9)
    if selector:  # a function of the Variable
        return lib.optimizers.MultiOptimizer(lambda v: adam if "first" in v.path else sgd)
    m = lib.optimizers.OptimizerMap(lib.optimizers.Lion(0.002), {"net/first/.*": adam})
    m["net/last/bias"] = sgd
    return lib.optimizers.MultiOptimizer(m)


@pytest.mark.parametrize("selector", [False, True])
def test_multi_optimizer_as_keras(keras, selector):
    """Each weight updated by its optimizer (by path: exact, then pattern, then
    the default; or a function), each with its own schedule and state."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(24, 4)).astype(np.float32)
    y = rng.normal(size=(24, 3)).astype(np.float32)
    w = [rng.normal(size=(4, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32) * .1,
         rng.normal(size=(8, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32) * .1]
    ours = nn.Sequential([nn.Input((4,)), nn.Dense(8, activation="tanh", name="first"),
                          nn.Dense(3, name="last")], name="net")
    theirs = keras.Sequential([keras.Input((4,)),
                               keras.layers.Dense(8, activation="tanh", name="first"),
                               keras.layers.Dense(3, name="last")], name="net")
    ours.set_weights(w)
    theirs.set_weights(w)
    ours.compile(_multi(nn, selector), "mse")
    theirs.compile(_multi(keras, selector), "mse")
    fit_both_as_keras(ours, theirs, x, y, batch_size=6, epochs=3)
    opt = ours.optimizer
    assert all(int(o.iterations) == 12 for o in theirs.optimizer.optimizers)
    assert [type(o).__name__ for o in opt.optimizers] == \
        [type(o).__name__ for o in theirs.optimizer.optimizers]
    with pytest.raises(AttributeError, match=r"\[MultiOptimizer\] has no learning rate"):
        opt.learning_rate
    if not selector:
        again = nn.optimizers.get(opt.get_config())
        assert again.get_config() == opt.get_config()
        assert again._optimizer_map["net/first/kernel"].get_config() == \
            opt.optimizers[0].get_config()
    else:
        with pytest.raises(TypeError, match=r"function cannot be serialized"):
            opt.get_config()


def test_optimizer_map_lookup_and_errors():
    adam, sgd, lion = nn.optimizers.Adam(), nn.optimizers.SGD(), nn.optimizers.Lion()
    m = nn.optimizers.OptimizerMap(lion, {"enc/.*": sgd, "enc/dense": adam})
    assert m["enc/dense"] is adam and m["enc/attention/q"] is sgd and m["dec/x"] is lion
    m["enc/dense.*"] = lion
    with pytest.raises(ValueError, match=r"more than one optimizer for the weight "
                                         r"'enc/dense_1'"):
        m["enc/dense_1"]
    with pytest.raises(ValueError, match=r"the key 'enc/dense' is in the map already"):
        m["enc/dense"] = sgd
    with pytest.raises(ValueError, match=r"must be an optimizer \(not a MultiOptimizer\)"):
        m["x"] = nn.optimizers.MultiOptimizer(nn.optimizers.OptimizerMap(sgd))
    with pytest.raises(TypeError, match=r"\[OptimizerMap\] default_optimizer must be an "):
        nn.optimizers.OptimizerMap("adam")
    with pytest.raises(TypeError, match=r"\[MultiOptimizer\] optimizer_map must be"):
        nn.optimizers.MultiOptimizer({"a": sgd})


def test_multi_optimizer_refuses_a_callback_setting_its_rate():
    m = nn.Sequential([nn.Input((2,)), nn.Dense(1)])
    m.compile(nn.optimizers.MultiOptimizer(nn.optimizers.OptimizerMap(nn.optimizers.SGD())),
              "mse")
    cb = nn.callbacks.LearningRateScheduler(lambda epoch: 0.1)
    with pytest.raises(ValueError, match=r"\[MultiOptimizer\] a callback set the learning rate"):
        m.fit(np.ones((4, 2), np.float32), np.ones((4, 1), np.float32), verbose=0,
              callbacks=[cb])


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum_under_a_schedule_as_keras(keras, nesterov):
    """Keras's momentum holds the learning rate (m = momentum m - lr g), which
    differs from PyTorch's form (tessera.optim.SGD) once the rate changes."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(12, 4)).astype(np.float32)
    y = rng.normal(size=(12, 3)).astype(np.float32)
    ours, theirs, _ = _models(keras, rng)
    for lib, model in ((nn, ours), (keras, theirs)):
        rate = lib.optimizers.schedules.ExponentialDecay(0.1, 1, 0.5)
        model.compile(lib.optimizers.SGD(rate, momentum=0.9, nesterov=nesterov), "mse")
    fit_both_as_keras(ours, theirs, x, y, batch_size=3, epochs=2)


@pytest.mark.parametrize("make", [
    lambda: nn.optimizers.SGD(0.05, momentum=0.9),
    lambda: nn.optimizers.MultiOptimizer(nn.optimizers.OptimizerMap(
        nn.optimizers.Adafactor(0.01), {"net/first/.*": nn.optimizers.Muon(0.01)})),
])
def test_saved_and_loaded_optimizers_resume_exactly(tmp_path, make):
    """load_model rebuilds keras.optimizers' forms (Keras's SGD momentum, a
    MultiOptimizer and its map) with their state: the next epoch is the same."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(16, 4)).astype(np.float32)
    y = x[:, :1] * 2
    model = nn.Sequential([nn.Input((4,)), nn.Dense(6, name="first"), nn.Dense(1, name="last")],
                          name="net")
    model.compile(make(), "mse")
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    model.save(tmp_path / "m.keras")
    again = nn.models.load_model(tmp_path / "m.keras")
    assert type(again.optimizer) is type(model.optimizer)
    for m in (model, again):
        m.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), again.get_weights()):
        np.testing.assert_array_equal(a, b)
