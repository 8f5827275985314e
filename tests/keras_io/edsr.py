# Modeled on keras-io examples/vision/edsr.py (Enhanced Deep Residual Networks for
# super-resolution: a functional `EDSRModel(input_layer, output_layer)` subclass on
# `Input(shape=(None, None, 3))`, Rescaling in and out, residual blocks with `layers.Add`,
# two x2 upsamplings by depth-to-space, an L1 loss, a PSNR metric function,
# `PiecewiseConstantDecay`, fit with `steps_per_epoch` on a repeating training set and
# validation data, and a `predict_step` override called directly on one image); written for
# tessera. Keras 3 form: the example's `train_step` (tf.GradientTape and Keras 2's
# `compiled_loss`/`compiled_metrics`: the default step) is left to Keras's own,
# `ops.depth_to_space` for `tf.nn.depth_to_space`, `ops.psnr` (the batch's) for
# `tf.image.psnr(...)[0]` (the first image's), `ops` in `predict_step`. In place of DIV2K and
# tfds: 64 + 16 generated smooth 96x96 colour images, their 4x box-averaged 24x24 versions
# as the bicubic low-resolution ones, and a `keras.utils.PyDataset` of random 12x12 / 48x48
# crops, quarter turns and flips (96 / 24 there) in batches of 16 in place of tf.data;
# filters 16 (64), 2 residual blocks (16), the schedule's boundary at 12 steps (5000),
# 3 epochs of 8 steps (100 of 200).
import math

import matplotlib.pyplot as plt
import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

rng = np.random.default_rng(0)


def smooth_images(n, size=96):
    yy, xx = np.mgrid[0:size, 0:size] / size
    images = np.empty((n, size, size, 3), "float32")
    for i in range(n):
        for c in range(3):
            fx, fy = rng.uniform(1, 4, 2)
            px, py = rng.uniform(0, 6.28, 2)
            images[i, :, :, c] = 128 + 60 * np.sin(6.28 * fx * xx + px) * np.cos(
                6.28 * fy * yy + py) + 40 * np.sin(6.28 * (fx + fy) * (xx + yy))
    return images.clip(0, 255)


