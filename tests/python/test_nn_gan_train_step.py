"""A train_step override that trains sub-models with tapes and optimizers of
their own (keras-io's GAN form: a model with no call, a generator and a
discriminator, an overridden compile(d_optimizer=, g_optimizer=, loss_fn=),
Mean trackers in a `metrics` property), fit by tessera (nn/tape_steps.py)
against Keras 3 on JAX running the same updates with its stateless API (JAX
has no GradientTape): the same weights (set_weights), the same data and
latent vectors (given as data), losses and final weights compared."""

import re

import numpy as np
import pytest

import tessera.data
import tessera.nn as tn

LATENT = 3


def _discriminator(lib):
    return lib.Sequential([lib.Input((4,)), lib.layers.Dense(5, activation="tanh"),
                           lib.layers.Dense(1)], name="discriminator")


def _generator(lib):
    return lib.Sequential([lib.Input((LATENT,)), lib.layers.Dense(6, activation="relu"),
                           lib.layers.Dense(4)], name="generator")


class _GAN(tn.Model):
    """The keras-io GAN step, its latent vectors read from the data."""

    def __init__(self, discriminator, generator):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn
        self.d_loss_metric = tn.metrics.Mean(name="d_loss")
        self.g_loss_metric = tn.metrics.Mean(name="g_loss")

    @property
    def metrics(self):
        return [self.d_loss_metric, self.g_loss_metric]

    def train_step(self, data):
        real, z1, z2 = data
        n = tn.ops.shape(real)[0]
        fake = self.generator(z1)
        combined = tn.ops.concatenate([fake, real], axis=0)
        labels = tn.ops.concatenate([tn.ops.ones((n, 1)), tn.ops.zeros((n, 1))], axis=0)
        with tn.GradientTape() as tape:
            d_loss = self.loss_fn(labels, self.discriminator(combined))
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        with tn.GradientTape() as tape:
            g_loss = self.loss_fn(tn.ops.zeros((n, 1)), self.discriminator(self.generator(z2)))
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        self.d_loss_metric.update_state(d_loss)
        self.g_loss_metric.update_state(g_loss)
        return {"d_loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result(),
                "last_g_loss": g_loss}


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    real = rng.normal(1.0, 0.5, (n, 4)).astype("float32")
    # rows of zeros: through the discriminator's zero biases their logits are exactly 0, where
    # the loss's gradient is sigmoid(0) - label (a form with relu(p) gave -label there)
    real[::7] = 0.0
    z1 = rng.normal(size=(n, LATENT)).astype("float32")
    z2 = rng.normal(size=(n, LATENT)).astype("float32")
    return real, z1, z2


def _optimizer(lib, kind, lr):
    return lib.optimizers.SGD(lr) if kind == "sgd" else lib.optimizers.Adam(lr)


def _keras_steps(keras, dw, gw, batches, lr, kind="adam", d_steps=1):
    """Keras on JAX: the same two updates per batch, stateless; per batch
    (d_loss, g_loss) and the final weights."""
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle
    import jax.numpy as jnp  # noqa: PLC0415

    d, g = _discriminator(keras), _generator(keras)
    d.set_weights(dw)
    g.set_weights(gw)
    d_opt, g_opt = _optimizer(keras, kind, lr), _optimizer(keras, kind, lr)
    d_opt.build(d.trainable_variables)
    g_opt.build(g.trainable_variables)
    loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
    dv = [v.value for v in d.trainable_variables]
    gv = [v.value for v in g.trainable_variables]
    dov = [v.value for v in d_opt.variables]
    gov = [v.value for v in g_opt.variables]
    losses = []
    for real, z1, z2 in batches:
        n = len(real)

        def d_loss_fn(dv_):
            fake, _ = g.stateless_call(gv, [], z1)
            pred, _ = d.stateless_call(dv_, [], jnp.concatenate([fake, real], axis=0))
            labels = jnp.concatenate([jnp.ones((n, 1)), jnp.zeros((n, 1))], axis=0)
            return loss_fn(labels, pred)

        for _ in range(d_steps):
            d_loss, grads = jax.value_and_grad(d_loss_fn)(dv)
            dv, dov = d_opt.stateless_apply(dov, grads, dv)

        def g_loss_fn(gv_):
            fake, _ = g.stateless_call(gv_, [], z2)
            pred, _ = d.stateless_call(dv, [], fake)
            return loss_fn(jnp.zeros((n, 1)), pred)

        g_loss, grads = jax.value_and_grad(g_loss_fn)(gv)
        gv, gov = g_opt.stateless_apply(gov, grads, gv)
        losses.append((float(d_loss), float(g_loss)))
    return losses, [np.asarray(v) for v in dv], [np.asarray(v) for v in gv]


