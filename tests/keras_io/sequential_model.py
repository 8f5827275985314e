# Modeled on keras-io guides/sequential_model.py (the API calls it makes); written for tessera.
import numpy as np
import tessera.nn as keras
from tessera.nn import layers, ops

model = keras.Sequential(
    [
        layers.Dense(2, activation="relu", name="layer1"),
        layers.Dense(3, activation="relu", name="layer2"),
        layers.Dense(4, name="layer3"),
    ]
)
x = ops.ones((3, 3))
y = model(x)
print(model.layers)

model = keras.Sequential()
model.add(layers.Dense(2, activation="relu"))
model.add(layers.Dense(3, activation="relu"))
model.add(layers.Dense(4))
model.pop()
print(len(model.layers))  # 2

layer = layers.Dense(3)
print(layer.weights)  # empty
x = ops.ones((1, 4))
y = layer(x)
print(layer.weights)  # kernel and bias

model = keras.Sequential(
    [
        layers.Dense(2, activation="relu"),
        layers.Dense(3, activation="relu"),
        layers.Dense(4),
    ]
)
x = ops.ones((1, 4))
y = model(x)
print("Number of weights after calling the model:", len(model.weights))  # 6
model.summary()

model = keras.Sequential()
model.add(keras.Input(shape=(4,)))
model.add(layers.Dense(2, activation="relu"))
model.summary()
print(model.layers)

# Debugging workflow: add() + summary().
model = keras.Sequential()
model.add(keras.Input(shape=(250, 250, 3)))
model.add(layers.Conv2D(32, 5, strides=2, activation="relu"))
model.add(layers.Conv2D(32, 3, activation="relu"))
model.add(layers.MaxPooling2D(3))
model.summary()
model.add(layers.Conv2D(32, 3, activation="relu"))
model.add(layers.Conv2D(32, 3, activation="relu"))
model.add(layers.MaxPooling2D(3))
model.add(layers.Conv2D(32, 3, activation="relu"))
model.add(layers.Conv2D(32, 3, activation="relu"))
model.add(layers.MaxPooling2D(2))
model.summary()
model.add(layers.GlobalMaxPooling2D())
model.add(layers.Dense(10))

# Feature extraction.
initial_model = keras.Sequential(
    [
        keras.Input(shape=(250, 250, 3)),
        layers.Conv2D(32, 5, strides=2, activation="relu"),
        layers.Conv2D(32, 3, activation="relu", name="my_intermediate_layer"),
        layers.Conv2D(32, 3, activation="relu"),
    ]
)
feature_extractor = keras.Model(
    inputs=initial_model.inputs,
    outputs=initial_model.get_layer(name="my_intermediate_layer").output,
)
x = ops.ones((1, 250, 250, 3))
features = feature_extractor(x)
print(features.shape)

# Transfer learning: freeze all but the last layer.
model = keras.Sequential([
    keras.Input(shape=(784,)),
    layers.Dense(32, activation="relu"),
    layers.Dense(32, activation="relu"),
    layers.Dense(32, activation="relu"),
    layers.Dense(10),
])
for layer in model.layers[:-1]:
    layer.trainable = False
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
rng = np.random.default_rng(0)
model.fit(rng.random((64, 784)).astype("float32"), rng.integers(0, 10, 64), epochs=1, verbose=0)
print(len(model.trainable_weights))  # 2
