# Modeled on keras-io examples/vision/fixres.py; written for tessera. Keras 3 form: the
# tf.data pipelines as keras.utils.PyDatasets whose batches are made with NumPy:
# a bilinear resize written in NumPy (tf.image's resize, random crop of a sampled box and
# flip; a Keras op per crop size compiles once per size under JAX), the
# `CenterCrop` layer called on one image `[None, ...]` as the example does; a small
# pre-activation residual network made functionally on `Input((None, None, 3))`, ending in a
# BatchNormalization named "post_bn" and average pooling, in place of
# `keras.applications.ResNet50V2(weights=None, pooling="avg")`; nested in the classifier as
# its layers[1], frozen layer by layer but for "post_bn" before fine-tuning at the bigger size.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops

# In place of tfds.load("tf_flowers"): 5 classes of 64x64 uint8 pictures, each class a tint
# and a bright disc of its own radius on noise (so that crops and resizes keep the class).
rng = np.random.default_rng(0)


def make_flowers(n):
    tints = np.array([[200, 60, 60], [60, 200, 60], [60, 60, 200], [200, 200, 60],
                      [160, 60, 200]], "float32")
    yy, xx = np.mgrid[0:64, 0:64]
    images = rng.uniform(0, 90, (n, 64, 64, 3)).astype("float32")
    labels = rng.integers(0, 5, n)
    for img, c in zip(images, labels):
        cy, cx = rng.integers(20, 44, 2)
        disc = (yy - cy) ** 2 + (xx - cx) ** 2 < (6 + 3 * c) ** 2
        img[disc] = 0.5 * img[disc] + tints[c]
    return np.clip(images, 0, 255).astype("uint8"), labels.astype("int64")


all_images, all_labels = make_flowers(600)
split = int(0.9 * len(all_images))
train_dataset = (all_images[:split], all_labels[:split])
val_dataset = (all_images[split:], all_labels[split:])
print(f"Number of training examples: {split}")
print(f"Number of validation examples: {len(all_images) - split}")

batch_size = 32  # the example: 128
smaller_size = 32  # the example: 128
bigger_size = 48  # the example: 224

size_for_resizing = int((bigger_size / smaller_size) * bigger_size)
central_crop_layer = layers.CenterCrop(bigger_size, bigger_size)


def resize_hw(image, size):
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


def resize(image, size):
    return resize_hw(image, (size, size))


def preprocess_initial(image, train, image_size):
    """Training: a random box of 5% to 100% of the area, resized, flipped; validation: resized."""
    if train:
        h, w = image.shape[:2]
        area = rng.uniform(0.05, 1.0) * h * w
        ratio = rng.uniform(3 / 4, 4 / 3)
        ch = int(min(h, max(1, round(np.sqrt(area / ratio)))))
        cw = int(min(w, max(1, round(np.sqrt(area * ratio)))))
        top, left = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
        image = resize(image[top:top + ch, left:left + cw], image_size)
        if rng.random() < 0.5:
            image = image[:, ::-1]
    else:
        image = resize(image, image_size)
    return (image - 127.5) / 127.5


def preprocess_finetune(image, train, image_size):
    """Resized to keep the ratio of the bigger size, flipped in training, centre-cropped."""
    image = resize(image, size_for_resizing)
    if train and rng.random() < 0.5:
        image = image[:, ::-1]
    image = np.asarray(central_crop_layer(image[None, ...])[0])
    return (image - 127.5) / 127.5


