# Modeled on keras-io examples/keras_recipes/antirectifier.py; written for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops


class Antirectifier(layers.Layer):
    def __init__(self, initializer="he_normal", **kwargs):
        super().__init__(**kwargs)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        output_dim = input_shape[-1]
        self.kernel = self.add_weight(
            shape=(output_dim * 2, output_dim), initializer=self.initializer, name="kernel", trainable=True
        )

    def call(self, inputs):
        inputs -= ops.mean(inputs, axis=-1, keepdims=True)
        pos = ops.relu(inputs)
        neg = ops.relu(-inputs)
        concatenated = ops.concatenate([pos, neg], axis=-1)
        mixed = ops.matmul(concatenated, self.kernel)
        return mixed

    def get_config(self):
        base_config = super().get_config()
        config = {"initializer": keras.initializers.serialize(self.initializer)}
        return dict(list(base_config.items()) + list(config.items()))


batch_size = 128
num_classes = 10
epochs = 1
rng = np.random.default_rng(0)
# Mostly zero, as MNIST's pixels scaled to [0, 1] are (the guide's data).
x_train = (rng.random((1024, 784)) * (rng.random((1024, 784)) < 0.15)).astype("float32")
x_test = (rng.random((256, 784)) * (rng.random((256, 784)) < 0.15)).astype("float32")
w_true = rng.normal(size=(784, 10))  # labels: a fixed function of the inputs, to learn
y_train = np.argmax((x_train - 0.075) @ w_true, axis=1)
y_test = np.argmax((x_test - 0.075) @ w_true, axis=1)

model = keras.Sequential(
    [
        keras.Input(shape=(784,)),
        layers.Dense(256),
        Antirectifier(),
        layers.Dense(256),
        Antirectifier(),
        layers.Dropout(0.5),
        layers.Dense(10),
    ]
)
model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    optimizer=keras.optimizers.RMSprop(),
    metrics=[keras.metrics.SparseCategoricalAccuracy()],
)
model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.15)
model.evaluate(x_test, y_test)
