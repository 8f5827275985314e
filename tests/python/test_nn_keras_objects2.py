"""Issue 30, the rest of Keras's object model, each run under Keras 3 (JAX backend) and
tessera.nn and compared: a BatchNormalization read in inference mode after its training-mode
call in the same GradientTape's loss, and the optimizers' variables (`optimizer.variables`,
`iterations`, `learning_rate`: names, paths, shapes, order, values after training, and copying
them between optimizers with `assign`)."""

import copy
import re

import numpy as np
import pytest

import tessera.nn as tn


# ------------------------------------------------------------------ BatchNormalization


def _bn_model(lib):
    return lib.Sequential([lib.Input((4,)), lib.layers.Dense(5, use_bias=False),
                           lib.layers.BatchNormalization(momentum=0.6),
                           lib.layers.Activation("tanh"), lib.layers.Dense(1)],
                          name="discriminator")


class _TrainThenRead(tn.Model):
    """A tape step calling the model in training mode, then (without `training`) in
    inference mode: the second call reads the moving statistics the first moved."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def train_step(self, data):
        x = data
        with tn.GradientTape() as tape:
            loss = tn.ops.mean(tn.ops.square(self.inner(x, training=True)))
            loss = loss + tn.ops.mean(self.inner(x * 2.0))
        grads = tape.gradient(loss, self.inner.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.inner.trainable_weights))
        return {"loss": loss}


def _keras_train_then_read(keras, weights, batches, lr):
    """Keras on JAX: one stateless call in training mode, then one in inference mode on the
    moving statistics it returned, inside one differentiated loss (as Keras's StatelessScope
    reads an assigned variable)."""
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle
    import jax.numpy as jnp  # noqa: PLC0415

    m = _bn_model(keras)
    m.set_weights(weights)
    opt = keras.optimizers.SGD(lr)
    opt.build(m.trainable_variables)
    tv = [v.value for v in m.trainable_variables]
    nv = [v.value for v in m.non_trainable_variables]
    ov = [v.value for v in opt.variables]
    losses = []
    for x in batches:
        def loss_fn(tv_, nv_):
            y1, nv2 = m.stateless_call(tv_, nv_, x, training=True)
            y2, _ = m.stateless_call(tv_, nv2, x * 2.0, training=False)
            return jnp.mean(jnp.square(y1)) + jnp.mean(y2), nv2

        (loss, nv), grads = jax.value_and_grad(loss_fn, has_aux=True)(tv, nv)
        tv, ov = opt.stateless_apply(ov, grads, tv)
        losses.append(float(loss))
    return losses, [np.asarray(v) for v in tv + nv]


def test_batch_norm_read_in_inference_after_its_training_call_as_keras(keras):
    rng = np.random.default_rng(5)
    x = rng.normal(0.5, 1.5, (16, 4)).astype("float32")
    km = _bn_model(keras)
    weights = [np.asarray(w) for w in km.get_weights()]
    batches = [x[:8], x[8:]] * 2
    k_losses, k_weights = _keras_train_then_read(keras, weights, batches, 0.1)
    inner = _bn_model(tn)
    inner.set_weights(weights)
    model = _TrainThenRead(inner)
    model.compile(tn.optimizers.SGD(0.1))
    seen = []
    cb = tn.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(logs["loss"]))
    model.fit(x, batch_size=8, epochs=2, shuffle=False, verbose=0, callbacks=[cb])
    np.testing.assert_allclose(seen, k_losses, rtol=1e-5, atol=1e-6)
    got = [np.asarray(v) for v in inner.trainable_weights + inner.non_trainable_weights]
    assert len(got) == len(k_weights)
    for a, b in zip(got, k_weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # the inference call's gradient reaches the weights through the moved statistics, as
    # JAX differentiates them: without that term the first step's loss would still agree
    # but the weights would not (checked above); and the statistics did move
    assert not np.allclose(np.asarray(inner.layers[1].moving_mean), 0.0)


# ------------------------------------------------------------------ optimizer.variables

_OPTIMIZERS = [("SGD", {"momentum": 0.9}), ("SGD", {"momentum": 0.5, "nesterov": True}),
               ("SGD", {}), ("Adam", {}), ("Adam", {"amsgrad": True}), ("AdamW", {}),
               ("RMSprop", {}), ("RMSprop", {"momentum": 0.5, "centered": True}),
               ("Adagrad", {}), ("Adadelta", {}), ("Adamax", {}), ("Nadam", {}), ("Ftrl", {}),
               ("Lion", {}), ("Lamb", {}), ("Adam", {"use_ema": True}),
               ("SGD", {"momentum": 0.5, "gradient_accumulation_steps": 2})]


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(8, 3)).astype("float32"), rng.normal(size=(8, 2)).astype("float32")


def _described(opt):
    """(path without the optimizer's own name, name, shape, dtype, value) of each variable
    (the optimizers' automatic names count what each process made before)."""
    out = []
    for v in opt.variables:
        path = v.path.split("/", 1)[1] if v.path.startswith(opt.name + "/") else v.path
        name = v.name
        if re.fullmatch(r"variable(_\d+)?", name):  # (Nadam's unnamed Variable: counted)
            path = name = "variable"
        out.append((path, name, tuple(v.shape), str(v.dtype), np.array(v.numpy())))
    return out


def _assert_same_variables(got, want):
    assert [g[:4] for g in got] == [w[:4] for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g[4], w[4], rtol=1e-4, atol=1e-6, err_msg=g[0])


def _fitted(lib, cls, kw, weights=None, epochs=3):
    x, y = _data()
    m = lib.Sequential([lib.Input((3,)), lib.layers.Dense(2, name="d")], name="seq")
    if weights is not None:
        m.set_weights(weights)
    opt = getattr(lib.optimizers, cls)(learning_rate=0.05, **kw)
    m.compile(opt, "mse")
    before = _described(opt)
    m.fit(x, y, verbose=0, epochs=epochs, batch_size=4, shuffle=False)
    return m, opt, before


@pytest.mark.parametrize("cls,kw", _OPTIMIZERS, ids=lambda v: str(v))
def test_optimizer_variables_after_fit_as_keras(keras, cls, kw):
    km, kopt, kbefore = _fitted(keras, cls, kw)
    weights = [np.asarray(w) for w in keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(2)]).get_weights()]
    km, kopt, kbefore = _fitted(keras, cls, kw, weights)
    tm, topt, tbefore = _fitted(tn, cls, kw, weights)
    # before the first update: the iteration and the learning rate only (Keras builds the
    # rest with the optimizer)
    _assert_same_variables(tbefore, kbefore)
    _assert_same_variables(_described(topt), _described(kopt))
    assert int(topt.iterations) == int(kopt.iterations)
    assert topt.variables[0].path == f"{topt.name}/iteration"


