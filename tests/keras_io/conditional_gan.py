# Modeled on keras-io examples/generative/conditional_gan.py; written for tessera. Its
# train_step is written there with TensorFlow's GradientTape: here keras.GradientTape
# (tessera.nn's); `tessera.data.Dataset` for tf.data (from_tensor_slices of (images, labels),
# shuffle, batch). In place of MNIST: 512 images of 28x28 with a bright bar at a height given by
# the digit; filters / 4 (32), latent 32 (128 there), 2 epochs (20). The interpolation between
# two classes is kept; its frames are saved with Pillow as a GIF in place of imageio and
# embed.embed_file.
import os

import numpy as np
import tessera.data
import tessera.nn as keras
from tessera.nn import layers, ops
from PIL import Image

keras.utils.set_random_seed(0)
batch_size = 64
num_channels = 1
num_classes = 10
image_size = 28
latent_dim = 32

rng = np.random.default_rng(0)
all_labels = rng.integers(0, num_classes, 512)
all_digits = rng.integers(0, 64, (512, 28, 28), dtype=np.uint8)
rows = 3 + 2 * all_labels
all_digits[np.arange(512)[:, None], rows[:, None] + np.arange(3)] = 255
all_digits = all_digits.astype("float32") / 255.0
all_digits = np.reshape(all_digits, (-1, 28, 28, 1))
all_labels = keras.utils.to_categorical(all_labels, 10)

dataset = tessera.data.Dataset.from_tensor_slices((all_digits, all_labels))
dataset = dataset.shuffle(buffer_size=1024).batch(batch_size)
print(f"Shape of training images: {all_digits.shape}")
print(f"Shape of training labels: {all_labels.shape}")

generator_in_channels = latent_dim + num_classes
discriminator_in_channels = num_channels + num_classes
print(generator_in_channels, discriminator_in_channels)

discriminator = keras.Sequential(
    [
        keras.layers.InputLayer((28, 28, discriminator_in_channels)),
        layers.Conv2D(16, (3, 3), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(32, (3, 3), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.GlobalMaxPooling2D(),
        layers.Dense(1),
    ],
    name="discriminator",
)

generator = keras.Sequential(
    [
        keras.layers.InputLayer((generator_in_channels,)),
        # the latent vector and its labels, to 7x7x(latent + classes) coefficients
        layers.Dense(7 * 7 * generator_in_channels),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Reshape((7, 7, generator_in_channels)),
        layers.Conv2DTranspose(32, (4, 4), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2DTranspose(32, (4, 4), strides=(2, 2), padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(1, (7, 7), padding="same", activation="sigmoid"),
    ],
    name="generator",
)


class ConditionalGAN(keras.Model):
    def __init__(self, discriminator, generator, latent_dim):
        super().__init__()
        self.discriminator = discriminator
        self.generator = generator
        self.latent_dim = latent_dim
        self.seed_generator = keras.random.SeedGenerator(1337)
        self.gen_loss_tracker = keras.metrics.Mean(name="generator_loss")
        self.disc_loss_tracker = keras.metrics.Mean(name="discriminator_loss")

    @property
    def metrics(self):
        return [self.gen_loss_tracker, self.disc_loss_tracker]

    def compile(self, d_optimizer, g_optimizer, loss_fn):
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn

    def train_step(self, data):
        real_images, one_hot_labels = data

        # The labels as extra channels of the images, for the discriminator.
        image_one_hot_labels = one_hot_labels[:, :, None, None]
        image_one_hot_labels = ops.repeat(image_one_hot_labels,
                                          repeats=[image_size * image_size])
        image_one_hot_labels = ops.reshape(image_one_hot_labels,
                                           (-1, image_size, image_size, num_classes))

        # Random points of the latent space, with the labels, for the generator.
        batch_size = ops.shape(real_images)[0]
        random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim),
                                                    seed=self.seed_generator)
        random_vector_labels = ops.concatenate([random_latent_vectors, one_hot_labels], axis=1)
        generated_images = self.generator(random_vector_labels)

        fake_image_and_labels = ops.concatenate([generated_images, image_one_hot_labels], -1)
        real_image_and_labels = ops.concatenate([real_images, image_one_hot_labels], -1)
        combined_images = ops.concatenate([fake_image_and_labels, real_image_and_labels],
                                          axis=0)
        # Fake images are labelled 1, real ones 0.
        labels = ops.concatenate([ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))],
                                 axis=0)

        with keras.GradientTape() as tape:
            predictions = self.discriminator(combined_images)
            d_loss = self.loss_fn(labels, predictions)
        grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
        self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights))

        random_latent_vectors = keras.random.normal(shape=(batch_size, self.latent_dim),
                                                    seed=self.seed_generator)
        random_vector_labels = ops.concatenate([random_latent_vectors, one_hot_labels], axis=1)
        # The generator is trained to make the discriminator say "real" (0); only its
        # weights are updated.
        misleading_labels = ops.zeros((batch_size, 1))
        with keras.GradientTape() as tape:
            fake_images = self.generator(random_vector_labels)
            fake_image_and_labels = ops.concatenate([fake_images, image_one_hot_labels], -1)
            predictions = self.discriminator(fake_image_and_labels)
            g_loss = self.loss_fn(misleading_labels, predictions)
        grads = tape.gradient(g_loss, self.generator.trainable_weights)
        self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights))

        self.gen_loss_tracker.update_state(g_loss)
        self.disc_loss_tracker.update_state(d_loss)
        return {
            "g_loss": self.gen_loss_tracker.result(),
            "d_loss": self.disc_loss_tracker.result(),
        }


