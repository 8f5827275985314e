"""Issue 30: Keras 3 user programs written with keras.ops (tests/python/user_ops_programs.py)
run under Keras 3 on JAX and under tessera.nn with only the import changed: the same
initial weights and data give the same predictions, the same losses over a few fit steps,
and tessera's saved-and-loaded model predicts what it predicted before saving."""

import numpy as np
import pytest
import user_ops_programs as progs

import tessera.nn as tn
from tessera.nn import output_nesting

DETERMINISTIC = ["rms_norm", "rotary_embedding", "swiglu_geglu", "causal_attention",
                 "focal_loss", "dice_loss", "contrastive_siamese", "label_smoothing",
                 "fbeta_metric", "custom_regularizer", "custom_constraint", "window_mask",
                 "top_k_sort", "segment_pool", "cumsum_positions", "squeeze_excite",
                 "patch_extraction", "learnable_temperature", "build_and_output_shape",
                 "nested_layers", "vae_sampling", "gumbel_softmax", "compute_loss_override",
                 "masked_sequence_loss"]


def _compiled(lib, program):
    opt = {"sgd": lib.optimizers.SGD, "adam": lib.optimizers.Adam}[program.optimizer]
    program.model.compile(opt(program.lr), loss=program.loss, metrics=program.metrics)
    return program.model


def _predict(lib, model, x):
    """tessera's predict (its compiled program); Keras's model called on the arrays (the
    same values, without an XLA compilation per model)."""
    if lib is tn:
        return np.asarray(model.predict(x, batch_size=8, verbose=0))
    return np.asarray(model(x, training=False))


def _run(lib, name, weights=None):
    program = getattr(progs, name)(lib)
    if weights is None and program.adjust is not None:
        weights = program.adjust(program.model.get_weights())
    if weights is not None:
        program.model.set_weights(weights)
    weights = program.model.get_weights()
    before = _predict(lib, program.model, program.x)
    if lib is tn:
        first = program.x[:3] if not isinstance(program.x, list) else [a[:3] for a in program.x]
        eager = np.asarray(program.model(first))  # a call on arrays, as predict computes
        np.testing.assert_allclose(eager, before[:3], rtol=1e-5, atol=1e-6)
    model = _compiled(lib, program)
    history = model.fit(program.x, program.y, batch_size=8, epochs=2, shuffle=False,
                        verbose=0).history
    after = _predict(lib, model, program.x)
    return program, weights, before, history, after


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_program_runs_as_keras(keras, tmp_path, name):
    _, weights, k_before, k_hist, k_after = _run(keras, name)
    program, _, t_before, t_hist, t_after = _run(tn, name, weights)
    np.testing.assert_allclose(t_before, k_before, rtol=1e-5, atol=1e-5)
    assert sorted(t_hist) == sorted(k_hist)
    for key in k_hist:
        np.testing.assert_allclose(t_hist[key], k_hist[key], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(t_after, k_after, rtol=1e-4, atol=1e-5)
    assert np.abs(k_after - k_before).max() > 1e-4  # fit changed the weights: can fail
    path = str(tmp_path / f"{name}.keras")
    program.model.save(path)
    loaded = tn.saving.load_model(path, custom_objects=program.custom_objects)
    np.testing.assert_allclose(loaded.predict(program.x, batch_size=8, verbose=0), t_after,
                               rtol=1e-6, atol=1e-6)


def _random_layer(lib, name, cls, **kwargs):
    return getattr(progs, name)(lib).custom_objects[cls](**kwargs)


def test_random_layers_sample_as_keras(keras):
    """keras.random with a SeedGenerator inside call, eagerly: the VAE's sampling layer and
    a Gumbel-softmax draw from the same distributions as Keras's (the draws themselves
    differ: moments compared), and each call draws anew."""
    rng = np.random.default_rng(3)
    mean = np.repeat(rng.normal(size=(1, 3)), 4000, 0).astype("float32")
    log_var = np.repeat(rng.normal(size=(1, 3)), 4000, 0).astype("float32")
    logits = np.repeat(rng.normal(size=(1, 4)), 4000, 0).astype("float32")
    std = np.exp(log_var[0] / 2)
    for lib in (keras, tn):
        sampling = _random_layer(lib, "vae_sampling", "Sampling")
        a, b = (np.asarray(sampling([mean, log_var])) for _ in range(2))
        assert not np.allclose(a, b)  # the generator advances
        np.testing.assert_allclose(a.mean(0), mean[0], atol=0.1 * std.max())
        np.testing.assert_allclose(a.std(0), std, rtol=0.08)
        gumbel = _random_layer(lib, "gumbel_softmax", "GumbelSoftmax", temperature=0.1)
        g = np.asarray(gumbel(logits, training=True))
        np.testing.assert_allclose(g.sum(-1), 1.0, rtol=1e-5)
        # the argmax of logits + Gumbel noise is a draw from softmax(logits)
        freq = np.bincount(g.argmax(-1), minlength=4) / len(g)
        want = np.exp(logits[0]) / np.exp(logits[0]).sum()
        np.testing.assert_allclose(freq, want, atol=0.03)
        hard = np.asarray(gumbel(logits, training=False))
        np.testing.assert_array_equal(hard, np.eye(4)[np.argmax(logits, -1)])


def _pair_layer(lib):
    class Gate(lib.layers.Layer):
        def call(self, inputs, scale=None):
            a, b = inputs["a"], inputs["b"]
            return a * lib.ops.sigmoid(b) + scale

    return Gate


def test_saved_user_layer_is_called_with_its_arguments_structure(tmp_path):
    """A user layer called with a list (keras-io's Sampling()([z_mean, z_log_var])), a dict
    or a tensor keyword is called the same way by load_model (it got the tensors as
    positional arguments); a file whose call entry does not name each input once is
    refused by name."""
    Gate = _pair_layer(tn)
    a, b, c = tn.Input((3,)), tn.Input((3,)), tn.Input((3,))
    model = tn.Model([a, b, c], Gate()({"a": a, "b": b}, scale=c))
    x = [progs._data((4, 3), s) for s in range(3)]
    want = x[0] / (1 + np.exp(-x[1])) + x[2]
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=1e-5)
    path = str(tmp_path / "gate.keras")
    model.save(path)
    loaded = tn.saving.load_model(path, custom_objects={"Gate": Gate})
    np.testing.assert_allclose(loaded.predict(x, verbose=0), want, rtol=1e-5)
    ctx = type("Ctx", (), {"error": staticmethod(ValueError)})
    ins = ["x0", "x1"]
    assert output_nesting.call_arguments({"call": {"args": [[1, 0]], "kwargs": {}}}, ins,
                                         ctx) == ([["x1", "x0"]], {})
    for bad in ([[0, 0]], [[0]], [[0, 1, 2]], [["0", 1]], [{"x": 0, "y": 1}]):
        with pytest.raises(ValueError, match="a layer call's arguments"):
            output_nesting.call_arguments({"call": {"args": bad, "kwargs": {}}}, ins, ctx)


