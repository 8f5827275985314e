"""keras-io's WGAN-GP step (examples/generative/wgan_gp.py): the critic's loss holds a
gradient penalty, the gradient of the critic's output with respect to interpolated images
taken by a GradientTape inside the critic's tape (a second-order gradient). fit traces the
step into one program (nn/tape_steps.py); compared with Keras 3 on JAX running the same
updates with its stateless API and jax.grad inside jax.value_and_grad: the same weights
(set_weights), the same data, latent vectors and interpolation weights (given as data)."""

import numpy as np
import pytest

import tessera.data
import tessera.nn as tn
from test_nn_gan_train_step import _Batches  # the same per-batch logs recorder

LATENT = 4
SHAPE = (6, 6, 1)
GP_WEIGHT = 10.0


def _critic(lib):
    x = inp = lib.Input(SHAPE)
    x = lib.layers.ZeroPadding2D((1, 1))(x)
    x = lib.layers.Conv2D(3, (3, 3), strides=(2, 2), padding="same")(x)
    x = lib.layers.LeakyReLU(0.2)(x)
    x = lib.layers.Conv2D(4, (3, 3), strides=(2, 2), padding="valid")(x)
    x = lib.layers.LeakyReLU(0.2)(x)
    x = lib.layers.Flatten()(x)
    x = lib.layers.Dense(1)(x)
    return lib.Model(inp, x, name="critic")


def _generator(lib):
    # keras-io's generator normalizes its batches (its moving statistics move at each of
    # its calls with training=True, as TensorFlow's tape step moves them)
    return lib.Sequential([lib.Input((LATENT,)), lib.layers.Dense(12, use_bias=False),
                           lib.layers.BatchNormalization(momentum=0.8),
                           lib.layers.LeakyReLU(0.2), lib.layers.Dense(36, activation="tanh"),
                           lib.layers.Reshape(SHAPE)], name="generator")


class _WGAN(tn.Model):
    """keras-io's WGAN step, its random draws read from the data."""

    def __init__(self, critic, generator, d_steps):
        super().__init__()
        self.discriminator = critic
        self.generator = generator
        self.d_steps = d_steps

    def compile(self, d_optimizer, g_optimizer):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer

    def gradient_penalty(self, real, fake, alpha):
        interpolated = real + alpha * (fake - real)
        with tn.GradientTape() as gp_tape:
            gp_tape.watch(interpolated)
            pred = self.discriminator(interpolated, training=True)
        grads = gp_tape.gradient(pred, [interpolated])[0]
        norm = tn.ops.sqrt(tn.ops.sum(tn.ops.square(grads), axis=[1, 2, 3]))
        return tn.ops.mean((norm - 1.0) ** 2)

    def train_step(self, data):
        real, z, alpha, z2 = data
        for _ in range(self.d_steps):
            with tn.GradientTape() as tape:
                fake = self.generator(z, training=True)
                d_cost = tn.ops.mean(self.discriminator(fake, training=True)) - \
                    tn.ops.mean(self.discriminator(real, training=True))
                gp = self.gradient_penalty(real, fake, alpha)
                d_loss = d_cost + gp * GP_WEIGHT
            grads = tape.gradient(d_loss, self.discriminator.trainable_variables)
            self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_variables))
        with tn.GradientTape() as tape:
            g_loss = -tn.ops.mean(self.discriminator(self.generator(z2, training=True),
                                                     training=True))
        grads = tape.gradient(g_loss, self.generator.trainable_variables)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_variables))
        return {"d_loss": d_loss, "gp": gp, "g_loss": g_loss}


def _data(n=16, seed=3):
    rng = np.random.default_rng(seed)
    real = rng.normal(0.0, 0.6, (n,) + SHAPE).astype("float32")
    z = rng.normal(size=(n, LATENT)).astype("float32")
    alpha = rng.uniform(size=(n, 1, 1, 1)).astype("float32")
    z2 = rng.normal(size=(n, LATENT)).astype("float32")
    return real, z, alpha, z2


def _optimizer(lib, kind, lr):
    """keras-io's Adam(beta_1=0.5, beta_2=0.9); with several critic updates per batch, a
    larger epsilon, or SGD: Adam's first updates are lr * sign(gradient) for a gradient
    far above epsilon, so a component that float32 rounding leaves near zero (the critic's
    loss and its penalty cancelling) would move by lr in either framework's direction."""
    if kind == "sgd":
        return lib.optimizers.SGD(lr)
    return lib.optimizers.Adam(lr, beta_1=0.5, beta_2=0.9,
                               epsilon=1e-7 if kind == "adam" else 1e-3)


