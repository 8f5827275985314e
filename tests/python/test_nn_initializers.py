"""tessera.nn.initializers: Keras's initializers (names, defaults, fans,
distributions), seeded reproducibility, configs."""

import json
import math

import numpy as np
import pytest

from tessera import _core
from tessera.nn import initializers as init


def test_compute_fans_dense_and_conv():
    assert init.compute_fans(()) == (1, 1)
    assert init.compute_fans((7,)) == (7, 7)
    assert init.compute_fans((3, 5)) == (3, 5)  # Dense kernel (in, out)
    assert init.compute_fans((3, 4, 5)) == (12, 15)  # Conv1D (k, in, out)
    assert init.compute_fans((3, 3, 16, 32)) == (144, 288)  # Conv2D


@pytest.mark.parametrize("name,cls", [
    ("zeros", init.Zeros), ("ones", init.Ones), ("constant", init.Constant),
    ("random_normal", init.RandomNormal), ("random_uniform", init.RandomUniform),
    ("truncated_normal", init.TruncatedNormal), ("glorot_uniform", init.GlorotUniform),
    ("glorot_normal", init.GlorotNormal), ("he_normal", init.HeNormal),
    ("he_uniform", init.HeUniform), ("lecun_normal", init.LecunNormal),
    ("lecun_uniform", init.LecunUniform), ("variance_scaling", init.VarianceScaling),
    ("orthogonal", init.Orthogonal), ("identity", init.Identity), ("HeNormal", init.HeNormal),
    ("Glorot_Uniform", init.GlorotUniform)])
def test_get_by_name(name, cls):
    obj = init.get(name)
    assert type(obj) is cls
    out = obj((4, 4))
    assert isinstance(out, np.ndarray) and out.shape == (4, 4) and out.dtype == np.float32


def test_get_passes_through_and_errors():
    he = init.HeNormal(seed=3)
    assert init.get(he) is he
    fn = lambda shape, dtype="float32": np.zeros(shape, dtype)  # noqa: E731
    assert init.get(fn) is fn and init.get(None) is None
    assert type(init.get(init.Ones)) is init.Ones
    assert init.get(he.get_config()).get_config() == he.get_config()
    with pytest.raises(ValueError, match=r"unknown initializer 'glorot_unifrom'; did you mean "
                                         r"'glorot_uniform'\?"):
        init.get("glorot_unifrom")
    with pytest.raises(TypeError, match=r"\[initializers.get\] expected"):
        init.get(3)
    with pytest.raises(ValueError, match=r"\[VarianceScaling\] mode must be one of"):
        init.VarianceScaling(mode="fan")
    with pytest.raises(ValueError, match=r"\[VarianceScaling\] scale must be a positive number"):
        init.VarianceScaling(scale=0.0)
    with pytest.raises(ValueError, match=r"\[RandomNormal\] seed must be None or an int >= 0"):
        init.RandomNormal(seed=-1)
    with pytest.raises(ValueError, match=r"\[Orthogonal\] needs a shape of at least 2"):
        init.Orthogonal()((3,))
    with pytest.raises(ValueError, match=r"\[Identity\] needs a 2-d shape"):
        init.Identity()((2, 2, 2))
    with pytest.raises(ValueError, match=r"\[RandomNormal\] dtype must be a float dtype"):
        init.RandomNormal()((2,), dtype="int32")
    # as Keras's, the constant initializers also make integer and bool values
    assert init.Zeros()((2,), dtype="int32").dtype == np.int32
    assert init.Constant(3)((2,), dtype="int16").tolist() == [3, 3]
    with pytest.raises(TypeError, match=r"\[Ones\] shape must be a tuple of ints"):
        init.Ones()((2.5,))


def test_constant_zeros_ones_identity_dtypes():
    np.testing.assert_array_equal(init.Constant(2.5)((2, 3), "float64"), np.full((2, 3), 2.5))
    assert init.Constant(2.5)((2,), "float64").dtype == np.float64
    assert init.Zeros()((3,)).dtype == np.float32 and not init.Zeros()((3,)).any()
    assert init.Ones()((2, 2), np.float64).dtype == np.float64
    np.testing.assert_array_equal(init.Identity(gain=2.0)((2, 3)), 2 * np.eye(2, 3))
    assert init.RandomNormal()((5,), "float16").dtype == np.float16


