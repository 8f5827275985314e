# Modeled on keras-io examples/vision/super_resolution_sub_pixel.py (its Keras 3 form);
# written for tessera. BSDS500 (a download read with tf.data) replaced by generated smooth
# images (sums of random waves): 240 crops of 24x24 whose 8x8 bicubic reductions are the
# inputs (upscale factor 3), and a 48x36 test image written as a PNG and read back with
# keras.utils.load_img; filters divided by 4; 3 epochs.
import math
import os
import tempfile

import numpy as np
import PIL
import PIL.Image
import tessera.nn as keras
from tessera.nn import layers, ops
from tessera.nn.utils import array_to_img, img_to_array, load_img

crop_size = 24
upscale_factor = 3
input_size = crop_size // upscale_factor
batch_size = 8

rng = np.random.default_rng(0)


def smooth_images(n, height, width):
    """Images of sums of a few random waves, in [0, 255]."""
    yy, xx = np.mgrid[0:height, 0:width].astype("float32")
    out = np.zeros((n, height, width, 3), dtype="float32")
    for _ in range(4):
        fy, fx = rng.uniform(0.02, 0.25, size=(2, n, 1, 1, 1))
        phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1, 3))
        out += np.sin(fy * yy[None, :, :, None] + fx * xx[None, :, :, None] + phase)
    return ((out - out.min()) / (out.max() - out.min()) * 255).astype("uint8")


def process_input(images, input_size):
    """The example's process_input: the Y channel of YUV, resized down (bicubic)."""
    out = []
    for img in images:
        y = PIL.Image.fromarray(img).convert("YCbCr").split()[0]
        y = y.resize((input_size, input_size), PIL.Image.BICUBIC)
        out.append(img_to_array(y) / 255.0)
    return np.stack(out)


def process_target(images):
    return np.stack([img_to_array(PIL.Image.fromarray(img).convert("YCbCr").split()[0]) / 255.0
                     for img in images])


train_images = smooth_images(240, crop_size, crop_size)
valid_images = smooth_images(48, crop_size, crop_size)
x_train, y_train = process_input(train_images, input_size), process_target(train_images)
x_valid, y_valid = process_input(valid_images, input_size), process_target(valid_images)
print(x_train.shape, y_train.shape)

out_dir = tempfile.mkdtemp()
test_img_path = os.path.join(out_dir, "test.png")
PIL.Image.fromarray(smooth_images(1, 48, 36)[0]).save(test_img_path)
test_img_paths = [test_img_path]


class DepthToSpace(layers.Layer):
    def __init__(self, block_size):
        super().__init__()
        self.block_size = block_size

    def call(self, input):
        batch, height, width, depth = ops.shape(input)
        depth = depth // (self.block_size**2)
        x = ops.reshape(input, [batch, height, width, self.block_size, self.block_size, depth])
        x = ops.transpose(x, [0, 1, 3, 2, 4, 5])
        x = ops.reshape(x, [batch, height * self.block_size, width * self.block_size, depth])
        return x


def get_model(upscale_factor=3, channels=1):
    conv_args = {"activation": "relu", "kernel_initializer": "orthogonal", "padding": "same"}
    inputs = keras.Input(shape=(None, None, channels))
    x = layers.Conv2D(16, 5, **conv_args)(inputs)
    x = layers.Conv2D(16, 3, **conv_args)(x)
    x = layers.Conv2D(8, 3, **conv_args)(x)
    x = layers.Conv2D(channels * (upscale_factor**2), 3, **conv_args)(x)
    outputs = DepthToSpace(upscale_factor)(x)
    return keras.Model(inputs, outputs)


def plot_results(img, prefix, title):
    """The example plots with matplotlib; here the image is written to a file."""
    img.save(os.path.join(out_dir, f"{prefix}-{title}.png"))


