# Modeled on keras-io guides/customizing_saving_and_serialization.py; written for tessera.
# Keras's saving hooks: save_own_variables / load_own_variables, save_assets /
# load_assets, get_build_config / build_from_config, get_compile_config /
# compile_from_config; load_model calls them in Keras's order (build, compile,
# variables, assets). Differences from the guide: tf.Variable -> keras.Variable, tf ops
# -> keras.ops; files in a temporary folder; the first model's labels have the output's
# shape (8, 10) (tessera refuses labels that would broadcast against the output).
import os
import tempfile

import numpy as np

import tessera.nn as keras
from tessera.nn import ops

tmp = tempfile.mkdtemp()
calls = []  # the order load_model calls the hooks in


# save_own_variables / load_own_variables: a variable of the layer's own beside the
# Dense layer's weights, in the store under a key of its choosing.
@keras.saving.register_keras_serializable(package="my_custom_package")
class LayerWithCustomVariables(keras.layers.Dense):
    def __init__(self, units, **kwargs):
        super().__init__(units, **kwargs)
        self.stored_variables = keras.Variable(
            np.random.random((10,)), name="special_arr", dtype="float32")

    def save_own_variables(self, store):
        super().save_own_variables(store)
        store["variables"] = self.stored_variables.numpy()

    def load_own_variables(self, store):
        calls.append("load_own_variables")
        self.stored_variables.assign(store["variables"])
        for i, v in enumerate(self.weights):
            v.assign(store[f"{i}"])

    def call(self, inputs):
        return super().call(inputs) * self.stored_variables


model = keras.Sequential([LayerWithCustomVariables(1)])
ref_input = np.random.random((8, 10))
ref_output = np.random.random((8, 10))
model.compile(optimizer="adam", loss="mean_squared_error")
model.fit(ref_input, ref_output)
model.save(os.path.join(tmp, "custom_vars_model.keras"))
restored_model = keras.models.load_model(os.path.join(tmp, "custom_vars_model.keras"))
np.testing.assert_allclose(model.layers[0].stored_variables.numpy(),
                           restored_model.layers[0].stored_variables.numpy())
np.testing.assert_allclose(model.predict(ref_input), restored_model.predict(ref_input),
                           rtol=1e-6)
print("custom variables restored:", calls)


# save_assets / load_assets: a text file kept with the model.
@keras.saving.register_keras_serializable(package="my_custom_package")
class LayerWithCustomAssets(keras.layers.Dense):
    def __init__(self, vocab=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.vocab = vocab

    def save_assets(self, inner_path):
        with open(os.path.join(inner_path, "vocabulary.txt"), "w") as f:
            f.write(self.vocab)

    def load_assets(self, inner_path):
        calls.append("load_assets")
        with open(os.path.join(inner_path, "vocabulary.txt"), "r") as f:
            text = f.read()
        self.vocab = text.replace("<unk>", "little")


model = keras.Sequential([LayerWithCustomAssets(vocab="Mary had a <unk> lamb.", units=5)])
x = np.random.random((10, 10))
y = model(x)
model.save(os.path.join(tmp, "custom_assets_model.keras"))
restored_model = keras.models.load_model(os.path.join(tmp, "custom_assets_model.keras"))
np.testing.assert_string_equal(restored_model.layers[0].vocab, "Mary had a little lamb.")
print("assets restored:", restored_model.layers[0].vocab)


# get_build_config / build_from_config: a build taking an extra argument.
@keras.saving.register_keras_serializable(package="my_custom_package")
class LayerWithCustomBuild(keras.layers.Layer):
    def __init__(self, units=32, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def call(self, inputs):
        return ops.matmul(inputs, self.w) + self.b

    def get_config(self):
        return dict(units=self.units, **super().get_config())

    def build(self, input_shape, layer_init):
        super().build(input_shape)
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer=layer_init,
                                 trainable=True)
        self.b = self.add_weight(shape=(self.units,), initializer=layer_init, trainable=True)
        self.layer_init = layer_init

    def get_build_config(self):
        build_config = super().get_build_config()
        build_config.update({"layer_init": self.layer_init})
        return build_config

    def build_from_config(self, config):
        calls.append("build_from_config")
        self.build(config["input_shape"], config["layer_init"])


custom_layer = LayerWithCustomBuild(units=16)
custom_layer.build(input_shape=(8,), layer_init="random_normal")
model = keras.Sequential([custom_layer, keras.layers.Dense(1, activation="sigmoid")])
x = np.random.random((16, 8))
y = model(x)
model.save(os.path.join(tmp, "custom_build_model.keras"))
restored_model = keras.models.load_model(os.path.join(tmp, "custom_build_model.keras"))
np.testing.assert_equal(restored_model.layers[0].layer_init, "random_normal")
np.testing.assert_equal(restored_model.built, True)
np.testing.assert_allclose(np.asarray(model(x)), np.asarray(restored_model(x)), rtol=1e-6)
print("built from its config:", restored_model.layers[0].layer_init)


# get_compile_config / compile_from_config: a compile with arguments of its own.
@keras.saving.register_keras_serializable(package="my_custom_package")
def small_square_sum_loss(y_true, y_pred):
    loss = ops.square(y_pred - y_true)
    loss = loss / 10.0
    loss = ops.sum(loss, axis=1)
    return loss


@keras.saving.register_keras_serializable(package="my_custom_package")
def mean_pred(y_true, y_pred):
    return ops.mean(y_pred)


@keras.saving.register_keras_serializable(package="my_custom_package")
class ModelWithCustomCompile(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense1 = keras.layers.Dense(8, activation="relu")
        self.dense2 = keras.layers.Dense(4, activation="softmax")

    def call(self, inputs):
        x = self.dense1(inputs)
        return self.dense2(x)

    def compile(self, optimizer, loss_fn, metrics):
        super().compile(optimizer=optimizer, loss=loss_fn, metrics=metrics)
        self.model_optimizer = optimizer
        self.loss_fn = loss_fn
        self.loss_metrics = metrics

    def get_compile_config(self):
        return {"model_optimizer": self.model_optimizer, "loss_fn": self.loss_fn,
                "metric": self.loss_metrics}

    def compile_from_config(self, config):
        calls.append("compile_from_config")
        optimizer = keras.utils.deserialize_keras_object(config["model_optimizer"])
        loss_fn = keras.utils.deserialize_keras_object(config["loss_fn"])
        metrics = keras.utils.deserialize_keras_object(config["metric"])
        self.compile(optimizer=optimizer, loss_fn=loss_fn, metrics=metrics)


model = ModelWithCustomCompile()
model.compile(optimizer="SGD", loss_fn=small_square_sum_loss, metrics=["accuracy", mean_pred])
x = np.random.random((4, 8))
y = np.random.random((4, 4))
model.fit(x, y)
model.save(os.path.join(tmp, "custom_compile_model.keras"))
restored_model = keras.models.load_model(os.path.join(tmp, "custom_compile_model.keras"))
np.testing.assert_equal(model.model_optimizer, restored_model.model_optimizer)
np.testing.assert_equal(model.loss_fn, restored_model.loss_fn)
np.testing.assert_equal(model.loss_metrics, restored_model.loss_metrics)
print("compiled from its config:", restored_model.model_optimizer,
      restored_model.loss_fn.__name__)
print("hooks called:", calls)
