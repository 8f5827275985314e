"""keras.utils.FeatureSpace (tessera.nn.utils.FeatureSpace) against Keras 3 on JAX.

Keras's FeatureSpace needs TensorFlow (its adapt and call go through tf.data and
TensorFlow's lookup tables), which is not installed here. So the oracle is the same
encoding built from Keras's own layers on JAX, as Keras's FeatureSpace builds it:
Normalization, Rescaling and Discretization (adapt batch by batch: update_state /
finalize_state, the NumPy computation under Keras's tf.data loop), CategoryEncoding
multi_hot for every one-hot output, features sorted by name then crosses by name,
concatenated. Keras's IntegerLookup / StringLookup / Hashing / HashedCrossing also need
TensorFlow: the lookups' indices are computed here from Keras's documented layout
(OOV indices first, then the vocabulary by decreasing count), the hashed bins with
tessera's Hashing / HashedCrossing, which test_nn_preprocessing.py and
test_nn_layers_misc.py check against Keras's test vectors."""

import os

import numpy as np
import pytest

import tessera
import tessera.nn as nn
from tessera.nn.utils import FeatureSpace

RNG = np.random.default_rng(7)
N = 90


def _data():
    # distinct counts per value, so the vocabulary order (by count) is unambiguous
    return {
        "f": RNG.normal(3.0, 2.0, N).astype(np.float32),
        "age": RNG.uniform(20, 80, N).astype(np.float32),
        "sex": np.repeat([0, 1], [35, 55]),
        "cp": np.repeat([4, 2, 7], [15, 45, 30]),
        "thal": np.repeat(["fixed", "normal", "reversible"], [10, 50, 30]),
        "r": RNG.uniform(0, 10, N),
    }


DATA = _data()
PERM = RNG.permutation(N)
DATA = {k: v[PERM] for k, v in DATA.items()}


def _lookup(values, vocab, oov):
    index = {v: oov + i for i, v in enumerate(vocab)}
    return np.array([[index.get(v, 0)] for v in values])


def _vocab(values):
    uniq, counts = np.unique(values, return_counts=True)
    return [u.item() for u in uniq[np.argsort(-counts, kind="stable")]]


def _batches(a, size=32):
    return [a[i:i + size] for i in range(0, len(a), size)]


def _keras_encoding(keras, data, crossed):
    """The concat encoding of the space in test_concat_matches_keras, from Keras's layers."""
    L = keras.layers
    parts = {}
    norm = L.Normalization(axis=-1)
    norm.adapt(data["f"][:, None])
    parts["f"] = np.asarray(norm(data["f"][:, None]))
    disc = L.Discretization(num_bins=6, epsilon=0.01)
    disc.reset_state()
    for b in _batches(data["age"]):
        disc.update_state(b[:, None])
    disc.finalize_state()
    age_bins = np.asarray(disc(data["age"][:, None]))
    parts["age"] = np.asarray(L.CategoryEncoding(6, output_mode="multi_hot")(age_bins))
    sex = _lookup(data["sex"], _vocab(data["sex"]), 1)
    parts["sex"] = np.asarray(L.CategoryEncoding(3, output_mode="multi_hot")(sex))
    cp = _lookup(data["cp"], _vocab(data["cp"]), 0)  # the layer one-hot encodes itself
    parts["cp"] = np.asarray(L.CategoryEncoding(3, output_mode="one_hot")(cp[:, 0]))
    thal = _lookup(data["thal"], _vocab(data["thal"]), 1)
    parts["thal"] = np.asarray(L.CategoryEncoding(4, output_mode="multi_hot")(thal))
    parts["r"] = np.asarray(L.Rescaling(scale=0.1, offset=-0.5)(data["r"][:, None]))
    cross = nn.layers.HashedCrossing(8)([age_bins, sex])  # in the cross's order
    crossed["age_X_sex"] = np.asarray(cross)
    cross_hot = np.asarray(L.CategoryEncoding(8, output_mode="multi_hot")(cross))
    names = sorted(parts)
    return np.concatenate([parts[n] for n in names] + [cross_hot], axis=-1).astype(np.float32)