def test_optimizer_state_copied_between_models_with_assign_as_keras(keras):
    x, y = _data()
    weights = [np.asarray(w) for w in keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(2)]).get_weights()]
    # Keras: 5 epochs of one model
    km, kopt, _ = _fitted(keras, "Adam", {}, weights, epochs=5)
    # tessera: 3 epochs of a, then its weights and optimizer state copied into b (trained
    # once on other data so that its state exists), which goes on for 2 epochs
    a, aopt, _ = _fitted(tn, "Adam", {}, weights, epochs=3)
    b, bopt, _ = _fitted(tn, "Adam", {}, weights, epochs=1)
    b.fit(x * 3.0, y, verbose=0, epochs=1, batch_size=8)
    assert not np.allclose(bopt.variables[2].numpy(), aopt.variables[2].numpy())
    b.set_weights(a.get_weights())
    for v, w in zip(bopt.variables, aopt.variables):
        v.assign(w)
    assert int(bopt.iterations) == 6
    b.fit(x, y, verbose=0, epochs=2, batch_size=4, shuffle=False)
    for got, want in zip(b.get_weights(), km.get_weights()):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-5)
    _assert_same_variables(_described(bopt), _described(kopt))
    # a wrong shape is refused by name
    with pytest.raises(ValueError, match=r"\[Variable.assign\] .*seq_d_kernel_momentum has "
                                         r"shape \(3, 2\)"):
        bopt.variables[2].assign(np.zeros((4,)))
    # the learning rate as Keras's variable: assign sets it
    bopt.learning_rate.assign(0.01)
    assert bopt.variables[1].numpy() == np.float32(0.01)
    bopt.variables[1].assign(0.02)
    assert float(bopt.learning_rate) == pytest.approx(0.02)


class _TapeStep(tn.Model):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def train_step(self, data):
        x, y = data
        with tn.GradientTape() as tape:
            loss = tn.ops.mean(tn.ops.square(self.inner(x) - y))
        grads = tape.gradient(loss, self.inner.trainable_weights)
        self.optimizer.apply_gradients(zip(grads, self.inner.trainable_weights))
        return {"loss": loss}


