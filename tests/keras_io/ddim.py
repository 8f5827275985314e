# Modeled on keras-io examples/generative/ddim.py; written for tessera. Keras 3 form: the
# sinusoidal noise embedding in a `layers.Lambda(fn, output_shape=...)` of `ops.exp`/
# `ops.linspace`/`ops.sin`/`ops.cos`, `UpSampling2D(size=image_size)` of it, a residual U-Net
# of `BatchNormalization(center=False, scale=False)`, swish Conv2Ds, AveragePooling2D,
# bilinear UpSampling2D and skips kept in a Python list, on two Inputs; a `DiffusionModel`
# holding an adapted `Normalization`, the network and a `keras.models.clone_model` copy,
# the cosine diffusion schedule in `ops.arccos`/`ops.cos`/`ops.sin`, reverse diffusion and
# generation called eagerly. The example's `train_step`/`test_step` (tf.GradientTape, the
# noise and image losses of `self.loss`) as Keras 3 writes them for every backend: `call`
# noises the normalized images (`keras.random.normal`/`uniform` with a SeedGenerator, the
# symbolic batch size from `ops.shape`) and denoises them, a `compute_loss` override returns
# `self.loss`'s noise loss (image loss logged by a `Mean` tracker updated in `compute_metrics`);
# the exponential moving average of the weights by `AdamW(use_ema=True,
# ema_momentum=0.999)` (the EMA network of the example: the weights fit leaves are the
# averages, copied into the clone that generates). KID (a downloaded InceptionV3) left out.
# 512 generated 16x16 "flowers" (coloured discs on a soft background) in place of Oxford
# Flowers 102 at 64x64; widths [16, 32] ([32, 64, 96, 128]), block depth 1 (2), 3 epochs (50).
import math

import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

# data
num_epochs = 3  # the example: 50
image_size = 16  # the example: 64

# sampling
min_signal_rate = 0.02
max_signal_rate = 0.95

# architecture
embedding_dims = 16  # the example: 32
embedding_max_frequency = 1000.0
widths = [16, 32]  # the example: [32, 64, 96, 128]
block_depth = 1  # the example: 2

# optimization
batch_size = 32  # the example: 64
ema = 0.999
learning_rate = 2e-3  # the example: 1e-3
weight_decay = 1e-4

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)


def make_flowers(n):
    """Images in [0, 1]: a coloured disc with a brighter centre on a soft background."""
    yy, xx = np.mgrid[0:image_size, 0:image_size] / (image_size - 1)
    out = np.empty((n, image_size, image_size, 3), "float32")
    for img in out:
        bg = rng.uniform(0.1, 0.4, 3)
        petal, centre = rng.uniform(0.3, 1.0, 3), rng.uniform(0.6, 1.0, 3)
        cy, cx = rng.uniform(0.35, 0.65, 2)
        r = np.hypot(yy - cy, xx - cx)
        img[:] = bg
        img[r < 0.3] = petal
        img[r < 0.1] = centre
        img += rng.normal(0, 0.02, img.shape)
    return np.clip(out, 0, 1)


train_images, val_images = make_flowers(512), make_flowers(64)


