# Modeled on keras-io examples/vision/learnable_resizer.py; written for tessera. Keras 3 form:
# the learnable resizer, a functional model on `Input(shape=[None, None, 3])` with two
# `Resizing` layers (the naive resize and the bottleneck), LeakyReLU layers passed as a default
# argument (one layer object shared by every call), `layers.Add` residuals; called eagerly on
# single images `image[None, ...]` before and after training; nested under `Rescaling` in the
# classifier. A small DenseNet (dense blocks of BN-ReLU-Conv concatenated, transitions of 1x1
# convolutions and average pooling) made functionally in place of
# `keras.applications.DenseNet121(weights=None, include_top=True, classes=2)`; a
# keras.utils.PyDataset of batches in place of tfds/tf.data, `tf.image.resize` written in
# NumPy (a Keras op per picture size would compile once per size under JAX);
# `SGD(momentum=0.9)` for "sgd" (3 epochs of plain SGD sit at the knee of the loss: an
# initial draw decided whether they passed it, under Keras as under tessera).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops
import matplotlib.pyplot as plt

INP_SIZE = (64, 64)  # the example: (300, 300)
TARGET_SIZE = (32, 32)  # the example: (150, 150)
INTERPOLATION = "bilinear"

BATCH_SIZE = 32  # the example: 64
EPOCHS = 3  # the example: 5

# In place of cats_vs_dogs: pictures of varied sizes (as the data set's), each with a bright
# blob in its upper (a "cat") or lower (a "dog") half; resized to INP_SIZE as the example's
# preprocess_dataset does, labels one-hot.
rng = np.random.default_rng(0)


