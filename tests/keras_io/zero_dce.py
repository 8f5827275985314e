# Modeled on keras-io examples/vision/zero_dce.py (Zero-Reference Deep Curve Estimation: the
# DCE-Net, a functional model of 7 Conv2D with Concatenate skips on `Input([None, None, 3])`,
# 8 light-enhancement curves applied by slicing its 24 maps, four non-reference losses:
# colour constancy, exposure through an AveragePooling2D made inside the loss function,
# illumination smoothness from the shape's sizes, and spatial consistency as `ops.conv` with
# constant 3x3 kernels in a plain Python class; a `ZeroDCE` model that holds the DCE-Net,
# overrides `compile(learning_rate)` to make its own optimizer and loss object, and
# `save_weights`/`load_weights` to the inner model); written for tessera. Keras 3 form: the
# example's `train_step`/`test_step` (tf.GradientTape, a dict of the four losses as the logs)
# become a `compute_loss` override returning their total (a backend-agnostic step has no
# tape), `ops` for tf's math and `keras.ops.conv` for `tf.nn.conv2d`. In place of the LoL
# download and its tf.data pipeline: 64 + 16 generated dark 32x32 images (smooth colour
# fields at a tenth to a third of full brightness) in batches of 8, 512x512 there; 3 epochs
# (100); the enhanced images compared with PIL's autocontrast and saved.
import os

import matplotlib.pyplot as plt
import numpy as np
from PIL import Image, ImageOps

import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops

IMAGE_SIZE = 32
BATCH_SIZE = 8
MAX_TRAIN_IMAGES = 64

rng = np.random.default_rng(0)


def low_light_images(n):
    """Smooth colour fields, dark: each channel a sum of two low-frequency waves."""
    yy, xx = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE] / IMAGE_SIZE
    images = np.empty((n, IMAGE_SIZE, IMAGE_SIZE, 3), "float32")
    for i in range(n):
        level = rng.uniform(0.1, 0.33)
        for c in range(3):
            fx, fy, phase = rng.uniform(0.5, 2.0), rng.uniform(0.5, 2.0), rng.uniform(0, 6.28)
            wave = 0.5 + 0.25 * np.sin(6.28 * fx * xx + phase) + 0.25 * np.cos(6.28 * fy * yy)
            images[i, :, :, c] = level * wave * rng.uniform(0.7, 1.0)
    return images


all_images = low_light_images(MAX_TRAIN_IMAGES + 16)
train_images = all_images[:MAX_TRAIN_IMAGES]
val_images = all_images[MAX_TRAIN_IMAGES:]
print("Train images:", train_images.shape)
print("Validation images:", val_images.shape)


def build_dce_net():
    input_img = keras.Input(shape=[None, None, 3])
    conv1 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(
        input_img)
    conv2 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(conv1)
    conv3 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(conv2)
    conv4 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(conv3)
    int_con1 = layers.Concatenate(axis=-1)([conv4, conv3])
    conv5 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(
        int_con1)
    int_con2 = layers.Concatenate(axis=-1)([conv5, conv2])
    conv6 = layers.Conv2D(32, (3, 3), strides=(1, 1), activation="relu", padding="same")(
        int_con2)
    int_con3 = layers.Concatenate(axis=-1)([conv6, conv1])
    x_r = layers.Conv2D(24, (3, 3), strides=(1, 1), activation="tanh", padding="same")(int_con3)
    return keras.Model(inputs=input_img, outputs=x_r)


def color_constancy_loss(x):
    mean_rgb = ops.mean(x, axis=(1, 2), keepdims=True)
    mr, mg, mb = mean_rgb[:, :, :, 0], mean_rgb[:, :, :, 1], mean_rgb[:, :, :, 2]
    d_rg = ops.power(mr - mg, 2)
    d_rb = ops.power(mr - mb, 2)
    d_gb = ops.power(mb - mg, 2)
    return ops.power(ops.power(d_rg, 2) + ops.power(d_rb, 2) + ops.power(d_gb, 2), 0.5)


def exposure_loss(x, mean_val=0.6):
    x = ops.mean(x, axis=3, keepdims=True)
    mean = layers.AveragePooling2D(pool_size=16, strides=16)(x)
    return ops.mean(ops.power(mean - mean_val, 2))