@keras.saving.register_keras_serializable()  # (clone_model makes the Lambda again)
def sinusoidal_embedding(x):
    embedding_min_frequency = 1.0
    frequencies = ops.exp(ops.linspace(ops.log(embedding_min_frequency),
                                       ops.log(embedding_max_frequency),
                                       embedding_dims // 2))
    angular_speeds = ops.cast(2.0 * math.pi * frequencies, "float32")
    embeddings = ops.concatenate([ops.sin(angular_speeds * x), ops.cos(angular_speeds * x)],
                                 axis=3)
    return embeddings


def ResidualBlock(width):
    def apply(x):
        input_width = x.shape[3]
        if input_width == width:
            residual = x
        else:
            residual = layers.Conv2D(width, kernel_size=1)(x)
        x = layers.BatchNormalization(center=False, scale=False)(x)
        x = layers.Conv2D(width, kernel_size=3, padding="same",
                          activation=keras.activations.swish)(x)
        x = layers.Conv2D(width, kernel_size=3, padding="same")(x)
        x = layers.Add()([x, residual])
        return x

    return apply


def DownBlock(width, block_depth):
    def apply(x):
        x, skips = x
        for _ in range(block_depth):
            x = ResidualBlock(width)(x)
            skips.append(x)
        x = layers.AveragePooling2D(pool_size=2)(x)
        return x

    return apply


def UpBlock(width, block_depth):
    def apply(x):
        x, skips = x
        x = layers.UpSampling2D(size=2, interpolation="bilinear")(x)
        for _ in range(block_depth):
            x = layers.Concatenate()([x, skips.pop()])
            x = ResidualBlock(width)(x)
        return x

    return apply


def get_network(image_size, widths, block_depth):
    noisy_images = keras.Input(shape=(image_size, image_size, 3))
    noise_variances = keras.Input(shape=(1, 1, 1))

    e = layers.Lambda(sinusoidal_embedding, output_shape=(1, 1, embedding_dims))(
        noise_variances)
    e = layers.UpSampling2D(size=image_size, interpolation="nearest")(e)

    x = layers.Conv2D(widths[0], kernel_size=1)(noisy_images)
    x = layers.Concatenate()([x, e])

    skips = []
    for width in widths[:-1]:
        x = DownBlock(width, block_depth)([x, skips])

    for _ in range(block_depth):
        x = ResidualBlock(widths[-1])(x)

    for width in reversed(widths[:-1]):
        x = UpBlock(width, block_depth)([x, skips])

    x = layers.Conv2D(3, kernel_size=1, kernel_initializer="zeros")(x)

    return keras.Model([noisy_images, noise_variances], x, name="residual_unet")


class DiffusionModel(keras.Model):
    def __init__(self, image_size, widths, block_depth):
        super().__init__()
        self.normalizer = layers.Normalization()
        self.network = get_network(image_size, widths, block_depth)
        self.seed_generator = keras.random.SeedGenerator(1337)

    def compile(self, **kwargs):
        super().compile(**kwargs)
        self.image_loss_tracker = keras.metrics.Mean(name="i_loss")

    def denormalize(self, images):
        # the pixel values back to the 0-1 range
        images = self.normalizer.mean + images * self.normalizer.variance**0.5
        return ops.clip(images, 0.0, 1.0)

    def diffusion_schedule(self, diffusion_times):
        # diffusion times -> angles
        start_angle = ops.cast(ops.arccos(max_signal_rate), "float32")
        end_angle = ops.cast(ops.arccos(min_signal_rate), "float32")
        diffusion_angles = start_angle + diffusion_times * (end_angle - start_angle)
        # angles -> signal and noise rates (their squares sum to 1)
        signal_rates = ops.cos(diffusion_angles)
        noise_rates = ops.sin(diffusion_angles)
        return noise_rates, signal_rates

    def denoise(self, network, noisy_images, noise_rates, signal_rates, training):
        # the network predicts the noise; the image follows
        pred_noises = network([noisy_images, noise_rates**2], training=training)
        pred_images = (noisy_images - noise_rates * pred_noises) / signal_rates
        return pred_noises, pred_images

    def call(self, images, training=False):
        # normalize images to have standard deviation of 1, like the noises
        images = self.normalizer(images, training=training)
        batch = ops.shape(images)[0]
        noises = keras.random.normal(shape=(batch, image_size, image_size, 3),
                                     seed=self.seed_generator)
        # uniform random diffusion times
        diffusion_times = keras.random.uniform(shape=(batch, 1, 1, 1), minval=0.0, maxval=1.0,
                                               seed=self.seed_generator)
        noise_rates, signal_rates = self.diffusion_schedule(diffusion_times)
        # mix the images with noises accordingly
        noisy_images = signal_rates * images + noise_rates * noises
        pred_noises, pred_images = self.denoise(self.network, noisy_images, noise_rates,
                                                signal_rates, training=training)
        return pred_noises, noises, pred_images, images

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        pred_noises, noises, _, _ = y_pred
        return ops.mean(self.loss(noises, pred_noises))  # used for training

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        _, _, pred_images, images = y_pred
        self.image_loss_tracker.update_state(ops.mean(self.loss(images, pred_images)))
        return {m.name: m.result() for m in self.metrics}

    def reverse_diffusion(self, network, initial_noise, diffusion_steps):
        num_images = initial_noise.shape[0]
        step_size = 1.0 / diffusion_steps
        # at the first step the "noisy image" is pure noise, its signal rate 0
        next_noisy_images = initial_noise
        for step in range(diffusion_steps):
            noisy_images = next_noisy_images
            diffusion_times = ops.ones((num_images, 1, 1, 1)) - step * step_size
            noise_rates, signal_rates = self.diffusion_schedule(diffusion_times)
            pred_noises, pred_images = self.denoise(network, noisy_images, noise_rates,
                                                    signal_rates, training=False)
            # remix the predicted components with the next signal and noise rates
            next_diffusion_times = diffusion_times - step_size
            next_noise_rates, next_signal_rates = self.diffusion_schedule(next_diffusion_times)
            next_noisy_images = next_signal_rates * pred_images + next_noise_rates * pred_noises
        return pred_images

    def generate(self, network, num_images, diffusion_steps):
        initial_noise = keras.random.normal(shape=(num_images, image_size, image_size, 3),
                                            seed=self.seed_generator)
        generated_images = self.reverse_diffusion(network, initial_noise, diffusion_steps)
        return self.denormalize(generated_images)

    def plot_images(self, network, name, num_rows=2, num_cols=4):
        generated_images = np.asarray(self.generate(network, num_rows * num_cols, 10))
        plt.figure(figsize=(num_cols * 2.0, num_rows * 2.0))
        for row in range(num_rows):
            for col in range(num_cols):
                index = row * num_cols + col
                plt.subplot(num_rows, num_cols, index + 1)
                plt.imshow(generated_images[index])
                plt.axis("off")
        plt.tight_layout()
        plt.savefig(name)
        plt.close()
        return generated_images


model = DiffusionModel(image_size, widths, block_depth)
model.compile(
    optimizer=keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=weight_decay,
                                     use_ema=True, ema_momentum=ema),
    loss=keras.losses.mean_absolute_error,
)  # pixelwise mean absolute error is the loss

# the normalization statistics of the training images
model.normalizer.adapt(train_images)
model.network.summary()

checkpoint_path = "diffusion_model.weights.h5"
checkpoint_callback = keras.callbacks.ModelCheckpoint(
    filepath=checkpoint_path, save_weights_only=True, monitor="val_i_loss", mode="min",
    save_best_only=True)

model.fit(train_images, epochs=num_epochs, batch_size=batch_size,
          validation_data=(val_images,), callbacks=[checkpoint_callback])

# The weights fit leaves are the moving averages (use_ema); a clone of the network holds
# them for generation, as the example's ema_network.
ema_network = keras.models.clone_model(model.network)
ema_network.set_weights(model.network.get_weights())
model.load_weights(checkpoint_path)
generated = model.plot_images(ema_network, "generated.png")
assert generated.shape == (8, image_size, image_size, 3)
assert 0.0 <= generated.min() and generated.max() <= 1.0
# the generated images' mean colour is near the data's (a flat grey would not be)
print("generated mean:", generated.mean(), "data mean:", train_images.mean())
