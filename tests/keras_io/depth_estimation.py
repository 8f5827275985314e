# Modeled on keras-io examples/vision/depth_estimation.py; written for tessera. Keras 3 form
# (the example is Keras 2): the U-Net of user layers (DownscaleBlock returning (x, p),
# UpscaleBlock called on (x, skip), BottleNeckBlock; Conv2D, BatchNormalization,
# `LeakyReLU(negative_slope=0.2)` for Keras 2's `alpha`, MaxPool2D, UpSampling2D,
# Concatenate) in a subclassed DepthEstimationModel; its loss (SSIM, L1 and edge-aware
# smoothness) with `tf.image.ssim` and `tf.image.image_gradients` written in `ops` (a 7-tap
# Gaussian window of sigma 1.5 by `ops.conv`, TensorFlow's formula; differences padded with
# zeros); the example's `train_step`/`test_step` (tf.GradientTape, a "loss" Mean tracker) as
# a `compute_loss` override returning `calculate_loss`, which Keras logs as "loss" itself.
# The DIODE download, pandas and cv2 are replaced by generated indoor scenes: a depth map of
# a back wall, a floor and a box, the image its shading with a texture; each depth map
# clipped, logged and masked as the example's `load`, in a `keras.utils.PyDataset` for the
# `tf.keras.utils.Sequence`. 32x32 (256x256), filters [4, 8, 16, 32, 64] ([16, ..., 256]),
# 64 + 16 scenes, batches of 8 (32), learning rate 2e-3 (2e-4), 2 epochs (30).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

keras.utils.set_random_seed(123)

HEIGHT = 32
WIDTH = 32
LR = 0.002
EPOCHS = 2
BATCH_SIZE = 8


def make_scene(rng):
    """(image, depth in metres, validity mask) of a generated room."""
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH] / HEIGHT
    wall = rng.uniform(4, 8)
    horizon = rng.uniform(0.3, 0.6)
    floor = np.where(yy > horizon, 1.5 / np.maximum(yy - horizon, 0.05), wall)
    depth = np.minimum(wall, floor)
    x0, y0 = rng.uniform(0.1, 0.6, 2)
    box = (xx > x0) & (xx < x0 + 0.3) & (yy > y0) & (yy < y0 + 0.3)
    depth = np.where(box, rng.uniform(1, 3), depth)
    shade = 1.0 / (1.0 + 0.3 * depth)
    tint = rng.uniform(0.5, 1.0, 3)
    image = shade[..., None] * tint + 0.05 * rng.random((HEIGHT, WIDTH, 3))
    mask = rng.random((HEIGHT, WIDTH)) > 0.02
    return np.clip(image, 0, 1), depth, mask


class DataGenerator(keras.utils.PyDataset):
    def __init__(self, data, batch_size=6, dim=(768, 1024), n_channels=3, shuffle=True,
                 **kwargs):
        super().__init__(**kwargs)
        self.data = data
        self.indices = list(range(len(data)))
        self.dim = dim
        self.n_channels = n_channels
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.min_depth = 0.1
        self.on_epoch_end()

    def __len__(self):
        return int(np.ceil(len(self.data) / self.batch_size))

    def __getitem__(self, index):
        batch = self.indices[index * self.batch_size:(index + 1) * self.batch_size]
        x, y = self.data_generation(batch)
        return x, y

    def on_epoch_end(self):
        self.index = np.arange(len(self.indices))
        if self.shuffle:
            np.random.shuffle(self.index)

    def load(self, scene):
        image_, depth_map, mask = scene
        image_ = image_.astype("float32")
        max_depth = min(300, np.percentile(depth_map, 99))
        depth_map = np.clip(depth_map, self.min_depth, max_depth)
        depth_map = np.log(depth_map, where=mask, out=np.zeros_like(depth_map))
        depth_map = np.ma.masked_where(~mask, depth_map)
        depth_map = np.clip(depth_map, 0.1, np.log(max_depth)).filled(0.1)
        depth_map = np.expand_dims(depth_map, axis=2).astype("float32")
        return image_, depth_map

    def data_generation(self, batch):
        x = np.empty((len(batch), *self.dim, self.n_channels), "float32")
        y = np.empty((len(batch), *self.dim, 1), "float32")
        for i, batch_id in enumerate(batch):
            x[i], y[i] = self.load(self.data[batch_id])
        return x, y


