# Modeled on keras-io guides/functional_api.py (the API calls it makes); written for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops

rng = np.random.default_rng(0)

# A first model: 784 -> 64 -> 64 -> 10.
inputs = keras.Input(shape=(784,))
x = layers.Dense(64, activation="relu")(inputs)
x = layers.Dense(64, activation="relu")(x)
outputs = layers.Dense(10)(x)
model = keras.Model(inputs=inputs, outputs=outputs, name="mnist_model")
model.summary()

x_train = rng.random((512, 784)).astype("float32")
x_test = rng.random((128, 784)).astype("float32")
w_true = rng.normal(size=(784, 10))  # labels: a fixed function of the inputs, to learn
y_train = np.argmax((x_train - 0.5) @ w_true, axis=1)
y_test = np.argmax((x_test - 0.5) @ w_true, axis=1)
model.compile(
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    optimizer=keras.optimizers.RMSprop(),
    metrics=["accuracy"],
)
history = model.fit(x_train, y_train, batch_size=64, epochs=1, validation_split=0.2)
scores = model.evaluate(x_test, y_test, verbose=2)
print("Test loss:", scores[0], "Test accuracy:", scores[1])

import os, tempfile
path = os.path.join(tempfile.mkdtemp(), "my_model.keras")
model.save(path)
del model
model = keras.models.load_model(path)

# The same graph of layers, several models: an autoencoder.
encoder_input = keras.Input(shape=(28, 28, 1), name="img")
x = layers.Conv2D(16, 3, activation="relu")(encoder_input)
x = layers.Conv2D(32, 3, activation="relu")(x)
x = layers.MaxPooling2D(3)(x)
x = layers.Conv2D(32, 3, activation="relu")(x)
x = layers.Conv2D(16, 3, activation="relu")(x)
encoder_output = layers.GlobalMaxPooling2D()(x)
encoder = keras.Model(encoder_input, encoder_output, name="encoder")
encoder.summary()
x = layers.Reshape((4, 4, 1))(encoder_output)
x = layers.Conv2DTranspose(16, 3, activation="relu")(x)
x = layers.Conv2DTranspose(32, 3, activation="relu")(x)
x = layers.UpSampling2D(3)(x)
x = layers.Conv2DTranspose(16, 3, activation="relu")(x)
decoder_output = layers.Conv2DTranspose(1, 3, activation="relu")(x)
autoencoder = keras.Model(encoder_input, decoder_output, name="autoencoder")
autoencoder.summary()

# Models are callable, like layers: an ensemble.
def get_model():
    inputs = keras.Input(shape=(128,))
    outputs = layers.Dense(1)(inputs)
    return keras.Model(inputs, outputs)

model1, model2, model3 = get_model(), get_model(), get_model()
inputs = keras.Input(shape=(128,))
y1, y2, y3 = model1(inputs), model2(inputs), model3(inputs)
outputs = layers.average([y1, y2, y3])
ensemble_model = keras.Model(inputs=inputs, outputs=outputs)

# Multiple inputs and outputs: ticket ranking.
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
model = keras.Model(
    inputs=[title_input, body_input, tags_input],
    outputs={"priority": priority_pred, "department": department_pred},
)
model.compile(
    optimizer=keras.optimizers.RMSprop(1e-3),
    loss={
        "priority": keras.losses.BinaryCrossentropy(from_logits=True),
        "department": keras.losses.CategoricalCrossentropy(from_logits=True),
    },
    loss_weights={"priority": 1.0, "department": 0.2},
)
title_data = rng.integers(0, num_words, size=(64, 10))
body_data = rng.integers(0, num_words, size=(64, 100))
tags_data = rng.integers(0, 2, size=(64, num_tags)).astype("float32")
priority_targets = rng.random(size=(64, 1))
dept_targets = rng.integers(0, 2, size=(64, num_departments))
model.fit(
    {"title": title_data, "body": body_data, "tags": tags_data},
    {"priority": priority_targets, "department": dept_targets},
    epochs=1,
    batch_size=32,
)

# A toy ResNet (non-linear topology).
inputs = keras.Input(shape=(32, 32, 3), name="img")
x = layers.Conv2D(32, 3, activation="relu")(inputs)
x = layers.Conv2D(64, 3, activation="relu")(x)
block_1_output = layers.MaxPooling2D(3)(x)
x = layers.Conv2D(64, 3, activation="relu", padding="same")(block_1_output)
x = layers.Conv2D(64, 3, activation="relu", padding="same")(x)
block_2_output = layers.add([x, block_1_output])
x = layers.Conv2D(64, 3, activation="relu", padding="same")(block_2_output)
x = layers.Conv2D(64, 3, activation="relu", padding="same")(x)
block_3_output = layers.add([x, block_2_output])
x = layers.Conv2D(64, 3, activation="relu")(block_3_output)
x = layers.GlobalAveragePooling2D()(x)
x = layers.Dense(256, activation="relu")(x)
x = layers.Dropout(0.5)(x)
outputs = layers.Dense(10)(x)
model = keras.Model(inputs, outputs, name="toy_resnet")
model.summary()
x_train = rng.random((64, 32, 32, 3)).astype("float32")
w_img = rng.normal(size=(3, 10))  # labels from the images' mean colour, to learn
y_train = keras.utils.to_categorical(np.argmax((x_train.mean(axis=(1, 2)) - 0.5) @ w_img, axis=1), 10)
model.compile(
    optimizer=keras.optimizers.RMSprop(1e-3),
    loss=keras.losses.CategoricalCrossentropy(from_logits=True),
    metrics=["acc"],
)
model.fit(x_train, y_train, batch_size=32, epochs=1, validation_split=0.25)

# Shared layers and feature extraction.
shared_embedding = layers.Embedding(1000, 128)
text_input_a = keras.Input(shape=(None,), dtype="int32")
text_input_b = keras.Input(shape=(None,), dtype="int32")
encoded_input_a = shared_embedding(text_input_a)
encoded_input_b = shared_embedding(text_input_b)

base_in = keras.Input(shape=(16,))
base = keras.Model(base_in, layers.Dense(4, name="d2")(layers.Dense(8, name="d1")(base_in)))
features_list = [layer.output for layer in base.layers]
feat_extraction_model = keras.Model(inputs=base.input, outputs=features_list)
features = feat_extraction_model(rng.random((2, 16)).astype("float32"))
print([tuple(f.shape) for f in features])

# A custom layer in the functional API, with get_config.
class CustomDense(layers.Layer):
    def __init__(self, units=32):
        super().__init__()
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(
            shape=(input_shape[-1], self.units), initializer="random_normal", trainable=True
        )
        self.b = self.add_weight(shape=(self.units,), initializer="random_normal", trainable=True)

    def call(self, inputs):
        return ops.matmul(inputs, self.w) + self.b

    def get_config(self):
        return {"units": self.units}

inputs = keras.Input((4,))
outputs = CustomDense(10)(inputs)
model = keras.Model(inputs, outputs)
config = model.get_config()
new_model = keras.Model.from_config(config, custom_objects={"CustomDense": CustomDense})
print(new_model(np.ones((1, 4), "float32")).shape)
