"""keras.utils' image functions, get_source_inputs, Config and
optimizers.schedules.serialize/deserialize (issue 30) against Keras 3 (the
oracle); load_img on untrusted files: planted links, decompression bombs,
errors naming the file; save_img writes through a temporary."""

import io
import os
import struct
import zlib

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tessera.nn as tnn  # noqa: E402

import keras  # noqa: E402 - the oracle, installed by scripts/install-deps

PIL = pytest.importorskip("PIL.Image")
RNG = np.random.default_rng(32)
PIXELS = RNG.uniform(-3, 5, (7, 9, 3)).astype("float32")


@pytest.mark.parametrize("shape", [(7, 9, 3), (7, 9, 4), (7, 9, 1), (3, 7, 9)])
@pytest.mark.parametrize("scale", [True, False])
def test_array_to_img_and_back_match_keras(shape, scale):
    x = RNG.uniform(0, 255, shape).astype("float32")
    fmt = "channels_first" if shape[0] == 3 else "channels_last"
    got = tnn.utils.array_to_img(x, data_format=fmt, scale=scale)
    want = keras.utils.array_to_img(x, data_format=fmt, scale=scale)
    assert got.mode == want.mode and got.size == want.size
    for f in ("channels_last", "channels_first"):
        a, b = tnn.utils.img_to_array(got, f), keras.utils.img_to_array(want, f)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_one_channel_above_255_is_an_int32_image_as_keras():
    x = RNG.uniform(0, 1000, (4, 5, 1)).astype("float32")
    got = tnn.utils.array_to_img(x, scale=False)
    want = keras.utils.array_to_img(x, scale=False)
    assert got.mode == want.mode == "I"
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("suffix", ["png", "bmp", "jpg"])
@pytest.mark.parametrize("color_mode,size,interp,keep", [
    ("rgb", None, "nearest", False), ("grayscale", (5, 4), "bilinear", False),
    ("rgba", (6, 3), "bicubic", True), ("rgb", (4, 8), "lanczos", True)])
def test_save_and_load_match_keras(tmp_path, suffix, color_mode, size, interp, keep):
    ours, theirs = tmp_path / f"ours.{suffix}", tmp_path / f"theirs.{suffix}"
    tnn.utils.save_img(str(ours), PIXELS)
    keras.utils.save_img(str(theirs), PIXELS)
    assert ours.read_bytes() == theirs.read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []
    got = tnn.utils.load_img(ours, color_mode, size, interp, keep)
    want = keras.utils.load_img(theirs, color_mode, size, interp, keep)
    assert got.mode == want.mode and got.size == want.size
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    from_bytes = tnn.utils.load_img(io.BytesIO(ours.read_bytes()), color_mode, size, interp, keep)
    np.testing.assert_array_equal(np.asarray(from_bytes), np.asarray(want))


def test_load_img_does_not_follow_a_planted_link(tmp_path):
    tnn.utils.save_img(str(tmp_path / "real.png"), PIXELS)
    os.symlink(tmp_path / "real.png", tmp_path / "planted.png")
    with pytest.raises(OSError) as e:
        tnn.utils.load_img(str(tmp_path / "planted.png"))
    assert "planted.png" in str(e.value) and "not followed" in str(e.value)


def _png_claiming(width, height):
    """A PNG whose header claims width x height pixels (the data is 1x1)."""
    buf = io.BytesIO()
    PIL.new("L", (1, 1)).save(buf, format="PNG")
    raw = bytearray(buf.getvalue())
    at = raw.index(b"IHDR")
    raw[at + 4:at + 12] = struct.pack(">II", width, height)
    raw[at + 17:at + 21] = struct.pack(">I", zlib.crc32(bytes(raw[at:at + 17])))
    return bytes(raw)


