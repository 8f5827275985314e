"""get_config, from_config and serialize of tessera.nn's layers and optimizers
against Keras 3 (JAX backend): the same constructor calls under both, the
configs compared key by key. What legitimately differs is normalised first,
and only that: the "module" of serialized objects (Keras writes its own
packages, keras.initializers; tessera its own, tessera.nn.initializers) and
the counters of automatic names (dense vs dense_3, which depend on what each
process made before)."""

import copy
import json
import os
import re

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "jax")
keras = pytest.importorskip("keras")

from tessera import nn  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data")

LAYERS = [
    "Dense(3)",
    "Dense(3, activation='relu', use_bias=False, kernel_regularizer='l2', "
    "kernel_initializer='he_normal', bias_constraint='non_neg')",
    "Conv1D(2, 3)", "Conv2D(4, 3, strides=2, padding='same', activation='relu')",
    "Conv3D(2, 2)", "Conv1DTranspose(3, 2)", "Conv2DTranspose(3, 2)", "Conv3DTranspose(3, 2)",
    "SeparableConv1D(3, 3)", "SeparableConv2D(3, 3, depth_multiplier=2)",
    "DepthwiseConv1D(3)", "DepthwiseConv2D(3)",
    "MaxPooling1D()", "MaxPooling2D(3, strides=1)", "AveragePooling1D(3)",
    "AveragePooling2D(2)", "GlobalAveragePooling2D()", "GlobalMaxPooling1D(keepdims=True)",
    "Dropout(0.5)", "Dropout(0.25, seed=3)", "BatchNormalization()",
    "BatchNormalization(momentum=0.9, epsilon=1e-5, center=False)", "LayerNormalization()",
    "Embedding(10, 4)", "Embedding(10, 4, mask_zero=True)", "LSTM(5)",
    "LSTM(5, return_sequences=True, dropout=0.1)", "GRU(5)", "GRU(5, reset_after=False)",
    "SimpleRNN(5)", "MultiHeadAttention(2, 4)", "MultiHeadAttention(2, 4, value_dim=3)",
    "Activation('relu')", "Activation('softmax')", "Reshape((2, 3))", "Flatten()",
    "Normalization()", "Rescaling(0.5, offset=1.0)", "Add()", "Concatenate(axis=1)",
    "InputLayer(shape=(3,))", "ConvLSTM2D(2, 3)", "EinsumDense('ab,bc->ac', 3)",
    "LeakyReLU()", "PReLU()", "UpSampling2D()", "Permute((2, 1))", "RepeatVector(3)",
    "GaussianNoise(0.1)", "GroupNormalization()", "UnitNormalization()", "ZeroPadding2D()",
    "ZeroPadding2D(((1, 2), (3, 4)))", "SpatialDropout2D(0.1)", "Discretization([0.5])",
    "RandomFlip()", "Resizing(4, 4)", "CenterCrop(2, 2)", "CategoryEncoding(3)",
    "Attention()", "Dot(1)", "ConvLSTM1D(2, 3)",
]

OPTIMIZERS = [
    ("SGD", {}), ("SGD", {"momentum": 0.9, "nesterov": True, "clipnorm": 1.0}),
    ("Adam", {}), ("Adam", {"weight_decay": 0.01, "global_clipnorm": 2.0, "use_ema": True}),
    ("AdamW", {}), ("RMSprop", {"centered": True}), ("Adagrad", {}), ("Nadam", {}),
    ("Lion", {}), ("Adamax", {"clipvalue": 0.5}), ("Adadelta", {}), ("Ftrl", {}),
    ("Lamb", {}), ("Adafactor", {}), ("Muon", {}),
]


def _normal(v):
    """A config with what legitimately differs taken out (the module docstring)."""
    if isinstance(v, dict):
        return {k: _normal(u) for k, u in v.items() if k != "module"}
    if isinstance(v, (list, tuple)):
        return [_normal(u) for u in v]
    return v


def _same(ours, theirs, what):
    ours, theirs = _normal(ours), _normal(theirs)
    for d in (ours, theirs):
        if isinstance(d.get("name"), str):
            d["name"] = re.sub(r"_\d+$", "", d["name"])
    assert sorted(ours) == sorted(theirs), (what, set(ours) ^ set(theirs))
    for key in theirs:
        assert ours[key] == theirs[key], (what, key, ours[key], theirs[key])


