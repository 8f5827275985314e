# Modeled on keras-io examples/generative/ddpm.py; written for tessera. Keras 3 form (the
# example is Keras 2, its data tensorflow_datasets'): the Gaussian diffusion utilities with
# `ops.take`/`ops.reshape`/`ops.clip` and `keras.random` for tf.gather/tf.reshape/
# tf.clip_by_value/tf.random; a U-Net of GroupNormalization, swish Conv2Ds, a `TimeEmbedding`
# layer, an `AttentionBlock` layer of `ops.einsum`, Concatenate-d skips and nearest
# UpSampling2D on an image Input and an int64 time Input. The example's `train_step`
# (tf.GradientTape, `self.loss`, the EMA of the weights assigned after each step) as Keras 3
# writes it for every backend: `call` samples the time steps and the noise (`keras.random`
# with a SeedGenerator) and predicts the noise, a `compute_loss` override returns
# `self.loss(noise, pred_noise)`, and the EMA network's weights are assigned as the example's
# step 9 in a `LambdaCallback(on_epoch_end=...)`, once per epoch with the momentum of its
# steps (Keras on JAX keeps the weights out of the Variables during an epoch: a batch
# callback cannot read them); the samples plotted by
# `LambdaCallback(on_epoch_end=model.plot_images)`. 256 generated 16x16 "flowers" (coloured
# discs on a soft background, flipped left-right) in place of Oxford Flowers 102 at 64x64 and
# tf.data; widths [16, 32] ([64, 128, 256, 512]), 1 residual block (2), 16 time steps
# with betas scaled to them (1000 of 1e-4 to 0.02), 2 epochs (1); the pretrained
# checkpoint (a download) left out.
import math

import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

batch_size = 32
num_epochs = 2  # Just for the sake of demonstration
total_timesteps = 16  # 1000 there
norm_groups = 8  # Number of groups used in GroupNormalization layer
learning_rate = 2e-3  # 2e-4 there
img_size = 16  # 64 there
img_channels = 3
clip_min = -1.0
clip_max = 1.0

first_conv_channels = 16  # 64 there
channel_multiplier = [1, 2]  # [1, 2, 4, 8] there
widths = [first_conv_channels * mult for mult in channel_multiplier]
has_attention = [False, True]
num_res_blocks = 1  # Number of residual blocks (2 there)

# In place of Oxford Flowers 102 (tfds): discs of a flower's colour on a soft background,
# scaled to [-1, 1] as resize_and_rescale does, then flipped left-right at random (augment).
rng = np.random.default_rng(0)
yy, xx = np.mgrid[0:img_size, 0:img_size]
images = []
for _ in range(256):
    cy, cx = rng.uniform(5, 11, 2)
    r = rng.uniform(3, 6)
    petal = rng.uniform(0.3, 1.0, 3)
    img = 0.3 * rng.uniform(0.2, 0.6, 3) * np.ones((img_size, img_size, 3))
    disc = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
    img[disc] = petal
    img[disc & ((yy - cy) ** 2 + (xx - cx) ** 2 < (r / 3) ** 2)] = [0.9, 0.8, 0.1]
    img = img * 2.0 - 1.0
    if rng.random() < 0.5:
        img = img[:, ::-1]
    images.append(np.clip(img, clip_min, clip_max))
train_images = np.stack(images).astype("float32")


