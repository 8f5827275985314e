# Modeled on keras-io examples/keras_recipes/creating_tfrecords.py (its model and training part);
# written for tessera. Writing and parsing the TFRecords (tf.train.Example, tf.io, tf.data) is
# TensorFlow data loading: here the COCO samples are generated arrays with the parsed features'
# names (image of its own size, category_id among COCO's 91 ids; a tint tells the category),
# read by a `keras.utils.PyDataset` that applies the example's `prepare_sample`
# (`keras.ops.image.resize`), shuffles and batches. `keras.applications.EfficientNetB0(weights=
# None)` is replaced, as the README allows for applications, by a small EfficientNet written
# here: Rescaling, a stride-2 stem, MBConv blocks (1x1 expansion, depthwise conv, squeeze and
# excitation, 1x1 projection, dropout and a residual), a 1x1 head, pooling, dropout and 91
# softmax classes. Images 64x64 (224 there), 256 samples, batches of 16, 8 steps per epoch (50),
# 3 epochs (1).
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)

num_samples = 256
category_ids = np.array([1, 3, 18, 44])  # person, car, dog, bottle
tints = np.array([[200, 40, 40], [40, 200, 40], [40, 40, 200], [200, 200, 40]])
samples = []
for i in range(num_samples):
    k = rng.integers(0, len(category_ids))
    h, w = rng.integers(48, 97, 2)
    image = rng.integers(0, 120, (h, w, 3)) + tints[k] // 2
    samples.append({"image": image.astype("float32"), "path": f"{i:012d}.jpg",
                    "area": float(h * w) / 2, "bbox": [0.0, 0.0, float(w), float(h)],
                    "category_id": int(category_ids[k]), "id": i, "image_id": i})

image_size = 64


def prepare_sample(features):
    image = keras.ops.image.resize(features["image"], size=(image_size, image_size))
    return image, features["category_id"]


class TFRecordLikeDataset(keras.utils.PyDataset):
    """The example's get_dataset: map(prepare_sample), shuffle, batch."""

    def __init__(self, samples, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.samples, self.batch_size = samples, batch_size
        self.order = np.random.permutation(len(samples))

    def __len__(self):
        return len(self.samples) // self.batch_size

    def __getitem__(self, idx):
        batch = [prepare_sample(self.samples[j])
                 for j in self.order[idx * self.batch_size:(idx + 1) * self.batch_size]]
        images = np.stack([np.asarray(im, "float32") for im, _ in batch])
        return images, np.array([c for _, c in batch], "int32")

    def on_epoch_end(self):
        self.order = np.random.permutation(len(self.samples))


def get_dataset(samples, batch_size):
    return TFRecordLikeDataset(samples, batch_size)


def mb_conv(x, filters_in, filters_out, kernel_size, strides, expand_ratio, name):
    """EfficientNet's inverted residual block with squeeze and excitation."""
    inputs = x
    filters = filters_in * expand_ratio
    if expand_ratio != 1:
        x = layers.Conv2D(filters, 1, padding="same", use_bias=False, name=name + "expand_conv")(x)
        x = layers.BatchNormalization(name=name + "expand_bn")(x)
        x = layers.Activation("swish", name=name + "expand_activation")(x)
    x = layers.DepthwiseConv2D(kernel_size, strides=strides, padding="same", use_bias=False,
                               name=name + "dwconv")(x)
    x = layers.BatchNormalization(name=name + "bn")(x)
    x = layers.Activation("swish", name=name + "activation")(x)
    se = layers.GlobalAveragePooling2D(name=name + "se_squeeze")(x)
    se = layers.Reshape((1, 1, filters), name=name + "se_reshape")(se)
    se = layers.Conv2D(max(1, filters_in // 4), 1, padding="same", activation="swish",
                       name=name + "se_reduce")(se)
    se = layers.Conv2D(filters, 1, padding="same", activation="sigmoid",
                       name=name + "se_expand")(se)
    x = layers.multiply([x, se], name=name + "se_excite")
    x = layers.Conv2D(filters_out, 1, padding="same", use_bias=False,
                      name=name + "project_conv")(x)
    x = layers.BatchNormalization(name=name + "project_bn")(x)
    if strides == 1 and filters_in == filters_out:
        x = layers.Dropout(0.2, noise_shape=(None, 1, 1, 1), name=name + "drop")(x)
        x = layers.add([x, inputs], name=name + "add")
    return x


def small_efficientnet(input_tensor, classes):
    x = layers.Rescaling(1.0 / 255.0)(input_tensor)
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False, name="stem_conv")(x)
    x = layers.BatchNormalization(name="stem_bn")(x)
    x = layers.Activation("swish", name="stem_activation")(x)
    # (filters in, filters out, kernel, strides, expansion) of each block
    for i, args in enumerate([(16, 8, 3, 1, 1), (8, 16, 3, 2, 6), (16, 16, 3, 1, 6),
                              (16, 24, 5, 2, 6), (24, 24, 5, 1, 6)]):
        x = mb_conv(x, *args, name=f"block{i + 1}_")
    x = layers.Conv2D(96, 1, padding="same", use_bias=False, name="top_conv")(x)
    x = layers.BatchNormalization(name="top_bn")(x)
    x = layers.Activation("swish", name="top_activation")(x)
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    x = layers.Dropout(0.2, name="top_dropout")(x)
    outputs = layers.Dense(classes, activation="softmax", name="predictions")(x)
    return keras.Model(input_tensor, outputs, name="efficientnet_small")


batch_size = 16
epochs = 3
steps_per_epoch = 8

input_tensor = keras.layers.Input(shape=(image_size, image_size, 3), name="image")
model = small_efficientnet(input_tensor=input_tensor, classes=91)
model.summary()
model.compile(
    optimizer=keras.optimizers.Adam(),
    loss=keras.losses.SparseCategoricalCrossentropy(),
    metrics=[keras.metrics.SparseCategoricalAccuracy()],
)
history = model.fit(
    x=get_dataset(samples, batch_size),
    epochs=epochs,
    steps_per_epoch=steps_per_epoch,
    verbose=1,
)
print(history.history)
assert history.history["loss"][-1] < history.history["loss"][0], history.history