def illumination_smoothness_loss(x):
    batch_size = ops.shape(x)[0]
    h_x = ops.shape(x)[1]
    w_x = ops.shape(x)[2]
    count_h = (ops.shape(x)[2] - 1) * ops.shape(x)[3]
    count_w = ops.shape(x)[2] * (ops.shape(x)[3] - 1)
    h_tv = ops.sum(ops.power((x[:, 1:, :, :] - x[:, : h_x - 1, :, :]), 2))
    w_tv = ops.sum(ops.power((x[:, :, 1:, :] - x[:, :, : w_x - 1, :]), 2))
    batch_size = ops.cast(batch_size, dtype="float32")
    count_h = ops.cast(count_h, dtype="float32")
    count_w = ops.cast(count_w, dtype="float32")
    return 2 * (h_tv / count_h + w_tv / count_w) / batch_size


class SpatialConsistancyLoss:
    def __init__(self):
        self.left_kernel = ops.convert_to_tensor(
            [[[[0, 0, 0]], [[-1, 1, 0]], [[0, 0, 0]]]], dtype="float32")
        self.right_kernel = ops.convert_to_tensor(
            [[[[0, 0, 0]], [[0, 1, -1]], [[0, 0, 0]]]], dtype="float32")
        self.up_kernel = ops.convert_to_tensor(
            [[[[0, -1, 0]], [[0, 1, 0]], [[0, 0, 0]]]], dtype="float32")
        self.down_kernel = ops.convert_to_tensor(
            [[[[0, 0, 0]], [[0, 1, 0]], [[0, -1, 0]]]], dtype="float32")
        # (the example's kernels are (1, 3, 1, 3): tf.nn.conv2d reads them as one row of
        # 3 taps from 1 channel to 3; as 3x3 single-channel kernels they are these)
        self.left_kernel = ops.reshape(ops.transpose(self.left_kernel, (1, 3, 0, 2)), (3, 3, 1, 1))
        self.right_kernel = ops.reshape(ops.transpose(self.right_kernel, (1, 3, 0, 2)),
                                        (3, 3, 1, 1))
        self.up_kernel = ops.reshape(ops.transpose(self.up_kernel, (1, 3, 0, 2)), (3, 3, 1, 1))
        self.down_kernel = ops.reshape(ops.transpose(self.down_kernel, (1, 3, 0, 2)),
                                       (3, 3, 1, 1))

        self.pool = layers.AveragePooling2D(pool_size=4)

    def __call__(self, original, enhanced):
        original_mean = ops.mean(original, 3, keepdims=True)
        enhanced_mean = ops.mean(enhanced, 3, keepdims=True)
        original_pool = self.pool(original_mean)
        enhanced_pool = self.pool(enhanced_mean)

        d_original_left = ops.conv(original_pool, self.left_kernel, strides=1, padding="same")
        d_original_right = ops.conv(original_pool, self.right_kernel, strides=1, padding="same")
        d_original_up = ops.conv(original_pool, self.up_kernel, strides=1, padding="same")
        d_original_down = ops.conv(original_pool, self.down_kernel, strides=1, padding="same")

        d_enhanced_left = ops.conv(enhanced_pool, self.left_kernel, strides=1, padding="same")
        d_enhanced_right = ops.conv(enhanced_pool, self.right_kernel, strides=1, padding="same")
        d_enhanced_up = ops.conv(enhanced_pool, self.up_kernel, strides=1, padding="same")
        d_enhanced_down = ops.conv(enhanced_pool, self.down_kernel, strides=1, padding="same")

        d_left = ops.power(d_original_left - d_enhanced_left, 2)
        d_right = ops.power(d_original_right - d_enhanced_right, 2)
        d_up = ops.power(d_original_up - d_enhanced_up, 2)
        d_down = ops.power(d_original_down - d_enhanced_down, 2)
        return d_left + d_right + d_up + d_down