@pytest.mark.parametrize("call", LAYERS)
def test_layer_config_matches_keras_key_by_key(call):
    _same(eval("nn.layers." + call).get_config(), eval("keras.layers." + call).get_config(),
          call)


@pytest.mark.parametrize("call", LAYERS)
def test_from_config_and_deserialize_round_trip(call):
    layer = eval("nn.layers." + call)
    config = layer.get_config()
    again = type(layer).from_config(copy.deepcopy(config))
    assert type(again) is type(layer)
    assert again.get_config() == config
    back = nn.layers.deserialize(nn.layers.serialize(layer))
    assert back.get_config() == config
    # Keras's serialize wraps the same config (its module aside)
    theirs = keras.layers.serialize(eval("keras.layers." + call))
    ours = nn.layers.serialize(layer)
    assert sorted(ours) == sorted(theirs) and ours["class_name"] == theirs["class_name"]


def test_a_changed_config_builds_the_changed_layer_as_keras():
    # Scripts copy a config, change one key and rebuild: the same under both
    for lib in (nn, keras):
        config = lib.layers.Dense(3, activation="relu").get_config()
        config["units"], config["name"] = 7, "wide"
        wide = lib.layers.Dense.from_config(config)
        assert wide.units == 7 and wide.name == "wide"
    ours = nn.layers.Dense(3).get_config()
    ours.update(units=7, name="wide")
    theirs = keras.layers.Dense(3).get_config()
    theirs.update(units=7, name="wide")
    _same(nn.layers.Dense.from_config(ours).get_config(),
          keras.layers.Dense.from_config(theirs).get_config(), "Dense changed")


def test_a_config_from_keras_builds_tessera_s_layer():
    # Keras's own dicts (keras.initializers modules) are read too
    for call in ("Dense(4, kernel_regularizer='l1', kernel_constraint='max_norm')",
                 "Conv2D(2, 3, padding='same')", "LSTM(3, go_backwards=True)",
                 "BatchNormalization(momentum=0.8, scale=False)"):
        theirs = eval("keras.layers." + call)
        ours = type(eval("nn.layers." + call)).from_config(theirs.get_config())
        _same(ours.get_config(), theirs.get_config(), call)


