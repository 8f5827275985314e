"""Keras's saving hooks on layers nested inside users' layers and nested
models, against Keras 3 on JAX (the oracle): model.save calls each nested
layer's save_own_variables (and save_assets), load_model its
load_own_variables (and load_assets), in the calls and with the values
Keras's do; get_build_config / build_from_config stay the saved layers'
only, as in Keras."""

import os

import numpy as np


def _classes(k, log):
    @k.saving.register_keras_serializable(package="nested_hooks")
    class Inner(k.layers.Layer):
        def __init__(self, **kw):  # (**kw: its config is found by kind, not by name)
            super().__init__(**kw)
            self.extra = np.zeros(2, "float32")

        def build(self, shape):
            log.append(("Inner.build", tuple(shape)))
            self.w = self.add_weight(shape=(shape[-1], 2), initializer="ones", name="w")

        def call(self, x):
            return x @ self.w

        def save_own_variables(self, store):
            store["0"] = np.asarray(self.w)
            store["extra"] = self.extra + 1
            log.append(("Inner.save", sorted(store.keys())))

        def load_own_variables(self, store):
            self.w.assign(store["0"])
            self.extra = np.asarray(store["extra"])
            log.append(("Inner.load", sorted(store.keys())))

        def get_build_config(self):
            log.append(("Inner.get_build_config",))
            return {"s": 3}

        def build_from_config(self, config):
            log.append(("Inner.build_from_config", config))
            self.build((None, 3))

        def save_assets(self, dir_path):
            with open(os.path.join(dir_path, "vocab.txt"), "w") as f:
                f.write("a b c")

        def load_assets(self, dir_path):
            with open(os.path.join(dir_path, "vocab.txt")) as f:
                log.append(("Inner.load_assets", f.read()))

    @k.saving.register_keras_serializable(package="nested_hooks")
    class Outer(k.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.inner = Inner(name="inner")

        def call(self, x):
            return self.inner(x)

    return Outer


def _round_trip(k, path, nested_model=False):
    log = []
    Outer = _classes(k, log)
    outer = Outer(name="outer")
    if nested_model:  # the user's layer inside a Sequential inside the model
        body = k.Sequential([k.Input((3,)), outer], name="body")
        m = k.Sequential([k.Input((3,)), body])
    else:
        m = k.Sequential([k.Input((3,)), outer])
    outer.inner.w.assign(np.arange(6, dtype="float32").reshape(3, 2))
    m.save(path)
    log.append("---")
    loaded = k.saving.load_model(path)
    found = loaded.layers[0].layers[0] if nested_model else loaded.layers[0]
    x = np.ones((2, 3), "float32")
    return log, found.inner.extra.tolist(), np.asarray(loaded.predict(x, verbose=0)).tolist()


def test_nested_layer_hooks_as_keras(keras, tmp_path):
    import tessera.nn as nn

    got = _round_trip(nn, str(tmp_path / "t.keras"))
    want = _round_trip(keras, str(tmp_path / "k.keras"))
    assert got == want
    assert ("Inner.save", ["0", "extra"]) in got[0] and got[1] == [1.0, 1.0]


def test_hooks_of_a_layer_inside_a_nested_model_as_keras(keras, tmp_path):
    import tessera.nn as nn

    got = _round_trip(nn, str(tmp_path / "t.keras"), nested_model=True)
    want = _round_trip(keras, str(tmp_path / "k.keras"), nested_model=True)
    assert got == want


def test_var_keyword_arguments_in_the_default_config():
    import tessera.nn as nn

    class Layer(nn.layers.Layer):
        def __init__(self, size=2, **kw):
            super().__init__(**kw)
            self.size = size

    assert Layer(size=3, name="x", trainable=False).get_config() == \
        {"size": 3, "name": "x", "trainable": False}