def _tessera_gan(dw, gw, lr, kind="adam"):
    d, g = _discriminator(tn), _generator(tn)
    d.set_weights(dw)
    g.set_weights(gw)
    gan = _GAN(d, g)
    gan.compile(d_optimizer=_optimizer(tn, kind, lr), g_optimizer=_optimizer(tn, kind, lr),
                loss_fn=tn.losses.BinaryCrossentropy(from_logits=True))
    return gan


class _Batches(tn.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.logs = []

    def on_train_batch_end(self, batch, logs=None):
        self.logs.append(dict(logs))


@pytest.mark.parametrize("kind, lr", [("adam", 0.01), ("adam", 0.1), ("sgd", 0.1)])
def test_gan_steps_as_keras(keras, kind, lr):
    real, z1, z2 = _data()
    kd, kg = _discriminator(keras), _generator(keras)
    dw, gw = [np.asarray(w) for w in kd.get_weights()], [np.asarray(w) for w in kg.get_weights()]
    bs = 8
    batches = [(real[i:i + bs], z1[i:i + bs], z2[i:i + bs]) for i in range(0, len(real), bs)]
    k_losses, k_dw, k_gw = _keras_steps(keras, dw, gw, batches * 2, lr, kind)  # 2 epochs
    gan = _tessera_gan(dw, gw, lr, kind)
    ds = tessera.data.Dataset.from_tensor_slices((real, z1, z2)).batch(bs)
    seen = _Batches()
    history = gan.fit(ds, epochs=2, verbose=0, callbacks=[seen])
    assert list(history.history) == ["d_loss", "g_loss", "last_g_loss"]
    got = [(b["last_g_loss"]) for b in seen.logs]
    np.testing.assert_allclose(got, [g for _, g in k_losses], rtol=2e-5, atol=1e-6)
    # the trackers' means over each epoch (reset at its start, as Keras's fit does)
    per = len(batches)
    for e in range(2):
        ks = k_losses[e * per:(e + 1) * per]
        np.testing.assert_allclose(history.history["d_loss"][e], np.mean([d for d, _ in ks]),
                                   rtol=2e-5)
        np.testing.assert_allclose(history.history["g_loss"][e], np.mean([g for _, g in ks]),
                                   rtol=2e-5)
    for a, b in zip(gan.discriminator.get_weights(), k_dw):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(gan.generator.get_weights(), k_gw):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # Keras's model.weights of the GAN: its sub-models' (discriminator first, as assigned)
    names = [w.path for w in gan.weights]
    assert names == [w.path for w in gan.discriminator.weights + gan.generator.weights]
    assert gan.d_optimizer.iterations == gan.g_optimizer.iterations == 2 * per


def test_second_update_sees_the_first():
    """The generator's loss reads the discriminator as the first update left it
    (as Keras's eager step does): recomputed here from the weights before and after."""
    real, z1, z2 = _data(8)
    d0, g0 = _discriminator(tn), _generator(tn)
    dw, gw = d0.get_weights(), g0.get_weights()
    gan = _tessera_gan(dw, gw, 0.5)
    seen = _Batches()
    gan.fit((real, z1, z2), batch_size=8, epochs=1, verbose=0, shuffle=False, callbacks=[seen])
    d1 = _discriminator(tn)
    d1.set_weights(gan.discriminator.get_weights())
    bce = tn.losses.BinaryCrossentropy(from_logits=True)
    zeros = np.zeros((8, 1), "float32")
    after = float(bce(zeros, d1.predict(g0.predict(z2, verbose=0), verbose=0)))
    before = float(bce(zeros, d0.predict(g0.predict(z2, verbose=0), verbose=0)))
    assert abs(after - before) > 1e-3  # the update changed the discriminator's answer
    np.testing.assert_allclose(seen.logs[0]["last_g_loss"], after, rtol=1e-5)


class _OneTape(tn.Model):
    """A step whose gradients or updates are wrong in the ways Keras reports."""

    def __init__(self, how):
        super().__init__()
        self.discriminator, self.generator = _discriminator(tn), _generator(tn)
        self.how = how

    def compile(self, d_optimizer):
        super().compile()
        self.d_optimizer = d_optimizer

    def train_step(self, data):
        real, z1, z2 = data
        watch = self.how != "unwatched"
        with tn.GradientTape(watch_accessed_variables=watch) as tape:
            loss = tn.ops.mean(self.discriminator(real))
        weights = self.discriminator.trainable_weights
        if self.how == "generator":  # weights the loss does not read: no gradients (None)
            weights = self.generator.trainable_weights
        grads = tape.gradient(loss, weights)
        if self.how == "twice":
            tape.gradient(loss, weights)
        if self.how == "mismatch":
            self.d_optimizer.apply(grads[:-1], weights)
        else:
            self.d_optimizer.apply_gradients(zip(grads, weights))
        return {"loss": loss}


@pytest.mark.parametrize("how, error, match", [
    ("generator", ValueError, "No gradients provided for any variable"),
    ("unwatched", ValueError, "No gradients provided for any variable"),
    ("twice", RuntimeError, "A non-persistent GradientTape can only be used to compute one "
                            "set of gradients"),
    ("mismatch", ValueError, r"\[Optimizer.apply\] 3 gradients for 4 weights"),
])
def test_gradient_errors_as_keras(keras, how, error, match):
    """Keras (TensorFlow's tape) gives None for a weight the loss does not read or the tape
    does not watch, and its optimizer refuses an update with no gradient at all; a
    non-persistent tape gives one set of gradients; tessera refuses mismatched lists (Keras's
    zip would drop the extra weights silently)."""
    real, z1, z2 = _data(8)
    model = _OneTape(how)
    model.compile(tn.optimizers.Adam())
    with pytest.raises(error, match=match):
        model.fit((real, z1, z2), batch_size=8, epochs=1, verbose=0)
    if how == "generator":  # Keras's own optimizer says the same of all-None gradients
        k = _discriminator(keras)
        opt = keras.optimizers.Adam()
        with pytest.raises(ValueError, match=match):
            opt.apply_gradients(zip([None] * len(k.trainable_weights), k.trainable_weights))


def test_gradient_with_respect_to_data_inside_a_tape(keras):
    """A tape's gradient with respect to a computed value (here the batch itself), inside
    the tape of the loss (WGAN-GP's penalty form, a second-order gradient): the logged
    loss and the updated weights are Keras-on-JAX's with jax.grad inside
    jax.value_and_grad (tests/python/test_nn_wgan_gp_step.py runs keras-io's step)."""
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle
    import jax.numpy as jnp  # noqa: PLC0415

    class _Penalty(_OneTape):
        def train_step(self, data):
            real, z1, z2 = data
            with tn.GradientTape() as tape:
                with tn.GradientTape() as gp_tape:
                    pred = self.discriminator(real)
                grad = gp_tape.gradient(pred, real)
                loss = tn.ops.mean(grad * grad)
            grads = tape.gradient(loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
            return {"loss": loss}

    real, z1, z2 = _data(8)
    model = _Penalty("penalty")
    weights = model.discriminator.get_weights()
    model.compile(tn.optimizers.SGD(0.1))
    seen = _Batches()
    model.fit((real, z1, z2), batch_size=8, epochs=1, verbose=0, callbacks=[seen])
    k = _discriminator(keras)
    k.set_weights(weights)

    def loss_fn(kv):
        def total(x):
            out, _ = k.stateless_call(kv, [], x)
            return jnp.sum(out)

        g = jax.grad(total)(real)
        return jnp.mean(g * g)

    kv = [v.value for v in k.trainable_variables]
    want, grads = jax.value_and_grad(loss_fn)(kv)
    np.testing.assert_allclose(seen.logs[0]["loss"], float(want), rtol=1e-5)
    for got, w, g in zip(model.discriminator.get_weights(), kv, grads):
        np.testing.assert_allclose(got, np.asarray(w) - 0.1 * np.asarray(g), rtol=1e-5,
                                   atol=1e-6)


def _summary_lines(model):
    lines = []
    model.summary(print_fn=lambda s, **kw: lines.append(s))
    return "\n".join(lines)


def test_summary_weights_and_save_as_keras(keras, tmp_path):
    """Keras lists a GAN's sub-models in its summary, with their output shapes and
    parameters, and its weights are theirs (in the order the model holds them) before any
    fit; it cannot save the model (never built): tessera says so by name."""

    class KGAN(keras.Model):
        def __init__(self, discriminator, generator):
            super().__init__()
            self.discriminator, self.generator = discriminator, generator

    kgan = KGAN(_discriminator(keras), _generator(keras))
    tgan = _GAN(_discriminator(tn), _generator(tn))
    ks, ts = _summary_lines(kgan), _summary_lines(tgan)
    for line in ("discriminator (Sequential)", "generator (Sequential)", "(None, 1)",
                 "(None, 4)"):
        assert line in ks and line in ts, line
    for what in ("Total", "Trainable"):
        counts = [re.search(what + r" params: ([\d,]+)", s).group(1) for s in (ks, ts)]
        assert counts[0] == counts[1], (what, counts)
    assert [w.path.split("/")[0] for w in tgan.weights] == \
        [w.path.split("/")[0] for w in kgan.weights]
    assert [tuple(w.shape) for w in tgan.trainable_weights] == \
        [tuple(w.shape) for w in kgan.trainable_weights]
    tgan.set_weights([np.asarray(w) for w in kgan.get_weights()])
    for a, b in zip(tgan.generator.get_weights(), kgan.generator.get_weights()):
        np.testing.assert_array_equal(a, np.asarray(b))
    with pytest.raises(Exception):
        kgan.save(str(tmp_path / "k.keras"))
    for save in (tgan.save, tgan.save_weights):
        path = str(tmp_path / ("t.keras" if save == tgan.save else "t.weights.h5"))
        with pytest.raises(ValueError, match=r"_GAN defines no call: .* save its sub-models"):
            save(path)


class _DropoutCritic(tn.Model):
    """A critic with dropout called with training=True: the loss the tape differentiates and
    the same loss recomputed for the logs draw the same mask."""

    def __init__(self):
        super().__init__()
        self.critic = tn.Sequential([tn.Input((4,)), tn.layers.Dense(8),
                                     tn.layers.Dropout(0.5), tn.layers.Dense(1)])

    def compile(self, optimizer):
        super().compile()
        self.c_optimizer = optimizer

    def train_step(self, data):
        real, z1, z2 = data
        with tn.GradientTape() as tape:
            loss = tn.ops.mean(tn.ops.square(self.critic(real, training=True)))
        grads = tape.gradient(loss, self.critic.trainable_weights)
        self.c_optimizer.apply_gradients(zip(grads, self.critic.trainable_weights))
        # another draw written first in the logs' code, then the loss again
        other = tn.ops.mean(self.critic(real, training=True)) * 0.0
        return {"loss": loss, "again": loss + other}


def test_a_value_written_twice_draws_the_same_dropout():
    real, z1, z2 = _data(8)
    model = _DropoutCritic()
    model.compile(tn.optimizers.SGD(0.0))
    before = float(np.mean(np.square(model.critic.predict(real, verbose=0))))
    seen = _Batches()
    model.fit((real, z1, z2), batch_size=8, epochs=2, verbose=0, callbacks=[seen])
    for logs in seen.logs:
        np.testing.assert_allclose(logs["again"], logs["loss"], rtol=1e-6)
        assert abs(logs["loss"] - before) > 1e-4  # dropout ran (the weights did not move)
    assert seen.logs[0]["loss"] != seen.logs[1]["loss"]  # a new mask at each step


def test_predict_and_call_need_a_call_as_in_keras(keras):
    """Keras: a model without call() cannot predict nor be called (NotImplementedError);
    tessera says the same, and that fit runs its train_step."""

    class KGAN(keras.Model):
        def __init__(self, discriminator):
            super().__init__()
            self.discriminator = discriminator

    x = _data(8)[0]
    kgan, tgan = KGAN(_discriminator(keras)), _GAN(_discriminator(tn), _generator(tn))
    for run in (lambda m: m.predict(x, verbose=0), lambda m: m(x)):
        with pytest.raises(NotImplementedError):
            run(kgan)
        with pytest.raises(NotImplementedError, match=r"\[Model.call\] Model _GAN does not have "
                                                      r"a call\(\) method implemented"):
            run(tgan)


def test_self_optimizer_and_another(keras):
    """The compiled optimizer (self.optimizer) for one update and an optimizer of the
    model's own for the other: each counts its own updates, and the steps match Keras's."""

    class Mixed(_GAN):
        def compile(self, g_optimizer, loss_fn, **kwargs):
            tn.Model.compile(self, **kwargs)
            self.g_optimizer, self.loss_fn = g_optimizer, loss_fn
            self.d_loss_metric = tn.metrics.Mean(name="d_loss")
            self.g_loss_metric = tn.metrics.Mean(name="g_loss")

        def train_step(self, data):
            self.d_optimizer = self.optimizer
            return super().train_step(data)

    real, z1, z2 = _data(16)
    kd, kg = _discriminator(keras), _generator(keras)
    dw, gw = [np.asarray(w) for w in kd.get_weights()], [np.asarray(w) for w in kg.get_weights()]
    batches = [(real[i:i + 8], z1[i:i + 8], z2[i:i + 8]) for i in (0, 8)]
    k_losses, k_dw, _ = _keras_steps(keras, dw, gw, batches, 0.05)
    d, g = _discriminator(tn), _generator(tn)
    d.set_weights(dw)
    g.set_weights(gw)
    gan = Mixed(d, g)
    gan.compile(_optimizer(tn, "adam", 0.05), tn.losses.BinaryCrossentropy(from_logits=True),
                optimizer=_optimizer(tn, "adam", 0.05))
    seen = _Batches()
    gan.fit((real, z1, z2), batch_size=8, shuffle=False, verbose=0, callbacks=[seen])
    np.testing.assert_allclose([b["last_g_loss"] for b in seen.logs], [g_ for _, g_ in k_losses],
                               rtol=2e-5, atol=1e-6)
    for a, b in zip(gan.discriminator.get_weights(), k_dw):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert gan.optimizer.iterations == gan.g_optimizer.iterations == 2


class _ExtraSteps(_GAN):
    """WGAN's form: the discriminator updated `d_steps` times per step by its one
    optimizer (its state and update count carried from one to the next), then the
    generator."""

    d_steps = 3

    def train_step(self, data):
        real, z1, z2 = data
        n = tn.ops.shape(real)[0]
        combined = tn.ops.concatenate([self.generator(z1), real], axis=0)
        labels = tn.ops.concatenate([tn.ops.ones((n, 1)), tn.ops.zeros((n, 1))], axis=0)
        for _ in range(self.d_steps):
            with tn.GradientTape() as tape:
                d_loss = self.loss_fn(labels, self.discriminator(combined))
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
        with tn.GradientTape() as tape:
            g_loss = self.loss_fn(tn.ops.zeros((n, 1)), self.discriminator(self.generator(z2)))
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
        return {"d_loss": d_loss, "g_loss": g_loss}


def test_an_optimizer_applied_several_times_in_a_step_as_keras(keras):
    real, z1, z2 = _data(16)
    kd, kg = _discriminator(keras), _generator(keras)
    dw, gw = [np.asarray(w) for w in kd.get_weights()], [np.asarray(w) for w in kg.get_weights()]
    batches = [(real[i:i + 8], z1[i:i + 8], z2[i:i + 8]) for i in (0, 8)]
    k_losses, k_dw, k_gw = _keras_steps(keras, dw, gw, batches, 0.02, d_steps=3)
    d, g = _discriminator(tn), _generator(tn)
    d.set_weights(dw)
    g.set_weights(gw)
    gan = _ExtraSteps(d, g)
    gan.compile(tn.optimizers.Adam(0.02), tn.optimizers.Adam(0.02),
                tn.losses.BinaryCrossentropy(from_logits=True))
    seen = _Batches()
    gan.fit((real, z1, z2), batch_size=8, shuffle=False, verbose=0, callbacks=[seen])
    np.testing.assert_allclose([b["d_loss"] for b in seen.logs], [d_ for d_, _ in k_losses],
                               rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose([b["g_loss"] for b in seen.logs], [g_ for _, g_ in k_losses],
                               rtol=2e-5, atol=1e-6)
    for a, b in zip(gan.discriminator.get_weights() + gan.generator.get_weights(), k_dw + k_gw):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert gan.d_optimizer.iterations == 6 and gan.g_optimizer.iterations == 2


def test_an_optimizer_on_other_weights_is_refused_as_keras(keras):
    """Keras builds an optimizer for the weights of its first update and refuses others."""

    class OneOptimizer(_GAN):
        def train_step(self, data):
            real, z1, z2 = data
            for model in (self.discriminator, self.generator):
                with tn.GradientTape() as tape:
                    loss = tn.ops.mean(self.discriminator(self.generator(z1)))
                grads = tape.gradient(loss, model.trainable_weights)
                self.d_optimizer.apply_gradients(zip(grads, model.trainable_weights))
            return {"loss": loss}

    k = _generator(keras)
    opt = keras.optimizers.Adam()
    opt.build(_discriminator(keras).trainable_variables)
    with pytest.raises(ValueError, match="Unknown variable"):
        opt.apply_gradients(zip([np.zeros(w.shape, "float32") for w in k.trainable_weights],
                                k.trainable_weights))
    gan = _tessera_gan(*[m.get_weights() for m in (_discriminator(tn), _generator(tn))], 0.1)
    gan.__class__ = OneOptimizer
    with pytest.raises(ValueError, match=r"\[Optimizer.apply_gradients\] Unknown variable: "
                                         r"generator/.*originally built with"):
        gan.fit(_data(8), batch_size=8, verbose=0)