def _space():
    return FeatureSpace(
        features={
            "f": "float_normalized",
            "age": FeatureSpace.float_discretized(num_bins=6),
            "sex": "integer_categorical",
            "cp": FeatureSpace.feature(
                dtype="int32", preprocessor=nn.layers.IntegerLookup(
                    num_oov_indices=0, output_mode="one_hot"), output_mode="float"),
            "thal": "string_categorical",
            "r": FeatureSpace.float_rescaled(scale=0.1, offset=-0.5),
        },
        crosses=[FeatureSpace.cross(("age", "sex"), crossing_dim=8)],
        output_mode="concat")


def _dataset(labels=False):
    x = {k: v for k, v in DATA.items()}
    return tessera.data.Dataset.from_tensor_slices((x, DATA["f"]) if labels else x)


def test_concat_matches_keras(keras):
    fs = _space()
    fs.adapt(_dataset().batch(32))
    out = fs(DATA)
    crossed = {}
    want = _keras_encoding(keras, DATA, crossed)
    assert out.dtype == np.float32 and out.shape == want.shape
    np.testing.assert_allclose(out, want, atol=1e-5)
    # adapt on a dict of arrays (Keras: Dataset.from_tensor_slices of it, unbatched:
    # batched by 32) is the same
    fs2 = _space()
    fs2.adapt(DATA)
    np.testing.assert_allclose(fs2(DATA), want, atol=1e-5)
    # one sample: no batch axis, the batch's row
    one = fs({k: v[3] for k, v in DATA.items()})
    assert one.shape == (want.shape[1],)
    np.testing.assert_allclose(one, want[3], atol=1e-5)
    # (batch, 1) columns as (batch,)
    np.testing.assert_allclose(fs({k: v[:, None] for k, v in DATA.items()}), want, atol=1e-5)
    # the layers are Keras's attributes
    assert isinstance(fs.preprocessors["thal"], nn.layers.StringLookup)
    assert isinstance(fs.crossers["age_X_sex"], nn.layers.HashedCrossing)
    assert fs.get_encoded_features().shape == (None, want.shape[1])


def test_dict_mode_int_outputs_and_hashing():
    fs = FeatureSpace(
        features={"sex": FeatureSpace.integer_categorical(output_mode="int"),
                  "thal": FeatureSpace.string_hashed(num_bins=5),
                  "cp": "integer_hashed", "f": "float"},
        crosses=[FeatureSpace.cross(("sex", "thal"), crossing_dim=16, output_mode="int")],
        hashing_dim=4, output_mode="dict")
    fs.adapt(DATA)
    out = fs({k: DATA[k] for k in ("sex", "thal", "cp", "f")})
    assert sorted(out) == ["cp", "f", "sex", "sex_X_thal", "thal"]
    np.testing.assert_array_equal(out["sex"], _lookup(DATA["sex"], _vocab(DATA["sex"]), 1))
    thal_bins = np.asarray(nn.layers.Hashing(5)(DATA["thal"][:, None]))
    want_thal = np.zeros((N, 5), np.float32)
    want_thal[np.arange(N), thal_bins[:, 0]] = 1
    np.testing.assert_array_equal(out["thal"], want_thal)
    assert out["cp"].shape == (N, 4)
    np.testing.assert_allclose(out["f"], DATA["f"][:, None])
    np.testing.assert_array_equal(
        out["sex_X_thal"], nn.layers.HashedCrossing(16)([out["sex"], thal_bins]))
    one = fs({"sex": 1, "thal": "fixed", "cp": 2, "f": 0.5})
    assert one["sex"].shape == (1,) and one["thal"].shape == (5,)
    enc = fs.get_encoded_features()
    assert sorted(enc) == sorted(out) and enc["thal"].shape == (None, 5)


