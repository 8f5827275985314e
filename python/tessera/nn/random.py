"""tessera.nn.random: Keras 3's ``keras.random`` on arrays (normal, uniform,
truncated_normal, randint, shuffle, dropout, categorical, gamma, beta,
binomial), seeded by ints or a ``SeedGenerator``. Draws come from tessera's
counter-based generators (the same seed gives the same numbers on any
machine and thread count); they are not JAX's numbers for the same seed."""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from .. import _core
from . import ops as _ops  # (at call time: ops.image imports this module)
from .ops._base import FLOATX, eager_value, is_symbolic
from .symbolic import STEP_SEED, _dtype_name, _record, user_location
from .variables import Variable, is_tracing, reseed_variables

__all__ = ["SeedGenerator", "beta", "binomial", "categorical", "dropout", "gamma", "normal",
           "randint", "shuffle", "truncated_normal", "uniform"]


class SeedGenerator:
    """A stream of seeds: each draw given this generator gets the next seed,
    so draws differ while the whole sequence is reproducible from `seed`."""

    def __init__(self, seed=None, name=None, **kwargs):
        if seed is None:
            # as Keras's (a seed from Python's global random): the global stream's next, so
            # an unseeded generator repeats after set_random_seed
            seed = (_GLOBAL.next() if _GLOBAL is not None
                    else int(np.random.SeedSequence().generate_state(1)[0]))
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"[random.SeedGenerator] seed must be an int or None, got {seed!r}")
        self.seed = int(seed)
        self.name = name or "seed_generator"
        self._count = 0

    def next(self, ordered=True) -> int:
        self._count += 1
        return int(np.random.SeedSequence([self.seed, self._count]).generate_state(1)[0])

    @property
    def state(self):
        """Keras's `seed_generator.state`: a uint32 Variable [seed, draws so far]
        (`numpy()`, `assign([seed, count])`: the draws after it repeat those made from
        that state)."""
        return _SeedState(self)

    def get_config(self):
        return {"seed": self.seed, "name": self.name}


class _SeedState(Variable):
    """A SeedGenerator's state as Keras's Variable `{name}/seed_generator_state`, viewing
    the generator's seed and count."""

    def __init__(self, generator):
        super().__init__(np.zeros(2, "uint32"), dtype="uint32", trainable=False,
                         name="seed_generator_state")
        self._generator = generator

    @property
    def path(self) -> str:
        return f"{self._generator.name}/seed_generator_state"

    @property
    def value(self) -> np.ndarray:
        g = self._generator
        return np.array([g.seed, g._count], dtype=np.int64).astype(np.uint32)

    def _store(self, value, where: str):
        new = np.asarray(getattr(value, "value", value))
        if new.shape != (2,) or new.dtype.kind not in "iu":
            raise ValueError(f"[SeedGenerator.state.{where}] {self.path} holds [seed, count] "
                             f"(2 integers), got {new!r}")
        self._generator.seed, self._generator._count = int(new[0]), int(new[1])
        return self


_GLOBAL = None
_GLOBAL = SeedGenerator()
_GLOBAL_SEEDED = [False]  # set_random_seed was called (in this process)


def reseed_global(seed: int) -> None:
    """The global stream started again from `seed` (utils.set_random_seed, as
    Keras's reseeds its global SeedGenerator): unseeded draws and the eager
    training-mode calls of random layers repeat after it."""
    _GLOBAL.seed, _GLOBAL._count = int(seed), 0
    _GLOBAL_SEEDED[0] = True
    reseed_variables(int(seed))


def forget_global_seed() -> None:
    """Back to the state before any set_random_seed (a fresh, unseeded global
    stream; models and fit calls without a seed take 0 again): for tests."""
    _GLOBAL.seed, _GLOBAL._count = int(np.random.SeedSequence().generate_state(1)[0]), 0
    _GLOBAL_SEEDED[0] = False
    reseed_variables(None)