def test_user_layer_config_is_what_it_writes():
    # Keras: super().get_config() of a user's layer gives only the base's entries
    class Scale(nn.layers.Layer):
        def __init__(self, factor=2.0, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

        def call(self, x):
            return x * self.factor

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    config = Scale(3.0, name="s").get_config()
    assert config["factor"] == 3.0 and config["name"] == "s"
    assert Scale.from_config(config).factor == 3.0


@pytest.mark.parametrize("name,kwargs", OPTIMIZERS)
def test_optimizer_config_matches_keras(name, kwargs):
    ours = getattr(nn.optimizers, name)(**kwargs).get_config()
    theirs = getattr(keras.optimizers, name)(**kwargs).get_config()
    _same(ours, theirs, name)
    again = getattr(nn.optimizers, name).from_config(ours).get_config()
    assert {**again, "name": 0} == {**ours, "name": 0}


def test_optimizer_serialize_and_schedule_as_keras():
    ours = nn.optimizers.Adam(learning_rate=nn.optimizers.schedules.ExponentialDecay(
        0.1, 100, 0.5))
    theirs = keras.optimizers.Adam(learning_rate=keras.optimizers.schedules.ExponentialDecay(
        0.1, 100, 0.5))
    _same(ours.get_config(), theirs.get_config(), "Adam with a schedule")
    s_ours, s_theirs = nn.optimizers.serialize(ours), keras.optimizers.serialize(theirs)
    assert sorted(s_ours) == sorted(s_theirs) and s_ours["class_name"] == "Adam"
    back = nn.optimizers.deserialize(s_ours)
    assert type(back) is nn.optimizers.Adam
    assert back.get_config()["learning_rate"] == ours.get_config()["learning_rate"]


def test_compiled_model_saves_and_loads_its_optimizer(tmp_path):
    model = nn.Sequential([nn.Input((3,)), nn.layers.Dense(2)])
    model.compile(nn.optimizers.Adam(0.01, beta_1=0.8, clipnorm=1.0), "mse")
    x = np.random.default_rng(1).normal(size=(8, 3)).astype("float32")
    model.fit(x, x[:, :2], epochs=1, verbose=0)
    path = str(tmp_path / "m.keras")
    model.save(path)
    back = nn.load_model(path)
    assert back.optimizer.get_config() == model.optimizer.get_config()


def test_a_file_saved_before_keras_configs_still_loads():
    # tests/python/data/kerascfg_old_format.keras: written by tessera with the earlier
    # configs (only the given arguments); its predictions were saved beside it
    io = np.load(os.path.join(DATA, "kerascfg_old_format_io.npz"))
    model = nn.load_model(os.path.join(DATA, "kerascfg_old_format.keras"))
    # Within float32's rounding, not bitwise: the predictions were saved on another CPU,
    # whose matrix kernels sum in another order (a wrong weight differs by far more).
    np.testing.assert_allclose(model.predict(io["x"], verbose=0), io["y"], rtol=1e-5, atol=1e-6)
    head = model.get_layer("head").get_config()
    assert head["units"] == 3 and head["activation"] == "softmax"
    assert head["kernel_initializer"]["class_name"] == "HeNormal"
    assert head["kernel_constraint"]["config"]["max_value"] == 2.0
    assert model.get_layer("conv").get_config()["kernel_size"] == (3,)


def test_model_config_layers_read_as_keras():
    def build(lib):
        return lib.Sequential([lib.Input((4,)), lib.layers.Dense(3, activation="relu"),
                               lib.layers.Dense(2)])

    ours = json.loads(build(nn).to_json())
    theirs = json.loads(build(keras).to_json())
    for doc in (ours, theirs):
        assert doc["class_name"] == "Sequential"
    ours_layers = [l for l in ours["config"]["layers"] if l["class_name"] != "InputLayer"]
    theirs_layers = [l for l in theirs["config"]["layers"] if l["class_name"] != "InputLayer"]
    assert len(ours_layers) == len(theirs_layers)
    for a, b in zip(ours_layers, theirs_layers):
        assert a["class_name"] == b["class_name"]
        # (JSON: Keras's tuples are lists in both)
        _same(a["config"], b["config"], a["class_name"])
    back = nn.models.model_from_json(build(nn).to_json())
    assert [type(l).__name__ for l in back.layers] == ["Dense", "Dense"]


EAGER = ["Dense(3, activation='tanh')", "Conv1D(2, 3)", "LayerNormalization()",
         "BatchNormalization()", "Activation('gelu')", "Rescaling(0.5)", "Flatten()",
         "GlobalAveragePooling1D()", "LSTM(3)"]


@pytest.mark.parametrize("call", EAGER)
def test_eager_call_on_float64_computes_in_float32_as_keras(call):
    x = np.random.default_rng(3).normal(size=(2, 5, 4))  # float64
    theirs_layer = eval("keras.layers." + call)
    theirs = np.asarray(theirs_layer(x))
    ours_layer = eval("nn.layers." + call)
    ours_layer(x[:1])  # builds; then Keras's weights (float32) in
    ours_layer.set_weights([np.asarray(w) for w in theirs_layer.get_weights()])
    ours = ours_layer(x)
    assert ours.dtype == theirs.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6)
    # a float64 layer computes in float64 (Keras's compute dtype); the same values
    wide = eval("nn.layers." + call[:-1] + (", " if call[-2] != "(" else "") + "dtype='float64')")
    wide(x[:1])
    wide.set_weights([np.asarray(w, "float64") for w in theirs_layer.get_weights()])
    assert wide(x).dtype == np.float64
    np.testing.assert_allclose(wide(x), theirs, rtol=2e-5, atol=2e-6)


def test_eager_integer_inputs_keep_their_dtype_as_keras():
    ids = np.array([[1, 2, 0]])
    assert nn.layers.Embedding(5, 2)(ids).dtype == np.asarray(
        keras.layers.Embedding(5, 2)(ids)).dtype == np.float32
    x = np.array([-3, 0, 2], "int32")
    for fn in ("relu",):
        ours, theirs = getattr(nn.activations, fn)(x), np.asarray(getattr(keras.activations,
                                                                           fn)(x))
        assert ours.dtype == theirs.dtype == np.int32
        np.testing.assert_array_equal(ours, theirs)
    assert np.asarray(nn.ops.relu(x)).dtype == np.asarray(keras.ops.relu(x)).dtype