rng = np.random.default_rng(42)
scenes = [make_scene(rng) for _ in range(80)]


def visualize_depth_map(samples, name, test=False, model=None):
    input, target = samples
    cmap = plt.cm.jet
    cmap.set_bad(color="black")
    cols = 3 if test else 2
    fig, ax = plt.subplots(6, cols, figsize=(6, 12))
    pred = model.predict(input, verbose=0) if test else None
    for i in range(6):
        ax[i, 0].imshow(input[i].squeeze())
        ax[i, 1].imshow(target[i].squeeze(), cmap=cmap)
        if test:
            ax[i, 2].imshow(pred[i].squeeze(), cmap=cmap)
    plt.savefig(name)
    plt.close(fig)


visualize_samples = DataGenerator(data=scenes, batch_size=6, dim=(HEIGHT, WIDTH))[0]
visualize_depth_map(visualize_samples, "samples.png")


class DownscaleBlock(layers.Layer):
    def __init__(self, filters, kernel_size=(3, 3), padding="same", strides=1, **kwargs):
        super().__init__(**kwargs)
        self.convA = layers.Conv2D(filters, kernel_size, strides, padding)
        self.convB = layers.Conv2D(filters, kernel_size, strides, padding)
        self.reluA = layers.LeakyReLU(negative_slope=0.2)
        self.reluB = layers.LeakyReLU(negative_slope=0.2)
        self.bn2a = layers.BatchNormalization()
        self.bn2b = layers.BatchNormalization()

        self.pool = layers.MaxPool2D((2, 2), (2, 2))

    def call(self, input_tensor):
        d = self.convA(input_tensor)
        x = self.bn2a(d)
        x = self.reluA(x)

        x = self.convB(x)
        x = self.bn2b(x)
        x = self.reluB(x)

        x += d
        p = self.pool(x)
        return x, p


class UpscaleBlock(layers.Layer):
    def __init__(self, filters, kernel_size=(3, 3), padding="same", strides=1, **kwargs):
        super().__init__(**kwargs)
        self.us = layers.UpSampling2D((2, 2))
        self.convA = layers.Conv2D(filters, kernel_size, strides, padding)
        self.convB = layers.Conv2D(filters, kernel_size, strides, padding)
        self.reluA = layers.LeakyReLU(negative_slope=0.2)
        self.reluB = layers.LeakyReLU(negative_slope=0.2)
        self.bn2a = layers.BatchNormalization()
        self.bn2b = layers.BatchNormalization()
        self.conc = layers.Concatenate()

    def call(self, x, skip):
        x = self.us(x)
        concat = self.conc([x, skip])
        x = self.convA(concat)
        x = self.bn2a(x)
        x = self.reluA(x)

        x = self.convB(x)
        x = self.bn2b(x)
        x = self.reluB(x)

        return x


class BottleNeckBlock(layers.Layer):
    def __init__(self, filters, kernel_size=(3, 3), padding="same", strides=1, **kwargs):
        super().__init__(**kwargs)
        self.convA = layers.Conv2D(filters, kernel_size, strides, padding)
        self.convB = layers.Conv2D(filters, kernel_size, strides, padding)
        self.reluA = layers.LeakyReLU(negative_slope=0.2)
        self.reluB = layers.LeakyReLU(negative_slope=0.2)

    def call(self, x):
        x = self.convA(x)
        x = self.reluA(x)
        x = self.convB(x)
        x = self.reluB(x)
        return x


def image_gradients(image):
    """tf.image.image_gradients: (dy, dx), forward differences with a zero last row / column."""
    dy = image[:, 1:, :, :] - image[:, :-1, :, :]
    dx = image[:, :, 1:, :] - image[:, :, :-1, :]
    dy = ops.concatenate([dy, ops.zeros_like(image[:, :1, :, :])], axis=1)
    dx = ops.concatenate([dx, ops.zeros_like(image[:, :, :1, :])], axis=2)
    return dy, dx