def default_seed() -> int:
    """The seed of a model or fit call given none: 0 (the same weights, shuffles and
    dropout draws at every run) until utils.set_random_seed is called; after it, the
    global stream's next, so that, as in Keras, the same global seed repeats a run and
    another seed gives other initial weights, shuffles and dropout draws."""
    return _GLOBAL.next() % (1 << 30) if _GLOBAL_SEEDED[0] else 0


def eager_training_seed() -> int:
    """The seed of one eager layer(x, training=True) call: the global
    stream's next, so every call draws anew."""
    return _GLOBAL.next() % (1 << 31)


# While an eager training-mode call's program is written: the (layer, call index) of each
# seeded random layer's draw, each given a seed parameter of its own (own_seed)
_OWN_SEEDS: contextvars.ContextVar = contextvars.ContextVar("tessera_nn_own_seeds",
                                                            default=None)


@contextlib.contextmanager
def own_seeds_collected():
    """Yields the list of (layer, call index) whose draws the program written in this
    block takes as parameters own_seed_0, own_seed_1, ... (Keras's eager call draws
    from each layer's own SeedGenerator, not from the global stream)."""
    held: list = []
    token = _OWN_SEEDS.set(held)
    try:
        yield held
    finally:
        _OWN_SEEDS.reset(token)


def own_seed(layer, index: int):
    """The name of the parameter holding the seed of `layer`'s draw at call `index`, in
    a program written under own_seeds_collected by a layer made with `seed=`; else None
    (the step's seed keys the draw)."""
    held = _OWN_SEEDS.get()
    seed = getattr(layer, "seed", None)
    if held is None or seed is None or isinstance(seed, SeedGenerator):
        return None
    for k, (other, at) in enumerate(held):
        if other is layer and at == index:
            return f"own_seed_{k}"
    held.append((layer, index))
    return f"own_seed_{len(held) - 1}"


def next_own_seed(layer) -> int:
    """A seeded layer's seed for its next eager draw: its `seed` and the number of draws
    it made, as Keras's SeedGenerator(seed) advances its state (the same seed repeats a
    fresh layer's draws; another seed gives others), below 2**40."""
    n = layer.__dict__.get("_own_draws", 0)
    layer.__dict__["_own_draws"] = n + 1
    return (int(layer.seed) * 1_000_003 + n * 7_919 + 1) % (1 << 40)


def unseeded_layer_seed() -> int:
    """The seed of a random layer made without one: the global stream's next, drawn when
    the layer is made (as Keras draws an unseeded layer's SeedGenerator seed), so that
    its draws repeat after set_random_seed."""
    return _GLOBAL.next() % (1 << 31)