class GaussianDiffusion:
    """Gaussian diffusion utility."""

    def __init__(self, beta_start=1e-4, beta_end=0.02, timesteps=1000, clip_min=-1.0,
                 clip_max=1.0):
        self.beta_start = beta_start
        self.beta_end = beta_end
        self.timesteps = timesteps
        self.clip_min = clip_min
        self.clip_max = clip_max

        # Define the linear variance schedule
        self.betas = betas = np.linspace(beta_start, beta_end, timesteps, dtype=np.float64)
        self.num_timesteps = int(timesteps)

        alphas = 1.0 - betas
        alphas_cumprod = np.cumprod(alphas, axis=0)
        alphas_cumprod_prev = np.append(1.0, alphas_cumprod[:-1])

        self.betas = ops.convert_to_tensor(betas, dtype="float32")
        self.alphas_cumprod = ops.convert_to_tensor(alphas_cumprod, dtype="float32")
        self.alphas_cumprod_prev = ops.convert_to_tensor(alphas_cumprod_prev, dtype="float32")

        # Calculations for diffusion q(x_t | x_{t-1}) and others
        self.sqrt_alphas_cumprod = ops.convert_to_tensor(np.sqrt(alphas_cumprod), "float32")
        self.sqrt_one_minus_alphas_cumprod = ops.convert_to_tensor(
            np.sqrt(1.0 - alphas_cumprod), "float32")
        self.log_one_minus_alphas_cumprod = ops.convert_to_tensor(
            np.log(1.0 - alphas_cumprod), "float32")
        self.sqrt_recip_alphas_cumprod = ops.convert_to_tensor(
            np.sqrt(1.0 / alphas_cumprod), "float32")
        self.sqrt_recipm1_alphas_cumprod = ops.convert_to_tensor(
            np.sqrt(1.0 / alphas_cumprod - 1), "float32")

        # Calculations for posterior q(x_{t-1} | x_t, x_0)
        posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
        self.posterior_variance = ops.convert_to_tensor(posterior_variance, "float32")
        # Log calculation clipped because the posterior variance is 0 at the beginning
        # of the diffusion chain
        self.posterior_log_variance_clipped = ops.convert_to_tensor(
            np.log(np.maximum(posterior_variance, 1e-20)), "float32")
        self.posterior_mean_coef1 = ops.convert_to_tensor(
            betas * np.sqrt(alphas_cumprod_prev) / (1.0 - alphas_cumprod), "float32")
        self.posterior_mean_coef2 = ops.convert_to_tensor(
            (1.0 - alphas_cumprod_prev) * np.sqrt(alphas) / (1.0 - alphas_cumprod), "float32")

    def _extract(self, a, t, x_shape):
        """Extract some coefficients at specified timesteps, then reshape to
        [batch_size, 1, 1, 1, 1, ...] for broadcasting purposes."""
        batch_size = x_shape[0]
        out = ops.take(a, t)
        return ops.reshape(out, [batch_size, 1, 1, 1])

    def q_mean_variance(self, x_start, t):
        x_start_shape = ops.shape(x_start)
        mean = self._extract(self.sqrt_alphas_cumprod, t, x_start_shape) * x_start
        variance = self._extract(1.0 - self.alphas_cumprod, t, x_start_shape)
        log_variance = self._extract(self.log_one_minus_alphas_cumprod, t, x_start_shape)
        return mean, variance, log_variance

    def q_sample(self, x_start, t, noise):
        """Diffuse the data."""
        x_start_shape = ops.shape(x_start)
        return (self._extract(self.sqrt_alphas_cumprod, t, x_start_shape) * x_start
                + self._extract(self.sqrt_one_minus_alphas_cumprod, t, x_start_shape) * noise)

    def predict_start_from_noise(self, x_t, t, noise):
        x_t_shape = ops.shape(x_t)
        return (self._extract(self.sqrt_recip_alphas_cumprod, t, x_t_shape) * x_t
                - self._extract(self.sqrt_recipm1_alphas_cumprod, t, x_t_shape) * noise)

    def q_posterior(self, x_start, x_t, t):
        """Compute the mean and variance of the diffusion posterior q(x_{t-1} | x_t, x_0)."""
        x_t_shape = ops.shape(x_t)
        posterior_mean = (self._extract(self.posterior_mean_coef1, t, x_t_shape) * x_start
                          + self._extract(self.posterior_mean_coef2, t, x_t_shape) * x_t)
        posterior_variance = self._extract(self.posterior_variance, t, x_t_shape)
        posterior_log_variance_clipped = self._extract(
            self.posterior_log_variance_clipped, t, x_t_shape)
        return posterior_mean, posterior_variance, posterior_log_variance_clipped

    def p_mean_variance(self, pred_noise, x, t, clip_denoised=True):
        x_recon = self.predict_start_from_noise(x, t=t, noise=pred_noise)
        if clip_denoised:
            x_recon = ops.clip(x_recon, self.clip_min, self.clip_max)
        model_mean, posterior_variance, posterior_log_variance = self.q_posterior(
            x_start=x_recon, x_t=x, t=t)
        return model_mean, posterior_variance, posterior_log_variance

    def p_sample(self, pred_noise, x, t, clip_denoised=True, seed=None):
        """Sample from the diffusion model."""
        model_mean, _, model_log_variance = self.p_mean_variance(
            pred_noise, x=x, t=t, clip_denoised=clip_denoised)
        noise = keras.random.normal(shape=x.shape, dtype=x.dtype, seed=seed)
        # No noise when t == 0
        nonzero_mask = ops.reshape(1 - ops.cast(ops.equal(t, 0), "float32"),
                                   [ops.shape(x)[0], 1, 1, 1])
        return model_mean + nonzero_mask * ops.exp(0.5 * model_log_variance) * noise


