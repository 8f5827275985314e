# Modeled on keras-io examples/keras_recipes/trainer_pattern.py; written for tessera (the
# example's train_step takes TensorFlow's GradientTape: here keras.GradientTape, tessera's).
import numpy as np
import tessera.nn as keras

# In place of keras.datasets.mnist.load_data(): uint8 arrays of MNIST's shapes, shrunk, with a
# bright bar 2 rows high at a height given by the digit.
rng = np.random.default_rng(0)


def make_digits(n):
    x = rng.integers(0, 128, (n, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, n).astype(np.uint8)
    x[np.arange(n)[:, None], 4 + 2 * y[:, None].astype(int) + np.arange(2)] = 255
    return x, y


(x_train, y_train), (x_test, y_test) = make_digits(1024), make_digits(256)
x_train, x_test = x_train / 255.0, x_test / 255.0


class MyTrainer(keras.Model):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy()
        self.accuracy_metric = keras.metrics.SparseCategoricalAccuracy()

    @property
    def metrics(self):
        return [self.accuracy_metric]

    def train_step(self, data):
        x, y = data
        with keras.GradientTape() as tape:
            y_pred = self.model(x, training=True)
            loss = self.loss_fn(y, y_pred)
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)
        self.optimizer.apply_gradients(zip(gradients, trainable_vars))
        for metric in self.metrics:
            metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}

    def test_step(self, data):
        x, y = data
        y_pred = self.model(x, training=False)
        for metric in self.metrics:
            metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}

    def call(self, x):
        x = self.model(x)
        return x


model_a = keras.models.Sequential(
    [
        keras.layers.Flatten(),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(10, activation="softmax"),
    ]
)

func_input = keras.Input(shape=(28, 28, 1))
x = keras.layers.Flatten()(func_input)
x = keras.layers.Dense(512, activation="relu")(x)
x = keras.layers.Dropout(0.4)(x)
func_output = keras.layers.Dense(10, activation="softmax")(x)
model_b = keras.Model(func_input, func_output)

trainer_1 = MyTrainer(model_a)
trainer_2 = MyTrainer(model_b)

trainer_1.compile(optimizer=keras.optimizers.SGD())
history_1 = trainer_1.fit(x_train, y_train, epochs=2, batch_size=64,
                          validation_data=(x_test, y_test))

trainer_2.compile(optimizer=keras.optimizers.Adam())
history_2 = trainer_2.fit(x_train, y_train, epochs=2, batch_size=64,
                          validation_data=(x_test, y_test))

# check: the logs are the metric's only (the trainer reports no loss), and both models learn
print(history_1.history)
print(history_2.history)
assert sorted(history_2.history) == ["sparse_categorical_accuracy",
                                     "val_sparse_categorical_accuracy"]
assert history_2.history["sparse_categorical_accuracy"][-1] > 0.3
# check: the trainer's weights are its model's
assert len(trainer_2.trainable_variables) == len(model_b.trainable_variables) == 4