def program_seed(seed: int, step: int, ways: int, part: int) -> int:
    """The seed a training step's program gets for one of its `ways` parts (ranks or
    chunks): the fit's seed and the step mixed, below 2**40 (the program multiplies it by
    a layer stride of up to 2**16, again in nested layers, then by 1000003 in draws: a
    seed from set_random_seed, up to 2**30, overflowed int64 there)."""
    base = (int(seed) * 1_000_003 + int(step)) % ((1 << 40) // int(ways))
    return base * int(ways) + int(part)


def _seed(op, seed) -> int:
    if seed is None:
        return _GLOBAL.next()
    if isinstance(seed, SeedGenerator):
        return seed.next()
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return int(seed)
    raise TypeError(f"[random.{op}] seed must be an int, a SeedGenerator or None, got {seed!r}")


def _eager(op, *values):
    if is_symbolic(values):
        raise TypeError(f"[random.{op}] at {user_location()}: random draws inside a model's "
                        "call are not supported yet for this function (a fixed seed would give "
                        "the same numbers at every step); normal, uniform, truncated_normal, "
                        "randint, shuffle, dropout and categorical are")


def _shape(op, shape):
    _eager(op, shape)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(int(d) < 0 for d in shape):
        raise ValueError(f"[random.{op}] shape must hold non-negative ints, got {shape}")
    return [int(d) for d in shape]


def _traced(*values) -> bool:
    """A draw inside a layer's call (or on symbolic tensors): recorded into
    the program, with the step's seed, so each step draws anew."""
    return is_tracing() or is_symbolic(values)


def _step_seed(op, seed):
    """The seed of a traced draw. A SeedGenerator (or None: the global one)
    gives new numbers at every step, as Keras's: the program's seed for the
    layer call plus this draw's own number, so two draws in one call differ.
    An int gives the same numbers at every call, as Keras's does ("passing an
    integer as the seed value will produce the same random values for each
    call")."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return int(seed)
    return STEP_SEED * 1000003 + (_seed(op, seed) % 1000003)


def _traced_shape(op, shape):
    shape = [shape] if not isinstance(shape, (list, tuple)) else list(shape)
    for d in shape:
        if not is_symbolic(d) and (isinstance(d, bool) or not isinstance(d, (int, np.integer))
                                   or d < 0):
            raise ValueError(f"[random.{op}] shape must hold non-negative ints (or ops.shape's "
                             f"entries), got {shape}")
    return [d if is_symbolic(d) else int(d) for d in shape]


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    if _traced(shape, mean, stddev):
        if is_symbolic(mean, stddev):
            return normal(shape, 0.0, 1.0, dtype, seed) * stddev + mean
        return _record("random_normal", (_traced_shape("normal", shape),), {
            "mean": float(mean), "std": float(stddev), "seed": _step_seed("normal", seed),
            "dtype": _dtype_name(dtype or FLOATX)})
    shape = _shape("normal", shape)
    return _core.call_primitive("random_normal", [shape], {
        "mean": float(mean), "std": float(stddev), "seed": _seed("normal", seed),
        "dtype": _dtype_name(dtype or FLOATX)})


def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    if not is_symbolic(minval, maxval) and not maxval > minval:
        raise ValueError(f"[random.uniform] maxval must exceed minval, got {minval}, {maxval}")
    if _traced(shape, minval, maxval):
        if is_symbolic(minval, maxval):
            return uniform(shape, 0.0, 1.0, dtype, seed) * (maxval - minval) + minval
        return _record("random_uniform", (_traced_shape("uniform", shape),), {
            "low": float(minval), "high": float(maxval), "seed": _step_seed("uniform", seed),
            "dtype": _dtype_name(dtype or FLOATX)})
    shape = _shape("uniform", shape)
    return _core.call_primitive("random_uniform", [shape], {
        "low": float(minval), "high": float(maxval), "seed": _seed("uniform", seed),
        "dtype": _dtype_name(dtype or FLOATX)})


_PHI_MINUS_2 = 0.022750131948179195  # the normal CDF at -2


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Normal draws redrawn until within two standard deviations of the mean. Inside a
    layer's call: the same distribution by the inverse of the normal CDF on uniform draws
    between its values at -2 and 2."""
    if _traced(shape, mean, stddev):
        u = uniform(shape, _PHI_MINUS_2, 1.0 - _PHI_MINUS_2, dtype, seed)
        z = _ops.multiply(_ops.erfinv(_ops.subtract(_ops.multiply(u, 2.0), 1.0)), 2.0 ** 0.5)
        return _ops.add(_ops.multiply(_ops.clip(z, -2.0, 2.0), stddev), mean)
    shape = _shape("truncated_normal", shape)
    s = _seed("truncated_normal", seed)
    z = np.asarray(normal(shape, 0.0, 1.0, "float64", s))
    k = 0
    while np.any(np.abs(z) > 2.0):
        k += 1
        bad = np.abs(z) > 2.0
        z[bad] = np.asarray(normal([int(bad.sum())], 0.0, 1.0, "float64", s + k))
    return (z * stddev + mean).astype(_dtype_name(dtype or FLOATX))


def randint(shape, minval, maxval, dtype="int32", seed=None):
    if not maxval > minval:
        raise ValueError(f"[random.randint] maxval must exceed minval, got {minval}, {maxval}")
    if _traced(shape):  # inside a call: the floor of uniform draws
        u = _ops.floor(uniform(shape, float(minval), float(maxval), "float64", seed))
        return _ops.cast(_ops.minimum(u, float(maxval) - 1.0), _dtype_name(dtype))
    shape = _shape("randint", shape)
    r = _core.call_primitive("random_integers", [int(minval), int(maxval)],
                             {"shape": shape, "seed": _seed("randint", seed)})
    return np.asarray(r).astype(_dtype_name(dtype))


def shuffle(x, axis=0, seed=None):
    """Keras 3's: each slice along `axis` permuted on its own (JAX's permutation with
    independent=True, NumPy's Generator.permuted), by sorting uniform keys."""
    if _traced(x):
        keys = uniform(_ops.shape(x), dtype="float32", seed=seed)
        return _ops.take_along_axis(x, _ops.argsort(keys, axis=axis), axis=axis)
    x = np.asarray(eager_value(x))
    keys = np.asarray(uniform(list(x.shape), dtype="float32", seed=seed))
    return np.take_along_axis(x, np.argsort(keys, axis=axis, kind="stable"), axis=axis)


def dropout(inputs, rate, noise_shape=None, seed=None):
    if _traced(inputs):
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"[random.dropout] rate must be in [0, 1), got {rate}")
        if noise_shape is None:
            return _record("dropout", (inputs, float(rate), _step_seed("dropout", seed), True),
                           {})
        dims = [_ops.shape(inputs)[i] if d is None else d for i, d in enumerate(noise_shape)]
        keep = _ops.greater_equal(uniform(dims, dtype="float32", seed=seed), rate)
        return _ops.where(keep, _ops.divide(inputs, 1.0 - rate), _ops.zeros_like(inputs))
    _eager("dropout", inputs)
    x = np.asarray(eager_value(inputs))
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"[random.dropout] rate must be in [0, 1), got {rate}")
    shape = x.shape if noise_shape is None else tuple(
        x.shape[i] if d is None else d for i, d in enumerate(noise_shape))
    keep = np.asarray(uniform(list(shape), dtype="float32", seed=seed)) >= rate
    return np.where(keep, x / (1.0 - rate), 0).astype(x.dtype)


