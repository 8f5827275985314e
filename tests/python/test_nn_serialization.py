"""Keras's serialization API in tessera.nn (issue 30, item 2): from_config
class methods, register_keras_serializable / get_custom_objects /
custom_object_scope / custom_objects=, to_json / model_from_json,
clone_model, with users' classes (layers, losses, metrics)."""

import os

import numpy as np
import pytest

import tessera.nn as nn
from tessera.nn import saving


class Linear(nn.Layer):
    def __init__(self, units=32, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units),
                                 initializer="random_normal")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros")

    def call(self, inputs):
        return np.matmul(inputs, self.w) + self.b

    def get_config(self):
        return {**super().get_config(), "units": self.units}


class Doubled(nn.Layer):
    """A layer whose from_config is its own (Keras calls it when loading)."""

    made_by_from_config = 0

    def __init__(self, factor, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, inputs):
        return inputs * self.factor

    def get_config(self):
        return {"name": self.name, "half": self.factor / 2}

    @classmethod
    def from_config(cls, config):
        Doubled.made_by_from_config += 1
        return cls(config["half"] * 2, name=config["name"])


class ScaledMSE(nn.losses.Loss):
    def __init__(self, scale=2.0, name="scaled_mse", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = scale

    def call(self, y_true, y_pred):
        return self.scale * np.mean(np.square(y_pred - y_true), axis=-1)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


class SumOfPredictions(nn.metrics.Metric):
    def __init__(self, name="sum_of_predictions", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_variable(shape=(), name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.total.assign_add(np.sum(y_pred))

    def result(self):
        return self.total


CUSTOM = {"Linear": Linear, "Doubled": Doubled, "ScaledMSE": ScaledMSE,
          "SumOfPredictions": SumOfPredictions}


def _model():
    inp = nn.Input((3,))
    out = nn.Dense(2)(Doubled(3.0)(Linear(4)(inp)))
    model = nn.Model(inp, out)
    model.compile(nn.optimizers.Adamax(0.01), ScaledMSE(3.0), metrics=[SumOfPredictions()])
    return model


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(12, 3)).astype(np.float32), rng.normal(size=(12, 2)).astype(
        np.float32)


def test_save_and_load_with_user_classes(tmp_path):
    model = _model()
    x, y = _data()
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    path = os.fspath(tmp_path / "m.keras")
    model.save(path)
    with pytest.raises(ValueError, match=r"names the class (Linear|Doubled|ScaledMSE).*"
                                         r"custom_objects=\{'(Linear|Doubled|ScaledMSE)'"):
        nn.load_model(path)
    before = Doubled.made_by_from_config
    loaded = nn.load_model(path, custom_objects=CUSTOM)
    assert Doubled.made_by_from_config == before + 1  # the class's own from_config
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert type(loaded.loss if hasattr(loaded, "loss") else loaded._compiled.losses[0]) \
        is ScaledMSE
    np.testing.assert_allclose(loaded.evaluate(x, y, verbose=0), model.evaluate(x, y, verbose=0),
                               rtol=1e-6)
    # training goes on identically (optimizer state restored)
    h1 = model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    h2 = loaded.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)
    assert h1.history == h2.history
    with saving.custom_object_scope(CUSTOM):
        scoped = nn.load_model(path)
    fresh = nn.load_model(path, custom_objects=CUSTOM)
    np.testing.assert_array_equal(scoped.predict(x, verbose=0), fresh.predict(x, verbose=0))


def test_register_keras_serializable_and_get_custom_objects(tmp_path):
    model = _model()
    path = os.fspath(tmp_path / "m.keras")
    model.save(path)
    saved = dict(saving.get_custom_objects())
    try:
        for cls in CUSTOM.values():
            nn.register_keras_serializable(package="Tests")(cls)
        objects = saving.get_custom_objects()
        assert objects["Tests>Linear"] is Linear and objects["Tests>ScaledMSE"] is ScaledMSE
        assert saving.get_registered_name(Linear) == "Tests>Linear"
        assert saving.get_registered_object("Tests>Linear") is Linear
        loaded = nn.load_model(path)
        x, _ = _data()
        np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    finally:
        objects = saving.get_custom_objects()
        objects.clear()
        objects.update(saved)
    assert saving.get_registered_object("Tests>Linear") is None


def test_to_json_and_model_from_json():
    model = _model()
    text = model.to_json()
    with pytest.raises(ValueError, match=r"names the class (Linear|Doubled).*custom_objects"):
        nn.models.model_from_json(text)
    again = nn.models.model_from_json(text, custom_objects=CUSTOM)
    assert [type(l).__name__ for l in again.layers] == [type(l).__name__ for l in model.layers]
    assert [l.name for l in again.layers] == [l.name for l in model.layers]
    assert again.to_json() == text
    again.set_weights(model.get_weights())
    x, _ = _data()
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
    with pytest.raises(ValueError, match=r"\[model_from_json\] the text is not JSON"):
        nn.models.model_from_json("{not json")


def test_from_config_class_methods():
    model = _model()
    again = nn.Model.from_config(model.get_config(), custom_objects=CUSTOM)
    assert again.count_params() == model.count_params()
    layer = Linear(5, name="lin")
    copy = Linear.from_config(layer.get_config())
    assert type(copy) is Linear and copy.units == 5 and copy.name == "lin"
    dense = nn.Dense(3, activation="relu", name="d")
    assert nn.Dense.from_config(dense.get_config()).get_config() == dense.get_config()
    loss = ScaledMSE.from_config(ScaledMSE(4.0).get_config())
    assert loss.scale == 4.0 and loss.name == "scaled_mse"
    metric = SumOfPredictions.from_config(SumOfPredictions(name="s").get_config())
    assert metric.name == "s"
    lion = nn.optimizers.Lion(0.002)  # (its config names it, as Keras's)
    opt = nn.optimizers.Lion.from_config(lion.get_config())
    assert opt.get_config() == lion.get_config()
    sched = nn.optimizers.schedules.CosineDecay(0.1, 100)
    assert type(sched).from_config(sched.get_config()).get_config() == sched.get_config()


def test_clone_model_new_weights_same_config():
    model = _model()
    x, y = _data()
    model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    clone = nn.models.clone_model(model)
    assert [l.get_config() for l in clone.layers] == [l.get_config() for l in model.layers]
    assert all(a is not b for a, b in zip(clone.layers, model.layers))
    assert not np.array_equal(clone.get_weights()[0], model.get_weights()[0])  # new weights
    assert [w.shape for w in clone.get_weights()] == [w.shape for w in model.get_weights()]
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(clone.predict(x, verbose=0), model.predict(x, verbose=0))
    renamed = nn.models.clone_model(model, clone_function=lambda l: type(l).from_config(
        {**l.get_config(), "name": "c_" + l.name}))
    inputs = [l for l in model.layers if isinstance(l, nn.InputLayer)]
    assert inputs and [l.name for l in renamed.layers[:len(inputs)]] == [l.name for l in inputs]
    # clone_function is called on every layer but the inputs, as Keras's
    assert [l.name for l in renamed.layers[len(inputs):]] == \
        ["c_" + l.name for l in model.layers[len(inputs):]]
    seq = nn.Sequential([nn.Dense(4, input_shape=(3,)), nn.Dense(1)])
    seq_clone = nn.models.clone_model(seq)
    assert isinstance(seq_clone, nn.Sequential) and seq_clone.count_params() == seq.count_params()
    with pytest.raises(ValueError, match=r"\[clone_model\] input_tensors is not supported"):
        nn.models.clone_model(seq, input_tensors=[nn.Input((3,))])
    with pytest.raises(TypeError, match=r"\[clone_model\] clone_function must return a Layer"):
        nn.models.clone_model(seq, clone_function=lambda l: None)


def test_loss_serialize_deserialize():
    cfg = nn.losses.serialize(nn.losses.BinaryFocalCrossentropy(gamma=3.0))
    assert cfg["class_name"] == "BinaryFocalCrossentropy"
    assert nn.losses.deserialize(cfg).gamma == 3.0
    user = nn.losses.serialize(ScaledMSE(5.0))
    with pytest.raises(ValueError, match=r"unknown loss class 'ScaledMSE'.*custom_objects"):
        nn.losses.deserialize(user)
    assert nn.losses.deserialize(user, custom_objects=CUSTOM).scale == 5.0
    with saving.custom_object_scope({"ScaledMSE": ScaledMSE}):
        assert nn.losses.deserialize(user).scale == 5.0
