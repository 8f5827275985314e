# Modeled on keras-io guides/intro_to_keras_for_engineers.py; written for tessera.
import numpy as np
import os

import tessera.nn as keras

# In place of keras.datasets.mnist.load_data(): uint8 arrays of MNIST's shapes, shrunk, with a
# bright bar 1 + digit rows high (the guide's global average pooling sees its area).
rng = np.random.default_rng(0)


def make_digits(n):
    x = rng.integers(0, 128, (n, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, n).astype(np.uint8)
    for i in range(n):
        x[i, 8 : 9 + y[i]] = 255
    return x, y


(x_train, y_train), (x_test, y_test) = make_digits(768), make_digits(192)

x_train = x_train.astype("float32") / 255
x_test = x_test.astype("float32") / 255
x_train = np.expand_dims(x_train, -1)
x_test = np.expand_dims(x_test, -1)
print("x_train shape:", x_train.shape)
print("y_train shape:", y_train.shape)
print(x_train.shape[0], "train samples")
print(x_test.shape[0], "test samples")

num_classes = 10
input_shape = (28, 28, 1)

# Filters / 4 of the guide's (64, 64, 128, 128).
model = keras.Sequential(
    [
        keras.layers.Input(shape=input_shape),
        keras.layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
        keras.layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
        keras.layers.MaxPooling2D(pool_size=(2, 2)),
        keras.layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        keras.layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(num_classes, activation="softmax"),
    ]
)
model.summary()

model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(),
    optimizer=keras.optimizers.Adam(learning_rate=1e-3),
    metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")],
)

batch_size = 64
epochs = 3  # 20 there, with EarlyStopping

callbacks = [
    keras.callbacks.ModelCheckpoint(filepath="model_at_epoch_{epoch}.keras"),
    keras.callbacks.EarlyStopping(monitor="val_loss", patience=2),
]
model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.15,
          callbacks=callbacks)
score = model.evaluate(x_test, y_test, verbose=0)
# check: a checkpoint per epoch run
assert os.path.exists("model_at_epoch_1.keras")

model.save("final_model.keras")
model = keras.saving.load_model("final_model.keras")
predictions = model.predict(x_test)
# check: the reloaded model's loss is the trained one's
reloaded = model.evaluate(x_test, y_test, verbose=0)
print("score:", score, "reloaded:", reloaded)
assert np.allclose(score, reloaded, rtol=1e-4, atol=1e-5)
assert predictions.shape == (len(x_test), num_classes)


class MyDense(keras.layers.Layer):
    def __init__(self, units, activation=None, name=None):
        super().__init__(name=name)
        self.units = units
        self.activation = keras.activations.get(activation)

    def build(self, input_shape):
        input_dim = input_shape[-1]
        self.w = self.add_weight(shape=(input_dim, self.units),
                                 initializer=keras.initializers.GlorotNormal(),
                                 name="kernel", trainable=True)
        self.b = self.add_weight(shape=(self.units,), initializer=keras.initializers.Zeros(),
                                 name="bias", trainable=True)

    def call(self, inputs):
        x = keras.ops.matmul(inputs, self.w) + self.b
        return self.activation(x)


class MyDropout(keras.layers.Layer):
    def __init__(self, rate, name=None):
        super().__init__(name=name)
        self.rate = rate
        # Its seed variable is state, tracked in layer.variables.
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, inputs):
        return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)


class MyModel(keras.Model):
    def __init__(self, num_classes):
        super().__init__()
        self.conv_base = keras.Sequential(
            [
                keras.layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
                keras.layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
                keras.layers.MaxPooling2D(pool_size=(2, 2)),
                keras.layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
                keras.layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
                keras.layers.GlobalAveragePooling2D(),
            ]
        )
        self.dp = MyDropout(0.5)
        self.dense = MyDense(num_classes, activation="softmax")

    def call(self, x):
        x = self.conv_base(x)
        x = self.dp(x)
        return self.dense(x)


model = MyModel(num_classes=10)
model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(),
    optimizer=keras.optimizers.Adam(learning_rate=1e-3),
    metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")],
)
model.fit(x_train, y_train, batch_size=batch_size, epochs=1, validation_split=0.15)
# check: weights are the 4 convolutions' and MyDense's kernels and biases (the seed
# generator's state is a variable, not a weight)
print("weights:", [v.path for v in model.weights])
assert len(model.weights) == 10

import torch

train_torch_dataset = torch.utils.data.TensorDataset(torch.from_numpy(x_train),
                                                     torch.from_numpy(y_train))
val_torch_dataset = torch.utils.data.TensorDataset(torch.from_numpy(x_test),
                                                   torch.from_numpy(y_test))
train_dataloader = torch.utils.data.DataLoader(train_torch_dataset, batch_size=batch_size,
                                               shuffle=True)
val_dataloader = torch.utils.data.DataLoader(val_torch_dataset, batch_size=batch_size,
                                             shuffle=False)

model = MyModel(num_classes=10)
model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(),
    optimizer=keras.optimizers.Adam(learning_rate=1e-3),
    metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")],
)
model.fit(train_dataloader, epochs=2, validation_data=val_dataloader)


# In place of the guide's tf.data pipeline (TensorFlow, not installed here): a PyDataset of
# the same batches.
class ArrayBatches(keras.utils.PyDataset):
    def __init__(self, x, y, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return -(-len(self.x) // self.batch_size)

    def __getitem__(self, i):
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return self.x[s], self.y[s]


train_dataset = ArrayBatches(x_train, y_train, batch_size)
test_dataset = ArrayBatches(x_test, y_test, batch_size)
model = MyModel(num_classes=10)
model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(),
    optimizer=keras.optimizers.Adam(learning_rate=1e-3),
    metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")],
)
model.fit(train_dataset, epochs=2, validation_data=test_dataset)