def test_serialized_optimizers_keep_their_class_by_module():
    # keras.optimizers' Adam (Keras's config) and tessera.optim's (PyTorch's L2 decay) share a
    # name: serialize_keras_object's module picks the class back
    from tessera import optim
    from tessera.nn.utils import deserialize_keras_object, serialize_keras_object
    ours = deserialize_keras_object(serialize_keras_object(nn.optimizers.SGD(0.1, momentum=0.5)))
    assert type(ours) is nn.optimizers.SGD and ours.momentum == 0.5
    torch_like = deserialize_keras_object(serialize_keras_object(optim.Adam(0.1,
                                                                            weight_decay=0.1)))
    assert type(torch_like) is optim.Adam and "decoupled" not in torch_like.get_config()


# Users' constraints and regularizers (issue 30: the Keras-shaped configs were first
# merged without the registry's lookup: such models no longer loaded)

@pytest.fixture
def registry_kept():
    """The tests' registrations taken out of tessera's and Keras's registries after."""
    saved = [(lib, dict(lib.saving.get_custom_objects())) for lib in (nn, keras)]
    yield
    for lib, before in saved:
        objects = lib.saving.get_custom_objects()
        objects.clear()
        objects.update(before)


def _user_classes(lib, package):
    @lib.saving.register_keras_serializable(package=package)
    class ClipTo(lib.constraints.Constraint):
        def __init__(self, limit=0.1):
            self.limit = limit

        def __call__(self, w):
            return lib.ops.clip(w, -self.limit, self.limit)

        def get_config(self):
            return {"limit": self.limit}

    class SumAbs(lib.regularizers.Regularizer):  # not registered: custom_objects or a scope
        def __init__(self, factor=0.01):
            self.factor = factor

        def __call__(self, w):
            return self.factor * lib.ops.sum(lib.ops.abs(w))

        def get_config(self):
            return {"factor": self.factor}

    return ClipTo, SumAbs


@pytest.mark.parametrize("how", ["custom_objects", "custom_object_scope"])
def test_user_constraint_and_regularizer_save_and_load_as_keras(tmp_path, how, registry_kept):
    x = np.random.default_rng(2).normal(size=(6, 3)).astype("float32")
    loaded = {}
    for lib in (nn, keras):
        ClipTo, SumAbs = _user_classes(lib, f"kc2_{how}")
        model = lib.Sequential([lib.Input((3,)), lib.layers.Dense(
            2, kernel_constraint=ClipTo(0.2), kernel_regularizer=SumAbs(0.5), name="d")])
        model.compile(optimizer="sgd", loss="mse")
        model.fit(x, x[:, :2], epochs=2, batch_size=3, verbose=0)
        path = str(tmp_path / f"{lib.__name__}.keras")
        model.save(path)
        if how == "custom_objects":
            back = lib.models.load_model(path, custom_objects={"SumAbs": SumAbs})
        else:
            with lib.saving.custom_object_scope({"SumAbs": SumAbs}):
                back = lib.models.load_model(path)
        np.testing.assert_allclose(back.predict(x, verbose=0), model.predict(x, verbose=0),
                                   rtol=1e-6, atol=1e-6)
        assert np.abs(back.get_layer("d").get_weights()[0]).max() <= 0.2 + 1e-6
        loaded[lib.__name__] = back.get_layer("d").get_config()
        # a config of the user's objects builds them again (from_config, within a scope)
        with lib.saving.custom_object_scope({"SumAbs": SumAbs}):
            again = lib.layers.Dense.from_config(loaded[lib.__name__])
        assert again.get_config() == loaded[lib.__name__]
        assert again.kernel_regularizer.factor == 0.5
    _same(loaded["tessera.nn"], loaded["keras"], "Dense with a user's constraint")


def test_an_unknown_user_constraint_in_a_file_is_a_clean_error(tmp_path, registry_kept):
    ClipTo, _ = _user_classes(nn, "kc2_unknown")
    model = nn.Sequential([nn.Input((3,)), nn.layers.Dense(2, kernel_constraint=ClipTo())])
    path = str(tmp_path / "m.keras")
    model.save(path)
    nn.saving.get_custom_objects().clear()
    with pytest.raises(ValueError, match=r"\[load_model\] .*names the class .*ClipTo.* "
                                         r"custom_objects"):
        nn.load_model(path)