def get_lowres_image(img, upscale_factor):
    """The image resized down by upscale_factor (bicubic)."""
    return img.resize((img.size[0] // upscale_factor, img.size[1] // upscale_factor),
                      PIL.Image.BICUBIC)


def upscale_image(model, img):
    """The image upscaled by the model (its Y channel; Cb and Cr bicubic)."""
    ycbcr = img.convert("YCbCr")
    y, cb, cr = ycbcr.split()
    y = img_to_array(y)
    y = y.astype("float32") / 255.0
    input = np.expand_dims(y, axis=0)
    out = model.predict(input, verbose=0)
    out_img_y = out[0]
    out_img_y *= 255.0
    out_img_y = out_img_y.clip(0, 255)
    out_img_y = out_img_y.reshape((np.shape(out_img_y)[0], np.shape(out_img_y)[1]))
    out_img_y = PIL.Image.fromarray(np.uint8(out_img_y), mode="L")
    out_img_cb = cb.resize(out_img_y.size, PIL.Image.BICUBIC)
    out_img_cr = cr.resize(out_img_y.size, PIL.Image.BICUBIC)
    out_img = PIL.Image.merge("YCbCr", (out_img_y, out_img_cb, out_img_cr)).convert("RGB")
    return out_img


class ESPCNCallback(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.test_img = get_lowres_image(load_img(test_img_paths[0]), upscale_factor)

    def on_epoch_begin(self, epoch, logs=None):
        self.psnr = []

    def on_epoch_end(self, epoch, logs=None):
        print("Mean PSNR for epoch: %.2f" % (np.mean(self.psnr)))
        if epoch % 2 == 0:
            prediction = upscale_image(self.model, self.test_img)
            plot_results(prediction, "epoch-" + str(epoch), "prediction")

    def on_test_batch_end(self, batch, logs=None):
        self.psnr.append(10 * math.log10(1 / logs["loss"]))


early_stopping_callback = keras.callbacks.EarlyStopping(monitor="loss", patience=10)
checkpoint_filepath = os.path.join(out_dir, "checkpoint.keras")
model_checkpoint_callback = keras.callbacks.ModelCheckpoint(
    filepath=checkpoint_filepath, save_weights_only=False, monitor="loss", mode="min",
    save_best_only=True)

model = get_model(upscale_factor=upscale_factor, channels=1)
model.summary()

callbacks = [ESPCNCallback(), early_stopping_callback, model_checkpoint_callback]
loss_fn = keras.losses.MeanSquaredError()
optimizer = keras.optimizers.Adam(learning_rate=0.003)

epochs = 3
model.compile(optimizer=optimizer, loss=loss_fn)
model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, callbacks=callbacks,
          validation_data=(x_valid, y_valid), verbose=2)

# The best model's weights back, and the test image: bicubic and the model compared.
model.load_weights(checkpoint_filepath)
total_bicubic_psnr = 0.0
total_test_psnr = 0.0
for index, test_img_path in enumerate(test_img_paths):
    img = load_img(test_img_path)
    lowres_input = get_lowres_image(img, upscale_factor)
    w = lowres_input.size[0] * upscale_factor
    h = lowres_input.size[1] * upscale_factor
    highres_img = img.resize((w, h))
    prediction = upscale_image(model, lowres_input)
    lowres_img = lowres_input.resize((w, h))
    lowres_img_arr = img_to_array(lowres_img)
    highres_img_arr = img_to_array(highres_img)
    predict_img_arr = img_to_array(prediction)
    assert predict_img_arr.shape == highres_img_arr.shape == (48, 36, 3)  # check
    bicubic_psnr = 10 * np.log10(255**2 / np.mean((lowres_img_arr - highres_img_arr) ** 2))
    test_psnr = 10 * np.log10(255**2 / np.mean((predict_img_arr - highres_img_arr) ** 2))
    total_bicubic_psnr += bicubic_psnr
    total_test_psnr += test_psnr
    print("PSNR of low resolution image and high resolution image is %.4f" % bicubic_psnr)
    print("PSNR of predict and high resolution is %.4f" % test_psnr)
    plot_results(lowres_img, index, "lowres")
    plot_results(array_to_img(highres_img_arr), index, "highres")
    plot_results(prediction, index, "prediction")

print("Avg. PSNR of lowres images is %.4f" % (total_bicubic_psnr / len(test_img_paths)))
print("Avg. PSNR of reconstructions is %.4f" % (total_test_psnr / len(test_img_paths)))