N = (400, 500)  # 200,000 values: mean and std to about 0.5%


def _stats(x):
    x = x.astype(np.float64)
    return x.mean(), x.std(), np.abs(x).max()


def test_random_normal_uniform_truncated_statistics():
    m, s, _ = _stats(init.RandomNormal(1.0, 2.0, seed=1)(N))
    assert m == pytest.approx(1.0, abs=0.02) and s == pytest.approx(2.0, rel=0.01)
    x = init.RandomUniform(-1.0, 3.0, seed=2)(N)
    assert x.min() >= -1.0 and x.max() < 3.0
    assert x.mean() == pytest.approx(1.0, abs=0.02)
    assert x.std() == pytest.approx(4 / math.sqrt(12), rel=0.01)
    t = init.TruncatedNormal(0.5, 0.1, seed=3)(N).astype(np.float64)
    assert np.abs(t - 0.5).max() <= 0.2 + 1e-6  # within 2 stddev
    assert t.mean() == pytest.approx(0.5, abs=0.002)
    assert t.std() == pytest.approx(0.1 * 0.87962566103423978, rel=0.01)


@pytest.mark.parametrize("cls,shape,std,uniform", [
    (init.GlorotUniform, (300, 500), math.sqrt(2 / 800), True),
    (init.GlorotNormal, (300, 500), math.sqrt(2 / 800), False),
    (init.HeNormal, (3, 3, 40, 64), math.sqrt(2 / 360), False),
    (init.HeUniform, (3, 3, 40, 64), math.sqrt(2 / 360), True),
    (init.LecunNormal, (5, 60, 200), math.sqrt(1 / 300), False),
    (init.LecunUniform, (5, 60, 200), math.sqrt(1 / 300), True),
])
def test_variance_scaling_presets(cls, shape, std, uniform):
    x = cls(seed=11)(shape).astype(np.float64)
    assert x.shape == shape
    assert x.mean() == pytest.approx(0.0, abs=0.02 * std)
    assert x.std() == pytest.approx(std, rel=0.015)
    if uniform:
        assert np.abs(x).max() <= math.sqrt(3) * std * (1 + 1e-6)
    else:
        assert np.abs(x).max() <= 2 * std / 0.87962566103423978 * (1 + 1e-6)


def test_variance_scaling_modes_and_distributions():
    shape = (200, 800)  # fan_in 200, fan_out 800, fan_avg 500
    for mode, fan in (("fan_in", 200), ("fan_out", 800), ("fan_avg", 500)):
        x = init.VarianceScaling(3.0, mode, "untruncated_normal", seed=4)(shape)
        assert x.astype(np.float64).std() == pytest.approx(math.sqrt(3.0 / fan), rel=0.01)
    assert init.VarianceScaling(distribution="normal").distribution == "truncated_normal"
    u = init.VarianceScaling(1.0, "fan_in", "uniform", seed=5)(shape)
    assert np.abs(u).max() <= math.sqrt(3.0 / 200) * (1 + 1e-6)


@pytest.mark.parametrize("shape", [(6, 6), (10, 4), (4, 10), (3, 3, 2, 8)])
def test_orthogonal(shape):
    x = init.Orthogonal(gain=1.5, seed=7)(shape, "float64")
    flat = x.reshape(-1, shape[-1])
    if flat.shape[0] >= flat.shape[1]:
        np.testing.assert_allclose(flat.T @ flat, 2.25 * np.eye(flat.shape[1]), atol=1e-12)
    else:
        np.testing.assert_allclose(flat @ flat.T, 2.25 * np.eye(flat.shape[0]), atol=1e-12)