OP_CASES = {
    # Keras 3's default epsilon is keras.config.epsilon() (tessera had 1e-3)
    "layer_normalization": lambda o, x: o.layer_normalization(x),
    "layer_normalization_axes": lambda o, x: o.layer_normalization(
        x, gamma=o.reshape(o.linspace(0.5, 1.5, 48), (6, 8)), beta=o.ones((6, 8)),
        axis=[1, 2], epsilon=1e-5),
    "layer_normalization_axis_1": lambda o, x: o.layer_normalization(
        x, gamma=o.linspace(0.5, 1.5, 6), beta=o.linspace(-1.0, 1.0, 6), axis=1),
    # the deprecated rms_scaling scales by the variance, as Keras's (tessera took the mean
    # square)
    "layer_normalization_rms_scaling": lambda o, x: o.layer_normalization(
        x + 1.0, gamma=o.linspace(0.5, 1.5, 8), rms_scaling=True),
    # the other methods than linear (NumPy's positions; a list of q: its axis moved last,
    # the batch axis staying first)
    "quantile_lower": lambda o, x: o.quantile(x, 0.3, axis=-1, method="lower"),
    "quantile_nearest": lambda o, x: o.moveaxis(o.quantile(x, [0.25, 0.5], axis=-1,
                                                           method="nearest", keepdims=True),
                                                0, -1),
    "percentile_midpoint": lambda o, x: o.percentile(x, 35, axis=1, method="midpoint"),
    "percentile_higher": lambda o, x: o.moveaxis(o.percentile(x, [10, 90], axis=2,
                                                              method="higher"), 0, -1),
    "quantile_linear": lambda o, x: o.moveaxis(o.quantile(x, [0.2, 0.7], axis=1), 0, -1),
}