def downsample(images, scale=4):
    n, h, w, c = images.shape
    return images.reshape(n, h // scale, scale, w // scale, scale, c).mean(axis=(2, 4))


highres_train, highres_val = smooth_images(64), smooth_images(16)
lowres_train, lowres_val = downsample(highres_train), downsample(highres_val)


def random_crop(lowres_img, highres_img, hr_crop_size=48, scale=4):
    lowres_crop_size = hr_crop_size // scale
    lowres_width = rng.integers(0, lowres_img.shape[1] - lowres_crop_size + 1)
    lowres_height = rng.integers(0, lowres_img.shape[0] - lowres_crop_size + 1)
    highres_width = lowres_width * scale
    highres_height = lowres_height * scale
    lowres_img_cropped = lowres_img[lowres_height:lowres_height + lowres_crop_size,
                                    lowres_width:lowres_width + lowres_crop_size]
    highres_img_cropped = highres_img[highres_height:highres_height + hr_crop_size,
                                      highres_width:highres_width + hr_crop_size]
    return lowres_img_cropped, highres_img_cropped


def random_rotate(lowres_img, highres_img):
    rn = rng.integers(0, 4)
    return np.rot90(lowres_img, rn), np.rot90(highres_img, rn)


def flip_left_right(lowres_img, highres_img):
    if rng.uniform() < 0.5:
        return lowres_img, highres_img
    return lowres_img[:, ::-1], highres_img[:, ::-1]


class CropBatches(keras.utils.PyDataset):
    """Batches of 16 random crops (turned and flipped when training) of the images."""

    def __init__(self, lowres, highres, training=True, batches=None, **kwargs):
        super().__init__(**kwargs)
        self.lowres, self.highres, self.training = lowres, highres, training
        self.batches = batches or math.ceil(len(lowres) / 16)

    def __len__(self):
        return self.batches

    def __getitem__(self, idx):
        pairs = []
        for k in range(16):
            i = (idx * 16 + k) % len(self.lowres)
            lr, hr = random_crop(self.lowres[i], self.highres[i], scale=4)
            if self.training:
                lr, hr = flip_left_right(*random_rotate(lr, hr))
            pairs.append((lr, hr))
        return (np.stack([p[0] for p in pairs]).astype("float32"),
                np.stack([p[1] for p in pairs]).astype("float32"))


train_ds = CropBatches(lowres_train, highres_train, training=True, batches=40)
val_ds = CropBatches(lowres_val, highres_val, training=False)

lowres, highres = train_ds[0]
plt.figure(figsize=(10, 10))
for i in range(9):
    ax = plt.subplot(3, 3, i + 1)
    plt.imshow(highres[i].astype("uint8"))
    plt.title(highres[i].shape)
    plt.axis("off")
plt.savefig("edsr_highres.png")
plt.close()


def PSNR(super_resolution, high_resolution):
    """Compute the peak signal-to-noise ratio, measures quality of image."""
    psnr_value = ops.psnr(high_resolution, super_resolution, max_val=255)
    return psnr_value


class EDSRModel(keras.Model):
    def predict_step(self, x):
        x = ops.cast(ops.expand_dims(x, axis=0), "float32")
        super_resolution_img = self(x, training=False)
        super_resolution_img = ops.clip(super_resolution_img, 0, 255)
        super_resolution_img = ops.round(super_resolution_img)
        super_resolution_img = ops.squeeze(ops.cast(super_resolution_img, "uint8"), axis=0)
        return super_resolution_img


def ResBlock(inputs):
    x = layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
    x = layers.Conv2D(16, 3, padding="same")(x)
    x = layers.Add()([inputs, x])
    return x


def Upsampling(inputs, factor=2, **kwargs):
    x = layers.Conv2D(16 * (factor**2), 3, padding="same", **kwargs)(inputs)
    x = ops.depth_to_space(x, block_size=factor)
    x = layers.Conv2D(16 * (factor**2), 3, padding="same", **kwargs)(x)
    x = ops.depth_to_space(x, block_size=factor)
    return x


def make_model(num_filters, num_of_residual_blocks):
    input_layer = layers.Input(shape=(None, None, 3))
    x = layers.Rescaling(scale=1.0 / 255)(input_layer)
    x = x_new = layers.Conv2D(num_filters, 3, padding="same")(x)

    for _ in range(num_of_residual_blocks):
        x_new = ResBlock(x_new)

    x_new = layers.Conv2D(num_filters, 3, padding="same")(x_new)
    x = layers.Add()([x, x_new])

    x = Upsampling(x)
    x = layers.Conv2D(3, 3, padding="same")(x)

    output_layer = layers.Rescaling(scale=255)(x)
    return EDSRModel(input_layer, output_layer)


model = make_model(num_filters=16, num_of_residual_blocks=2)

optim_edsr = keras.optimizers.Adam(
    learning_rate=keras.optimizers.schedules.PiecewiseConstantDecay(
        boundaries=[12], values=[1e-3, 5e-4]
    )
)
model.compile(optimizer=optim_edsr, loss="mae", metrics=[PSNR])
model.fit(train_ds, epochs=3, steps_per_epoch=8, validation_data=val_ds)


def plot_results(lowres, preds, path):
    plt.figure(figsize=(24, 14))
    plt.subplot(132), plt.imshow(lowres.astype("uint8")), plt.title("Low resolution")
    plt.subplot(133), plt.imshow(np.asarray(preds)), plt.title("Prediction")
    plt.savefig(path)
    plt.close()


for k in range(3):
    start = rng.integers(0, 24 - 15 + 1, 2)
    crop = lowres_val[k, start[0]:start[0] + 15, start[1]:start[1] + 15]
    preds = model.predict_step(crop)
    preds = np.asarray(preds)
    assert preds.shape == (60, 60, 3) and preds.dtype == np.uint8, (preds.shape, preds.dtype)
    plot_results(crop, preds, f"edsr_{k}.png")