@pytest.mark.parametrize("cls", ["Adam", "RMSprop", "Nadam"])
def test_optimizer_variables_of_a_tape_step_as_keras(keras, cls):
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle
    import jax.numpy as jnp  # noqa: PLC0415

    x, y = _data()
    km = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="d")], name="seq")
    weights = [np.asarray(w) for w in km.get_weights()]
    kopt = getattr(keras.optimizers, cls)(learning_rate=0.05)
    kopt.build(km.trainable_variables)
    tv, ov = [v.value for v in km.trainable_variables], [v.value for v in kopt.variables]
    for i in (0, 4, 0, 4):
        def loss_fn(tv_, xb=x[i:i + 4], yb=y[i:i + 4]):
            out, _ = km.stateless_call(tv_, [], xb)
            return jnp.mean(jnp.square(out - yb))

        grads = jax.grad(loss_fn)(tv)
        tv, ov = kopt.stateless_apply(ov, grads, tv)
    for v, value in zip(kopt.variables, ov):
        v.assign(value)
    inner = tn.Sequential([tn.Input((3,)), tn.layers.Dense(2, name="d")], name="seq")
    inner.set_weights(weights)
    model = _TapeStep(inner)
    topt = getattr(tn.optimizers, cls)(learning_rate=0.05)
    model.compile(topt)
    model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    _assert_same_variables(_described(topt), _described(kopt))


# ------------------------------------------------------------------ SeedGenerator


def _seed_states(lib):
    g = lib.random.SeedGenerator(1337)
    out = {"first": (g.state.name, g.state.path.split("/")[-1], str(g.state.dtype),
                     tuple(g.state.shape), bool(g.state.trainable)),
           "states": [np.array(g.state.numpy())]}
    draws = []
    for _ in range(3):
        draws.append(np.asarray(lib.random.normal((4,), seed=g)))
        out["states"].append(np.array(g.state.numpy()))
    g.state.assign(np.array([1337, 1], "uint32"))  # back to the state after one draw
    again = [np.asarray(lib.random.normal((4,), seed=g)) for _ in range(2)]
    out["states"].append(np.array(g.state.numpy()))
    out["config"] = g.get_config()
    return out, draws, again


def test_seed_generator_state_as_keras(keras):
    kout, _, kagain = _seed_states(keras)
    tout, tdraws, tagain = _seed_states(tn)
    assert tout["first"] == kout["first"]
    for a, b in zip(tout["states"], kout["states"]):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    assert tout["config"]["seed"] == kout["config"]["seed"] == 1337
    # the draws after the assignment repeat those made from that state (as Keras's do)
    np.testing.assert_array_equal(tagain, tdraws[1:])
    # a state that is not [seed, count] is refused by name
    with pytest.raises(ValueError, match=r"\[SeedGenerator.state.assign\] .*seed_generator_state"):
        tn.random.SeedGenerator(3).state.assign(np.zeros(3, "uint32"))


