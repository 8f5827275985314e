"""Issue 30, second round: places where tessera.nn gave a silently different answer from
Keras 3 (on JAX), each run under both and compared: the global seed, the names of unnamed
weights and variables, Variable dtypes, two-input eager calls, BatchNormalization in a
traced train_step, and small programs users write (compile/fit/evaluate keys, callbacks,
summary text, get/set_weights)."""

import re

import numpy as np
import pytest

import tessera.nn as tn


def _seeded_run(lib, seed):
    """Initial weights, fit losses (shuffle and dropout), an unseeded initializer, an
    unseeded SeedGenerator's draw and an eager dropout, after set_random_seed(seed)."""
    if seed is not None:
        lib.utils.set_random_seed(seed)
    m = lib.Sequential([lib.Input((4,)), lib.layers.Dense(3), lib.layers.Dropout(0.5),
                        lib.layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse")
    x = np.arange(40, dtype="float32").reshape(10, 4) / 40
    y = np.arange(10, dtype="float32")[:, None] / 10
    w0 = [np.array(w) for w in m.get_weights()]
    h = m.fit(x, y, epochs=2, batch_size=3, verbose=0, shuffle=True)
    init = np.asarray(lib.initializers.GlorotUniform()((3, 3)))
    draw = np.asarray(lib.random.normal((3,), seed=lib.random.SeedGenerator()))
    drop = np.asarray(lib.layers.Dropout(0.5)(np.ones((1, 16), "float32"), training=True))

    class Linear(lib.layers.Layer):  # a user's layer: add_weight with an unseeded initializer
        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1], 2), initializer="random_normal")

        def call(self, inputs):
            return lib.ops.matmul(inputs, self.w)

    inp = lib.Input((4,))
    user = np.array(lib.Model(inp, Linear()(inp)).get_weights()[0])
    return {"weights": w0[0], "losses": np.array(h.history["loss"]), "initializer": init,
            "seed_generator": draw, "dropout": drop, "user_weight": user}


def _same(a, b):
    return all(np.array_equal(a[k], b[k]) for k in a), {k: np.array_equal(a[k], b[k]) for k in a}


@pytest.fixture(scope="module")
def seeded_runs(keras):
    """Each library's three seeded runs (seeds 1, 1, 2), made once for the module: every
    part below reads the same runs (each run draws all the parts)."""
    return {lib.__name__: (_seeded_run(lib, 1), _seeded_run(lib, 1), _seeded_run(lib, 2))
            for lib in (keras, tn)}


@pytest.mark.parametrize("part", ["weights", "losses", "initializer", "seed_generator",
                                  "dropout", "user_weight"])
def test_set_random_seed_repeats_and_varies_as_keras(keras, seeded_runs, part):
    for lib in (keras, tn):
        a, b, c = seeded_runs[lib.__name__]
        assert np.array_equal(a[part], b[part]), (lib.__name__, part, "same seed")
        assert not np.array_equal(a[part], c[part]), (lib.__name__, part, "other seed")


