"""WGAN-GP's training step (issue 30, second-order gradients): tessera.nn's fit of keras-io's
WGAN-GP train_step (examples/generative/wgan_gp.py as tests/keras_io has it: 28x28x1 images
zero-padded to 32x32, a critic of four 5x5 strided Conv2D 16/32/64/128 with LeakyReLU(0.2) and
Dropout, Flatten, Dropout, Dense(1); a generator of Dense(4x4x64, no bias), BatchNormalization,
LeakyReLU, three UpSampling2D/Conv2D/BatchNormalization blocks and Cropping2D; noise 32; the
critic trained 3 times per step with a gradient penalty of weight 10, the gradient of the
critic's output with respect to interpolated images taken inside the critic's tape; two
Adam(2e-4, beta_1=0.5, beta_2=0.9)) against Keras 3 on JAX running the same updates as one
jax.jit-compiled stateless step (stateless_call, jax.grad inside jax.value_and_grad,
optimizer.stateless_apply; the generator's moving statistics threaded through). Keras's
TensorFlow form (GradientTape) needs TensorFlow, not installed here.

The unit is one epoch of --batches batches of --batch images (the random draws are each
side's own); both sides start from the same weights (tessera gets Keras's). Each side's first
epoch (tracing and compiling) is timed apart, then medians of interleaved rounds. Threads: 1
each by default (XLA through XLA_FLAGS).

run: .venv/bin/python bench/bench_wgan_gp_step.py [--batch 64] [--batches 4] [--rounds 3]
         [--threads 1]
"""

import argparse
import time

import keras_jax_setup  # noqa: E402 - bench/

keras_jax_setup.setup()

import numpy as np  # noqa: E402

import fair  # noqa: E402

NOISE = 32
D_STEPS = 3
GP_WEIGHT = 10.0


def sub_models(keras, layers):
    """keras-io's critic and generator (filters / 4)."""
    x = inp = keras.Input((28, 28, 1))
    x = layers.ZeroPadding2D((2, 2))(x)
    for filters, drop in ((16, False), (32, True), (64, True), (128, False)):
        x = layers.Conv2D(filters, (5, 5), strides=(2, 2), padding="same")(x)
        x = layers.LeakyReLU(0.2)(x)
        if drop:
            x = layers.Dropout(0.3)(x)
    x = layers.Dropout(0.2)(layers.Flatten()(x))
    critic = keras.Model(inp, layers.Dense(1)(x), name="discriminator")
    z = noise = keras.Input((NOISE,))
    z = layers.Dense(4 * 4 * 64, use_bias=False)(z)
    z = layers.LeakyReLU(0.2)(layers.BatchNormalization()(z))
    z = layers.Reshape((4, 4, 64))(z)
    for filters, act in ((32, "leaky"), (16, "leaky"), (1, "tanh")):
        z = layers.UpSampling2D((2, 2))(z)
        z = layers.Conv2D(filters, (3, 3), padding="same", use_bias=False)(z)
        z = layers.BatchNormalization()(z)
        z = layers.LeakyReLU(0.2)(z) if act == "leaky" else layers.Activation("tanh")(z)
    generator = keras.Model(noise, layers.Cropping2D((2, 2))(z), name="generator")
    return critic, generator


def tessera_wgan(tnn, cw, gw):
    critic, generator = sub_models(tnn, tnn.layers)
    critic.set_weights(cw)
    generator.set_weights(gw)
    ops = tnn.ops

    class WGAN(tnn.Model):
        def __init__(self):
            super().__init__()
            self.discriminator, self.generator = critic, generator

        def compile(self, d_optimizer, g_optimizer):
            super().compile()
            self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer

        def gradient_penalty(self, n, real, fake):
            alpha = tnn.random.uniform([n, 1, 1, 1], 0.0, 1.0)
            interpolated = real + alpha * (fake - real)
            with tnn.GradientTape() as gp_tape:
                gp_tape.watch(interpolated)
                pred = self.discriminator(interpolated, training=True)
            grads = gp_tape.gradient(pred, [interpolated])[0]
            norm = ops.sqrt(ops.sum(ops.square(grads), axis=[1, 2, 3]))
            return ops.mean((norm - 1.0) ** 2)

        def train_step(self, real):
            n = ops.shape(real)[0]
            for _ in range(D_STEPS):
                z = tnn.random.normal((n, NOISE))
                with tnn.GradientTape() as tape:
                    fake = self.generator(z, training=True)
                    d_cost = ops.mean(self.discriminator(fake, training=True)) - \
                        ops.mean(self.discriminator(real, training=True))
                    d_loss = d_cost + self.gradient_penalty(n, real, fake) * GP_WEIGHT
                grads = tape.gradient(d_loss, self.discriminator.trainable_variables)
                self.d_optimizer.apply_gradients(
                    zip(grads, self.discriminator.trainable_variables))
            z = tnn.random.normal((n, NOISE))
            with tnn.GradientTape() as tape:
                g_loss = -ops.mean(self.discriminator(self.generator(z, training=True),
                                                      training=True))
            grads = tape.gradient(g_loss, self.generator.trainable_variables)
            self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_variables))
            return {"d_loss": d_loss, "g_loss": g_loss}

    wgan = WGAN()
    wgan.compile(tnn.optimizers.Adam(2e-4, beta_1=0.5, beta_2=0.9),
                 tnn.optimizers.Adam(2e-4, beta_1=0.5, beta_2=0.9))
    return wgan