def _clip_weights(w):
    return nn.ops.clip(w, -0.1, 0.1)


def test_a_function_constraint_saves_by_its_name_as_before(tmp_path):
    # The config keeps the function (tessera's files name it; load_model's custom_objects
    # gives it back); a lambda cannot be saved, with the error that says why
    layer = nn.layers.Dense(2, kernel_constraint=_clip_weights, name="d")
    assert layer.get_config()["kernel_constraint"] is _clip_weights
    model = nn.Sequential([nn.Input((3,)), layer])
    x = np.random.default_rng(3).normal(size=(6, 3)).astype("float32")
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, x[:, :2], epochs=1, verbose=0)
    path = str(tmp_path / "f.keras")
    model.save(path)
    back = nn.load_model(path, custom_objects={"_clip_weights": _clip_weights})
    assert back.get_layer("d").get_config()["kernel_constraint"] is _clip_weights
    np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))
    with pytest.raises(ValueError, match="names the function '_clip_weights'"):
        nn.load_model(path)
    lam = nn.Sequential([nn.Input((3,)), nn.layers.Dense(2, kernel_constraint=lambda w: w)])
    with pytest.raises(TypeError, match=r"\[save\] cannot save the function '.*<lambda>'"):
        lam.save(str(tmp_path / "l.keras"))


_JUNK = [None, True, -1, 2 ** 70, 1e308, float("nan"), "", "x" * 300, "float32", "int64", [],
         {}, [1, 2], {"a": 1}, 3.5]
_JUNK_OF_TYPES = [[], {}, {"a": 1}, float("nan"), "x" * 300]  # (at every field, as well)


def _spots(v, path=()):
    """(path, value) of every entry of a JSON document."""
    if isinstance(v, dict):
        for k, u in v.items():
            yield path + (k,), u
            yield from _spots(u, path + (k,))
    elif isinstance(v, list):
        for i, u in enumerate(v):
            yield path + (i,), u
            yield from _spots(u, path + (i,))


def test_every_field_of_a_saved_layer_config_replaced_loads_or_is_a_value_error(tmp_path):
    # Each field of the Keras-shaped config (the dtype policy's dict, the initializers',
    # regularizers' and constraints' dicts, ...) replaced by a value of the wrong type: the
    # file loads, or load_model raises its ValueError; never a TypeError or a crash
    import hashlib
    import struct

    model = nn.Sequential([nn.Input((3,)), nn.layers.Dense(
        2, kernel_regularizer="l2", kernel_constraint="max_norm", name="d")])
    good = tmp_path / "good.keras"
    model.save(str(good))
    blob = good.read_bytes()
    (length,) = struct.unpack("<Q", blob[8:16])
    header = json.loads(blob[16:16 + length])
    layers = header["model"]["layers"]
    at = next(i for i, l in enumerate(layers) if l.get("class") == "Dense")
    spots = [p for p, _ in _spots(layers[at]["config"])]
    assert len(spots) > 20  # (the whole config: every argument and its nested dicts)
    rnd = np.random.default_rng(30)
    outcomes = {"ok": 0, "error": 0}
    path = tmp_path / "mutant.keras"
    for spot in spots:
        for junk in [_JUNK[i] for i in rnd.choice(len(_JUNK), 4, replace=False)] + \
                _JUNK_OF_TYPES:
            h = copy.deepcopy(header)
            target = h["model"]["layers"][at]["config"]
            for p in spot[:-1]:
                target = target[p]
            target[spot[-1]] = junk
            text = json.dumps(h).encode()
            body = blob[:8] + struct.pack("<Q", len(text)) + text + blob[16 + length:-32]
            path.write_bytes(body + hashlib.sha256(body).digest())
            try:
                nn.load_model(str(path))
                outcomes["ok"] += 1
            except ValueError as e:
                assert str(e).startswith("["), (spot, junk, e)  # (an op's own error)
                outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 0, outcomes


# Wrappers: the wrapped layer as Keras's dict

WRAPPERS = [
    "Bidirectional(LSTM(3, return_sequences=True, name='rnn'), merge_mode='sum', name='bi')",
    "Bidirectional(GRU(2, name='rnn'), name='bi')",
    "TimeDistributed(Dense(2, activation='relu', name='inner'), name='td')",
]