def categorical(logits, num_samples, dtype="int32", seed=None):
    """num_samples class draws per row of logits (Gumbel-max)."""
    if _traced(logits):
        if len(_ops.shape(logits)) != 2:
            raise ValueError(f"[random.categorical] logits must be 2-d (batch, classes), got "
                             f"shape {_ops.shape(logits)} (at {user_location()})")
        b, k = _ops.shape(logits)
        u = uniform((b, int(num_samples), k), 1e-20, 1.0, "float32", seed)
        noisy = _ops.add(_ops.expand_dims(logits, 1), _ops.negative(_ops.log(_ops.negative(
            _ops.log(u)))))
        return _ops.cast(_ops.argmax(noisy, axis=-1), _dtype_name(dtype))
    _eager("categorical", logits)
    lg = np.asarray(eager_value(logits), dtype="float64")
    if lg.ndim != 2:
        raise ValueError(f"[random.categorical] logits must be 2-d (batch, classes), got shape "
                         f"{lg.shape}")
    u = np.asarray(uniform([lg.shape[0], int(num_samples), lg.shape[1]], 1e-20, 1.0,
                           "float64", seed))
    g = -np.log(-np.log(u))
    return np.argmax(lg[:, None, :] + g, axis=-1).astype(_dtype_name(dtype))


def _generator(op, seed):
    return np.random.default_rng(_seed(op, seed))


def gamma(shape, alpha, dtype=None, seed=None):
    shape = _shape("gamma", shape)
    return _generator("gamma", seed).gamma(alpha, size=shape).astype(_dtype_name(dtype or FLOATX))


def beta(shape, alpha, beta, dtype=None, seed=None):
    shape = _shape("beta", shape)
    return _generator("beta", seed).beta(alpha, beta, size=shape).astype(
        _dtype_name(dtype or FLOATX))


def binomial(shape, counts, probabilities, dtype=None, seed=None):
    shape = _shape("binomial", shape)
    return _generator("binomial", seed).binomial(counts, probabilities, size=shape).astype(
        _dtype_name(dtype or FLOATX))
