"""Keras's saving hooks in model.save / load_model: save_own_variables /
load_own_variables (a store of arrays, by default the layer's weights as
"0", "1", ... as Keras's, compared with Keras 3 on JAX), save_assets /
load_assets (files kept in the model file), get_build_config /
build_from_config, get_compile_config / compile_from_config, called in
Keras's order. What load_model reads stays untrusted: asset paths that leave
their folder, entries naming no layer, assets that are not bytes and links
made by save_assets are refused, naming what is wrong."""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the oracle only; tessera never imports it)
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tessera import nn  # noqa: E402
from tessera.nn.weights_file import read_file, save_file  # noqa: E402

CALLS = []
RNG = np.random.default_rng(5)


@nn.saving.register_keras_serializable(package="test_hooks")
class Vocab(nn.layers.Dense):
    """A Dense layer keeping a vocabulary file and a counter of its own."""

    def __init__(self, units, vocab="a b c", **kwargs):
        super().__init__(units, **kwargs)
        self.vocab = vocab
        self.counter = nn.Variable(np.zeros((2,), "int32"), trainable=False, name="counter")

    def get_build_config(self):
        return dict(super().get_build_config(), note="built")

    def build_from_config(self, config):
        CALLS.append(("build_from_config", config["note"], tuple(config["input_shape"])))
        super().build_from_config(config)

    def save_own_variables(self, store):
        super().save_own_variables(store)
        store["extra"] = np.arange(3, dtype=np.int64)

    def load_own_variables(self, store):
        CALLS.append(("load_own_variables", sorted(store)))
        super().load_own_variables(store)
        self.extra = np.asarray(store["extra"])

    def save_assets(self, dir_path):
        os.makedirs(os.path.join(dir_path, "words"))
        with open(os.path.join(dir_path, "words", "vocab.txt"), "w") as f:
            f.write(self.vocab)

    def load_assets(self, dir_path):
        CALLS.append(("load_assets",))
        with open(os.path.join(dir_path, "words", "vocab.txt")) as f:
            self.vocab = f.read()
        self.assets_dir = dir_path


@nn.saving.register_keras_serializable(package="test_hooks")
class HookedSequential(nn.Sequential):
    def compile_from_config(self, config):
        CALLS.append(("compile_from_config", sorted(config)))
        super().compile_from_config(config)


def _saved(tmp_path, cls=nn.Sequential):
    model = cls([nn.Input((4,)), Vocab(3, vocab="hello world"), nn.layers.Dense(2)])
    model.compile(optimizer=nn.optimizers.SGD(0.1), loss="mse")
    x = RNG.normal(size=(6, 4)).astype("float32")
    model.fit(x, RNG.normal(size=(6, 2)).astype("float32"), verbose=0)
    model.layers[0].counter.assign(np.array([4, 5], "int32"))
    path = str(tmp_path / "m.keras")
    model.save(path)
    return model, path, x


def test_hooks_round_trip_in_keras_order(tmp_path):
    model, path, x = _saved(tmp_path)
    del CALLS[:]
    back = nn.models.load_model(path)
    assert [c[0] for c in CALLS] == ["build_from_config", "load_own_variables", "load_assets"]
    assert CALLS[0][1:] == ("built", (None, 4))
    layer = back.layers[0]
    assert CALLS[1][1] == ["0", "1", "2", "extra"]  # kernel, bias, counter: Keras's order
    assert layer.vocab == "hello world"
    assert not os.path.exists(layer.assets_dir)  # the folder is removed after load_assets
    np.testing.assert_array_equal(layer.extra, np.arange(3))
    np.testing.assert_array_equal(layer.counter.numpy(), [4, 5])
    np.testing.assert_allclose(back.predict(x, verbose=0), model.predict(x, verbose=0),
                               rtol=1e-6)


def test_compile_from_config_comes_before_the_variables(tmp_path):
    model, path, x = _saved(tmp_path, HookedSequential)
    del CALLS[:]
    back = nn.models.load_model(path, custom_objects={"HookedSequential": HookedSequential})
    names = [c[0] for c in CALLS]
    # (a Sequential is rebuilt as a Sequential: its compile settings are the default
    # get_compile_config's, compiled by the default compile_from_config)
    assert "load_own_variables" in names and names.index("build_from_config") < \
        names.index("load_own_variables") < names.index("load_assets")
    y = RNG.normal(size=(6, 2)).astype("float32")
    assert np.isfinite(back.evaluate(x, y, verbose=0))