# Kernel initializer to use
def kernel_init(scale):
    scale = max(scale, 1e-10)
    return keras.initializers.VarianceScaling(scale, mode="fan_avg", distribution="uniform")


class AttentionBlock(layers.Layer):
    """Applies self-attention."""

    def __init__(self, units, groups=8, **kwargs):
        self.units = units
        self.groups = groups
        super().__init__(**kwargs)

        self.norm = layers.GroupNormalization(groups=groups)
        self.query = layers.Dense(units, kernel_initializer=kernel_init(1.0))
        self.key = layers.Dense(units, kernel_initializer=kernel_init(1.0))
        self.value = layers.Dense(units, kernel_initializer=kernel_init(1.0))
        self.proj = layers.Dense(units, kernel_initializer=kernel_init(0.0))

    def call(self, inputs):
        batch_size = ops.shape(inputs)[0]
        height = ops.shape(inputs)[1]
        width = ops.shape(inputs)[2]
        scale = ops.cast(self.units, "float32") ** (-0.5)

        inputs = self.norm(inputs)
        q = self.query(inputs)
        k = self.key(inputs)
        v = self.value(inputs)

        attn_score = ops.einsum("bhwc, bHWc->bhwHW", q, k) * scale
        attn_score = ops.reshape(attn_score, [batch_size, height, width, height * width])

        attn_score = ops.softmax(attn_score, -1)
        attn_score = ops.reshape(attn_score, [batch_size, height, width, height, width])

        proj = ops.einsum("bhwHW,bHWc->bhwc", attn_score, v)
        proj = self.proj(proj)
        return inputs + proj


class TimeEmbedding(layers.Layer):
    def __init__(self, dim, **kwargs):
        super().__init__(**kwargs)
        self.dim = dim
        self.half_dim = dim // 2
        self.emb = math.log(10000) / (self.half_dim - 1)
        self.emb = ops.exp(ops.arange(self.half_dim, dtype="float32") * -self.emb)

    def call(self, inputs):
        inputs = ops.cast(inputs, dtype="float32")
        emb = inputs[:, None] * self.emb[None, :]
        emb = ops.concatenate([ops.sin(emb), ops.cos(emb)], axis=-1)
        return emb


def ResidualBlock(width, groups=8, activation_fn=keras.activations.swish):
    def apply(inputs):
        x, t = inputs
        input_width = x.shape[3]

        if input_width == width:
            residual = x
        else:
            residual = layers.Conv2D(width, kernel_size=1, kernel_initializer=kernel_init(1.0))(x)

        temb = activation_fn(t)
        temb = layers.Dense(width, kernel_initializer=kernel_init(1.0))(temb)[:, None, None, :]

        x = layers.GroupNormalization(groups=groups)(x)
        x = activation_fn(x)
        x = layers.Conv2D(width, kernel_size=3, padding="same",
                          kernel_initializer=kernel_init(1.0))(x)

        x = layers.Add()([x, temb])
        x = layers.GroupNormalization(groups=groups)(x)
        x = activation_fn(x)

        x = layers.Conv2D(width, kernel_size=3, padding="same",
                          kernel_initializer=kernel_init(0.0))(x)
        x = layers.Add()([x, residual])
        return x

    return apply


