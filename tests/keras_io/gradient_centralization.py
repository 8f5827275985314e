# Modeled on keras-io examples/vision/gradient_centralization.py (Keras 3 form: ops.mean in the
# optimizer subclass's get_gradients, layers.Rescaling, the augmentation Sequential called with
# training=True); written for tessera. In place of tensorflow_datasets' Horses or Humans and
# tf.data: 128 training and 64 test uint8 images of 100x100 (300x300 there), a bright figure
# on the left half for a horse and on the right half for a human (a vertical flip keeps the
# class; the example's "horizontal_and_vertical" flip becomes "vertical"), served in batches of
# 32 (128) by a keras.utils.PyDataset that rescales, shuffles and augments as the example's
# `prepare`; 2 epochs per fit (10 there).
#
# As in Keras 3, `get_gradients` is not an optimizer method any more (Keras 2's): nothing calls
# it, and the "GC" optimizer trains as RMSprop does.
from time import time

import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops
from tessera.nn.optimizers import RMSprop

num_classes = 2
input_shape = (100, 100, 3)
batch_size = 32

rng = np.random.default_rng(0)


def horses_or_humans(n):
    labels = rng.integers(0, num_classes, n)
    images = rng.integers(0, 120, (n,) + input_shape)
    rows = rng.integers(10, 60, n)
    cols = rng.integers(5, 25, n) + 50 * labels
    for i in range(n):
        images[i, rows[i]:rows[i] + 30, cols[i]:cols[i] + 20] += 120
    return images.astype(np.uint8), labels.astype(np.int64)


(train_images, train_labels), (test_images, test_labels) = (horses_or_humans(128),
                                                              horses_or_humans(64))
print(f"Image shape: {train_images.shape[1:]}")
print(f"Training images: {len(train_images)}")
print(f"Test images: {len(test_images)}")

rescale = layers.Rescaling(1.0 / 255)

data_augmentation = keras.Sequential(
    [
        layers.RandomFlip("vertical"),
        layers.RandomRotation(0.05),
        layers.RandomZoom(0.2),
    ]
)


class Prepared(keras.utils.PyDataset):
    """The rescaled (and, for training, shuffled and augmented) batches of a split."""

    def __init__(self, images, labels, shuffle=False, augment=False, **kwargs):
        super().__init__(**kwargs)
        self.images, self.labels = images, labels
        self.shuffle, self.augment = shuffle, augment
        self.order = np.arange(len(images))

    def __len__(self):
        return -(-len(self.images) // batch_size)

    def __getitem__(self, idx):
        chosen = self.order[idx * batch_size:(idx + 1) * batch_size]
        x = np.asarray(rescale(self.images[chosen]))
        if self.augment:
            x = np.asarray(data_augmentation(x, training=True))
        return x, self.labels[chosen]

    def on_epoch_end(self):
        if self.shuffle:
            self.order = rng.permutation(len(self.images))


train_ds = Prepared(train_images, train_labels, shuffle=True, augment=True)
test_ds = Prepared(test_images, test_labels)

model = keras.Sequential(
    [
        layers.Conv2D(16, (3, 3), activation="relu", input_shape=input_shape),
        layers.MaxPooling2D(2, 2),
        layers.Conv2D(32, (3, 3), activation="relu"),
        layers.Dropout(0.5),
        layers.MaxPooling2D(2, 2),
        layers.Conv2D(64, (3, 3), activation="relu"),
        layers.Dropout(0.5),
        layers.MaxPooling2D(2, 2),
        layers.Conv2D(64, (3, 3), activation="relu"),
        layers.MaxPooling2D(2, 2),
        layers.Conv2D(64, (3, 3), activation="relu"),
        layers.MaxPooling2D(2, 2),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(512, activation="relu"),
        layers.Dense(1, activation="sigmoid"),
    ]
)


class GCRMSprop(RMSprop):
    def get_gradients(self, loss, params):
        # We here just provide a modified get_gradients() function since we are
        # trying to just compute the centralized gradients.

        grads = []
        gradients = super().get_gradients()
        for grad in gradients:
            grad_len = len(grad.shape)
            if grad_len > 1:
                axis = list(range(grad_len - 1))
                grad -= ops.mean(grad, axis=axis, keep_dims=True)
            grads.append(grad)

        return grads


optimizer = GCRMSprop(learning_rate=1e-4)


class TimeHistory(keras.callbacks.Callback):
    def on_train_begin(self, logs={}):
        self.times = []

    def on_epoch_begin(self, batch, logs={}):
        self.epoch_time_start = time()

    def on_epoch_end(self, batch, logs={}):
        self.times.append(time() - self.epoch_time_start)


time_callback_no_gc = TimeHistory()
model.compile(
    loss="binary_crossentropy",
    optimizer=RMSprop(learning_rate=1e-4),
    metrics=["accuracy"],
)

model.summary()

history_no_gc = model.fit(train_ds, epochs=2, verbose=1, callbacks=[time_callback_no_gc])

time_callback_gc = TimeHistory()
model.compile(loss="binary_crossentropy", optimizer=optimizer, metrics=["accuracy"])

model.summary()

history_gc = model.fit(train_ds, epochs=2, verbose=1, callbacks=[time_callback_gc])

print("Not using Gradient Centralization")
print(f"Loss: {history_no_gc.history['loss'][-1]}")
print(f"Accuracy: {history_no_gc.history['accuracy'][-1]}")
print(f"Training Time: {sum(time_callback_no_gc.times)}")

print("Using Gradient Centralization")
print(f"Loss: {history_gc.history['loss'][-1]}")
print(f"Accuracy: {history_gc.history['accuracy'][-1]}")
print(f"Training Time: {sum(time_callback_gc.times)}")

print("Test loss and accuracy:", model.evaluate(test_ds, verbose=0))
