# Modeled on keras-io examples/generative/dcgan_overriding_train_step.py; written for tessera.
# Its train_step is written there with TensorFlow: here keras.GradientTape (tessera.nn's) for
# tf.GradientTape, keras.random.normal/uniform for tf.random.*, ops.concatenate/ones/zeros/shape
# for tf.concat/ones/zeros/shape; `tessera.data.Dataset` for tf.data (from_tensor_slices,
# shuffle, batch, prefetch). In place of MNIST: 512 images of 28x28 with a bright bar at a random
# height; filters / 4 (16 and 32), latent 32 (128 there), 2 epochs (30); the callback's
# `generated_images.numpy()` left out (a no-op statement there; arrays here); the images it saves
# are checked instead of displayed.
import os

import numpy as np
import tessera.data
import tessera.nn as keras
from tessera.nn import layers, ops

keras.utils.set_random_seed(0)
batch_size = 64
rng = np.random.default_rng(0)
all_digits = rng.integers(0, 64, (512, 28, 28), dtype=np.uint8)
rows = rng.integers(4, 22, 512)
all_digits[np.arange(512)[:, None], rows[:, None] + np.arange(3)] = 255
all_digits = all_digits.astype("float32") / 255
all_digits = np.reshape(all_digits, (-1, 28, 28, 1))
dataset = tessera.data.Dataset.from_tensor_slices(all_digits)
dataset = dataset.shuffle(buffer_size=1024).batch(batch_size).prefetch(32)

discriminator = keras.Sequential(
    [
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(16, (3, 3), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(32, (3, 3), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.GlobalMaxPooling2D(),
        layers.Dense(1),
    ],
    name="discriminator",
)
discriminator.summary()

latent_dim = 32
generator = keras.Sequential(
    [
        keras.Input(shape=(latent_dim,)),
        # 7x7x32 coefficients, reshaped into a map
        layers.Dense(7 * 7 * 32),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Reshape((7, 7, 32)),
        layers.Conv2DTranspose(32, (4, 4), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2DTranspose(32, (4, 4), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(1, (7, 7), padding="same", activation="sigmoid"),
    ],
    name="generator",
)
generator.summary()


class GAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim
        self.seed_generator = keras.random.SeedGenerator(1337)

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn
        self.d_loss_metric = keras.metrics.Mean(name="d_loss")
        self.g_loss_metric = keras.metrics.Mean(name="g_loss")

    @property
    def metrics(self):
        return [self.d_loss_metric, self.g_loss_metric]

    def train_step(self, real_images):
        batch_size = ops.shape(real_images)[0]
        random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim),
                                                    seed=self.seed_generator)
        generated_images = self.generator(random_latent_vectors)
        combined_images = ops.concatenate([generated_images, real_images], axis=0)
        # Fake images are labelled 1, real ones 0, with a little noise on the labels.
        labels = ops.concatenate([ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))], axis=0)
        labels += 0.05 * keras.random.uniform(ops.shape(labels), seed=self.seed_generator)

        with keras.GradientTape() as tape:
            predictions = self.discriminator(combined_images)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))

        random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim),
                                                    seed=self.seed_generator)
        # The generator is trained to make the discriminator say "real" (0).
        misleading_labels = ops.zeros((batch_size, 1))
        with keras.GradientTape() as tape:
            predictions = self.discriminator(self.generator(random_latent_vectors))
            g_loss = self.loss_fn(misleading_labels, predictions)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))

        self.d_loss_metric.update_state(d_loss)
        self.g_loss_metric.update_state(g_loss)
        return {"d_loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result()}


class GANMonitor(keras.callbacks.Callback):
    def __init__(self, num_img=3, latent_dim=128):
        self.num_img = num_img
        self.latent_dim = latent_dim

    def on_epoch_end(self, epoch, logs=None):
        random_latent_vectors = keras.random.normal(shape=(self.num_img, self.latent_dim))
        generated_images = self.model.generator(random_latent_vectors)
        generated_images *= 255
        for i in range(self.num_img):
            img = keras.preprocessing.image.array_to_img(generated_images[i])
            img.save("generated_img_{i}_{epoch}.png".format(i=i, epoch=epoch))


epochs = 2
gan = GAN(discriminator=discriminator, generator=generator, latent_dim=latent_dim)
gan.compile(
    d_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
    g_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
    loss_fn=keras.losses.BinaryCrossentropy(from_logits=True),
)
d_before = [w.copy() for w in discriminator.get_weights()]
g_before = [w.copy() for w in generator.get_weights()]
history = gan.fit(dataset, epochs=epochs,
                  callbacks=[GANMonitor(num_img=3, latent_dim=latent_dim)])
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})

# Both networks were trained by the one step, each by its own optimizer.
assert sorted(history.history) == ["d_loss", "g_loss"], sorted(history.history)
assert any(not np.array_equal(a, b) for a, b in zip(d_before, discriminator.get_weights()))
assert any(not np.array_equal(a, b) for a, b in zip(g_before, generator.get_weights()))
for i in range(3):
    assert os.path.exists(f"generated_img_{i}_{epochs - 1}.png")
