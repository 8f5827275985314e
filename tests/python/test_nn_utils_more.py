"""keras.utils and keras.saving names added for issue 30 (item 3), against Keras 3
on JAX (the oracle) where Keras gives a value: packing a step's data, dtype
names, clear_session's names, interactive logging and the saving aliases."""

import logging
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn as tnn  # noqa: E402
from tessera.nn import saving, utils  # noqa: E402

import keras  # noqa: E402 - the oracle, installed by scripts/install-deps

X, Y, W = np.ones((2, 3)), np.zeros(2), np.ones(2)


@pytest.mark.parametrize("args", [(X,), (X, Y), (X, Y, W), ([X, X],), ((X,), Y), (X, None, W)])
def test_pack_and_unpack_match_keras(args):
    got = utils.pack_x_y_sample_weight(*args)
    want = keras.utils.pack_x_y_sample_weight(*args)
    assert type(got) is type(want) and len(np.atleast_1d(got) if not isinstance(
        got, tuple) else got) == len(np.atleast_1d(want) if not isinstance(want, tuple) else want)
    for data in (got, [X, Y], (X, Y, W), X):
        u, ku = utils.unpack_x_y_sample_weight(data), keras.utils.unpack_x_y_sample_weight(data)
        assert [v is None for v in u] == [v is None for v in ku]
    with pytest.raises(ValueError, match=r"\[unpack_x_y_sample_weight\] .* tuple of 4"):
        utils.unpack_x_y_sample_weight((X, Y, W, W))


@pytest.mark.parametrize("d", [None, "float32", "float64", "int32", "bool", float, bool,
                               np.float32, np.dtype("int16"), "uint8", "float16"])
def test_standardize_dtype_matches_keras(d):
    assert utils.standardize_dtype(d) == keras.utils.standardize_dtype(d)


def test_is_keras_tensor():
    assert utils.is_keras_tensor(tnn.Input((3,)))
    assert not utils.is_keras_tensor(X)


def test_clear_session_restarts_names_as_keras():
    tnn.layers.Dense(2)
    utils.clear_session()
    keras.utils.clear_session()
    assert tnn.layers.Dense(2).name == keras.layers.Dense(2).name == "dense"
    assert tnn.layers.Dense(2).name == keras.layers.Dense(2).name == "dense_1"


def test_interactive_logging_moves_progress_to_logging(capsys, caplog):
    assert utils.is_interactive_logging_enabled()
    utils.disable_interactive_logging()
    try:
        assert not utils.is_interactive_logging_enabled()
        with caplog.at_level(logging.INFO, logger="tessera"):
            bar = utils.Progbar(3)
            for i in range(3):
                bar.update(i + 1, [("loss", 0.5)])
        assert capsys.readouterr().out == ""
        assert any("3/3" in r.getMessage() and "loss" in r.getMessage() for r in caplog.records)
    finally:
        utils.enable_interactive_logging()
    bar = utils.Progbar(2)
    bar.update(2)
    assert "2/2" in capsys.readouterr().out


def test_saving_aliases_round_trip(tmp_path):
    inp = tnn.Input((3,))
    model = tnn.Model(inp, tnn.layers.Dense(2)(inp))
    path = str(tmp_path / "w.weights.tsm")
    saving.save_weights(model, path)
    with pytest.raises(FileExistsError, match=r"\[save_weights\].*overwrite=False"):
        saving.save_weights(model, path, overwrite=False)
    before = model.get_weights()
    model.set_weights([w * 0 for w in before])
    saving.load_weights(model, path)
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)
    cfg = saving.serialize_keras_object(tnn.layers.Dense(4, activation="relu"))
    assert cfg["class_name"] == "Dense"
    layer = saving.deserialize_keras_object(cfg)
    assert layer.units == 4
