# Modeled on keras-io examples/keras_recipes/debugging_tips.py; written for tessera (the
# example's train_step takes TensorFlow's GradientTape, two nested for second-order
# gradients: here keras.GradientTape, tessera's; `ops.normalize` for `tf.math.l2_normalize`
# of each whole gradient, written as x / ||x||). Tip 1: a user layer's bug (concatenating on
# the batch axis) raises a clear error on test data; Tip 2: the three-input, two-output
# model's summary (`plot_model` left out: pydot is not installed); Tip 3: the second-order
# train_step, its gradients printed with `run_eagerly=True` for 3 steps (10), then
# normalized and combined, and the final run with `InverseTimeDecay`. In place of MNIST:
# 784-pixel images with a bar at the digit's height, 4,096 (60,000); 3 epochs for each fit
# (3, 5 and 50), batches of 1024 and 2048 as the example.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers
from tessera.nn import ops


class MyAntirectifier(layers.Layer):
    def build(self, input_shape):
        output_dim = input_shape[-1]
        self.kernel = self.add_weight(shape=(output_dim * 2, output_dim),
                                      initializer="he_normal", name="kernel", trainable=True)

    def call(self, inputs):
        pos = ops.relu(inputs)
        neg = ops.relu(-inputs)
        print("pos.shape:", pos.shape)
        print("neg.shape:", neg.shape)
        concatenated = ops.concatenate([pos, neg], axis=0)  # the bug: the batch axis
        print("concatenated.shape:", concatenated.shape)
        print("kernel.shape:", self.kernel.shape)
        return ops.matmul(concatenated, self.kernel)


x = keras.random.normal(shape=(2, 5))
try:
    y = MyAntirectifier()(x)
except Exception as e:  # the example shows TensorFlow's "Matrix size-incompatible"
    print(f"{type(e).__name__}: {e}")
else:
    raise AssertionError("the buggy layer ran")


class MyAntirectifier(layers.Layer):
    def build(self, input_shape):
        output_dim = input_shape[-1]
        self.kernel = self.add_weight(shape=(output_dim * 2, output_dim),
                                      initializer="he_normal", name="kernel", trainable=True)

    def call(self, inputs):
        pos = ops.relu(inputs)
        neg = ops.relu(-inputs)
        concatenated = ops.concatenate([pos, neg], axis=1)
        print("concatenated.shape:", concatenated.shape)
        print("kernel.shape:", self.kernel.shape)
        return ops.matmul(concatenated, self.kernel)


x = keras.random.normal(shape=(2, 5))
y = MyAntirectifier()(x)
assert tuple(y.shape) == (2, 5)

# Tip 2: model.summary() shows each layer's output shape.
num_tags = 12
num_words = 10000
num_departments = 4
title_input = keras.Input(shape=(None,), name="title")
body_input = keras.Input(shape=(None,), name="body")
tags_input = keras.Input(shape=(num_tags,), name="tags")
title_features = layers.Embedding(num_words, 64)(title_input)
body_features = layers.Embedding(num_words, 64)(body_input)
title_features = layers.LSTM(128)(title_features)
body_features = layers.LSTM(32)(body_features)
x = layers.concatenate([title_features, body_features, tags_input])
priority_pred = layers.Dense(1, name="priority")(x)
department_pred = layers.Dense(num_departments, name="department")(x)
model = keras.Model(inputs=[title_input, body_input, tags_input],
                    outputs=[priority_pred, department_pred])
model.summary()


# Tip 3: debugging fit() with run_eagerly=True.
def make_digits(n):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 128, (n, 28, 28)).astype("float32")
    y = rng.integers(0, 10, n)
    x[np.arange(n)[:, None], 4 + 2 * y[:, None] + np.arange(2)] = 255
    return x, y


(x_train, y_train) = make_digits(4096)
x_train = np.reshape(x_train, (-1, 784)) / 255