def test_global_seed_varies_shuffle_and_dropout_of_fit_alone(keras):
    """With the model's weights fixed (set_weights), the global seed still changes fit's
    losses: through the shuffle order alone, and through dropout alone."""
    x = np.random.default_rng(0).normal(size=(12, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)

    def losses(lib, seed, dropout, shuffle):
        # (Keras's Dropout takes its seed when it is made: the global seed is set first)
        lib.utils.set_random_seed(seed)
        layers = [lib.Input((4,)), lib.layers.Dense(3)]
        layers += [lib.layers.Dropout(0.5)] if dropout else []
        m = lib.Sequential(layers + [lib.layers.Dense(1)])
        m.set_weights([np.full(w.shape, 0.1 * (i + 1), "float32")
                       for i, w in enumerate(m.get_weights())])
        m.compile(optimizer="sgd", loss="mse")
        return m.fit(x, y, epochs=2, batch_size=4, verbose=0, shuffle=shuffle).history["loss"]

    for lib in (keras, tn):
        for dropout, shuffle in ((False, True), (True, False)):
            a, b = losses(lib, 3, dropout, shuffle), losses(lib, 3, dropout, shuffle)
            c = losses(lib, 4, dropout, shuffle)
            assert a == b and a != c, (lib.__name__, dropout, shuffle, a, b, c)


def test_without_a_global_seed_models_start_alike():
    """No set_random_seed: tessera's models still start from seed 0 (the same weights at
    every run), as before; an explicit seed is still the model's own."""
    def weights(**kw):
        return tn.Sequential([tn.Input((3,)), tn.layers.Dense(2)], **kw).get_weights()[0]

    assert np.array_equal(weights(), weights())
    assert np.array_equal(weights(seed=5), weights(seed=5))
    assert not np.array_equal(weights(seed=5), weights(seed=6))


class _Unnamed:
    """A layer with unnamed and named weights, for both libraries."""

    @staticmethod
    def make(lib, name):
        class L(lib.layers.Layer):
            def build(self, shape):
                self.a = self.add_weight(shape=(2,), initializer="zeros")
                self.b = self.add_weight(shape=(2,), initializer="zeros", name="named")
                self.c = self.add_weight(shape=(2,), initializer="zeros")

            def call(self, x):
                return x

        layer = L(name=name)
        layer.build((1, 2))
        return layer


def _names_since_reset(lib, make):
    lib.backend.clear_session()
    return make()


def test_unnamed_weights_and_variables_are_named_as_keras(keras):
    def run(lib):
        l1, l2 = _Unnamed.make(lib, "lay"), _Unnamed.make(lib, "lay2")
        v1, v2 = lib.Variable(np.zeros(2)), lib.Variable(np.zeros(2))
        return ([(w.name, w.path) for w in l1.weights + l2.weights]
                + [(v.name, v.path) for v in (v1, v2)])

    got = _names_since_reset(tn, lambda: run(tn))
    want = _names_since_reset(keras, lambda: run(keras))
    assert got == want


def test_unnamed_metric_variables_are_named_as_keras(keras):
    def run(lib):
        class M(lib.metrics.Metric):
            def __init__(self, **kw):
                super().__init__(**kw)
                self.a = self.add_variable(shape=(), initializer="zeros")
                self.b = self.add_weight(shape=(), initializer="zeros")

            def update_state(self, *args):
                pass

            def result(self):
                return self.a

        m = M(name="m")
        return [(v.name, v.path) for v in m.variables]

    assert _names_since_reset(tn, lambda: run(tn)) == \
        _names_since_reset(keras, lambda: run(keras))


def test_unnamed_weights_save_and_load_across_models(tmp_path):
    """The Keras names come from a process-wide count, so two copies of a model name their
    unnamed weights differently; the weights file still loads into the other copy."""
    def model():
        return tn.Sequential([tn.Input((2,)), _Unnamed.make(tn, None), tn.layers.Dense(1)])

    a, b = model(), model()
    a.set_weights([np.full(w.shape, i + 1.0, w.dtype) for i, w in enumerate(a.get_weights())])
    a.save_weights(tmp_path / "a.weights.h5")
    b.load_weights(tmp_path / "a.weights.h5")
    for u, v in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("value,kwargs", [
    (3, {}), (np.int32(3), {}), (3, {"dtype": "int"}), (3, {"dtype": int}),
    ([1, 2], {}), (3.0, {}), (np.float64(3.0), {}), (3.0, {"dtype": float}), (True, {}),
    (np.zeros(2, "int16"), {}), (3, {"dtype": "int16"}), (3, {"dtype": "bool"}),
    (3, {"dtype": "float64"})])
def test_variable_dtypes_as_keras(keras, value, kwargs):
    assert tn.Variable(value, **kwargs).dtype == keras.Variable(value, **kwargs).dtype


@pytest.mark.parametrize("dtype", ["float", "double", "f4"])
def test_variable_dtype_keras_refuses_is_refused(keras, dtype):
    with pytest.raises(ValueError, match="dtype"):
        keras.Variable(3.0, dtype=dtype)
    with pytest.raises(ValueError, match=r"\[Variable\] invalid dtype"):
        tn.Variable(3.0, dtype=dtype)


@pytest.mark.parametrize("d", [int, "int", float, bool, "int64", np.int8, "float", "double"])
def test_standardize_dtype_as_keras(keras, d):
    try:
        want = keras.backend.standardize_dtype(d)
    except ValueError:
        with pytest.raises(ValueError, match=r"\[standardize_dtype\] invalid dtype"):
            tn.backend.standardize_dtype(d)
        return
    assert tn.backend.standardize_dtype(d) == want


def _int_weight_model(lib):
    class L(lib.layers.Layer):
        def build(self, shape):
            self.k = self.add_weight(shape=(shape[-1], 2), initializer="ones")
            self.n = self.add_weight(shape=(2,), dtype="int", initializer="ones",
                                     trainable=False, name="n")

        def call(self, x):
            return lib.ops.matmul(x, self.k) * lib.ops.cast(self.n, "float32")

    m = lib.Sequential([lib.Input((3,)), L(), lib.layers.Dense(1, kernel_initializer="ones")])
    m.compile("sgd", "mse")
    return m


def test_integer_weight_of_a_layer_keeps_its_dtype(keras):
    x = np.linspace(0, 1, 12, dtype="float32").reshape(4, 3)
    y = np.zeros((4, 1), "float32")
    got, want = _int_weight_model(tn), _int_weight_model(keras)
    assert [w.dtype for w in got.get_weights()] == [w.dtype for w in want.get_weights()]
    assert [str(w.dtype) for w in got.weights] == [str(w.dtype) for w in want.weights]
    np.testing.assert_allclose(got.predict(x, verbose=0), want.predict(x, verbose=0), rtol=1e-6)
    hg = got.fit(x, y, epochs=2, batch_size=4, verbose=0, shuffle=False).history["loss"]
    hw = want.fit(x, y, epochs=2, batch_size=4, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(hg, hw, rtol=1e-5)


def _two_input_models(lib):
    """(joined, independent): two-input functional models whose outputs mix the inputs'
    rows (Concatenate on the feature axis) or do not (a Dense per input)."""
    a, b = lib.Input((3,)), lib.Input((2,))
    joined = lib.Model([a, b], lib.layers.Concatenate()([lib.layers.Dense(2)(a), b]))
    c, d = lib.Input((3,)), lib.Input((2,))
    indep = lib.Model([c, d], [lib.layers.Dense(1)(c), lib.layers.Dense(2)(d)])
    return joined, indep


def _copy_weights(src, dst):
    dst.set_weights(src.get_weights())


def test_two_inputs_of_different_batch_sizes_as_keras(keras):
    rng = np.random.default_rng(1)
    x4, x5 = rng.normal(size=(4, 3)).astype("float32"), rng.normal(size=(5, 2)).astype("float32")
    (kj, ki), (tj, ti) = _two_input_models(keras), _two_input_models(tn)
    _copy_weights(ki, ti)
    # nothing mixes the rows: Keras's eager call gives each output its input's rows
    want, got = ki([x4, x5]), ti([x4, x5])
    assert [np.shape(g) for g in got] == [np.shape(w) for w in want] == [(4, 1), (5, 2)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    # Concatenate on the feature axis needs the same rows: refused by both, tessera naming it
    with pytest.raises(TypeError, match="(?i)concatenat"):
        kj([x4, x5])
    with pytest.raises(ValueError, match=r"\[concatenate\] .*size 4 .*size 5"):
        tj([x4, x5])
    # predict and evaluate cut the inputs into batches of samples: both refuse
    for model, kmodel in ((tj, kj), (ti, ki)):
        with pytest.raises(ValueError, match="(?i)cardinality"):
            kmodel.predict([x4, x5], verbose=0)
        with pytest.raises(ValueError, match=r"\[predict\] the inputs have different numbers "
                                             r"of samples: \[4, 5\]"):
            model.predict([x4, x5], verbose=0)


def test_two_input_predict_with_a_batch_size_not_dividing_the_samples(keras):
    rng = np.random.default_rng(2)
    xa, xb = rng.normal(size=(7, 3)).astype("float32"), rng.normal(size=(7, 2)).astype("float32")
    for k, t in zip(_two_input_models(keras), _two_input_models(tn)):
        _copy_weights(k, t)
        want, got = k.predict([xa, xb], batch_size=3, verbose=0), \
            t.predict([xa, xb], batch_size=3, verbose=0)
        for g, w in zip(got if isinstance(got, list) else [got],
                        want if isinstance(want, list) else [want]):
            assert np.shape(g) == np.shape(w)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _bn_discriminator(lib):
    # (no bias before the normalization: its gradient is zero but for rounding)
    return lib.Sequential([lib.Input((4,)), lib.layers.Dense(5, use_bias=False),
                           lib.layers.BatchNormalization(momentum=0.8),
                           lib.layers.Activation("tanh"), lib.layers.Dense(1)],
                          name="discriminator")


def _bn_generator(lib):
    return lib.Sequential([lib.Input((3,)), lib.layers.Dense(6, use_bias=False),
                           lib.layers.BatchNormalization(momentum=0.7),
                           lib.layers.Activation("relu"), lib.layers.Dense(4)], name="generator")


class _BNGAN(tn.Model):
    """The keras-io GAN step with both sub-models called in training mode (their batch
    normalizations normalize by the batch and update their moving statistics)."""

    def __init__(self, discriminator, generator):
        super().__init__()
        self.discriminator, self.generator = discriminator, generator

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn

    def train_step(self, data):
        real, z1, z2 = data
        n = tn.ops.shape(real)[0]
        fake = self.generator(z1, training=True)
        combined = tn.ops.concatenate([fake, real], axis=0)
        labels = tn.ops.concatenate([tn.ops.ones((n, 1)), tn.ops.zeros((n, 1))], axis=0)
        with tn.GradientTape() as tape:
            d_loss = self.loss_fn(labels, self.discriminator(combined, training=True))
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        with tn.GradientTape() as tape:
            pred = self.discriminator(self.generator(z2, training=True), training=True)
            g_loss = self.loss_fn(tn.ops.zeros((n, 1)), pred)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        # (fake written again for the logs: its call still updates the statistics once)
        return {"d_loss": d_loss, "g_loss": g_loss, "fake_mean": tn.ops.mean(fake)}


def _keras_bn_steps(keras, dw, gw, batches, lr):
    """Keras on JAX, stateless: the same step, each training-mode call returning the
    sub-model's updated moving statistics, carried to the next call."""
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle
    import jax.numpy as jnp  # noqa: PLC0415

    d, g = _bn_discriminator(keras), _bn_generator(keras)
    d.set_weights(dw)
    g.set_weights(gw)
    d_opt, g_opt = keras.optimizers.SGD(lr), keras.optimizers.SGD(lr)
    d_opt.build(d.trainable_variables)
    g_opt.build(g.trainable_variables)
    bce = keras.losses.BinaryCrossentropy(from_logits=True)
    dv, dn = [v.value for v in d.trainable_variables], [v.value for v in d.non_trainable_variables]
    gv, gn = [v.value for v in g.trainable_variables], [v.value for v in g.non_trainable_variables]
    dov, gov = [v.value for v in d_opt.variables], [v.value for v in g_opt.variables]
    losses = []

    def d_loss_fn(dv_, dn_, fake, real):
        n = len(real)
        labels = jnp.concatenate([jnp.ones((n, 1)), jnp.zeros((n, 1))], axis=0)
        pred, dn2 = d.stateless_call(dv_, dn_, jnp.concatenate([fake, real], axis=0),
                                     training=True)
        return bce(labels, pred), dn2

    def g_loss_fn(gv_, gn_, dn_, dv_, z2):
        f2, gn2 = g.stateless_call(gv_, gn_, z2, training=True)
        pred, dn2 = d.stateless_call(dv_, dn_, f2, training=True)
        return bce(jnp.zeros((len(z2), 1)), pred), (gn2, dn2)

    # each compiled once (as Keras's own fit compiles its step), not run eagerly: eager JAX
    # compiles every primitive on its own
    generate = jax.jit(lambda gv_, gn_, z1: g.stateless_call(gv_, gn_, z1, training=True))
    d_step = jax.jit(jax.value_and_grad(d_loss_fn, has_aux=True))
    g_step = jax.jit(jax.value_and_grad(g_loss_fn, has_aux=True))
    for real, z1, z2 in batches:
        fake, gn = generate(gv, gn, z1)
        (d_loss, dn), grads = d_step(dv, dn, fake, real)
        dv, dov = d_opt.stateless_apply(dov, grads, dv)
        (g_loss, (gn, dn)), grads = g_step(gv, gn, dn, dv, z2)
        gv, gov = g_opt.stateless_apply(gov, grads, gv)
        losses.append((float(d_loss), float(g_loss)))
    weights = [np.asarray(v) for v in dv + dn], [np.asarray(v) for v in gv + gn]
    return losses, weights


def test_batch_norm_in_training_mode_in_a_tape_step_as_keras(keras):
    rng = np.random.default_rng(3)
    real = rng.normal(1.0, 0.5, (16, 4)).astype("float32")
    z1, z2 = rng.normal(size=(16, 3)).astype("float32"), rng.normal(size=(16, 3)).astype("float32")
    kd, kg = _bn_discriminator(keras), _bn_generator(keras)
    dw, gw = [np.asarray(w) for w in kd.get_weights()], [np.asarray(w) for w in kg.get_weights()]
    batches = [(real[i:i + 8], z1[i:i + 8], z2[i:i + 8]) for i in (0, 8)]
    k_losses, (k_d, k_g) = _keras_bn_steps(keras, dw, gw, batches * 2, 0.5)
    d, g = _bn_discriminator(tn), _bn_generator(tn)
    d.set_weights(dw)
    g.set_weights(gw)
    gan = _BNGAN(d, g)
    # SGD: Adam would scale up the rounding noise of gradients that are zero in exact
    # arithmetic (the generator's output bias, which the discriminator's batch norm removes)
    gan.compile(tn.optimizers.SGD(0.5), tn.optimizers.SGD(0.5),
                tn.losses.BinaryCrossentropy(from_logits=True))
    seen = []
    cb = tn.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(dict(logs)))
    gan.fit((real, z1, z2), batch_size=8, epochs=2, shuffle=False, verbose=0, callbacks=[cb])
    np.testing.assert_allclose([(s["d_loss"], s["g_loss"]) for s in seen], k_losses,
                               rtol=1e-5, atol=1e-6)
    # trainable weights then moving statistics, as Keras's stateless lists order them
    for model, want in ((gan.discriminator, k_d), (gan.generator, k_g)):
        got = [np.asarray(v) for v in model.trainable_weights + model.non_trainable_weights]
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # the moving statistics did move (the comparison above is not of untouched zeros/ones)
    bn = gan.discriminator.layers[1]
    assert not np.allclose(np.asarray(bn.moving_mean), 0.0)


# (a BatchNormalization read in inference mode after its training-mode call in the same
# loss: tests/python/test_nn_keras_objects2.py, against Keras)


# ------------------------------------------------------------------ small user programs

_RNG = np.random.default_rng(0)
_X = _RNG.normal(size=(20, 4)).astype("float32")
_Y = (_X.sum(1, keepdims=True) > 0).astype("float32")
_W = [_RNG.normal(size=s).astype("float32") * 0.5 for s in [(4, 3), (3,), (3, 1), (1,)]]


def _small(lib, name=None):
    m = lib.Sequential([lib.Input((4,)), lib.layers.Dense(3, activation="relu"),
                        lib.layers.Dense(1, activation="sigmoid")], name=name)
    m.set_weights(_W)
    return m


def _both(keras, program):
    return program(keras), program(tn)


def _close(got, want):
    assert list(got) == list(want), (list(got), list(want))
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-6, err_msg=k)


def test_fit_and_evaluate_logs_keys_order_and_values_as_keras(keras):
    """Keras sorts the logs' keys (history.history, evaluate's dict, the callbacks'); the
    list form keeps loss then compile's metrics."""
    def program(lib):
        m = _small(lib)
        m.compile(lib.optimizers.SGD(0.1), "binary_crossentropy",
                  metrics=["accuracy", lib.metrics.AUC(name="my_auc"), "mae",
                           lib.metrics.Precision()])
        seen = []
        cb = lib.callbacks.LambdaCallback(
            on_epoch_end=lambda e, logs: seen.append(list(logs)),
            on_train_batch_end=lambda b, logs: seen.append(list(logs)))
        h = m.fit(_X, _Y, epochs=2, batch_size=5, verbose=0, shuffle=False,
                  validation_split=0.25, callbacks=[cb])
        return (h.history, h.params, h.epoch, seen, m.evaluate(_X, _Y, verbose=0,
                                                                return_dict=True),
                m.evaluate(_X, _Y, verbose=0), m.metrics_names)

    want, got = _both(keras, program)
    _close(got[0], want[0])
    assert got[1] == want[1] and list(got[1]) == list(want[1])  # params, in Keras's order
    assert got[2] == want[2]
    assert got[3] == want[3]
    _close(got[4], want[4])
    np.testing.assert_allclose(got[5], want[5], rtol=1e-4)
    assert got[6] == want[6]


def test_multi_output_and_batch_logs_as_keras(keras):
    def program(lib):
        a = lib.Input((4,))
        h = lib.layers.Dense(3)(a)
        m = lib.Model(a, [lib.layers.Dense(1, name="o1")(h), lib.layers.Dense(2, name="o2")(h)])
        m.set_weights([np.full(w.shape, 0.1 * (i + 1), "float32")
                       for i, w in enumerate(m.get_weights())])
        m.compile("sgd", loss=["mse", "mae"], loss_weights=[1.0, 0.5],
                  metrics=[["mae"], ["mse"]])
        ys = [_Y, np.ones((20, 2), "float32")]
        h = m.fit(_X, ys, verbose=0, epochs=1, batch_size=20, shuffle=False)
        return (h.history, m.evaluate(_X, ys, verbose=0, return_dict=True),
                m.train_on_batch(_X[:5], [y[:5] for y in ys], return_dict=True),
                m.test_on_batch(_X[:5], [y[:5] for y in ys], return_dict=True))

    want, got = _both(keras, program)
    for g, w in zip(got, want):
        _close(g, w)


def test_callbacks_read_the_learning_rate_and_stop_as_keras(keras):
    def program(lib):
        m = _small(lib)
        m.compile(lib.optimizers.SGD(0.0), "mse")
        rates = []

        class Rate(lib.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                rates.append(float(np.asarray(self.model.optimizer.learning_rate)))

        # min_delta: with the rate 0 the losses are equal, and Keras's differ in their
        # last bits in a process where other tests ran (its stop moved by an epoch)
        stop = lib.callbacks.EarlyStopping(monitor="loss", patience=1, min_delta=1e-4)
        plateau = lib.callbacks.ReduceLROnPlateau(monitor="loss", patience=0, factor=0.5)
        h = m.fit(_X, _Y, epochs=10, verbose=0, callbacks=[Rate(), plateau, stop])
        return h.history, rates, stop.stopped_epoch

    want, got = _both(keras, program)
    _close(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    assert got[2] == want[2]


def test_frozen_layer_shared_layer_and_sequential_edits_as_keras(keras):
    def program(lib):
        m = _small(lib)
        m.layers[0].trainable = False
        m.compile(lib.optimizers.SGD(0.1), "binary_crossentropy")
        m.fit(_X, _Y, epochs=1, verbose=0, batch_size=20, shuffle=False)
        frozen = (len(m.trainable_weights), len(m.non_trainable_weights),
                  [np.asarray(w) for w in m.get_weights()])
        a, b = lib.Input((4,)), lib.Input((4,))
        d = lib.layers.Dense(2, name="shared")
        shared = lib.Model([a, b], lib.layers.Add()([d(a), d(b)]))
        s = lib.Sequential(name="s")
        s.add(lib.Input((4,)))
        s.add(lib.layers.Dense(3, name="d1"))
        s.add(lib.layers.Dense(2, name="d2"))
        s.pop()
        edits = [l.name for l in s.layers], s.output_shape
        s.add(lib.layers.Dense(5, name="d3"))
        return frozen, (len(shared.weights), [l.name for l in shared.layers][-2:]), edits, \
            ([l.name for l in s.layers], s.output_shape)

    want, got = _both(keras, program)
    assert got[0][:2] == want[0][:2]
    for g, w in zip(got[0][2], want[0][2]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert got[1:] == want[1:]


def test_custom_layer_config_and_weights_round_trip_as_keras(keras):
    def program(lib):
        class Lin(lib.layers.Layer):
            def __init__(self, units=2, **kw):
                super().__init__(**kw)
                self.units = units

            def build(self, shape):
                self.w = self.add_weight(shape=(shape[-1], self.units), initializer="ones",
                                         name="w")

            def call(self, x):
                return lib.ops.matmul(x, self.w)

            def get_config(self):
                return {**super().get_config(), "units": self.units}

        layer = Lin(3, name="lin")
        out = np.asarray(layer(np.ones((2, 4), "float32")))
        cfg = layer.get_config()
        again = Lin.from_config(cfg)
        m = _small(lib)
        w = m.get_weights()
        m.set_weights([a + 1 for a in w])
        return (sorted(k for k in cfg if k != "dtype"), (again.name, again.units), out,
                [(v.name, v.path, tuple(v.shape)) for v in layer.weights],
                [(type(a).__name__, a.dtype, a.shape) for a in m.get_weights()])

    want, got = _both(keras, program)
    assert got[0] == want[0] and got[1] == want[1] and got[3] == want[3]
    np.testing.assert_array_equal(got[2], want[2])
    assert got[4] == want[4]


def _summary_text(model):
    lines = []
    model.summary(print_fn=lambda s, **kw: lines.append(s))
    return "\n".join(lines)


@pytest.mark.parametrize("opt", ["adam", "sgd", "sgd_momentum", "amsgrad", None])
def test_summary_counts_the_optimizer_after_fit_as_keras(keras, opt):
    """After fit builds the optimizer, Keras's summary adds its variables (state, iteration
    count, learning rate) to the total, on an "Optimizer params" line."""
    def program(lib):
        m = _small(lib, "counted")
        make = {"adam": lambda: lib.optimizers.Adam(), "sgd": lambda: lib.optimizers.SGD(),
                "sgd_momentum": lambda: lib.optimizers.SGD(momentum=0.9),
                "amsgrad": lambda: lib.optimizers.Adam(amsgrad=True), None: None}[opt]
        if make is not None:
            m.compile(make(), "mse")
            m.fit(_X, _Y, epochs=1, verbose=0)
        text = _summary_text(m)
        return [line.strip() for line in text.splitlines()
                if re.match(r"\s*(Total|Trainable|Non-trainable|Optimizer) params", line)], \
            text.splitlines()[0]

    want, got = _both(keras, program)
    assert got == want


_I32, _F32 = np.arange(3, dtype="int32"), np.ones(3, "float32")
_B, _I8, _U8 = np.array([True, False, True]), np.arange(3, dtype="int8"), np.arange(3, dtype="uint8")


@pytest.mark.parametrize("case", [
    ("add", _I32, 1.5), ("multiply", _I32, 1.0), ("add", _B, 1), ("add", _B, 1.0),
    ("add", _I8, 1.0), ("add", _I32, _F32), ("subtract", _F32, _I32), ("maximum", _I32, 1.5),
    ("power", _I32, 0.5), ("add", _U8, _I8), ("multiply", _I32, 2), ("floor_divide", _I32, 2),
    ("divide", _I32, _I32), ("add", _F32, 1)], ids=lambda c: f"{c[0]}")
def test_ops_promote_dtypes_as_keras(keras, case):
    """keras.ops on NumPy arrays and Python numbers: Keras's promotion (JAX's lattice), not
    NumPy's (int32 + 1.5 is float32, bool + 1 int32)."""
    name, a, b = case
    want = np.asarray(getattr(keras.ops, name)(a, b))
    got = np.asarray(getattr(tn.ops, name)(a, b))
    assert got.dtype == want.dtype, (name, a.dtype, b, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    args = (a.dtype.name, type(b) if not isinstance(b, np.ndarray) else b.dtype.name)
    assert tn.backend.result_type(*args) == keras.backend.result_type(*args)


def test_normalization_mean_and_variance_after_adapt_as_keras(keras):
    x = np.random.default_rng(4).normal(size=(24, 4)).astype("float32")
    got, want = tn.layers.Normalization(), keras.layers.Normalization()
    assert got.mean is None and want.mean is None
    for layer in (got, want):
        layer.adapt(x)
    for attr in ("mean", "variance"):
        g, w = np.asarray(getattr(got, attr)), np.asarray(getattr(want, attr))
        assert g.shape == w.shape == (1, 4)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got(x[:3]), want(x[:3]), rtol=1e-5, atol=1e-6)
    given = tn.layers.Normalization(mean=[1.0, 2.0], variance=[4.0, 4.0])
    assert given.mean == [1.0, 2.0] and given.get_config()["mean"] == [1.0, 2.0]


def test_to_categorical_as_keras(keras):
    for y in (np.array([0, 2, 1]), np.array([[0], [2]]), [1, 0]):
        got, want = tn.utils.to_categorical(y, 3), keras.utils.to_categorical(y, 3)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_output_names_as_keras(keras):
    def names(lib):
        a = lib.Input((4,))
        h = lib.layers.Dense(3, name="hh")(a)
        models = [lib.Model(a, [lib.layers.Dense(1, name="o1")(h), h]),
                  lib.Model(a, {"first": lib.layers.Dense(1, name="o2")(h), "second": h}),
                  lib.Model(a, lib.ops.add(h, 1.0))]
        # an op's automatic name ends in a process-wide count (add, add_1, ...): each
        # framework's depends on the tests run before in this process
        return [[re.sub(r"_\d+$", "", n) for n in m.output_names] for m in models]

    assert names(tn) == names(keras)
    seq = tn.Sequential([tn.Input((3,)), tn.layers.Dense(2)])
    kseq = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(AttributeError):
        kseq.output_names
    with pytest.raises(AttributeError, match="output_names"):
        seq.output_names


def test_eager_float64_call_leaves_layer_dtypes_as_keras(keras, tmp_path):
    """A model called eagerly on float64 data keeps its layers' dtype (float32), as Keras's:
    the eager call's own model gave a user's layer float64, so its saved config rebuilt
    float64 weights that the file's float32 ones did not match."""
    def program(lib):
        class Linear(lib.layers.Layer):
            def build(self, input_shape):
                self.w = self.add_weight(shape=(input_shape[-1], 2), initializer="ones")

            def call(self, inputs):
                return lib.ops.matmul(inputs, self.w)

        lin = Linear()
        lin.build((3,))
        m = lib.Sequential([lin, lib.layers.Dense(1)])
        m(np.random.default_rng(0).random((2, 3)))  # float64 data
        return [lin.dtype, m.layers[1].dtype], m

    (want, _), (got, model) = _both(keras, program)
    assert got == want
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = tn.models.load_model(path, custom_objects={"Linear": type(model.layers[0])})
    assert [str(w.dtype) for w in loaded.get_weights()] == ["float32"] * 3