def test_default_store_is_keras_weights_by_index():
    class Plain(nn.layers.Dense):
        def call(self, x):
            return super().call(x)

    class KPlain(keras.layers.Dense):
        def call(self, x):
            return super().call(x)

    t, k = Plain(3), KPlain(3)
    x = RNG.normal(size=(2, 4)).astype("float32")
    t(x)
    k(x)
    k.set_weights(t.get_weights())
    ts, ks = {}, {}
    t.save_own_variables(ts)
    k.save_own_variables(ks)
    assert sorted(ts) == sorted(ks)
    for key in ks:
        np.testing.assert_array_equal(ts[key], np.asarray(ks[key]))
    new = [w + 1 for w in t.get_weights()]
    t.load_own_variables({str(i): w for i, w in enumerate(new)})
    for a, b in zip(t.get_weights(), new):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"Plain.load_own_variables.*lacks \['1'\]"):
        t.load_own_variables({"0": new[0]})


def _rewrite(path, rename=None, add=None):
    """The file with tensors renamed or added (what a crafted file could hold)."""
    tensors, header = read_file(path, "test")
    meta = {k: v for k, v in header.items() if k not in ("format", "version", "tensors")}
    for old, new in (rename or {}).items():
        tensors[new] = tensors.pop(old)
    tensors.update(add or {})
    save_file(path, tensors, meta, "test")


ASSET = "hooks/0/assets/words/vocab.txt"


@pytest.mark.parametrize("name", ["hooks/0/assets/../escape.txt",
                                  "hooks/0/assets//tmp/escape.txt",
                                  "hooks/0/assets/words/../../escape.txt",
                                  "hooks/0/assets/words\\..\\escape.txt"])
def test_an_asset_path_leaving_its_folder_is_refused(tmp_path, name):
    _, path, _ = _saved(tmp_path)
    _rewrite(path, rename={ASSET: name})
    with pytest.raises(ValueError, match=r"\[load_model\].*asset.*relative"):
        nn.models.load_model(path)
    assert not os.path.exists(tmp_path / "escape.txt")
    assert not os.path.exists("/tmp/escape.txt")


def test_hook_entries_naming_no_layer_or_not_bytes_are_refused(tmp_path):
    _, path, _ = _saved(tmp_path)
    _rewrite(path, add={"hooks/9/vars/0": np.zeros(3, "float32")})
    with pytest.raises(ValueError, match=r"hooks/9/vars/0.*names no layer"):
        nn.models.load_model(path)
    _, path, _ = _saved(tmp_path)
    _rewrite(path, add={ASSET: np.zeros(3, "float32")})
    with pytest.raises(ValueError, match=r"not bytes"):
        nn.models.load_model(path)


def test_an_asset_both_file_and_folder_is_a_named_error(tmp_path):
    _, path, _ = _saved(tmp_path)
    _rewrite(path, add={"hooks/0/assets/words": np.frombuffer(b"x", np.uint8)})
    with pytest.raises(ValueError, match=r"\[load_model\].*'words/vocab.txt' cannot be written"):
        nn.models.load_model(path)


def test_a_missing_store_key_names_the_layer(tmp_path):
    _, path, _ = _saved(tmp_path)
    _rewrite(path, rename={"hooks/0/vars/extra": "hooks/0/vars/other"})
    with pytest.raises(KeyError, match=r"no variable 'extra' for layer 'vocab"):
        nn.models.load_model(path)


def test_save_refuses_links_and_unsupported_store_values(tmp_path):
    class Linker(nn.layers.Dense):
        def call(self, x):
            return super().call(x)

        def save_assets(self, dir_path):
            os.symlink("/etc/passwd", os.path.join(dir_path, "link"))

    model = nn.Sequential([nn.Input((4,)), Linker(2)])
    with pytest.raises(ValueError, match=r"Linker.save_assets.*'link'.*not a regular file"):
        model.save(str(tmp_path / "l.keras"))
    assert not os.path.exists(tmp_path / "l.keras")

    class Strings(nn.layers.Dense):
        def call(self, x):
            return super().call(x)

        def save_own_variables(self, store):
            store["words"] = np.array(["a", "b"])

    model = nn.Sequential([nn.Input((4,)), Strings(2)])
    with pytest.raises(TypeError, match=r"Strings.save_own_variables.*'words'.*dtype"):
        model.save(str(tmp_path / "s.keras"))