def make_pictures(n):
    images, labels = [], []
    for _ in range(n):
        h, w = rng.integers(48, 96, 2)
        img = rng.uniform(0, 120, (h, w, 3)).astype("float32")
        label = int(rng.integers(0, 2))
        cy = rng.integers(h // 8, h // 2 - h // 8) + (h // 2 if label else 0)
        cx = rng.integers(w // 4, 3 * w // 4)
        yy, xx = np.mgrid[0:h, 0:w]
        img[(yy - cy) ** 2 + (xx - cx) ** 2 < (min(h, w) // 6) ** 2] += 130
        images.append(np.clip(img, 0, 255))
        labels.append(label)
    return images, np.array(labels)


def resize(image, size):
    """Bilinear resize with half-pixel centres (tf.image.resize's, Keras's), in NumPy: the
    data pipeline's (a Keras op per picture size would compile once per size under JAX)."""
    image = np.asarray(image, "float32")
    out = image
    for axis, n_out in ((0, size[0]), (1, size[1])):
        n_in = out.shape[axis]
        pos = np.clip((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, n_in - 1)
        frac = (pos - lo).reshape([-1 if a == axis else 1 for a in range(out.ndim)])
        out = np.take(out, lo, axis=axis) * (1 - frac) + np.take(out, hi, axis=axis) * frac
    return out.astype("float32")


def preprocess_dataset(image, label):
    image = resize(image, (INP_SIZE[0], INP_SIZE[1]))
    label = np.asarray(ops.one_hot(label, 2))
    return image, label


class Batches(keras.utils.PyDataset):
    def __init__(self, images, labels, shuffle, **kwargs):
        super().__init__(**kwargs)
        pairs = [preprocess_dataset(i, l) for i, l in zip(images, labels)]
        self.x = np.stack([p[0] for p in pairs]).astype("float32")
        self.y = np.stack([p[1] for p in pairs]).astype("float32")
        self.shuffle, self.order = shuffle, np.arange(len(self.x))

    def __len__(self):
        return -(-len(self.x) // BATCH_SIZE)

    def __getitem__(self, idx):
        if idx == 0 and self.shuffle:
            self.order = rng.permutation(len(self.x))
        rows = self.order[idx * BATCH_SIZE:(idx + 1) * BATCH_SIZE]
        return self.x[rows], self.y[rows]


images, labels = make_pictures(480)
train_ds = Batches(images[:400], labels[:400], shuffle=True)
validation_ds = Batches(images[400:], labels[400:], shuffle=False)


def conv_block(x, filters, kernel_size, strides, activation=layers.LeakyReLU(0.2)):
    x = layers.Conv2D(filters, kernel_size, strides, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    if activation:
        x = activation(x)
    return x


def res_block(x):
    inputs = x
    x = conv_block(x, 16, 3, 1)
    x = conv_block(x, 16, 3, 1, activation=None)
    return layers.Add()([inputs, x])


def get_learnable_resizer(filters=16, num_res_blocks=1, interpolation=INTERPOLATION):
    inputs = layers.Input(shape=[None, None, 3])

    # First, the naive resizing.
    naive_resize = layers.Resizing(*TARGET_SIZE, interpolation=interpolation)(inputs)

    # A first convolution block without batch normalization.
    x = layers.Conv2D(filters=filters, kernel_size=7, strides=1, padding="same")(inputs)
    x = layers.LeakyReLU(0.2)(x)

    # A second one with batch normalization.
    x = layers.Conv2D(filters=filters, kernel_size=1, strides=1, padding="same")(x)
    x = layers.LeakyReLU(0.2)(x)
    x = layers.BatchNormalization()(x)

    # The intermediate resizing, a bottleneck.
    bottleneck = layers.Resizing(*TARGET_SIZE, interpolation=interpolation)(x)

    # Residual passes.
    x = res_block(bottleneck)
    for _ in range(num_res_blocks - 1):
        x = res_block(x)

    # Projection.
    x = layers.Conv2D(filters=filters, kernel_size=3, strides=1, padding="same",
                      use_bias=False)(x)
    x = layers.BatchNormalization()(x)

    # Skip connection.
    x = layers.Add()([bottleneck, x])

    # The final resized image.
    x = layers.Conv2D(filters=3, kernel_size=7, strides=1, padding="same")(x)
    final_resize = layers.Add()([naive_resize, x])

    return keras.Model(inputs, final_resize, name="learnable_resizer")


learnable_resizer = get_learnable_resizer()
learnable_resizer.summary()

# The resizer's outputs at its initial weights, on images of any size.
sample_images, _ = train_ds[0]


def show(title, scale):
    plt.figure(figsize=(16, 10))
    outputs = []
    for i, image in enumerate(sample_images[:6]):
        image = image / 255
        plt.subplot(3, 4, 2 * i + 1)
        plt.title("Input Image")
        plt.imshow(image.squeeze())
        plt.axis("off")
        plt.subplot(3, 4, 2 * i + 2)
        resized_image = learnable_resizer(image[None, ...])
        outputs.append(np.asarray(resized_image))
        plt.title("Resized Image")
        plt.imshow(np.clip(np.asarray(resized_image).squeeze() / scale, 0, 1))
        plt.axis("off")
    plt.savefig(title)
    return np.concatenate(outputs)


before = show("resized_before.png", 1)
assert before.shape == (6, TARGET_SIZE[0], TARGET_SIZE[1], 3)
odd = learnable_resizer(np.ones((1, 45, 37, 3), "float32"))  # any input size
assert tuple(odd.shape) == (1, TARGET_SIZE[0], TARGET_SIZE[1], 3)


def dense_net(input_shape, classes, growth=8, blocks=(2, 2)):
    """A small DenseNet (BN-ReLU-Conv layers concatenated to their inputs), with a softmax top."""
    inputs = layers.Input(input_shape)
    x = layers.Conv2D(2 * growth, 3, strides=2, padding="same", use_bias=False,
                      name="conv1_conv")(inputs)
    for b, n in enumerate(blocks):
        for i in range(n):
            y = layers.BatchNormalization(name=f"conv{b + 2}_block{i + 1}_0_bn")(x)
            y = layers.Activation("relu")(y)
            y = layers.Conv2D(growth, 3, padding="same", use_bias=False)(y)
            x = layers.Concatenate(name=f"conv{b + 2}_block{i + 1}_concat")([x, y])
        if b < len(blocks) - 1:
            x = layers.BatchNormalization(name=f"pool{b + 2}_bn")(x)
            x = layers.Activation("relu")(x)
            x = layers.Conv2D(x.shape[-1] // 2, 1, use_bias=False, name=f"pool{b + 2}_conv")(x)
            x = layers.AveragePooling2D(2, strides=2, name=f"pool{b + 2}_pool")(x)
    x = layers.BatchNormalization(name="bn")(x)
    x = layers.Activation("relu", name="relu")(x)
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    outputs = layers.Dense(classes, activation="softmax", name="predictions")(x)
    return keras.Model(inputs, outputs, name="densenet")


def get_model():
    backbone = dense_net(input_shape=(TARGET_SIZE[0], TARGET_SIZE[1], 3), classes=2)
    backbone.trainable = True

    inputs = layers.Input((INP_SIZE[0], INP_SIZE[1], 3))
    x = layers.Rescaling(scale=1.0 / 255)(inputs)
    x = learnable_resizer(x)
    outputs = backbone(x)

    return keras.Model(inputs, outputs)


model = get_model()
model.compile(loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1),
              optimizer=keras.optimizers.SGD(momentum=0.9), metrics=["accuracy"])
model.fit(train_ds, validation_data=validation_ds, epochs=EPOCHS)

# The trained resizer's outputs: the same images, another picture.
after = show("resized_after.png", 10)
assert after.shape == before.shape and not np.allclose(after, before)
print("resizer parameters:", learnable_resizer.count_params(),
      "of", model.count_params())
