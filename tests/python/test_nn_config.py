"""keras.config (tessera.nn.config) against Keras 3: the same names, the
settings' effects (floatx, image_data_format, the epoch and step caps and their
environment variables, interactive logging), their errors."""

import logging
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tessera.nn as nn
from tessera.nn._config import SETTINGS


@pytest.fixture(autouse=True)
def _restore_settings():
    saved = dict(SETTINGS)
    floatx = nn.config.floatx()
    yield
    SETTINGS.clear()
    SETTINGS.update(saved)
    nn.config.set_floatx(floatx)


def test_the_names_are_kerass(keras):
    public = {n for n in dir(keras.config) if not n.startswith("_")}
    assert public <= set(nn.config.__all__) and public <= set(dir(nn.config))
    for name in ("floatx", "epsilon", "image_data_format"):
        assert getattr(nn.config, name)() == getattr(keras.config, name)()
        assert getattr(nn.backend, name)() == getattr(keras.config, name)()
    assert nn.config.max_epochs() is None and nn.config.max_steps_per_epoch() is None
    assert nn.config.is_interactive_logging_enabled() is True
    assert nn.config.is_flash_attention_enabled() == keras.config.is_flash_attention_enabled()


def test_floatx_is_the_dtype_of_new_layers_and_models():
    nn.config.set_floatx("float64")
    assert nn.backend.floatx() == "float64" and nn.config.dtype_policy().name == "float64"
    inp = nn.Input((3,))
    m = nn.Model(inp, nn.layers.Dense(2)(inp))
    assert m.layers[-1].dtype == "float64"
    assert m.predict(np.ones((2, 3)), verbose=0).dtype == np.float64
    nn.config.set_floatx("float32")
    assert nn.layers.Dense(2).dtype == "float32"
    with pytest.raises(ValueError, match="float16"):
        nn.config.set_floatx("float16")
    with pytest.raises(ValueError, match="unknown floatx"):
        nn.config.set_floatx("int8")


def _conv_shape(k):
    inp = k.Input((3, 8, 6))  # channels first under the global setting
    return tuple(k.Model(inp, k.layers.MaxPooling2D(2)(k.layers.Conv2D(4, 3)(inp))).output_shape)


def test_image_data_format_is_the_default_of_layers(keras):
    nn.config.set_image_data_format("channels_first")
    keras.config.set_image_data_format("channels_first")
    try:
        assert _conv_shape(nn) == _conv_shape(keras) == (None, 4, 3, 2)
        x = np.random.default_rng(0).random((2, 3, 5, 4)).astype("float32")
        np.testing.assert_allclose(nn.ops.image.rgb_to_grayscale(x),
                                   keras.ops.image.rgb_to_grayscale(x), rtol=1e-6)
    finally:
        keras.config.set_image_data_format("channels_last")
    assert nn.layers.Conv2D(2, 3).data_format == "channels_first"
    nn.config.set_image_data_format("channels_last")
    assert nn.layers.Conv2D(2, 3).data_format == "channels_last"
    with pytest.raises(ValueError, match="channels_first"):
        nn.config.set_image_data_format("nchw")


def _small_fit(epochs=5, **kw):
    inp = nn.Input((2,))
    m = nn.Model(inp, nn.layers.Dense(1)(inp))
    m.compile("sgd", "mse")
    x, y = np.ones((40, 2), "float32"), np.zeros((40, 1), "float32")
    seen = []

    class Count(nn.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(batch)

    h = m.fit(x, y, batch_size=4, epochs=epochs, verbose=0, callbacks=[Count()], **kw)
    return h, seen, m


def test_max_epochs_and_steps_cap_fit_with_kerass_warning():
    nn.config.set_max_epochs(2)
    nn.config.set_max_steps_per_epoch(3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        h, seen, m = _small_fit()
    assert len(h.history["loss"]) == 2 and seen == [0, 1, 2, 0, 1, 2]
    texts = [str(x.message) for x in w]
    assert "Limiting epochs to 2" in texts and "Limiting steps_per_epoch to 3" in texts
    calls = []

    class Count(nn.callbacks.Callback):
        def on_predict_batch_end(self, batch, logs=None):
            calls.append(batch)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.predict(np.ones((40, 2), "float32"), batch_size=4, verbose=0, callbacks=[Count()])
    assert calls == [0, 1, 2]
    with pytest.raises(ValueError, match="positive int"):
        nn.config.set_max_epochs(0)


def test_the_environment_variables_cap_as_under_keras(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        "import numpy as np, warnings\nimport tessera.nn as nn\nwarnings.simplefilter('ignore')\n"
        "inp = nn.Input((2,))\nm = nn.Model(inp, nn.layers.Dense(1)(inp))\n"
        "m.compile('sgd', 'mse')\n"
        "h = m.fit(np.ones((8, 2)), np.zeros((8, 1)), epochs=6, verbose=0)\n"
        "print(len(h.history['loss']), nn.config.max_epochs(), nn.config.max_steps_per_epoch())\n")
    env = dict(os.environ, KERAS_MAX_EPOCHS="3", KERAS_MAX_STEPS_PER_EPOCH="1")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "3", "1"]


def test_disabled_interactive_logging_sends_epoch_lines_to_the_logger(capsys, caplog):
    nn.config.disable_interactive_logging()
    assert not nn.config.is_interactive_logging_enabled()
    inp = nn.Input((2,))
    m = nn.Model(inp, nn.layers.Dense(1)(inp))
    m.compile("sgd", "mse")
    with caplog.at_level(logging.INFO, logger="tessera.nn"):
        m.fit(np.ones((8, 2)), np.zeros((8, 1)), epochs=2, verbose=1)
    assert "Epoch" not in capsys.readouterr().out
    assert [r.getMessage().split(" - ")[0] for r in caplog.records] == ["Epoch 1/2", "Epoch 2/2"]
    nn.config.enable_interactive_logging()
    m.fit(np.ones((8, 2)), np.zeros((8, 1)), epochs=1, verbose=1)
    assert "Epoch 1/1" in capsys.readouterr().out


def test_switches_without_an_effect_are_recorded_or_refused():
    nn.config.disable_traceback_filtering()
    assert nn.config.is_traceback_filtering_enabled() is False
    nn.config.enable_flash_attention()
    assert nn.config.is_flash_attention_enabled() is True
    nn.config.enable_unsafe_deserialization()
    assert nn.config.is_nnx_enabled() is False
    nn.config.set_epsilon(1e-7)
    with pytest.raises(NotImplementedError, match="1e-7; 0.001"):
        nn.config.set_epsilon(1e-3)
    with pytest.raises(NotImplementedError, match="own backend"):
        nn.config.set_backend("jax")
