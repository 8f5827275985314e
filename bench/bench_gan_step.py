"""A GAN's training step (issue 30): tessera.nn's fit of keras-io's DCGAN train_step
(examples/generative/dcgan_overriding_train_step.py as tests/keras_io has it shrunk:
28x28x1 images, a discriminator of Conv2D 16/32 strided, LeakyReLU, GlobalMaxPooling2D,
Dense(1); a generator of Dense(7x7x32), Conv2DTranspose 32/32, Conv2D(1, 7x7, sigmoid); latent
32; two Adam(3e-4), binary cross-entropy from logits) against Keras 3 on JAX running the same
two updates in the form of the guide's JAX version ("Customizing what happens in fit() with
JAX"): one jax.jit-compiled stateless step (stateless_call, jax.value_and_grad,
optimizer.stateless_apply) threading the state through the batches. Keras's TensorFlow form
(GradientTape) needs TensorFlow, not installed here.

The unit is one epoch of --batches batches of --batch images (the latent draws are each side's
own); both sides start from the same weights (tessera gets Keras's). Each side's first epoch
(tracing and compiling) is timed apart, then medians of interleaved rounds. Threads: 1 each by
default (XLA through XLA_FLAGS).

run: .venv/bin/python bench/bench_gan_step.py [--batch 64] [--batches 8] [--rounds 5]
         [--threads 1]
"""

import argparse
import time

import keras_jax_setup  # noqa: E402 - bench/

keras_jax_setup.setup()

import numpy as np  # noqa: E402

import fair  # noqa: E402

LATENT = 32


def sub_models(keras, layers):
    """The DCGAN's discriminator and generator (filters / 4 of keras-io's)."""
    d = keras.Sequential([keras.Input(shape=(28, 28, 1)),
                          layers.Conv2D(16, (3, 3), strides=(2, 2), padding="same"),
                          layers.LeakyReLU(negative_slope=0.2),
                          layers.Conv2D(32, (3, 3), strides=(2, 2), padding="same"),
                          layers.LeakyReLU(negative_slope=0.2),
                          layers.GlobalMaxPooling2D(), layers.Dense(1)], name="discriminator")
    g = keras.Sequential([keras.Input(shape=(LATENT,)), layers.Dense(7 * 7 * 32),
                          layers.LeakyReLU(negative_slope=0.2), layers.Reshape((7, 7, 32)),
                          layers.Conv2DTranspose(32, (4, 4), strides=(2, 2), padding="same"),
                          layers.LeakyReLU(negative_slope=0.2),
                          layers.Conv2DTranspose(32, (4, 4), strides=(2, 2), padding="same"),
                          layers.LeakyReLU(negative_slope=0.2),
                          layers.Conv2D(1, (7, 7), padding="same", activation="sigmoid")],
                         name="generator")
    return d, g