ALL = [init.Zeros(), init.Ones(), init.Constant(0.3), init.RandomNormal(0.1, 0.2, seed=1),
       init.RandomUniform(-1.0, 1.0, seed=2), init.TruncatedNormal(seed=3),
       init.VarianceScaling(2.0, "fan_out", "uniform", seed=4), init.GlorotUniform(seed=5),
       init.GlorotNormal(), init.HeNormal(seed=6), init.HeUniform(), init.LecunNormal(seed=7),
       init.LecunUniform(seed=8), init.Orthogonal(0.5, seed=9), init.Identity(3.0)]


@pytest.mark.parametrize("obj", ALL, ids=lambda o: type(o).__name__)
def test_config_round_trip(obj):
    config = obj.get_config()
    assert config["class"] == type(obj).__name__
    back = init.deserialize(json.loads(json.dumps(config)))
    assert type(back) is type(obj) and back.get_config() == config
    assert type(obj).from_config(config).get_config() == config
    fixed = isinstance(obj, (init.Zeros, init.Ones, init.Constant, init.Identity))
    if fixed or obj.seed is not None:
        np.testing.assert_array_equal(back((4, 5)), obj((4, 5)))
    keras = {"class_name": type(obj).__name__,
             "config": {k: v for k, v in config.items() if k != "class"}}
    assert init.deserialize(keras).get_config() == config


def test_seeds_reproducible_and_thread_independent(threads):
    he = init.HeNormal(seed=42)
    a = he((64, 33))
    np.testing.assert_array_equal(a, he((64, 33)))  # same seeded object, same values
    np.testing.assert_array_equal(a, init.HeNormal(seed=42)((64, 33)))
    assert not np.array_equal(a, init.HeNormal(seed=43)((64, 33)))
    # generate(): the model's per-parameter seed, unless the initializer has its own.
    g = init.HeNormal()
    np.testing.assert_array_equal(g.generate((64, 33), "float32", 42), a)
    assert not np.array_equal(g.generate((64, 33), "float32", 1), a)
    np.testing.assert_array_equal(he.generate((64, 33), "float32", 7), a)
    # The values of a seed are the same with 1 and 2 worker threads.
    ref = _reference.setdefault("he", a)
    np.testing.assert_array_equal(a, ref)
    ref_t = _reference.setdefault("tn", init.TruncatedNormal(seed=1)((1000,)))
    np.testing.assert_array_equal(init.TruncatedNormal(seed=1)((1000,)), ref_t)


_reference = {}


def test_unseeded_draws_follow_the_global_state():
    # as Keras's: one unseeded object gives the same values each call, two objects differ
    u = init.RandomUniform()
    np.testing.assert_array_equal(u((100,)), u((100,)))
    assert not np.array_equal(u((100,)), init.RandomUniform()((100,)))
    _core.call_primitive("set_seed", [123], {})
    a = init.GlorotNormal()((50, 50))
    _core.call_primitive("set_seed", [123], {})
    np.testing.assert_array_equal(init.GlorotNormal()((50, 50)), a)


def test_module_aliases_are_keras_s():
    """keras.initializers.he_normal & co are the classes themselves, as in Keras: each
    lower-case (and *Initializer) alias Keras has is tessera's class of the same name,
    and the deterministic ones give Keras's values."""
    import os

    os.environ.setdefault("KERAS_BACKEND", "jax")
    keras = pytest.importorskip("keras")
    names = [n for n in dir(keras.initializers) if not n.startswith("_")
             and isinstance(getattr(keras.initializers, n), type)
             and n != getattr(keras.initializers, n).__name__ and n not in ("stft", "STFT",
                                                                           "STFTInitializer")]
    assert len(names) >= 16, names
    for n in names:
        ours, theirs = getattr(init, n), getattr(keras.initializers, n)
        assert ours.__name__ == theirs.__name__, (n, ours, theirs)
    for n, args in (("zeros", ()), ("ones", ()), ("constant", (1.5,)), ("identity", (3.0,)),
                    ("IdentityInitializer", (0.5,))):
        np.testing.assert_array_equal(getattr(init, n)(*args)((3, 4)),
                                      np.asarray(getattr(keras.initializers, n)(*args)((3, 4))))
    q = init.OrthogonalInitializer(gain=2.0, seed=3)((6, 4))
    np.testing.assert_allclose(q.T @ q, 4.0 * np.eye(4), atol=1e-5)