class make_dataset(keras.utils.PyDataset):
    def __init__(self, dataset, train, image_size=smaller_size, fixres=True, **kwargs):
        super().__init__(**kwargs)
        if image_size not in [smaller_size, bigger_size]:
            raise ValueError(f"{image_size} resolution is not supported.")
        self.images, self.labels = dataset
        self.train, self.image_size = train, image_size
        if image_size == smaller_size or not fixres:
            self.preprocess = preprocess_initial
        else:
            self.preprocess = preprocess_finetune
        self.order = np.arange(len(self.images))

    def __len__(self):
        return -(-len(self.images) // batch_size)

    def __getitem__(self, idx):
        if idx == 0 and self.train:
            self.order = rng.permutation(len(self.images))
        rows = self.order[idx * batch_size:(idx + 1) * batch_size]
        x = np.stack([self.preprocess(self.images[i], self.train, self.image_size) for i in rows])
        return x.astype("float32"), self.labels[rows]


initial_train_dataset = make_dataset(train_dataset, train=True, image_size=smaller_size)
initial_val_dataset = make_dataset(val_dataset, train=False, image_size=smaller_size)
finetune_train_dataset = make_dataset(train_dataset, train=True, image_size=bigger_size)
finetune_val_dataset = make_dataset(val_dataset, train=False, image_size=bigger_size)
vanilla_train_dataset = make_dataset(train_dataset, train=True, image_size=bigger_size,
                                     fixres=False)
vanilla_val_dataset = make_dataset(val_dataset, train=False, image_size=bigger_size,
                                   fixres=False)

for ds in (initial_train_dataset, finetune_train_dataset, vanilla_train_dataset):
    batch_images, _ = ds[0]
    print(f"Batch shape: {batch_images.shape}.")
    assert batch_images.shape[1:] == (ds.image_size, ds.image_size, 3)
    assert -1.0 <= batch_images.min() and batch_images.max() <= 1.0


def small_resnet_v2(width=16):
    """A pre-activation residual base: stem, two residual stages, post_bn, average pooling."""
    inputs = layers.Input((None, None, 3))
    x = layers.Conv2D(width, 3, strides=2, padding="same", name="conv1_conv")(inputs)
    for stage, filters in enumerate((width, 2 * width)):
        preact = layers.BatchNormalization(name=f"conv{stage + 2}_preact_bn")(x)
        preact = layers.Activation("relu")(preact)
        shortcut = layers.Conv2D(filters, 1, strides=2, name=f"conv{stage + 2}_0_conv")(preact)
        y = layers.Conv2D(filters, 3, strides=2, padding="same", use_bias=False)(preact)
        y = layers.BatchNormalization()(y)
        y = layers.Activation("relu")(y)
        y = layers.Conv2D(filters, 3, padding="same")(y)
        x = layers.Add()([shortcut, y])
    x = layers.BatchNormalization(name="post_bn")(x)
    x = layers.Activation("relu", name="post_relu")(x)
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    return keras.Model(inputs, x, name="resnet_base")


def get_training_model(num_classes=5):
    inputs = layers.Input((None, None, 3))
    resnet_base = small_resnet_v2()
    resnet_base.trainable = True

    x = resnet_base(inputs)
    outputs = layers.Dense(num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs)


def train_and_evaluate(model, datasets, epochs, lr=None, use_es=False):
    if lr:
        optimizer = keras.optimizers.Adam(learning_rate=lr)
    else:
        optimizer = "adam"

    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])

    callbacks = [keras.callbacks.EarlyStopping(patience=5)] if use_es else None

    model.fit(datasets[0], validation_data=datasets[1], epochs=epochs, callbacks=callbacks)

    _, accuracy = model.evaluate(datasets[1])
    print(f"Top-1 accuracy on the validation set: {accuracy*100:.2f}%.")
    return model


# Experiment 1: train on the smaller size, then fine-tune on the bigger one.
epochs = 3  # the example: 30
smaller_res_model = get_training_model()
smaller_res_model = train_and_evaluate(
    smaller_res_model, (initial_train_dataset, initial_val_dataset), epochs)

# Freeze all the layers but the final BatchNormalization ("post_bn").
for layer in smaller_res_model.layers[1].layers:
    layer.trainable = False
smaller_res_model.layers[1].get_layer("post_bn").trainable = True
base = smaller_res_model.layers[1]
print("trainable weights of the base:", [w.path for w in base.trainable_weights])
assert len(base.trainable_weights) == 2  # post_bn's gamma and beta
frozen_before = [w.copy() for w in base.get_layer("conv1_conv").get_weights()]
post_bn_before = base.get_layer("post_bn").get_weights()[0].copy()

epochs = 2  # the example: 10
# A lower learning rate for fine-tuning.
bigger_res_model = train_and_evaluate(
    smaller_res_model, (finetune_train_dataset, finetune_val_dataset), epochs, lr=1e-3)
for before, after in zip(frozen_before, base.get_layer("conv1_conv").get_weights()):
    np.testing.assert_array_equal(before, after)
assert not np.array_equal(post_bn_before, base.get_layer("post_bn").get_weights()[0])

# Experiment 2: a model trained from scratch on the bigger size.
epochs = 3  # the example: 30
vanilla_bigger_res_model = get_training_model()
vanilla_bigger_res_model = train_and_evaluate(
    vanilla_bigger_res_model, (vanilla_train_dataset, vanilla_val_dataset), epochs)