def test_fit_with_same_weights_and_the_inference_model_match_keras(keras):
    fs = _space()
    fs.adapt(_dataset().batch(32))
    x = fs(DATA)
    y = (DATA["f"] > 3).astype(np.float32)[:, None]
    enc = fs.get_encoded_features()
    h = nn.layers.Dense(8, activation="relu")(enc)
    out = nn.layers.Dense(1, activation="sigmoid")(h)
    training = nn.Model(inputs=enc, outputs=out)
    inference = nn.Model(inputs=fs.get_inputs(), outputs=out)

    ki = keras.Input(shape=(x.shape[1],))
    kh = keras.layers.Dense(8, activation="relu")(ki)
    kmodel = keras.Model(ki, keras.layers.Dense(1, activation="sigmoid")(kh))
    training.set_weights(kmodel.get_weights())
    kx = _keras_encoding(keras, DATA, {})
    for m in (training, kmodel):
        m.compile(optimizer=keras.optimizers.SGD(0.1) if m is kmodel else nn.optimizers.SGD(0.1),
                  loss="binary_crossentropy")
    th = training.fit(x, y, batch_size=30, epochs=3, shuffle=False, verbose=0)
    kh = kmodel.fit(kx, y, batch_size=30, epochs=3, shuffle=False, verbose=0)
    np.testing.assert_allclose(th.history["loss"], kh.history["loss"], rtol=1e-4)
    for a, b in zip(training.get_weights(), kmodel.get_weights()):
        np.testing.assert_allclose(a, np.asarray(b), atol=1e-5)
    # the end-to-end model runs the FeatureSpace on the raw dict (Keras's inference model)
    raw = {k: v[:7] for k, v in DATA.items()}
    np.testing.assert_allclose(inference.predict(raw, verbose=0),
                               np.asarray(kmodel.predict(kx[:7], verbose=0)), atol=1e-5)
    np.testing.assert_allclose(inference.predict({k: np.array([v[0]]) for k, v in raw.items()},
                                                 verbose=0),
                               training.predict(x[:1], verbose=0), atol=1e-6)


def test_map_over_a_labeled_dataset_and_fit():
    fs = _space()
    fs.adapt(_dataset(labels=True).batch(32).map(lambda x, y: x))
    ds = _dataset(labels=True).batch(32).map(lambda x, y: (fs(x), (y > 3).astype(np.float32)))
    enc = fs.get_encoded_features()
    model = nn.Model(enc, nn.layers.Dense(1, activation="sigmoid")(enc))
    model.compile("adam", "binary_crossentropy")
    hist = model.fit(ds, epochs=2, verbose=0)
    assert len(hist.history["loss"]) == 2 and np.all(np.isfinite(hist.history["loss"]))


def test_config_round_trip_and_save_load(tmp_path):
    fs = _space()
    fs.adapt(DATA)
    want = fs(DATA)
    again = FeatureSpace.from_config(fs.get_config())
    np.testing.assert_allclose(again(DATA), want, atol=1e-6)
    path = tmp_path / "fs.keras"
    fs.save(path)
    loaded = nn.models.load_model(path)
    assert isinstance(loaded, FeatureSpace)
    np.testing.assert_allclose(loaded(DATA), want, atol=1e-6)
    assert loaded.get_config()["crosses"] == fs.get_config()["crosses"]
    assert sorted(p.name for p in os.scandir(tmp_path)) == ["fs.keras"]  # no temporary left


def test_errors_name_what_was_wrong():
    with pytest.raises(ValueError, match=r"\[FeatureSpace\] feature 'a' has the invalid type "
                                         r"'floaty'.*test_nn_feature_space.py:\d+"):
        FeatureSpace({"a": "floaty"})
    with pytest.raises(ValueError, match=r"names features \['b'\]"):
        FeatureSpace({"a": "float"}, crosses=[("a", "b")])
    with pytest.raises(ValueError, match=r"output_mode must be 'concat' or 'dict', got 'list'"):
        FeatureSpace({"a": "float"}, output_mode="list")
    with pytest.raises(ValueError, match=r"output_mode must be one of"):
        FeatureSpace.integer_categorical(output_mode="multi_hot")
    with pytest.raises(ValueError, match=r"non-empty dict"):
        FeatureSpace({})
    fs = _space()
    with pytest.raises(ValueError, match=r"call \.adapt\(dataset\)"):
        fs(DATA)
    with pytest.raises(ValueError, match=r"no labels: map"):
        fs.adapt(_dataset(labels=True).batch(32))
    with pytest.raises(ValueError, match=r"Dataset or a dict"):
        fs.adapt([1, 2, 3])
    fs.adapt(DATA)
    with pytest.raises(ValueError, match=r"only be called on a dict"):
        fs(np.ones(3))
    with pytest.raises(ValueError, match=r"missing \['thal'\], unknown \['x'\]"):
        fs({**{k: v for k, v in DATA.items() if k != "thal"}, "x": DATA["f"]})
    with pytest.raises(ValueError, match=r"cannot concatenate.*'sex'.*int64"):
        bad = FeatureSpace({"sex": FeatureSpace.integer_categorical(output_mode="int")})
        bad.adapt(DATA)
    # a model from the encoded features whose inputs lack some of the raw Inputs
    enc = fs.get_encoded_features()
    out = nn.layers.Dense(1)(enc)
    with pytest.raises(ValueError, match=r"lack its Inputs \['thal'\]"):
        nn.Model({k: v for k, v in fs.get_inputs().items() if k != "thal"}, out)
    with pytest.raises(TypeError, match=r"called on symbolic tensors"):
        fs(fs.get_inputs())





