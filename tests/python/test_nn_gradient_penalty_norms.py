"""A WGAN-GP gradient penalty (the norm of d critic / d input, then its gradient with
respect to the weights: a second-order gradient) through a critic with MaxPooling2D,
BatchNormalization and LayerNormalization, whose backwards (max_pool2d_grad,
batch_norm_grad, layer_norm_grad) are themselves differentiated (issue 30). The critic
runs in inference (its batch norm with the moving statistics, gamma and beta trained):
tessera.nn's traced step refuses a batch norm called with training=True inside the inner
tape (its moving statistics would not move there); the batch norm's training-mode
backward under a second-order gradient is checked in test_second_order_grad.py. fit traces
the tape step; compared with Keras 3 on JAX running the same SGD updates with its
stateless API and jax.grad inside jax.value_and_grad, from the same weights and data."""

import numpy as np
import pytest

import tessera.data
import tessera.nn as tn
from test_nn_gan_train_step import _Batches  # the per-batch logs recorder

SHAPE = (6, 6, 2)
GP_WEIGHT = 10.0


def _critic(lib):
    x = inp = lib.Input(SHAPE)
    x = lib.layers.Conv2D(3, (3, 3), padding="same")(x)
    x = lib.layers.MaxPooling2D(2)(x)
    x = lib.layers.BatchNormalization()(x)
    x = lib.layers.LeakyReLU(0.2)(x)
    x = lib.layers.Flatten()(x)
    x = lib.layers.Dense(6)(x)
    x = lib.layers.LayerNormalization()(x)
    x = lib.layers.Activation("tanh")(x)
    x = lib.layers.Dense(1)(x)
    return lib.Model(inp, x, name="critic")


class _Critic(tn.Model):
    """The critic's loss with keras-io's gradient penalty, at interpolated inputs."""

    def __init__(self, critic):
        super().__init__()
        self.critic = critic

    def train_step(self, data):
        real, fake, alpha = data
        with tn.GradientTape() as tape:
            cost = tn.ops.mean(self.critic(fake)) - tn.ops.mean(self.critic(real))
            interpolated = real + alpha * (fake - real)
            with tn.GradientTape() as gp_tape:
                gp_tape.watch(interpolated)
                pred = self.critic(interpolated)
            grads = gp_tape.gradient(pred, [interpolated])[0]
            norm = tn.ops.sqrt(tn.ops.sum(tn.ops.square(grads), axis=[1, 2, 3]))
            gp = tn.ops.mean((norm - 1.0) ** 2)
            loss = cost + gp * GP_WEIGHT
        grads = tape.gradient(loss, self.critic.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.critic.trainable_variables))
        return {"loss": loss, "gp": gp}


def _keras_steps(keras, weights, batches, lr):
    import jax  # noqa: PLC0415 - Keras's backend, present with the oracle
    import jax.numpy as jnp  # noqa: PLC0415

    c = _critic(keras)
    c.set_weights(weights)
    opt = keras.optimizers.SGD(lr)
    opt.build(c.trainable_variables)
    cv = [v.value for v in c.trainable_variables]
    cnt = [v.value for v in c.non_trainable_variables]  # the moving statistics
    ov = [v.value for v in opt.variables]
    logs = []

    def loss_fn(cv_, cnt_, real, fake, alpha):
        fake_out, _ = c.stateless_call(cv_, cnt_, fake)
        real_out, _ = c.stateless_call(cv_, cnt_, real)
        interpolated = real + alpha * (fake - real)

        def critic_sum(x):
            out, _ = c.stateless_call(cv_, cnt_, x)
            return jnp.sum(out)

        g = jax.grad(critic_sum)(interpolated)
        norm = jnp.sqrt(jnp.sum(jnp.square(g), axis=(1, 2, 3)))
        gp = jnp.mean((norm - 1.0) ** 2)
        return jnp.mean(fake_out) - jnp.mean(real_out) + gp * GP_WEIGHT, (gp, cnt_)

    # compiled once (as Keras's own fit compiles its step), not run eagerly primitive by
    # primitive: eager JAX compiles every primitive on its own, most of this test's time
    loss_and_grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
    for real, fake, alpha in batches:
        (loss, (gp, cnt)), grads = loss_and_grads(cv, cnt, real, fake, alpha)
        cv, ov = opt.stateless_apply(ov, grads, cv)
        logs.append((float(loss), float(gp)))
    return logs, [np.asarray(v) for v in cv]


@pytest.mark.parametrize("lr", [0.01, 0.05])
def test_gradient_penalty_through_pooling_and_norms_as_keras(keras, lr):
    keras.utils.set_random_seed(5)
    rng = np.random.default_rng(5)
    n, bs = 12, 6
    real = rng.normal(0.0, 0.8, (n,) + SHAPE).astype("float32")
    fake = rng.normal(0.3, 1.0, (n,) + SHAPE).astype("float32")
    alpha = rng.uniform(size=(n, 1, 1, 1)).astype("float32")
    kc = _critic(keras)
    weights = [np.asarray(w) for w in kc.get_weights()]
    for i, v in enumerate(kc.weights):  # moving statistics that the batch norm can show
        if "moving_mean" in v.path:
            weights[i] = rng.normal(0.0, 0.3, v.shape).astype("float32")
        elif "moving_variance" in v.path:
            weights[i] = rng.uniform(0.5, 2.0, v.shape).astype("float32")
    batches = [(real[i:i + bs], fake[i:i + bs], alpha[i:i + bs]) for i in range(0, n, bs)]
    k_logs, k_weights = _keras_steps(keras, weights, batches, lr)

    critic = _critic(tn)
    critic.set_weights(weights)
    model = _Critic(critic)
    model.compile(optimizer=tn.optimizers.SGD(lr))
    seen = _Batches()
    ds = tessera.data.Dataset.from_tensor_slices((real, fake, alpha)).batch(bs)
    model.fit(ds, epochs=1, verbose=0, callbacks=[seen])
    got = [(b["loss"], b["gp"]) for b in seen.logs]
    assert k_logs[0][1] > 1e-3  # the penalty is not negligible: the test can tell
    np.testing.assert_allclose(got, k_logs, rtol=1e-4, atol=1e-5)
    trained = [w for w, v in zip(critic.get_weights(), critic.weights) if v.trainable]
    assert len(trained) == len(k_weights)
    for a, b in zip(trained, k_weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    assert not np.allclose(trained[0], weights[0])  # the step moved the weights
