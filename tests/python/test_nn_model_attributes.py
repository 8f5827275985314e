"""Model and optimizer attributes Keras scripts read, against Keras 3 on JAX (the
oracle): trainable_variables, optimizer.iterations, optimizer.learning_rate after a
LearningRateScheduler or ReduceLROnPlateau (and set by a user's callback),
model.compiled and model.loss."""

import numpy as np

import tessera.nn as nn


def _run(k):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    m = k.Sequential([k.Input((5,)), k.layers.Dense(4, activation="relu"),
                      k.layers.BatchNormalization(), k.layers.Dense(2, activation="softmax")])
    out = {"compiled_before": m.compiled}
    m.compile("adam", "sparse_categorical_crossentropy")
    seen = []

    class Spy(k.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(round(float(self.model.optimizer.learning_rate), 8))

    class SetRate(k.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 3:
                self.model.optimizer.learning_rate = 0.01

    m.fit(x, y, batch_size=16, epochs=3, verbose=0,
          callbacks=[k.callbacks.LearningRateScheduler(lambda e, lr: lr * 0.5), Spy()])
    out["scheduled"] = seen[:]
    out["iterations"] = int(m.optimizer.iterations)
    seen.clear()
    m.fit(x, y, batch_size=32, epochs=5, verbose=0, callbacks=[SetRate(), Spy()])
    out["after"] = seen[:]
    out["iterations_2"] = int(m.optimizer.iterations)
    out["compiled"] = m.compiled
    out["loss"] = m.loss
    out["variables"] = (len(m.trainable_variables), len(m.non_trainable_variables),
                        len(m.layers[1].trainable_variables),
                        len(m.layers[1].non_trainable_variables))
    return out


def test_model_attributes_as_keras(keras):
    assert _run(nn) == _run(keras)