def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03):
    """tf.image.ssim of one-channel images: a Gaussian window ('valid'), TensorFlow's
    luminance and contrast-structure terms, their product averaged per image."""
    g = np.exp(-0.5 * ((np.arange(filter_size) - (filter_size - 1) / 2) / filter_sigma) ** 2)
    g = np.outer(g, g) / np.outer(g, g).sum()
    kernel = ops.convert_to_tensor(g.reshape(filter_size, filter_size, 1, 1), "float32")

    def reducer(x):
        return ops.conv(x, kernel, padding="valid")

    c1 = (k1 * max_val) ** 2
    c2 = (k2 * max_val) ** 2
    mean0, mean1 = reducer(img1), reducer(img2)
    num0 = mean0 * mean1 * 2.0
    den0 = ops.square(mean0) + ops.square(mean1)
    luminance = (num0 + c1) / (den0 + c1)
    num1 = reducer(img1 * img2) * 2.0
    den1 = reducer(ops.square(img1) + ops.square(img2))
    cs = (num1 - num0 + c2) / (den1 - den0 + c2)
    return ops.mean(luminance * cs, axis=(1, 2, 3))


class DepthEstimationModel(keras.Model):
    def __init__(self):
        super().__init__()
        self.ssim_loss_weight = 0.85
        self.l1_loss_weight = 0.1
        self.edge_loss_weight = 0.9
        f = [4, 8, 16, 32, 64]  # [16, 32, 64, 128, 256] there
        self.downscale_blocks = [
            DownscaleBlock(f[0]),
            DownscaleBlock(f[1]),
            DownscaleBlock(f[2]),
            DownscaleBlock(f[3]),
        ]
        self.bottle_neck_block = BottleNeckBlock(f[4])
        self.upscale_blocks = [
            UpscaleBlock(f[3]),
            UpscaleBlock(f[2]),
            UpscaleBlock(f[1]),
            UpscaleBlock(f[0]),
        ]
        self.conv_layer = layers.Conv2D(1, (1, 1), padding="same", activation="tanh")

    def calculate_loss(self, target, pred):
        # Edges
        dy_true, dx_true = image_gradients(target)
        dy_pred, dx_pred = image_gradients(pred)
        weights_x = ops.exp(ops.mean(ops.abs(dx_true)))
        weights_y = ops.exp(ops.mean(ops.abs(dy_true)))

        # Depth smoothness
        smoothness_x = dx_pred * weights_x
        smoothness_y = dy_pred * weights_y

        depth_smoothness_loss = ops.mean(abs(smoothness_x)) + ops.mean(abs(smoothness_y))

        # Structural similarity (SSIM) index
        ssim_loss = ops.mean(
            1 - ssim(target, pred, max_val=WIDTH, filter_size=7, k1=0.01**2, k2=0.03**2))
        # Point-wise depth
        l1_loss = ops.mean(ops.abs(target - pred))

        loss = ((self.ssim_loss_weight * ssim_loss) + (self.l1_loss_weight * l1_loss)
                + (self.edge_loss_weight * depth_smoothness_loss))

        return loss

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return self.calculate_loss(y, y_pred)

    def call(self, x):
        c1, p1 = self.downscale_blocks[0](x)
        c2, p2 = self.downscale_blocks[1](p1)
        c3, p3 = self.downscale_blocks[2](p2)
        c4, p4 = self.downscale_blocks[3](p3)

        bn = self.bottle_neck_block(p4)

        u1 = self.upscale_blocks[0](bn, c4)
        u2 = self.upscale_blocks[1](u1, c3)
        u3 = self.upscale_blocks[2](u2, c2)
        u4 = self.upscale_blocks[3](u3, c1)

        return self.conv_layer(u4)


optimizer = keras.optimizers.Adam(learning_rate=LR, amsgrad=False)
model = DepthEstimationModel()
# Compile the model
model.compile(optimizer)

train_loader = DataGenerator(data=scenes[:64], batch_size=BATCH_SIZE, dim=(HEIGHT, WIDTH))
validation_loader = DataGenerator(data=scenes[64:], batch_size=BATCH_SIZE, dim=(HEIGHT, WIDTH))
history = model.fit(train_loader, epochs=EPOCHS, validation_data=validation_loader)

test_loader = DataGenerator(data=scenes[64:], batch_size=6, dim=(HEIGHT, WIDTH))[0]
visualize_depth_map(test_loader, "test_1.png", test=True, model=model)
print("loss:", history.history["loss"], "val_loss:", history.history["val_loss"])
assert sorted(history.history) == ["loss", "val_loss"]
