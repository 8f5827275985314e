# Modeled on keras-io guides/serialization_and_saving.py; written for tessera.
import os, tempfile
import numpy as np
import tessera.nn as keras
from tessera.nn import ops

tmp = tempfile.mkdtemp()


def get_model():
    inputs = keras.Input(shape=(32,))
    outputs = keras.layers.Dense(1)(inputs)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(), loss="mean_squared_error")
    return model


model = get_model()
test_input = np.random.random((128, 32))
test_target = np.random.random((128, 1))
model.fit(test_input, test_target)
model.save(os.path.join(tmp, "my_model.keras"))
reconstructed_model = keras.models.load_model(os.path.join(tmp, "my_model.keras"))
np.testing.assert_allclose(model.predict(test_input), reconstructed_model.predict(test_input))


# Custom objects, registered.
@keras.saving.register_keras_serializable(package="my_package", name="custom_fn")
def custom_fn(x):
    return x**2


@keras.saving.register_keras_serializable(package="MyLayers")
class CustomLayer(keras.layers.Layer):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def call(self, x):
        return x * self.factor

    def get_config(self):
        return {"factor": self.factor}


@keras.saving.register_keras_serializable(package="my_package", name="custom_loss")
def custom_loss(y_true, y_pred):
    return ops.mean(ops.square(y_true - y_pred), axis=-1)


inputs = keras.Input(shape=(4,))
x = CustomLayer(2.0)(inputs)
x = keras.layers.Lambda(custom_fn)(x)
outputs = keras.layers.Dense(1)(x)
model = keras.Model(inputs, outputs)
model.compile(optimizer="rmsprop", loss=custom_loss)
model.fit(np.random.random((16, 4)), np.random.random((16, 1)), verbose=0)
model.save(os.path.join(tmp, "custom_model.keras"))
reconstructed_model = keras.models.load_model(os.path.join(tmp, "custom_model.keras"))
x = np.random.random((4, 4))
np.testing.assert_allclose(model.predict(x), reconstructed_model.predict(x), rtol=1e-6)

# get_config / from_config and to_json.
layer = keras.layers.Dense(3, activation="relu")
layer_config = layer.get_config()
new_layer = keras.layers.Dense.from_config(layer_config)
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(1)])
config = model.get_config()
new_model = keras.Sequential.from_config(config)
json_config = model.to_json()
new_model = keras.models.model_from_json(json_config)
new_model = keras.models.clone_model(model)

# Weights only.
def create_layer():
    layer = keras.layers.Dense(64, activation="relu", name="dense_2")
    layer.build((None, 784))
    return layer


layer_1 = create_layer()
layer_2 = create_layer()
layer_2.set_weights(layer_1.get_weights())

model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(8), keras.layers.Dense(2)])
model.save_weights(os.path.join(tmp, "my_model.weights.h5"))
model2 = keras.Sequential([keras.Input((784,)), keras.layers.Dense(8), keras.layers.Dense(2)])
model2.load_weights(os.path.join(tmp, "my_model.weights.h5"))
for a, b in zip(model.get_weights(), model2.get_weights()):
    np.testing.assert_array_equal(a, b)
print("saved and restored")
