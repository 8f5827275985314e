# Modeled on keras-io examples/keras_recipes/sklearn_metric_callbacks.py (Keras 3: a
# JaccardScoreCallback whose __init__ does not call the base class's, that calls
# `self.model.predict` in `on_epoch_end`, feeds a per-class score array to a standalone
# `keras.metrics.Mean("jaccard_score")` (`reset_state`, `update_state`, `result()`),
# and writes the value per epoch; the mnist_convnet model with `validation_split`); written
# for tessera. In place of scikit-learn's `jaccard_score(..., average=None)` (not installed
# here): the same per-class score written with NumPy (intersection over union of each label
# present in either argument); in place of `tf.summary`'s TensorBoard writer: a text file of
# (name, step, value) lines in the log folder; `result().numpy()` (a TensorFlow tensor's
# method: Keras on JAX returns a jax Array, which has none) as `ops.convert_to_numpy(result())`. MNIST-shaped images with a bright bar at the
# digit's height in place of the download: 1,200 + 300 images, filters / 2, 3 epochs (15).
import os
import tempfile

import numpy as np
import tessera.nn as keras
from tessera.nn import layers


def jaccard_score(y_true, y_pred, average=None):
    """Per-class Jaccard index, sklearn's with average=None, over the sorted labels present."""
    labels = np.union1d(y_true, y_pred)
    scores = []
    for label in labels:
        t, p = y_true == label, y_pred == label
        union = np.logical_or(t, p).sum()
        scores.append(np.logical_and(t, p).sum() / union if union else 0.0)
    return np.asarray(scores)


class JaccardScoreCallback(keras.callbacks.Callback):
    """Computes the Jaccard score and logs the results to a file."""

    def __init__(self, name, x_test, y_test, log_dir):
        self.x_test = x_test
        self.y_test = y_test
        self.keras_metric = keras.metrics.Mean("jaccard_score")
        self.epoch = 0
        self.log_path = os.path.join(log_dir, name + ".log")
        self.values = []

    def on_epoch_end(self, batch, logs=None):
        self.epoch += 1
        self.keras_metric.reset_state()
        predictions = self.model.predict(self.x_test)
        jaccard_value = jaccard_score(np.argmax(predictions, axis=-1), self.y_test, average=None)
        self.keras_metric.update_state(jaccard_value)
        self._write_metric(self.keras_metric.name,
                           keras.ops.convert_to_numpy(self.keras_metric.result()).astype(float))

    def _write_metric(self, name, value):
        self.values.append(value)
        with open(self.log_path, "a") as f:
            f.write(f"{name} {self.epoch} {value}\n")


num_classes = 10
input_shape = (28, 28, 1)

# In place of keras.datasets.mnist.load_data(): uint8 arrays of the same shapes, shrunk, with
# a bright bar 2 rows high at a height given by the digit.
rng = np.random.default_rng(2)
x_train = rng.integers(0, 128, (1200, 28, 28), dtype=np.uint8)
y_train = rng.integers(0, 10, 1200).astype(np.uint8)
x_test = rng.integers(0, 128, (300, 28, 28), dtype=np.uint8)
y_test = rng.integers(0, 10, 300).astype(np.uint8)
for x, y in ((x_train, y_train), (x_test, y_test)):
    x[np.arange(len(x))[:, None], 4 + 2 * y[:, None].astype(int) + np.arange(2)] = 255

x_train = x_train.astype("float32") / 255
x_test = x_test.astype("float32") / 255
x_train = np.expand_dims(x_train, -1)
x_test = np.expand_dims(x_test, -1)
print("x_train shape:", x_train.shape)
print(x_train.shape[0], "train samples")
print(x_test.shape[0], "test samples")

y_train = keras.utils.to_categorical(y_train, num_classes)
y_test = keras.utils.to_categorical(y_test, num_classes)

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)

model.summary()

batch_size = 128
epochs = 3

log_dir = tempfile.mkdtemp(prefix="logs")
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
callbacks = [JaccardScoreCallback(model.name, x_test, np.argmax(y_test, axis=-1), log_dir)]
model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.1,
          callbacks=callbacks)

# Checks (not in the example): one value a epoch, each the mean of the per-class scores of
# the model's predictions at that point (the last one recomputed here).
values = callbacks[0].values
assert len(values) == epochs, values
with open(callbacks[0].log_path) as f:
    assert [line.split()[:2] for line in f] == [["jaccard_score", str(e + 1)] for e in range(epochs)]
last = jaccard_score(np.argmax(model.predict(x_test, verbose=0), axis=-1), np.argmax(y_test, -1))
np.testing.assert_allclose(values[-1], last.mean(), rtol=1e-5)
print("Jaccard scores by epoch:", [round(float(v), 4) for v in values])