def DownSample(width):
    def apply(x):
        x = layers.Conv2D(width, kernel_size=3, strides=2, padding="same",
                          kernel_initializer=kernel_init(1.0))(x)
        return x

    return apply


def UpSample(width, interpolation="nearest"):
    def apply(x):
        x = layers.UpSampling2D(size=2, interpolation=interpolation)(x)
        x = layers.Conv2D(width, kernel_size=3, padding="same",
                          kernel_initializer=kernel_init(1.0))(x)
        return x

    return apply


def TimeMLP(units, activation_fn=keras.activations.swish):
    def apply(inputs):
        temb = layers.Dense(units, activation=activation_fn,
                            kernel_initializer=kernel_init(1.0))(inputs)
        temb = layers.Dense(units, kernel_initializer=kernel_init(1.0))(temb)
        return temb

    return apply


def build_model(img_size, img_channels, widths, has_attention, num_res_blocks=2, norm_groups=8,
                interpolation="nearest", activation_fn=keras.activations.swish):
    image_input = layers.Input(shape=(img_size, img_size, img_channels), name="image_input")
    time_input = keras.Input(shape=(), dtype="int64", name="time_input")

    x = layers.Conv2D(first_conv_channels, kernel_size=(3, 3), padding="same",
                      kernel_initializer=kernel_init(1.0))(image_input)

    temb = TimeEmbedding(dim=first_conv_channels * 4)(time_input)
    temb = TimeMLP(units=first_conv_channels * 4, activation_fn=activation_fn)(temb)

    skips = [x]

    # DownBlock
    for i in range(len(widths)):
        for _ in range(num_res_blocks):
            x = ResidualBlock(widths[i], groups=norm_groups, activation_fn=activation_fn)(
                [x, temb])
            if has_attention[i]:
                x = AttentionBlock(widths[i], groups=norm_groups)(x)
            skips.append(x)

        if widths[i] != widths[-1]:
            x = DownSample(widths[i])(x)
            skips.append(x)

    # MiddleBlock
    x = ResidualBlock(widths[-1], groups=norm_groups, activation_fn=activation_fn)([x, temb])
    x = AttentionBlock(widths[-1], groups=norm_groups)(x)
    x = ResidualBlock(widths[-1], groups=norm_groups, activation_fn=activation_fn)([x, temb])

    # UpBlock
    for i in reversed(range(len(widths))):
        for _ in range(num_res_blocks + 1):
            x = layers.Concatenate(axis=-1)([x, skips.pop()])
            x = ResidualBlock(widths[i], groups=norm_groups, activation_fn=activation_fn)(
                [x, temb])
            if has_attention[i]:
                x = AttentionBlock(widths[i], groups=norm_groups)(x)

        if i != 0:
            x = UpSample(widths[i], interpolation=interpolation)(x)

    # End block
    x = layers.GroupNormalization(groups=norm_groups)(x)
    x = activation_fn(x)
    x = layers.Conv2D(3, (3, 3), padding="same", kernel_initializer=kernel_init(0.0))(x)
    return keras.Model([image_input, time_input], x, name="unet")


