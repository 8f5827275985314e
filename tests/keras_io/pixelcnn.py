# Modeled on keras-io examples/generative/pixelcnn.py; written for tessera. Keras 3 form:
# `self.conv.kernel.shape` for `get_shape()`, `keras.utils.save_img` for
# `keras.preprocessing.image.save_img`, NumPy's binomial draw for tfp's Bernoulli.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

num_classes = 10
input_shape = (28, 28, 1)
n_residual_blocks = 2  # the example: 5

# In place of keras.datasets.mnist.load_data(): uint8 images of the same shape, shrunk:
# dim noise with a bright bar 2 rows high at a height given by the digit, and a column.
rng = np.random.default_rng(0)
x = rng.integers(0, 100, (640, 28, 28)).astype(np.uint8)
digits = rng.integers(0, 10, 640)
x[np.arange(640)[:, None], 4 + 2 * digits[:, None] + np.arange(2)] = 255
x[np.arange(640)[:, None], :, 6 + 2 * digits[:, None]] = 255
data = x
# Every pixel below a third of the range is 0, the others 1.
data = np.where(data < (0.33 * 256), 0, 1)
data = data.astype(np.float32)


# A Conv2D whose kernel is masked so that a pixel sees only the pixels above it and to its
# left ("A": not itself; "B": itself too).
class PixelConvLayer(layers.Layer):
    def __init__(self, mask_type, **kwargs):
        super().__init__()
        self.mask_type = mask_type
        self.conv = layers.Conv2D(**kwargs)

    def build(self, input_shape):
        # Build the conv2d layer to initialize its kernel, then the mask of its shape.
        self.conv.build(input_shape)
        kernel_shape = self.conv.kernel.shape
        self.mask = np.zeros(shape=kernel_shape)
        self.mask[: kernel_shape[0] // 2, ...] = 1.0
        self.mask[kernel_shape[0] // 2, : kernel_shape[1] // 2, ...] = 1.0
        if self.mask_type == "B":
            self.mask[kernel_shape[0] // 2, kernel_shape[1] // 2, ...] = 1.0

    def call(self, inputs):
        self.conv.kernel.assign(self.conv.kernel * self.mask)
        return self.conv(inputs)


class ResidualBlock(keras.layers.Layer):
    def __init__(self, filters, **kwargs):
        super().__init__(**kwargs)
        self.a = keras.layers.ReLU()
        self.b = keras.layers.Conv2D(filters=filters, kernel_size=1, activation="relu")
        self.c = PixelConvLayer(
            mask_type="B",
            filters=filters // 2,
            kernel_size=3,
            activation="relu",
            padding="same",
        )
        self.d = keras.layers.Conv2D(filters=filters, kernel_size=1, activation="relu")

    def call(self, inputs):
        x = self.a(inputs)
        x = self.b(x)
        x = self.c(x)
        x = self.d(x)
        return keras.layers.add([inputs, x])


filters = 32  # the example: 128
inputs = keras.Input(shape=input_shape)
x = PixelConvLayer(
    mask_type="A", filters=filters, kernel_size=7, padding="same", activation="relu"
)(inputs)

for _ in range(n_residual_blocks):
    x = ResidualBlock(filters=filters)(x)

for _ in range(2):
    x = PixelConvLayer(
        mask_type="B",
        filters=filters,
        kernel_size=1,
        strides=1,
        activation="relu",
        padding="valid",
    )(x)

out = keras.layers.Conv2D(
    filters=1, kernel_size=1, strides=1, activation="sigmoid", padding="valid"
)(x)

pixel_cnn = keras.Model(inputs, out)
adam = keras.optimizers.Adam(learning_rate=0.001)  # the example: 0.0001 over 50 epochs
pixel_cnn.compile(optimizer=adam, loss="binary_crossentropy")

pixel_cnn.summary()
pixel_cnn.fit(x=data, y=data, batch_size=64, epochs=2, validation_split=0.1)

# The masks hold after training (a check, not in the example): changing one pixel changes
# no prediction at or before it in raster order.
probe = data[:2, :, :, None].copy()
before = pixel_cnn.predict(probe, verbose=0)
probe[:, 14, 14, 0] = 1 - probe[:, 14, 14, 0]
after = pixel_cnn.predict(probe, verbose=0)
assert np.allclose(before[:, :14], after[:, :14], atol=1e-6)
assert np.allclose(before[:, 14, :15], after[:, 14, :15], atol=1e-6)
assert not np.allclose(before[:, 15:], after[:, 15:], atol=1e-6)

# Generation, pixel after pixel: the whole array is fed back and the next pixel drawn
# from the predicted probability (the example: every row; here the first 3 rows).
batch = 4
pixels = np.zeros(shape=(batch,) + (pixel_cnn.input_shape)[1:])
batch, rows, cols, channels = pixels.shape

for row in range(3):
    for col in range(cols):
        for channel in range(channels):
            probs = pixel_cnn.predict(pixels, verbose=0)[:, row, col, channel]
            pixels[:, row, col, channel] = rng.binomial(1, probs)


def deprocess_image(x):
    # Stack the single-channel image into RGB, back to [0, 255].
    x = np.stack((x, x, x), 2)
    x *= 255.0
    x = np.clip(x, 0, 255).astype("uint8")
    return x


for i, pic in enumerate(pixels):
    keras.utils.save_img("generated_image_{}.png".format(i), deprocess_image(np.squeeze(pic, -1)))
print("generated", len(pixels), "images")