def keras_epoch_fn(keras, critic, generator, batches):
    """One jitted stateless step over the batches; returns a callable running one epoch
    (the state carried from call to call)."""
    import jax
    import jax.numpy as jnp

    c_opt = keras.optimizers.Adam(2e-4, beta_1=0.5, beta_2=0.9)
    g_opt = keras.optimizers.Adam(2e-4, beta_1=0.5, beta_2=0.9)
    c_opt.build(critic.trainable_variables)
    g_opt.build(generator.trainable_variables)

    # the critic's non-trainable state: its dropout layers' seed generators (held fixed in
    # the step: the masks' cost is the same)
    cnt = [v.value for v in critic.non_trainable_variables]

    def critic_call(cv, x, key):
        out, _ = critic.stateless_call(cv, cnt, x, training=True)
        return out

    @jax.jit
    def step(state, real):
        cv, gv, gnt, cov, gov = state
        n = real.shape[0]
        key = jax.random.PRNGKey(0)
        for i in range(D_STEPS):
            key, kz, ka = jax.random.split(key, 3)
            z = jax.random.normal(kz, (n, NOISE))
            alpha = jax.random.uniform(ka, (n, 1, 1, 1))

            def d_loss_fn(cv_, gnt_):
                fake, gnt_ = generator.stateless_call(gv, gnt_, z, training=True)
                d_cost = jnp.mean(critic_call(cv_, fake, key)) - \
                    jnp.mean(critic_call(cv_, real, key))
                interpolated = real + alpha * (fake - real)
                grads = jax.grad(lambda x: jnp.sum(critic_call(cv_, x, key)))(interpolated)
                norm = jnp.sqrt(jnp.sum(jnp.square(grads), axis=(1, 2, 3)))
                return d_cost + jnp.mean((norm - 1.0) ** 2) * GP_WEIGHT, gnt_

            (d_loss, gnt), grads = jax.value_and_grad(d_loss_fn, has_aux=True)(cv, gnt)
            cv, cov = c_opt.stateless_apply(cov, grads, cv)
        key, kz = jax.random.split(key)
        z = jax.random.normal(kz, (n, NOISE))

        def g_loss_fn(gv_, gnt_):
            fake, gnt_ = generator.stateless_call(gv_, gnt_, z, training=True)
            return -jnp.mean(critic_call(cv, fake, key)), gnt_

        (g_loss, gnt), grads = jax.value_and_grad(g_loss_fn, has_aux=True)(gv, gnt)
        gv, gov = g_opt.stateless_apply(gov, grads, gv)
        return (cv, gv, gnt, cov, gov), d_loss, g_loss

    state = [([v.value for v in critic.trainable_variables],
              [v.value for v in generator.trainable_variables],
              [v.value for v in generator.non_trainable_variables],
              [v.value for v in c_opt.variables], [v.value for v in g_opt.variables])]

    def epoch():
        for real in batches:
            state[0], d_loss, g_loss = step(state[0], real)
        jax.block_until_ready(g_loss)

    return epoch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    import keras

    import tessera
    import tessera.data
    import tessera.nn as tnn

    tessera.set_num_threads(args.threads)
    fair.header("WGAN-GP's train_step (3 critic updates with a gradient penalty, 1 generator "
                f"update): one epoch of {args.batches} batches of {args.batch}",
                threads=args.threads)
    keras.utils.set_random_seed(0)
    kc, kg = sub_models(keras, keras.layers)
    cw = [np.asarray(w, np.float32) for w in kc.get_weights()]
    gw = [np.asarray(w, np.float32) for w in kg.get_weights()]
    rng = np.random.default_rng(0)
    images = (rng.random((args.batch * args.batches, 28, 28, 1)) * 2 - 1).astype(np.float32)
    batches = [images[i:i + args.batch] for i in range(0, len(images), args.batch)]
    wgan = tessera_wgan(tnn, cw, gw)
    ds = tessera.data.Dataset.from_tensor_slices(images).batch(args.batch)

    def t_epoch():
        wgan.fit(ds, epochs=1, verbose=0)

    k_epoch = keras_epoch_fn(keras, kc, kg, batches)
    keras_jax_setup.race_epochs(t_epoch, k_epoch, args)


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t0:.0f} s in all)")