def _layers_call(lib, call):
    return eval(re.sub(r"\b([A-Z]\w*)\(", r"lib.layers.\1(", call))


@pytest.mark.parametrize("call", WRAPPERS)
def test_wrapper_config_holds_the_wrapped_layer_as_keras(call):
    ours, theirs = _layers_call(nn, call).get_config(), _layers_call(keras, call).get_config()
    _same(ours, theirs, call)
    again = type(_layers_call(nn, call)).from_config(copy.deepcopy(ours))
    assert again.get_config() == ours
    # a config Keras wrote builds tessera's wrapper
    _same(type(again).from_config(copy.deepcopy(theirs)).get_config(), theirs, call)


def test_a_model_with_wrappers_saves_loads_and_rebuilds_from_json(tmp_path):
    x = np.random.default_rng(4).normal(size=(4, 5, 3)).astype("float32")
    inp = nn.Input((5, 3))
    h = nn.layers.Bidirectional(nn.layers.LSTM(4, return_sequences=True), name="bi")(inp)
    out = nn.layers.TimeDistributed(nn.layers.Dense(2, kernel_regularizer="l2"), name="td")(h)
    model = nn.Model(inp, out)
    path = str(tmp_path / "w.keras")
    model.save(path)
    back = nn.load_model(path)
    np.testing.assert_array_equal(back.predict(x, verbose=0), model.predict(x, verbose=0))
    assert [w.path for w in back.weights] == [w.path for w in model.weights]
    assert back.get_layer("bi").get_config() == model.get_layer("bi").get_config()
    rebuilt = nn.models.model_from_json(model.to_json())
    assert [w.path for w in rebuilt.weights] == [w.path for w in model.weights]


# A functional model's to_json: Keras's inbound_nodes, input_layers, output_layers

def _functional(lib):
    a, b = lib.Input((4,), name="a"), lib.Input((4,), name="b")
    shared = lib.layers.Dense(3, name="shared")
    added = lib.layers.Add(name="added")([shared(a), shared(b)])
    out = lib.layers.Dense(2, name="out")(added)
    scaled = out * 2.0 + a[:, :2]
    return lib.Model([a, b], [out, scaled, added])


def _unnumbered(v):
    """A document with the counters of operations' names taken out (Keras numbers them
    across the process: add_2 after two other models' additions; tessera per model)."""
    if isinstance(v, dict):
        return {k: _unnumbered(u) for k, u in v.items()}
    if isinstance(v, list):
        return [_unnumbered(u) for u in v]
    return re.sub(r"_\d+$", "", v) if isinstance(v, str) else v


def test_functional_to_json_reads_as_keras():
    ours = _unnumbered(json.loads(_functional(nn).to_json())["config"])
    theirs = _unnumbered(json.loads(_functional(keras).to_json())["config"])
    assert ours["input_layers"] == theirs["input_layers"]
    assert ours["output_layers"] == theirs["output_layers"]
    by_name = {l["name"]: l for l in ours["layers"]}
    assert sorted(by_name) == sorted(l["name"] for l in theirs["layers"])
    for entry in theirs["layers"]:
        mine = by_name[entry["name"]]
        assert mine["class_name"] == entry["class_name"], entry["name"]
        assert _normal(mine["inbound_nodes"]) == _normal(entry["inbound_nodes"]), entry["name"]
    # what scripts do with it: the graph's edges, layer by layer
    def edges(config):
        return sorted((l["name"], t["config"]["keras_history"][0])
                      for l in config["layers"] for node in l["inbound_nodes"]
                      for t in _tensors(node["args"]))
    assert edges(ours) == edges(theirs)


def _tensors(args):
    for a in args:
        if isinstance(a, list):
            yield from _tensors(a)
        elif isinstance(a, dict) and a.get("class_name") == "__keras_tensor__":
            yield a


def test_single_input_functional_to_json_names_its_tensors_as_keras():
    def build(lib):
        inp = lib.Input((3,), name="x")
        return lib.Model(inp, lib.layers.Dense(2, name="d")(inp))
    ours = json.loads(build(nn).to_json())["config"]
    theirs = json.loads(build(keras).to_json())["config"]
    assert (ours["input_layers"], ours["output_layers"]) == \
        (theirs["input_layers"], theirs["output_layers"])
    assert [l["name"] for l in ours["layers"]] == [l["name"] for l in theirs["layers"]]