class _Noise(tn.layers.Layer):
    """A user's layer holding a SeedGenerator and drawing with it in call."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.seed_generator = tn.random.SeedGenerator(1337)

    def call(self, x, training=None):
        if training:
            return x + 0.1 * tn.random.normal(tn.ops.shape(x), seed=self.seed_generator)
        return x


def test_layer_with_a_seed_generator_trains_saves_and_loads(tmp_path):
    x = np.random.default_rng(1).normal(size=(8, 3)).astype("float32")

    def run():
        tn.utils.set_random_seed(4)
        inp = tn.Input((3,))
        m = tn.Model(inp, tn.layers.Dense(2)(_Noise(name="noise")(inp)))
        m.compile("sgd", "mse")
        h = m.fit(x, x[:, :2], epochs=3, batch_size=4, verbose=0, shuffle=False)
        return m, h.history["loss"]

    m1, l1 = run()
    m2, l2 = run()
    assert l1 == l2  # reproducible from the seeds
    path = str(tmp_path / "noise.keras")
    m1.save(path)
    loaded = tn.saving.load_model(path, custom_objects={"_Noise": _Noise})
    np.testing.assert_allclose(loaded.predict(x, verbose=0), m1.predict(x, verbose=0),
                               rtol=1e-6)
    # as in Keras, the generator's state is not among the saved weights: a loaded layer's
    # generator starts from its seed
    assert isinstance(loaded.get_layer("noise").seed_generator, tn.random.SeedGenerator)
    assert len(loaded.get_weights()) == len(m1.get_weights()) == 2


# ------------------------------------------------------------------ wrappers' configs


def _normal(v):
    """A config without what legitimately differs: the "module" of serialized objects and
    the counters of automatic names (as tests/python/test_nn_keras_config.py)."""
    if isinstance(v, dict):
        out = {k: _normal(u) for k, u in v.items() if k != "module"}
        if isinstance(out.get("name"), str):
            out["name"] = re.sub(r"_\d+$", "", out["name"])
        return out
    if isinstance(v, (list, tuple)):
        return [_normal(u) for u in v]
    return v


def _spectral(lib):
    return lib.layers.SpectralNormalization(
        lib.layers.Dense(3, activation="tanh", name="inner"), power_iterations=2, name="sn")


def test_spectral_normalization_config_round_trips_as_keras(keras):

    ours, theirs = _spectral(tn).get_config(), _spectral(keras).get_config()
    assert _normal(ours) == _normal(theirs)
    again = tn.layers.SpectralNormalization.from_config(copy.deepcopy(ours))
    assert again.get_config() == ours and again.layer.units == 3
    # a config Keras wrote builds tessera's layer
    built = tn.layers.SpectralNormalization.from_config(copy.deepcopy(theirs))
    assert _normal(built.get_config()) == _normal(theirs)
    back = tn.layers.deserialize(tn.layers.serialize(_spectral(tn)))
    assert type(back) is tn.layers.SpectralNormalization and back.power_iterations == 2


def test_spectral_normalization_model_trains_saves_and_loads(keras, tmp_path):
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(8, 4)).astype("float32"), rng.normal(size=(8, 3)).astype("float32")
    k_inp = keras.Input((4,))
    km = keras.Model(k_inp, _spectral(keras)(k_inp))
    weights = [np.asarray(w) for w in km.get_weights()]
    km.compile(keras.optimizers.SGD(0.1), "mse")
    km.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    inp = tn.Input((4,))
    m = tn.Model(inp, _spectral(tn)(inp))
    m.set_weights(weights)
    m.compile(tn.optimizers.SGD(0.1), "mse")
    m.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    assert [v.path for v in m.weights] == [v.path for v in km.weights]
    for a, b in zip(m.get_weights(), km.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-6)
    path = str(tmp_path / "sn.keras")
    m.save(path)
    loaded = tn.saving.load_model(path)
    assert type(loaded.layers[1]) is tn.layers.SpectralNormalization
    assert _normal(loaded.layers[1].get_config()) == _normal(km.layers[1].get_config())
    for a, b in zip(loaded.get_weights(), m.get_weights()):  # vector_u included
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), km.predict(x, verbose=0),
                               rtol=1e-4, atol=1e-6)


def _user_wrapper(lib):
    @lib.saving.register_keras_serializable(package="objects2")
    class Scaled(lib.layers.Wrapper):
        def __init__(self, layer, factor=2.0, **kwargs):
            super().__init__(layer, **kwargs)
            self.factor = factor

        def call(self, x):
            return self.layer(x) * self.factor

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    return Scaled


def test_user_wrapper_config_and_save_load_as_keras(keras, tmp_path):

    ours_cls, theirs_cls = _user_wrapper(tn), _user_wrapper(keras)
    ours = ours_cls(tn.layers.Dense(3, name="inner"), factor=3.0, name="scaled")
    theirs = theirs_cls(keras.layers.Dense(3, name="inner"), factor=3.0, name="scaled")
    mine, want = _normal(ours.get_config()), _normal(theirs.get_config())
    # (a user's layer's dtype: tessera writes the policy's name, Keras its dict)
    mine.pop("dtype"), want.pop("dtype")
    assert mine == want
    again = ours_cls.from_config(copy.deepcopy(ours.get_config()))
    assert again.get_config() == ours.get_config() and again.layer.units == 3
    x = np.random.default_rng(3).normal(size=(5, 4)).astype("float32")
    k_inp = keras.Input((4,))
    km = keras.Model(k_inp, theirs(k_inp))
    inp = tn.Input((4,))
    m = tn.Model(inp, ours(inp))
    m.set_weights([np.asarray(w) for w in km.get_weights()])
    assert [v.path for v in m.weights] == [v.path for v in km.weights]
    path = str(tmp_path / "scaled.keras")
    m.save(path)
    loaded = tn.saving.load_model(path)
    assert type(loaded.layers[1]).__name__ == "Scaled" and loaded.layers[1].factor == 3.0
    np.testing.assert_allclose(loaded.predict(x, verbose=0), km.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)