def _keras_steps(keras, cw, gw, batches, lr, d_steps, kind):
    """Keras on JAX: the same updates per batch, stateless; per batch (d_loss, gp,
    g_loss) and the final weights."""
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle
    import jax.numpy as jnp  # noqa: PLC0415

    c, g = _critic(keras), _generator(keras)
    c.set_weights(cw)
    g.set_weights(gw)
    c_opt, g_opt = _optimizer(keras, kind, lr), _optimizer(keras, kind, lr)
    c_opt.build(c.trainable_variables)
    g_opt.build(g.trainable_variables)
    cv = [v.value for v in c.trainable_variables]
    gv = [v.value for v in g.trainable_variables]
    gnt = [v.value for v in g.non_trainable_variables]
    cov = [v.value for v in c_opt.variables]
    gov = [v.value for v in g_opt.variables]
    logs = []

    def critic_sum(cv_, x):
        out, _ = c.stateless_call(cv_, [], x, training=True)
        return jnp.sum(out)

    def d_loss_fn(cv_, gnt_, gv_, real, z, alpha):
        fake, gnt_ = g.stateless_call(gv_, gnt_, z, training=True)
        fake_out, _ = c.stateless_call(cv_, [], fake, training=True)
        real_out, _ = c.stateless_call(cv_, [], real, training=True)
        interpolated = real + alpha * (fake - real)
        grads = jax.grad(critic_sum, argnums=1)(cv_, interpolated)
        norm = jnp.sqrt(jnp.sum(jnp.square(grads), axis=(1, 2, 3)))
        gp = jnp.mean((norm - 1.0) ** 2)
        return jnp.mean(fake_out) - jnp.mean(real_out) + gp * GP_WEIGHT, (gp, gnt_)

    def g_loss_fn(gv_, gnt_, cv_, z2):
        fake, gnt_ = g.stateless_call(gv_, gnt_, z2, training=True)
        out, _ = c.stateless_call(cv_, [], fake, training=True)
        return -jnp.mean(out), gnt_

    # each compiled once (as Keras's own fit compiles its step), not run eagerly: eager JAX
    # compiles every primitive on its own, most of this test's time
    d_step = jax.jit(jax.value_and_grad(d_loss_fn, has_aux=True))
    g_step = jax.jit(jax.value_and_grad(g_loss_fn, has_aux=True))
    for real, z, alpha, z2 in batches:
        for _ in range(d_steps):
            (d_loss, (gp, gnt)), grads = d_step(cv, gnt, gv, real, z, alpha)
            cv, cov = c_opt.stateless_apply(cov, grads, cv)
        (g_loss, gnt), grads = g_step(gv, gnt, cv, z2)
        gv, gov = g_opt.stateless_apply(gov, grads, gv)
        logs.append((float(d_loss), float(gp), float(g_loss)))
    for v, value in zip(g.trainable_variables + g.non_trainable_variables, gv + gnt):
        v.assign(value)
    return logs, [np.asarray(v) for v in cv], [np.asarray(w) for w in g.get_weights()]


@pytest.mark.parametrize("kind, d_steps", [("adam_eps", 1), ("adam_eps", 3), ("sgd", 3)])
def test_wgan_gp_steps_as_keras(keras, kind, d_steps):
    keras.utils.set_random_seed(d_steps)
    real, z, alpha, z2 = _data()
    kc, kg = _critic(keras), _generator(keras)
    cw = [np.asarray(w) for w in kc.get_weights()]
    gw = [np.asarray(w) for w in kg.get_weights()]
    bs, lr = 8, 0.01
    batches = [(real[i:i + bs], z[i:i + bs], alpha[i:i + bs], z2[i:i + bs])
               for i in range(0, len(real), bs)]
    k_logs, k_cw, k_gw = _keras_steps(keras, cw, gw, batches, lr, d_steps, kind)

    c, g = _critic(tn), _generator(tn)
    c.set_weights(cw)
    g.set_weights(gw)
    wgan = _WGAN(c, g, d_steps)
    wgan.compile(d_optimizer=_optimizer(tn, kind, lr), g_optimizer=_optimizer(tn, kind, lr))
    seen = _Batches()
    ds = tessera.data.Dataset.from_tensor_slices((real, z, alpha, z2)).batch(bs)
    wgan.fit(ds, epochs=1, verbose=0, callbacks=[seen])
    got = [(b["d_loss"], b["gp"], b["g_loss"]) for b in seen.logs]
    assert k_logs[0][1] > 1e-3  # the penalty is not negligible: the test can tell
    np.testing.assert_allclose(got, k_logs, rtol=1e-4, atol=1e-5)
    for a, b in zip(wgan.discriminator.get_weights(), k_cw):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    moving_mean = wgan.generator.get_weights()[3]
    assert not np.allclose(moving_mean, gw[3])  # the statistics moved (and as Keras's)
    for a, b in zip(wgan.generator.get_weights(), k_gw):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_gradient_of_unreached_source_is_refused():
    class _Bad(_WGAN):
        def train_step(self, data):
            real, z, alpha, z2 = data
            with tn.GradientTape() as tape:
                interpolated = real * alpha
                with tn.GradientTape() as gp_tape:
                    gp_tape.watch(interpolated)
                    pred = self.discriminator(real)
                grads = gp_tape.gradient(pred, interpolated)
                loss = tn.ops.mean(grads)
            gr = tape.gradient(loss, self.discriminator.trainable_variables)
            self.d_optimizer.apply_gradients(zip(gr, self.discriminator.trainable_variables))
            return {"loss": loss}

    bad = _Bad(_critic(tn), _generator(tn), 1)
    bad.compile(d_optimizer=tn.optimizers.SGD(0.1), g_optimizer=tn.optimizers.SGD(0.1))
    with pytest.raises(ValueError, match=r"\[GradientTape.gradient\] the target .* does not "
                                         r"depend on the source.*test_nn_wgan_gp_step"):
        bad.fit(_data(8), batch_size=8, epochs=1, verbose=0)


def test_batch_norm_in_training_inside_a_gradient_function_is_refused_by_name():
    critic = tn.Sequential([tn.Input(SHAPE), tn.layers.Flatten(), tn.layers.Dense(5),
                            tn.layers.BatchNormalization(), tn.layers.Dense(1)])
    wgan = _WGAN(critic, _generator(tn), 1)
    wgan.compile(d_optimizer=tn.optimizers.SGD(0.1), g_optimizer=tn.optimizers.SGD(0.1))
    with pytest.raises(NotImplementedError, match=r"BatchNormalization\) is called with "
                                                  r"training=True inside a GradientTape's "
                                                  r"gradient with respect to a computed value"):
        wgan.fit(_data(8), batch_size=8, epochs=1, verbose=0)
