"""The pieces of the tessera.nn examples (examples/char_gpt.py,
resnet_fashion.py, lstm_har.py), without training: their data handling and
model shapes. The CI-sized training runs are ctest's example_* tests."""

import importlib.util
import math
import os
import shutil
import sys

import numpy as np
import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "examples")


def load(name):
    # as `python examples/NAME.py` runs it: the examples folder on the path
    # (lstm_har imports har_cnn's data loading)
    if os.path.abspath(EXAMPLES) not in map(os.path.abspath, sys.path):
        sys.path.insert(0, os.path.abspath(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gpt = load("char_gpt")


@pytest.mark.skipif(shutil.which("bible") is None, reason="Debian's bible-kjv is not installed")
def test_kjv_text_has_no_verse_references():
    text = gpt.load_kjv()
    lines = text.split("\n")
    assert lines[0] == "In the beginning God created the heaven and the earth."
    assert lines[-2] == "The grace of our Lord Jesus Christ be with you all. Amen."
    assert len(lines) == 31102 + 1 and len(text) == 4137850
    assert not any(gpt._REFERENCE.match(line) for line in lines)
    assert len(set(text)) == 63


def test_windows_are_shifted_by_one():
    ids = np.arange(20, dtype=np.int32)
    x, y = gpt.windows(ids, np.array([0, 5]), 4)
    np.testing.assert_array_equal(x, [[0, 1, 2, 3], [5, 6, 7, 8]])
    np.testing.assert_array_equal(y, x + 1)
    assert y.dtype == np.int64


def test_char_gpt_is_causal_and_generates_from_a_short_prompt():
    model = gpt.build_model(vocab=11, context=8, d_model=16, layers=1, heads=2)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 11, size=(2, 8)).astype(np.int32)
    changed = x.copy()
    changed[:, 5:] = (changed[:, 5:] + 1) % 11
    a, b = model.predict(x, verbose=0), model.predict(changed, verbose=0)
    assert a.shape == (2, 8, 11)
    np.testing.assert_allclose(a[:, :5], b[:, :5], rtol=1e-5, atol=1e-6)  # the past only
    assert not np.allclose(a[:, 5:], b[:, 5:])
    out = gpt.generate(model, [1, 2, 3], 10, 8, 0.0, np.random.default_rng(0))
    assert out[:3] == [1, 2, 3] and len(out) == 13 and all(0 <= i < 11 for i in out)
    # greedy: the first new id is the argmax after the prompt, padding ignored
    first = np.zeros((1, 8), np.int32)
    first[0, :3] = [1, 2, 3]
    assert out[3] == int(np.argmax(model.predict(first, verbose=0)[0, 2]))


def test_char_gpt_parameter_count():
    v, d, t, n = 63, 256, 128, 4
    model = gpt.build_model(v, t, d, n, 4)
    block = 2 * 2 * d + 4 * (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    assert model.count_params() == v * d + t * d + n * block + 2 * d + d * v + v
    assert model.count_params() == 3224639
    assert math.isclose(model.count_params() / 1e6, 3.22, abs_tol=0.01)


def test_resnet_shapes_and_shortcuts():
    resnet = load("resnet_fashion")
    model = resnet.build_model((8, 16, 32))
    assert model.predict(np.zeros((3, 28, 28, 1), np.float32), verbose=0).shape == (3, 10)
    kinds = [type(layer).__name__ for layer in model.layers]
    assert kinds.count("Add") == 3
    shapes = [layer.output_shape for layer in model.layers if type(layer).__name__ == "Add"]
    assert [tuple(s)[-3:] for s in shapes] == [(28, 28, 8), (14, 14, 16), (7, 7, 32)]
    # 1x1 projections where the width or the resolution changes: stages 2 and 3
    assert sum(1 for layer in model.layers if type(layer).__name__ == "Conv2D"
               and layer.kernel_size == (1, 1)) == 2
    x = np.arange(2 * 4 * 28, dtype=np.float32).reshape(2, 4, 28, 1).repeat(7, axis=1)
    flipped, _ = resnet.flip(0)(x, np.zeros(2))
    for a, b in zip(x, flipped):
        assert np.array_equal(a, b) or np.array_equal(a[:, ::-1], b)


def test_lstm_har_model():
    lstm = load("lstm_har")
    model = lstm.build_model(units=16, layers=2, frame=4)
    layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
    assert [type(layer).__name__ for layer in layers] == ["Reshape", "LSTM", "LSTM", "Dense"]
    assert tuple(layers[0].output_shape)[-2:] == (32, 36)
    assert tuple(layers[1].output_shape)[-2:] == (32, 16)
    assert model.predict(np.zeros((3, 128, 9), np.float32), verbose=0).shape == (3, 6)