@pytest.mark.parametrize("side", [10_000, 40_000])
def test_load_img_refuses_a_decompression_bomb_naming_the_file(tmp_path, side):
    path = tmp_path / "bomb.png"
    path.write_bytes(_png_claiming(side, side))
    with pytest.warns() if side == 10_000 else _nothing():
        with pytest.raises(ValueError) as e:
            tnn.utils.load_img(str(path))
    assert "[utils.load_img]" in str(e.value) and "bomb.png" in str(e.value)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_load_and_save_errors_name_the_file(tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_bytes(b"not an image at all")
    with pytest.raises(ValueError, match=r"\[utils.load_img\] .*notes.png is not a readable"):
        tnn.utils.load_img(str(bad))
    with pytest.raises(OSError, match=r"\[utils.load_img\] cannot open .*missing.png"):
        tnn.utils.load_img(str(tmp_path / "missing.png"))
    with pytest.raises(ValueError, match=r"color_mode"):
        tnn.utils.load_img(str(bad), color_mode="cmyk")
    with pytest.raises(ValueError, match=r"\[utils.save_img\] .*out.xyz: no image format"):
        tnn.utils.save_img(str(tmp_path / "out.xyz"), PIXELS)
    with pytest.raises(ValueError, match=r"\[utils.array_to_img\].*\(7, 9, 2\)"):
        tnn.utils.array_to_img(PIXELS[..., :2])


def test_get_source_inputs_matches_keras():
    def build(k):
        a, b = k.Input((3,), name="a"), k.Input((3,), name="b")
        c = k.layers.Dense(2)(k.layers.Concatenate()([b, a]))
        d = k.layers.Add()([c, k.layers.Dense(2)(a)])
        return [t.name for t in k.utils.get_source_inputs(d)], \
            [t.name for t in k.utils.get_source_inputs(a)]

    assert build(tnn) == build(keras)
    with pytest.raises(TypeError, match=r"\[utils.get_source_inputs\]"):
        tnn.utils.get_source_inputs(np.zeros(3))


def test_config_behaves_as_keras():
    for k in (tnn, keras):
        c = k.utils.Config(learning_rate=0.1, layers=3)
        c.epochs = 5
        c["batch"] = 8
        assert (c.learning_rate, c["epochs"], c.batch, len(c), list(c)) == \
            (0.1, 5, 8, 4, ["batch", "epochs", "layers", "learning_rate"])
        assert "layers" in c and c.get("missing", 7) == 7 and c.pop("layers") == 3
        c.freeze()
        assert c.frozen
        with pytest.raises(ValueError, match="frozen"):
            c.epochs = 6
        with pytest.raises(AttributeError, match="Did you mean 'epochs'"):
            c.epoch  # noqa: B018
        c.unfreeze()
        c.update(epochs=9)
        assert c.as_dict() == {"learning_rate": 0.1, "epochs": 9, "batch": 8}
        assert c.to_json() == '{"learning_rate": 0.1, "epochs": 9, "batch": 8}'


@pytest.mark.parametrize("make", [
    lambda m: m.optimizers.schedules.ExponentialDecay(0.1, 10, 0.9, staircase=True),
    lambda m: m.optimizers.schedules.PiecewiseConstantDecay([3, 6], [1.0, 0.5, 0.1]),
    lambda m: m.optimizers.schedules.CosineDecay(0.1, 20, warmup_steps=5, warmup_target=0.2),
    lambda m: m.optimizers.schedules.PolynomialDecay(0.1, 10, 0.01, power=2.0),
])
def test_schedule_serialize_deserialize_match_keras(make):
    ours, theirs = make(tnn), make(keras)
    assert tnn.optimizers.schedules.serialize(ours) == \
        keras.optimizers.schedules.serialize(theirs)
    back = tnn.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(theirs))
    steps = [0, 4, 8, 15]
    np.testing.assert_allclose([float(back(s)) for s in steps],
                               [float(theirs(s)) for s in steps], rtol=1e-6)
    assert type(keras.optimizers.schedules.deserialize(
        tnn.optimizers.schedules.serialize(ours))) is type(theirs)


def test_a_users_schedule_round_trips_through_the_registry():
    @tnn.saving.register_keras_serializable(package="tests")
    class Halving(tnn.optimizers.schedules.LearningRateSchedule):
        def __init__(self, rate=0.5):
            self.rate = rate

        def __call__(self, step):
            return self.rate / (step + 1)

        def get_config(self):
            return {"rate": self.rate}

    config = tnn.optimizers.schedules.serialize(Halving(0.25))
    assert config["registered_name"] == "tests>Halving"
    assert tnn.optimizers.schedules.deserialize(config)(1) == 0.125
    with pytest.raises(ValueError, match=r"\[optimizers.schedules.deserialize\]"):
        tnn.optimizers.schedules.deserialize({"rate": 1})