def tessera_gan(tnn, dw, gw):
    d, g = sub_models(tnn, tnn.layers)
    d.set_weights(dw)
    g.set_weights(gw)
    ops = tnn.ops

    class GAN(tnn.Model):
        def __init__(self):
            super().__init__()
            self.discriminator, self.generator = d, g
            self.seed_generator = tnn.random.SeedGenerator(1337)

        def compile(self, d_optimizer, g_optimizer, loss_fn):
            super().compile()
            self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn
            self.d_loss_metric = tnn.metrics.Mean(name="d_loss")
            self.g_loss_metric = tnn.metrics.Mean(name="g_loss")

        @property
        def metrics(self):
            return [self.d_loss_metric, self.g_loss_metric]

        def train_step(self, real):
            n = ops.shape(real)[0]
            z = tnn.random.normal((n, LATENT), seed=self.seed_generator)
            combined = ops.concatenate([self.generator(z), real], axis=0)
            labels = ops.concatenate([ops.ones((n, 1)), ops.zeros((n, 1))], axis=0)
            with tnn.GradientTape() as tape:
                d_loss = self.loss_fn(labels, self.discriminator(combined))
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))
            z = tnn.random.normal((n, LATENT), seed=self.seed_generator)
            with tnn.GradientTape() as tape:
                g_loss = self.loss_fn(ops.zeros((n, 1)), self.discriminator(self.generator(z)))
            grads = tape.gradient(g_loss, self.generator.trainable_weights)
            self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))
            self.d_loss_metric.update_state(d_loss)
            self.g_loss_metric.update_state(g_loss)
            return {"d_loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result()}

    gan = GAN()
    gan.compile(tnn.optimizers.Adam(3e-4), tnn.optimizers.Adam(3e-4),
                tnn.losses.BinaryCrossentropy(from_logits=True))
    return gan


def keras_epoch_fn(keras, d, g, batches):
    """The guide's JAX form: a jitted stateless step over the batches; returns a callable
    running one epoch (the state carried from call to call)."""
    import jax
    import jax.numpy as jnp

    d_opt, g_opt = keras.optimizers.Adam(3e-4), keras.optimizers.Adam(3e-4)
    d_opt.build(d.trainable_variables)
    g_opt.build(g.trainable_variables)
    loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)

    @jax.jit
    def step(state, real, key):
        dv, gv, dov, gov = state
        n = real.shape[0]
        k1, k2 = jax.random.split(key)
        z1 = jax.random.normal(k1, (n, LATENT))
        fake, _ = g.stateless_call(gv, [], z1)
        labels = jnp.concatenate([jnp.ones((n, 1)), jnp.zeros((n, 1))], axis=0)

        def d_loss_fn(dv_):
            pred, _ = d.stateless_call(dv_, [], jnp.concatenate([fake, real], axis=0))
            return loss_fn(labels, pred)

        d_loss, grads = jax.value_and_grad(d_loss_fn)(dv)
        dv, dov = d_opt.stateless_apply(dov, grads, dv)
        z2 = jax.random.normal(k2, (n, LATENT))

        def g_loss_fn(gv_):
            pred, _ = d.stateless_call(dv, [], g.stateless_call(gv_, [], z2)[0])
            return loss_fn(jnp.zeros((n, 1)), pred)

        g_loss, grads = jax.value_and_grad(g_loss_fn)(gv)
        gv, gov = g_opt.stateless_apply(gov, grads, gv)
        return (dv, gv, dov, gov), d_loss, g_loss

    state = [([v.value for v in d.trainable_variables], [v.value for v in g.trainable_variables],
              [v.value for v in d_opt.variables], [v.value for v in g_opt.variables])]
    key = [jax.random.PRNGKey(0)]

    def epoch():
        for real in batches:
            key[0], sub = jax.random.split(key[0])
            state[0], d_loss, g_loss = step(state[0], real, sub)
        jax.block_until_ready(g_loss)

    return epoch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    import keras

    import tessera
    import tessera.data
    import tessera.nn as tnn

    tessera.set_num_threads(args.threads)
    fair.header("A GAN's train_step: DCGAN shrunk, one epoch of "
                f"{args.batches} batches of {args.batch}", threads=args.threads)
    keras.utils.set_random_seed(0)
    kd, kg = sub_models(keras, keras.layers)
    dw = [np.asarray(w, np.float32) for w in kd.get_weights()]
    gw = [np.asarray(w, np.float32) for w in kg.get_weights()]
    rng = np.random.default_rng(0)
    images = rng.random((args.batch * args.batches, 28, 28, 1)).astype(np.float32)
    batches = [images[i:i + args.batch] for i in range(0, len(images), args.batch)]
    gan = tessera_gan(tnn, dw, gw)
    ds = tessera.data.Dataset.from_tensor_slices(images).batch(args.batch)

    def t_epoch():
        gan.fit(ds, epochs=1, verbose=0)

    k_epoch = keras_epoch_fn(keras, kd, kg, batches)
    keras_jax_setup.race_epochs(t_epoch, k_epoch, args)


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t0:.0f} s in all)")
