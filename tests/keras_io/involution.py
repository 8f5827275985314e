# Modeled on keras-io examples/vision/involution.py (Keras 3 form); written for tessera.
import os
import tempfile

import numpy as np
import matplotlib.pyplot as plt
import tessera.nn as keras
from tessera.nn import ops

keras.utils.set_random_seed(42)


class Involution(keras.layers.Layer):
    """A position-specific, channel-agnostic kernel generated from the input itself."""

    def __init__(self, channel, group_number, kernel_size, stride, reduction_ratio, name):
        super().__init__(name=name)
        self.channel = channel
        self.group_number = group_number
        self.kernel_size = kernel_size
        self.stride = stride
        self.reduction_ratio = reduction_ratio

    def build(self, input_shape):
        (_, height, width, num_channels) = input_shape
        height = height // self.stride
        width = width // self.stride
        # average-pools the input when the stride is over 1
        self.stride_layer = (
            keras.layers.AveragePooling2D(pool_size=self.stride, strides=self.stride,
                                          padding="same")
            if self.stride > 1
            else lambda x: x
        )
        # generates the kernel
        self.kernel_gen = keras.Sequential(
            [
                keras.layers.Conv2D(filters=self.channel // self.reduction_ratio, kernel_size=1),
                keras.layers.BatchNormalization(),
                keras.layers.ReLU(),
                keras.layers.Conv2D(
                    filters=self.kernel_size * self.kernel_size * self.group_number,
                    kernel_size=1,
                ),
            ]
        )
        self.kernel_reshape = keras.layers.Reshape(
            target_shape=(height, width, self.kernel_size * self.kernel_size, 1,
                          self.group_number)
        )
        self.input_patches_reshape = keras.layers.Reshape(
            target_shape=(height, width, self.kernel_size * self.kernel_size,
                          num_channels // self.group_number, self.group_number)
        )
        self.output_reshape = keras.layers.Reshape(target_shape=(height, width, num_channels))

    def call(self, x):
        # B, H, W, K*K*G
        kernel_input = self.stride_layer(x)
        kernel = self.kernel_gen(kernel_input)
        # B, H, W, K*K, 1, G
        kernel = self.kernel_reshape(kernel)
        # B, H, W, K*K*C
        input_patches = ops.image.extract_patches(
            x, size=self.kernel_size, strides=self.stride, dilation_rate=1, padding="same"
        )
        # B, H, W, K*K, C//G, G
        input_patches = self.input_patches_reshape(input_patches)
        output = ops.multiply(kernel, input_patches)
        # B, H, W, C//G, G
        output = ops.sum(output, axis=3)
        # B, H, W, C
        output = self.output_reshape(output)
        return output, kernel


# Testing the layer (on 4 images of 32x32 in place of 32 of 256x256).
input_tensor = keras.random.normal((4, 32, 32, 3))
output_tensor, _ = Involution(
    channel=3, group_number=1, kernel_size=5, stride=1, reduction_ratio=1, name="inv_1"
)(input_tensor)
print(f"with stride 1 output shape: {output_tensor.shape}")
assert tuple(output_tensor.shape) == (4, 32, 32, 3)  # check

output_tensor, _ = Involution(
    channel=3, group_number=1, kernel_size=5, stride=2, reduction_ratio=1, name="inv_2"
)(input_tensor)
print(f"with stride 2 output shape: {output_tensor.shape}")
assert tuple(output_tensor.shape) == (4, 16, 16, 3)  # check

output_tensor, _ = Involution(
    channel=16, group_number=1, kernel_size=5, stride=1, reduction_ratio=2, name="inv_3"
)(input_tensor)
print("with channel 16 and reduction ratio 2 output shape: {}".format(output_tensor.shape))
assert tuple(output_tensor.shape) == (4, 32, 32, 3)  # check

# In place of keras.datasets.cifar10.load_data(): uint8 arrays of CIFAR's shapes, shrunk,
# each image tinted by a colour of its class (something to learn).
rng = np.random.default_rng(0)
colours = rng.integers(0, 256, (10, 3))
def cifar(n):
    labels = rng.integers(0, 10, (n, 1)).astype(np.uint8)
    images = rng.integers(0, 256, (n, 32, 32, 3))
    images = images // 4 + colours[labels[:, 0]][:, None, None, :] * 3 // 4
    return images.astype(np.uint8), labels
(train_images, train_labels), (test_images, test_labels) = cifar(256), cifar(64)

(train_images, test_images) = (train_images / 255.0, test_images / 255.0)

class_names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
               "ship", "truck"]
figures = tempfile.mkdtemp()

plt.figure(figsize=(10, 10))
for i in range(25):
    plt.subplot(5, 5, i + 1)
    plt.xticks([])
    plt.yticks([])
    plt.grid(False)
    plt.imshow(train_images[i])
    plt.xlabel(class_names[train_labels[i][0]])
plt.savefig(os.path.join(figures, "data.png"))
plt.close()

print("building the convolution model...")
conv_model = keras.Sequential(
    [
        keras.layers.Conv2D(32, (3, 3), input_shape=(32, 32, 3), padding="same"),
        keras.layers.ReLU(name="relu1"),
        keras.layers.MaxPooling2D((2, 2)),
        keras.layers.Conv2D(64, (3, 3), padding="same"),
        keras.layers.ReLU(name="relu2"),
        keras.layers.MaxPooling2D((2, 2)),
        keras.layers.Conv2D(64, (3, 3), padding="same"),
        keras.layers.ReLU(name="relu3"),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ]
)
conv_model.compile(
    optimizer="adam",
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
# the guide's tf.data pipeline (shuffle, batches of 256): the arrays, batches of 64
conv_hist = conv_model.fit(train_images, train_labels, batch_size=64, epochs=2,
                           validation_data=(test_images, test_labels))

print("building the involution model...")
inputs = keras.Input(shape=(32, 32, 3))
x, _ = Involution(
    channel=3, group_number=1, kernel_size=3, stride=1, reduction_ratio=2, name="inv_1"
)(inputs)
x = keras.layers.ReLU()(x)
x = keras.layers.MaxPooling2D((2, 2))(x)
x, _ = Involution(
    channel=3, group_number=1, kernel_size=3, stride=1, reduction_ratio=2, name="inv_2"
)(x)
x = keras.layers.ReLU()(x)
x = keras.layers.MaxPooling2D((2, 2))(x)
x, _ = Involution(
    channel=3, group_number=1, kernel_size=3, stride=1, reduction_ratio=2, name="inv_3"
)(x)
x = keras.layers.ReLU()(x)
x = keras.layers.Flatten()(x)
x = keras.layers.Dense(64, activation="relu")(x)
outputs = keras.layers.Dense(10)(x)

inv_model = keras.Model(inputs=[inputs], outputs=[outputs], name="inv_model")
inv_model.compile(
    optimizer="adam",
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
inv_hist = inv_model.fit(train_images, train_labels, batch_size=64, epochs=2,
                         validation_data=(test_images, test_labels))

conv_model.summary()
inv_model.summary()

for what in ("loss", "accuracy"):
    plt.figure(figsize=(20, 5))
    for k, (title, hist) in enumerate((("Convolution", conv_hist), ("Involution", inv_hist))):
        plt.subplot(1, 2, k + 1)
        plt.title(f"{title} {what}")
        plt.plot(hist.history[what], label=what)
        plt.plot(hist.history["val_" + what], label="val_" + what)
        plt.legend()
    plt.savefig(os.path.join(figures, f"{what}.png"))
    plt.close()

# The involution kernels: the sum of each position's K*K values, as a heat map.
layer_names = ["inv_1", "inv_2", "inv_3"]
outputs = [inv_model.get_layer(name).output for name in layer_names]
vis_model = keras.Model(inv_model.input, outputs)

fig, axes = plt.subplots(nrows=4, ncols=4, figsize=(10, 12))
for ax, test_image in zip(axes, test_images[:4]):
    (inv1_out, inv2_out, inv3_out) = vis_model.predict(test_image[None, ...])
    _, inv1_kernel = inv1_out
    _, inv2_kernel = inv2_out
    _, inv3_kernel = inv3_out
    inv1_kernel = ops.sum(inv1_kernel, axis=[-1, -2, -3])
    inv2_kernel = ops.sum(inv2_kernel, axis=[-1, -2, -3])
    inv3_kernel = ops.sum(inv3_kernel, axis=[-1, -2, -3])
    assert tuple(inv1_kernel.shape) == (1, 32, 32)  # check
    assert tuple(inv3_kernel.shape) == (1, 8, 8)  # check

    ax[0].imshow(keras.utils.array_to_img(test_image))
    ax[0].set_title("Input Image")
    ax[1].imshow(keras.utils.array_to_img(inv1_kernel[0, ..., None]))
    ax[1].set_title("Involution Kernel 1")
    ax[2].imshow(keras.utils.array_to_img(inv2_kernel[0, ..., None]))
    ax[2].set_title("Involution Kernel 2")
    ax[3].imshow(keras.utils.array_to_img(inv3_kernel[0, ..., None]))
    ax[3].set_title("Involution Kernel 3")
plt.savefig(os.path.join(figures, "kernels.png"))
plt.close(fig)