class DiffusionModel(keras.Model):
    def __init__(self, network, ema_network, timesteps, gdf_util, ema=0.999):
        super().__init__()
        self.network = network
        self.ema_network = ema_network
        self.timesteps = timesteps
        self.gdf_util = gdf_util
        self.ema = ema
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, images, training=False):
        # 1. Get the batch size
        batch_size = ops.shape(images)[0]
        # 2. Sample timesteps uniformly
        t = keras.random.randint(minval=0, maxval=self.timesteps, shape=(batch_size,),
                                 dtype="int32", seed=self.seed_generator)
        # 3. Sample random noise to be added to the images in the batch
        noise = keras.random.normal(shape=ops.shape(images), dtype=images.dtype,
                                    seed=self.seed_generator)
        # 4. Diffuse the images with noise
        images_t = self.gdf_util.q_sample(images, t, noise)
        # 5. Pass the diffused images and time steps to the network
        pred_noise = self.network([images_t, t], training=training)
        return noise, pred_noise

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        # 6. Calculate the loss
        noise, pred_noise = y_pred
        return self.loss(noise, pred_noise)

    def update_ema(self, epoch=None, logs=None):
        # 9. Updates the weight values for the network with EMA weights (an epoch's steps
        # at once)
        ema = self.ema ** steps_per_epoch
        for weight, ema_weight in zip(self.network.weights, self.ema_network.weights):
            ema_weight.assign(ema * ema_weight + (1 - ema) * weight)

    def generate_images(self, num_images=16):
        # 1. Randomly sample noise (starting point for reverse process)
        samples = keras.random.normal(shape=(num_images, img_size, img_size, img_channels),
                                      dtype="float32", seed=self.seed_generator)
        # 2. Sample from the model iteratively
        for t in reversed(range(0, self.timesteps)):
            tt = ops.cast(ops.full(num_images, t), dtype="int64")
            pred_noise = self.ema_network.predict([samples, tt], verbose=0,
                                                  batch_size=num_images)
            samples = self.gdf_util.p_sample(pred_noise, samples, tt, clip_denoised=True,
                                             seed=self.seed_generator)
        # 3. Return generated samples
        return samples

    def plot_images(self, epoch=None, logs=None, num_rows=2, num_cols=8, figsize=(12, 5)):
        """Utility to plot images using the diffusion model during training."""
        generated_samples = self.generate_images(num_images=num_rows * num_cols)
        generated_samples = ops.convert_to_numpy(
            ops.clip(generated_samples * 127.5 + 127.5, 0.0, 255.0)).astype(np.uint8)

        _, ax = plt.subplots(num_rows, num_cols, figsize=figsize)
        for i, image in enumerate(generated_samples):
            if num_rows == 1:
                ax[i].imshow(image)
                ax[i].axis("off")
            else:
                ax[i // num_cols, i % num_cols].imshow(image)
                ax[i // num_cols, i % num_cols].axis("off")

        plt.tight_layout()
        plt.savefig(f"generated_{epoch}.png")
        plt.close()
        return generated_samples


# Build the unet model
network = build_model(img_size=img_size, img_channels=img_channels, widths=widths,
                      has_attention=has_attention, num_res_blocks=num_res_blocks,
                      norm_groups=norm_groups, activation_fn=keras.activations.swish)
ema_network = build_model(img_size=img_size, img_channels=img_channels, widths=widths,
                          has_attention=has_attention, num_res_blocks=num_res_blocks,
                          norm_groups=norm_groups, activation_fn=keras.activations.swish)
ema_network.set_weights(network.get_weights())  # Initially the weights are the same

# Get an instance of the Gaussian Diffusion utilities (betas scaled to 16 steps)
gdf_util = GaussianDiffusion(beta_start=5e-3, beta_end=0.7, timesteps=total_timesteps)

# Get the model
model = DiffusionModel(network=network, ema_network=ema_network, gdf_util=gdf_util,
                       timesteps=total_timesteps)

# Compile the model
model.compile(loss=keras.losses.MeanSquaredError(),
              optimizer=keras.optimizers.Adam(learning_rate=learning_rate))

# Train the model
steps_per_epoch = math.ceil(len(train_images) / batch_size)
history = model.fit(
    train_images,
    epochs=num_epochs,
    batch_size=batch_size,
    callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=model.update_ema),
               keras.callbacks.LambdaCallback(on_epoch_end=model.plot_images)],
)

# Generate and plot some samples
samples = model.plot_images(num_rows=4, num_cols=8)
assert samples.shape == (32, img_size, img_size, img_channels)
# the EMA network moved from the initial weights toward the trained ones
moved = [np.abs(e - w).max() for e, w in zip(ema_network.get_weights(), network.get_weights())]
assert max(moved) > 0
print("loss per epoch:", history.history["loss"])