cond_gan = ConditionalGAN(discriminator=discriminator, generator=generator,
                          latent_dim=latent_dim)
cond_gan.compile(
    d_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
    g_optimizer=keras.optimizers.Adam(learning_rate=0.0003),
    loss_fn=keras.losses.BinaryCrossentropy(from_logits=True),
)
g_before = [w.copy() for w in generator.get_weights()]
history = cond_gan.fit(dataset, epochs=2)
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})

# Interpolating between classes with the trained generator.
trained_gen = cond_gan.generator
num_interpolation = 9
interpolation_noise = keras.random.normal(shape=(1, latent_dim))
interpolation_noise = ops.repeat(interpolation_noise, repeats=num_interpolation)
interpolation_noise = ops.reshape(interpolation_noise, (num_interpolation, latent_dim))


def interpolate_class(first_number, second_number):
    first_label = keras.utils.to_categorical([first_number], num_classes)
    second_label = keras.utils.to_categorical([second_number], num_classes)
    first_label = ops.cast(first_label, "float32")
    second_label = ops.cast(second_label, "float32")
    percent_second_label = ops.linspace(0, 1, num_interpolation)[:, None]
    percent_second_label = ops.cast(percent_second_label, "float32")
    interpolation_labels = (first_label * (1 - percent_second_label)
                            + second_label * percent_second_label)
    noise_and_labels = ops.concatenate([interpolation_noise, interpolation_labels], 1)
    fake = trained_gen.predict(noise_and_labels)
    return fake


start_class = 2
end_class = 6
fake_images = interpolate_class(start_class, end_class)
fake_images *= 255.0
converted_images = np.asarray(fake_images).astype(np.uint8)
converted_images = ops.image.resize(converted_images, (96, 96))
converted_images = np.asarray(converted_images).astype(np.uint8)
frames = [Image.fromarray(im[:, :, 0]) for im in converted_images]
frames[0].save("animation.gif", save_all=True, append_images=frames[1:], duration=100)

# Both networks were trained, each by its own optimizer; the interpolation has its frames.
assert sorted(history.history) == ["d_loss", "g_loss"], sorted(history.history)
assert any(not np.array_equal(a, b) for a, b in zip(g_before, generator.get_weights()))
assert converted_images.shape == (num_interpolation, 96, 96, 1)
assert os.path.getsize("animation.gif") > 0
