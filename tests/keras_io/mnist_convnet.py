# Modeled on keras-io examples/vision/mnist_convnet.py; written for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers

num_classes = 10
input_shape = (28, 28, 1)

# In place of keras.datasets.mnist.load_data(): uint8 arrays of the same shapes, shrunk.
rng = np.random.default_rng(0)
x_train = rng.integers(0, 128, (1024, 28, 28), dtype=np.uint8)
y_train = rng.integers(0, 10, 1024).astype(np.uint8)
x_test = rng.integers(0, 128, (256, 28, 28), dtype=np.uint8)
y_test = rng.integers(0, 10, 256).astype(np.uint8)
# Something to learn: a bright bar 2 rows high at a height given by the label.
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
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)
model.summary()

batch_size = 128
epochs = 1
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.1)
score = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", score[0])
print("Test accuracy:", score[1])