class MyModel(keras.Model):
    def train_step(self, data):
        inputs, targets = data
        trainable_vars = self.trainable_variables
        with keras.GradientTape() as tape2:
            with keras.GradientTape() as tape1:
                y_pred = self(inputs, training=True)  # Forward pass
                loss = self.compute_loss(y=targets, y_pred=y_pred)
            dl_dw = tape1.gradient(loss, trainable_vars)
        d2l_dw2 = tape2.gradient(dl_dw, trainable_vars)
        grads = [0.5 * w1 + 0.5 * w2 for (w1, w2) in zip(d2l_dw2, dl_dw)]
        self.optimizer.apply_gradients(zip(grads, trainable_vars))
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(targets, y_pred)
        return {m.name: m.result() for m in self.metrics}


def get_model():
    inputs = keras.Input(shape=(784,))
    intermediate = layers.Dense(256, activation="relu")(inputs)
    outputs = layers.Dense(10, activation="softmax")(intermediate)
    return MyModel(inputs, outputs)


model = get_model()
model.compile(optimizer=keras.optimizers.SGD(learning_rate=1e-2),
              loss="sparse_categorical_crossentropy")
model.fit(x_train, y_train, epochs=3, batch_size=1024, validation_split=0.1)


class MyModel(keras.Model):
    def train_step(self, data):
        print()
        print("----Start of step: %d" % (self.step_counter,))
        self.step_counter += 1

        inputs, targets = data
        trainable_vars = self.trainable_variables
        with keras.GradientTape() as tape2:
            with keras.GradientTape() as tape1:
                y_pred = self(inputs, training=True)  # Forward pass
                loss = self.compute_loss(y=targets, y_pred=y_pred)
            dl_dw = tape1.gradient(loss, trainable_vars)
        d2l_dw2 = tape2.gradient(dl_dw, trainable_vars)

        print("Max of dl_dw[0]: %.4f" % ops.max(dl_dw[0]))
        print("Min of dl_dw[0]: %.4f" % ops.min(dl_dw[0]))
        print("Mean of dl_dw[0]: %.4f" % ops.mean(dl_dw[0]))
        print("-")
        print("Max of d2l_dw2[0]: %.4f" % ops.max(d2l_dw2[0]))
        print("Min of d2l_dw2[0]: %.4f" % ops.min(d2l_dw2[0]))
        print("Mean of d2l_dw2[0]: %.4f" % ops.mean(d2l_dw2[0]))

        grads = [0.5 * w1 + 0.5 * w2 for (w1, w2) in zip(d2l_dw2, dl_dw)]
        self.optimizer.apply_gradients(zip(grads, trainable_vars))
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(targets, y_pred)
        return {m.name: m.result() for m in self.metrics}


model = get_model()
model.compile(optimizer=keras.optimizers.SGD(learning_rate=1e-2),
              loss="sparse_categorical_crossentropy",
              metrics=["sparse_categorical_accuracy"], run_eagerly=True)
model.step_counter = 0
model.fit(x_train, y_train, epochs=1, batch_size=1024, verbose=0, steps_per_epoch=3)
assert model.step_counter == 3, model.step_counter


def l2_normalize(w):
    return w / ops.sqrt(ops.maximum(ops.sum(ops.square(w)), 1e-12))


class MyModel(keras.Model):
    def train_step(self, data):
        inputs, targets = data
        trainable_vars = self.trainable_variables
        with keras.GradientTape() as tape2:
            with keras.GradientTape() as tape1:
                y_pred = self(inputs, training=True)  # Forward pass
                loss = self.compute_loss(y=targets, y_pred=y_pred)
            dl_dw = tape1.gradient(loss, trainable_vars)
        d2l_dw2 = tape2.gradient(dl_dw, trainable_vars)
        dl_dw = [l2_normalize(w) for w in dl_dw]
        d2l_dw2 = [l2_normalize(w) for w in d2l_dw2]
        grads = [0.2 * w1 + 0.8 * w2 for (w1, w2) in zip(d2l_dw2, dl_dw)]
        self.optimizer.apply_gradients(zip(grads, trainable_vars))
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(targets, y_pred)
        return {m.name: m.result() for m in self.metrics}


model = get_model()
lr = learning_rate = keras.optimizers.schedules.InverseTimeDecay(
    initial_learning_rate=0.1, decay_steps=25, decay_rate=0.1)
model.compile(optimizer=keras.optimizers.SGD(lr), loss="sparse_categorical_crossentropy",
              metrics=["sparse_categorical_accuracy"])
history = model.fit(x_train, y_train, epochs=3, batch_size=2048, validation_split=0.1)
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})