def test_end_to_end_model_fits_saves_and_loads(tmp_path):
    # Keras's inference model (raw Inputs -> FeatureSpace -> layers), here also fitted on
    # raw dicts, with one more raw Input beside the space's, saved and loaded
    fs = FeatureSpace({"f": "float_normalized", "sex": "integer_categorical",
                       "thal": "string_categorical"}, crosses=[("sex", "thal")], crossing_dim=8)
    fs.adapt({k: DATA[k] for k in ("f", "sex", "thal")})
    extra = nn.Input(shape=(2,), name="extra")
    joined = nn.layers.Concatenate()([fs.get_encoded_features(), extra])
    out = nn.layers.Dense(1, activation="sigmoid")(nn.layers.Dense(4, activation="relu")(joined))
    model = nn.Model({**fs.get_inputs(), "extra": extra}, out)
    raw = {k: DATA[k] for k in ("f", "sex", "thal")}
    raw["extra"] = RNG.normal(size=(N, 2)).astype(np.float32)
    model.compile("adam", "binary_crossentropy")
    model.fit(raw, (DATA["f"] > 3).astype(np.float32), epochs=2, batch_size=30, verbose=0)
    got = model.predict(raw, verbose=0)
    # the same as the program on the encoded arrays (the layers' own computation)
    program = nn.Model([fs.get_encoded_features(), extra], out)
    encoded = fs({k: raw[k] for k in fs.features})
    np.testing.assert_allclose(got, program.predict([encoded, raw["extra"]], verbose=0),
                               atol=1e-6)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = nn.models.load_model(path)
    np.testing.assert_allclose(loaded.predict(raw, verbose=0), got, atol=1e-6)
    again = nn.Model.from_config(model.get_config())
    assert again.predict(raw, verbose=0).shape == (N, 1)
    with pytest.raises(ValueError, match=r"lacks the model's inputs \['extra'\]"):
        loaded.predict({k: raw[k] for k in fs.features}, verbose=0)
    # a damaged FeatureSpace entry is a clear error, not a model with other inputs
    config = model.get_config()
    config["feature_spaces"]["raw"][0] = {"space": 0, "feature": "nope"}
    with pytest.raises(ValueError, match=r"FeatureSpaces are malformed \(KeyError: 'nope'\)"):
        nn.Model.from_config(config)


def test_a_crafted_size_is_refused_before_anything_is_made(tmp_path):
    fs = FeatureSpace({"sex": "integer_categorical", "thal": "string_categorical"},
                      crosses=[("sex", "thal")], crossing_dim=8)
    fs.adapt({k: DATA[k] for k in ("sex", "thal")})
    out = nn.layers.Dense(1)(fs.get_encoded_features())
    config = nn.Model(fs.get_inputs(), out).get_config()
    config["feature_spaces"]["spaces"][0]["crosses"][0]["config"]["crossing_dim"] = 10 ** 12
    with pytest.raises(ValueError, match=r"feature 'sex_X_thal' declares 1000000000000 values"):
        nn.Model.from_config(config)
    fs_config = fs.get_config()
    fs_config["crosses"][0]["config"]["crossing_dim"] = 10 ** 12
    tessera.nn.saving.save_file(str(tmp_path / "fs.keras"), {}, {
        "holds": "tessera.FeatureSpace", "feature_space": fs_config}, "test")
    with pytest.raises(ValueError, match=r"fs.keras: feature 'sex_X_thal' declares"):
        nn.models.load_model(tmp_path / "fs.keras")