@pytest.mark.parametrize("name", sorted(OP_CASES))
def test_ops_users_call_as_keras(keras, name):
    """keras.ops calls met writing the programs that differed from Keras or failed: on
    arrays and inside a layer's call (compiled), against Keras on JAX."""
    fn = OP_CASES[name]
    x = progs._data((4, 6, 8), 5)
    def warns():  # Keras's deprecation warning of rms_scaling, tessera's too
        return pytest.warns(UserWarning, match="rms_scaling") if "rms" in name else \
            _no_warning()

    with warns():
        want = np.asarray(fn(keras.ops, x))
    with warns():
        eager = np.asarray(fn(tn.ops, x))
    assert eager.shape == want.shape
    np.testing.assert_allclose(eager, want, rtol=1e-5, atol=1e-5)

    class Op(tn.layers.Layer):
        def call(self, v):
            return fn(tn.ops, v)

    inp = tn.Input((6, 8))
    with warns():
        model = tn.Model(inp, Op()(inp))
    got = model.predict(x, batch_size=2, verbose=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_ops_arguments_checked():
    x = progs._data((4, 6), 5)
    with pytest.raises(ValueError, match=r"\[ops.quantile\] method must be one of .*'cubic'"):
        tn.ops.quantile(x, 0.5, method="cubic")
    with pytest.raises(NotImplementedError, match=r"\[ops.percentile\] method='lower' takes q "
                                                  r"as numbers and axis as None or an int"):
        tn.ops.percentile(x, 50, axis=(0, 1), method="lower")
    inp = tn.Input((6,))
    with pytest.raises(NotImplementedError, match=r"\[ops.quantile\] method='higher' needs the "
                                                  r"length of the axis"):
        tn.ops.quantile(inp, 0.5, axis=0, method="higher")
    with pytest.raises(TypeError, match=r"\[ops.layer_normalization\] unexpected arguments "
                                        r"\['center'\]"):
        tn.ops.layer_normalization(x, center=True)
    with pytest.raises(ValueError, match=r"\[ops.layer_normalization\] axis 3 is out of range"):
        tn.ops.layer_normalization(x, axis=[0, 3])


@pytest.mark.parametrize("hook, call", [("train_step", "fit"), ("test_step", "evaluate")])
def test_jax_stateless_step_is_refused_with_the_forms_that_work(hook, call):
    """Keras's JAX trainer's train_step(self, state, data) is refused by name, naming the
    (self, data) form with GradientTape and compute_loss (it failed with Python's 'missing
    1 required positional argument')."""

    def step(self, state, data):
        return {}, state

    JaxStep = type("JaxStep", (tn.Model,), {hook: step})
    inp = tn.Input((5,))
    model = JaxStep(inp, tn.layers.Dense(2)(inp))
    model.compile("sgd", "mse")
    x, y = progs._data((8, 5)), progs._data((8, 2), 1)
    with pytest.raises(NotImplementedError, match=rf"\[{call}\] JaxStep.{hook} takes \['state', "
                                                  rf"'data'\]: the stateless .*JAX trainer is "
                                                  r"not supported.*GradientTape.*compute_loss"):
        getattr(model, call)(x, y, verbose=0)


def _draws(lib, which, x):
    """A layer drawing with keras.random in every call (compiled by predict)."""
    ops, random = lib.ops, lib.random

    class Draw(lib.layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.seed_generator = random.SeedGenerator(11)

        def call(self, v):
            seed = self.seed_generator
            if which == "truncated_normal":
                return random.truncated_normal(ops.shape(v), 1.0, 0.5, seed=seed) + 0.0 * v
            if which == "randint":
                return ops.cast(random.randint(ops.shape(v), 0, 5, seed=seed), "float32") + 0 * v
            if which == "shuffle":
                return random.shuffle(v, axis=1, seed=seed)
            if which == "dropout":
                return random.dropout(v, 0.5, noise_shape=(None, 1), seed=seed)
            return ops.cast(random.categorical(v, 3, seed=seed), "float32")

    inp = lib.Input((4,))
    return np.asarray(lib.Model(inp, Draw()(inp)).predict(x, batch_size=len(x), verbose=0))


@pytest.mark.parametrize("which", ["truncated_normal", "randint", "shuffle", "dropout",
                                   "categorical"])
def test_random_draws_inside_a_call_as_keras(keras, which):
    """keras.random's truncated_normal, randint, shuffle, dropout(noise_shape=) and
    categorical inside a layer's call (they raised 'not supported yet'): the draws'
    distribution and structure as Keras's on JAX (moments and frequencies compared)."""
    x = np.tile(np.array([[0.5, -1.0, 2.0, 0.0]], "float32"), (3000, 1))
    got = _draws(tn, which, x)
    # (Keras on JAX cannot shuffle a symbolic batch: its eager draw is the reference)
    want = np.asarray(keras.random.shuffle(x, axis=1, seed=11)) if which == "shuffle" else \
        _draws(keras, which, x)
    assert got.shape == want.shape
    if which in ("truncated_normal", "randint"):
        assert got.min() >= want.min() - 1e-6 and got.max() <= want.max() + 1e-6
        np.testing.assert_allclose(got.mean(), want.mean(), atol=0.03)
        np.testing.assert_allclose(got.std(), want.std(), rtol=0.03)
    elif which == "shuffle":  # each row permuted on its own (Keras's independent=True)
        np.testing.assert_array_equal(np.sort(got, 1), np.sort(x, 1))
        for a in (got, want):
            np.testing.assert_allclose(a.mean(0), x[0].mean(), atol=0.1)
        eager = np.asarray(tn.random.shuffle(x, axis=1, seed=11))
        np.testing.assert_array_equal(np.sort(eager, 1), np.sort(x, 1))
        np.testing.assert_allclose(eager.mean(0), x[0].mean(), atol=0.1)
    elif which == "dropout":  # whole rows dropped or scaled by 2
        kept = got[:, 0] != 0
        np.testing.assert_array_equal(got[kept], 2 * x[kept])
        np.testing.assert_array_equal(got[~kept], 0 * x[~kept])
        np.testing.assert_allclose(kept.mean(), (want[:, 0] != 0).mean(), atol=0.05)
    else:
        for k in range(4):
            np.testing.assert_allclose((got == k).mean(), (want == k).mean(), atol=0.03)
    if which != "shuffle":
        assert not np.allclose(got, got[::-1])  # draws differ across rows: the test can fail