class ZeroDCE(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dce_model = build_dce_net()

    def compile(self, learning_rate, **kwargs):
        super().compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate), **kwargs)
        self.spatial_constancy_loss = SpatialConsistancyLoss()

    def get_enhanced_image(self, data, output):
        r1 = output[:, :, :, :3]
        r2 = output[:, :, :, 3:6]
        r3 = output[:, :, :, 6:9]
        r4 = output[:, :, :, 9:12]
        r5 = output[:, :, :, 12:15]
        r6 = output[:, :, :, 15:18]
        r7 = output[:, :, :, 18:21]
        r8 = output[:, :, :, 21:24]
        x = data + r1 * (ops.power(data, 2) - data)
        x = x + r2 * (ops.power(x, 2) - x)
        x = x + r3 * (ops.power(x, 2) - x)
        enhanced_image = x + r4 * (ops.power(x, 2) - x)
        x = enhanced_image + r5 * (ops.power(enhanced_image, 2) - enhanced_image)
        x = x + r6 * (ops.power(x, 2) - x)
        x = x + r7 * (ops.power(x, 2) - x)
        enhanced_image = x + r8 * (ops.power(x, 2) - x)
        return enhanced_image

    def call(self, data):
        dce_net_output = self.dce_model(data)
        return self.get_enhanced_image(data, dce_net_output)

    def _calculate_losses(self, data, output):
        enhanced_image = self.get_enhanced_image(data, output)
        loss_illumination = 200 * illumination_smoothness_loss(output)
        loss_spatial_constancy = ops.mean(self.spatial_constancy_loss(enhanced_image, data))
        loss_color_constancy = 5 * ops.mean(color_constancy_loss(enhanced_image))
        loss_exposure = 10 * ops.mean(exposure_loss(enhanced_image))
        total_loss = (loss_illumination + loss_spatial_constancy + loss_color_constancy
                      + loss_exposure)
        return {
            "total_loss": total_loss,
            "illumination_smoothness_loss": loss_illumination,
            "spatial_constancy_loss": loss_spatial_constancy,
            "color_constancy_loss": loss_color_constancy,
            "exposure_loss": loss_exposure,
        }

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        output = self.dce_model(x)
        return self._calculate_losses(x, output)["total_loss"]

    def save_weights(self, filepath, overwrite=True):
        self.dce_model.save_weights(filepath, overwrite=overwrite)

    def load_weights(self, filepath, skip_mismatch=False):
        self.dce_model.load_weights(filepath=filepath, skip_mismatch=skip_mismatch)


zero_dce_model = ZeroDCE()
zero_dce_model.compile(learning_rate=1e-3)
history = zero_dce_model.fit(train_images, batch_size=BATCH_SIZE,
                             validation_data=(val_images,), epochs=3)

for item in ("loss",):
    plt.plot(history.history[item], label=item)
    plt.plot(history.history["val_" + item], label="val_" + item)
    plt.xlabel("Epochs")
    plt.ylabel(item)
    plt.title(f"Train and Validation {item} Over Epochs", fontsize=14)
    plt.legend()
    plt.grid()
    plt.savefig(f"zero_dce_{item}.png")
    plt.close()

# The weights go through the DCE-Net's own file, and come back.
zero_dce_model.save_weights("dce.weights.h5")
restored = ZeroDCE()
restored.dce_model.load_weights("dce.weights.h5")
probe = val_images[:2]
assert np.allclose(np.asarray(restored(probe)), np.asarray(zero_dce_model(probe)), atol=1e-5)


def infer(original_image):
    image = keras.utils.img_to_array(original_image)
    image = image.astype("float32") / 255.0
    image = np.expand_dims(image, axis=0)
    output_image = zero_dce_model(image)
    output_image = ops.cast((output_image[0, :, :, :] * 255), dtype=np.uint8)
    return Image.fromarray(np.asarray(output_image))


def plot_results(images, titles, path, figure_size=(12, 12)):
    fig = plt.figure(figsize=figure_size)
    for i in range(len(images)):
        fig.add_subplot(1, len(images), i + 1).set_title(titles[i])
        _ = plt.imshow(images[i])
        plt.axis("off")
    fig.savefig(path)
    plt.close(fig)


# Inference on an image of another size than the training crops (the DCE-Net is fully
# convolutional): brighter than its input.
for k, array in enumerate(low_light_images(2)):
    original_image = Image.fromarray((array * 255).astype("uint8"))
    enhanced_image = infer(original_image)
    print(f"image {k}: mean brightness {np.asarray(original_image).mean():.1f} -> "
          f"{np.asarray(enhanced_image).mean():.1f}")
    plot_results([original_image, ImageOps.autocontrast(original_image), enhanced_image],
                 ["Original", "PIL Autocontrast", "Enhanced"], f"zero_dce_{k}.png",
                 (20, 12))
