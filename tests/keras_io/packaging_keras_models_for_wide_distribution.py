# Modeled on keras-io examples/keras_recipes/packaging_keras_models_for_wide_distribution.py
# (Keras 3); written for tessera. The Functional Subclassing pattern: a `keras.Model`
# subclass whose `__init__` builds a functional graph on a uint8 `Input((None, None, 1))` and
# hands it to `super().__init__(inputs, outputs)`; walking `layers`, model surgery from
# `model.input` and `get_layer(...).input` to a new binary head, and the same model on a dict
# of inputs. In place of MNIST: 28x28 uint8 images with a bright bar at a height given by the
# digit, 2,048 training and 512 test images; `tessera.data.Dataset` in place of tf.data (the
# example's from_tensor_slices, per-sample map adding the channel axis, batch, cache, shuffle,
# repeat with `steps_per_epoch`); batches of 128 (256); 2 epochs per fit (5).
import numpy as np
import tessera.nn as keras
from tessera.data import Dataset  # in place of tf.data.Dataset

print("Keras version", keras.version())
print("Keras is running on", keras.config.backend())

BATCH_SIZE = 128
rng = np.random.default_rng(0)


def load_data(n):
    labels = rng.integers(0, 10, n)
    images = rng.integers(0, 60, (n, 28, 28))
    for i, digit in enumerate(labels):
        row = 2 + 2 * digit + rng.integers(0, 2)
        start = rng.integers(0, 8)
        images[i, row:row + 3, start:start + 20] = rng.integers(180, 256)
    return images.astype("uint8"), labels.astype("uint8")


(x_train, train_labels), (x_test, test_labels) = load_data(2048), load_data(512)

train_data = Dataset.from_tensor_slices((x_train, train_labels))
train_data = train_data.map(lambda x, y: (np.expand_dims(x, axis=-1), y))  # 1-channel monochrome
train_data = train_data.batch(BATCH_SIZE)
train_data = train_data.cache()
train_data = train_data.shuffle(5000, reshuffle_each_iteration=True)
train_data = train_data.repeat()

test_data = Dataset.from_tensor_slices((x_test, test_labels))
test_data = test_data.map(lambda x, y: (np.expand_dims(x, axis=-1), y))  # 1-channel monochrome
test_data = test_data.batch(10000)
test_data = test_data.cache()

STEPS_PER_EPOCH = len(train_labels) // BATCH_SIZE
EPOCHS = 2


class MnistModel(keras.Model):
    def __init__(self, **kwargs):
        # Keras Functional model definition, on a 1-channel monochrome input of any size
        inputs = keras.layers.Input(shape=(None, None, 1), dtype="uint8")
        # pixel format conversion from uint8 to float32
        y = keras.layers.Rescaling(1 / 255.0)(inputs)
        # 3 convolutional layers
        y = keras.layers.Conv2D(filters=16, kernel_size=3, padding="same", activation="relu")(y)
        y = keras.layers.Conv2D(
            filters=32, kernel_size=6, padding="same", activation="relu", strides=2)(y)
        y = keras.layers.Conv2D(
            filters=48, kernel_size=6, padding="same", activation="relu", strides=2)(y)
        # 2 dense layers
        y = keras.layers.GlobalAveragePooling2D()(y)
        y = keras.layers.Dense(48, activation="relu")(y)
        y = keras.layers.Dropout(0.4)(y)
        outputs = keras.layers.Dense(
            10, activation="softmax", name="classification_head")(y)  # 10 classes
        # A Keras Functional model is created by calling keras.Model(inputs, outputs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)


model = MnistModel()
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
              metrics=["sparse_categorical_accuracy"])
history = model.fit(train_data, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS,
                    validation_data=test_data)
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})

# The same weights on another image size: the input shape is (None, None, 1).
print("on 40x36 images:", model.predict(np.pad(x_test[:4, :, :, None],
                                               ((0, 0), (6, 6), (4, 4), (0, 0)))).shape)

# Model introspection
model = MnistModel()
model.summary()


def walk_layers(layer):
    if hasattr(layer, "layers"):
        for layer in layer.layers:
            walk_layers(layer)
    else:
        print(layer.name)


print("\nWalking model layers:\n")
walk_layers(model)

# Model surgery: a binary head, "0" or "not 0", in place of the 10-way classification.
model = MnistModel()
input = model.input
y = model.get_layer("classification_head").input
output = keras.layers.Dense(
    1,  # single class for binary classification
    activation="sigmoid",
    name="binary_classification_head",
)(y)
binary_model = keras.Model(input, output)
binary_model.summary()

bin_train_data = train_data.map(lambda x, y: (x, (y == np.zeros_like(y)).astype("uint8")))
bin_test_data = test_data.map(lambda x, y: (x, (y == np.zeros_like(y)).astype("uint8")))
binary_model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["binary_accuracy"])
history = binary_model.fit(bin_train_data, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS,
                           validation_data=bin_test_data)
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})


class MnistDictModel(keras.Model):
    def __init__(self, **kwargs):
        # The input is a dictionary
        inputs = {
            "image": keras.layers.Input(
                shape=(None, None, 1),  # 1-channel monochrome
                dtype="uint8",
                name="image",
            )
        }
        # pixel format conversion from uint8 to float32
        y = keras.layers.Rescaling(1 / 255.0)(inputs["image"])
        # 3 conv layers
        y = keras.layers.Conv2D(filters=16, kernel_size=3, padding="same", activation="relu")(y)
        y = keras.layers.Conv2D(
            filters=32, kernel_size=6, padding="same", activation="relu", strides=2)(y)
        y = keras.layers.Conv2D(
            filters=48, kernel_size=6, padding="same", activation="relu", strides=2)(y)
        # 2 dense layers
        y = keras.layers.GlobalAveragePooling2D()(y)
        y = keras.layers.Dense(48, activation="relu")(y)
        y = keras.layers.Dropout(0.4)(y)
        outputs = keras.layers.Dense(
            10, activation="softmax", name="classification_head")(y)  # 10 classes
        # A Keras Functional model is created by calling keras.Model(inputs, outputs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)


model = MnistDictModel()
dict_train_data = train_data.map(lambda x, y: ({"image": x}, y))
dict_test_data = test_data.map(lambda x, y: ({"image": x}, y))
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
              metrics=["sparse_categorical_accuracy"])
history = model.fit(dict_train_data, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS,
                    validation_data=dict_test_data)
print({k: [round(float(v), 4) for v in vs] for k, vs in history.history.items()})
print("test:", model.evaluate(dict_test_data))
