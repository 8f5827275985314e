"""tessera.nn.initializers: Keras's weight initializers, with Keras's names,
arguments, defaults and definitions, drawing from tessera's counter-based
generators (the values of a seed do not depend on the number of threads).

    init = nn.initializers.HeNormal(seed=1)
    w = init((3, 3, 16, 32))                   # a NumPy array, float32
    nn.initializers.get("glorot_uniform")      # by Keras's snake_case name

Each initializer is called as Keras's: ``init(shape, dtype="float32")``. A
seeded initializer (``seed=`` an int) uses its seed every call, so, as in
Keras, *the same seeded initializer object gives the same values each call*
(give different seeds, or no seed, to layers that should differ); so does an
unseeded one called directly, as Keras's: it draws its seed once from tessera's global
random state (``set_random_seed`` repeats it).
``init.generate(shape, dtype, seed)`` is what a model calls with a seed of
its own per parameter: the initializer's own seed, when it has one, wins.

The fans are Keras's ``compute_fans``: a 1-d shape has fan_in = fan_out =
shape[0], a 2-d (Dense kernel) shape (in, out), and a convolution kernel
(k..., in, out) multiplies both by the receptive field size prod(k).
"""

from __future__ import annotations

import copy
import difflib
import math
import numbers
import operator
from typing import Optional, Tuple

import numpy as np

from .. import _core
from ._config import Configurable
from .registry import registered_class

__all__ = ["Initializer", "Zeros", "Ones", "Constant", "RandomNormal", "RandomUniform",
           "TruncatedNormal", "VarianceScaling", "GlorotUniform", "GlorotNormal", "HeNormal",
           "HeUniform", "LecunNormal", "LecunUniform", "Orthogonal", "Identity",
           "compute_fans", "get", "serialize", "deserialize", "zeros", "ones", "constant",
           "random_normal", "random_uniform", "truncated_normal", "variance_scaling",
           "glorot_uniform", "glorot_normal", "he_normal", "he_uniform", "lecun_normal",
           "lecun_uniform", "orthogonal", "OrthogonalInitializer", "identity",
           "IdentityInitializer", "STFT", "STFTInitializer", "stft"]

_DTYPES = ("float32", "float64", "float16")


def compute_fans(shape, input_axes=None, output_axes=None) -> Tuple[int, int]:
    """(fan_in, fan_out) of a weight shape, as Keras computes them: with
    input_axes and output_axes (an EinsumDense kernel's), the products of the
    sizes of those axes."""
    shape = tuple(int(d) for d in shape)
    if input_axes is not None and output_axes is not None:
        return (math.prod(shape[a] for a in input_axes),
                math.prod(shape[a] for a in output_axes))
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _index(d) -> int:
    if isinstance(d, bool):
        raise TypeError("a bool is not a size")
    return operator.index(d)


def _shape(cls: str, shape) -> Tuple[int, ...]:
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(_index(d) for d in shape)
    except TypeError:
        raise TypeError(f"[{cls}] shape must be a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"[{cls}] shape must not have negative sizes, got {shape!r}")
    return out


def _dtype(cls: str, dtype, exact: bool = False) -> str:
    name = np.dtype(dtype).name if dtype is not None else "float32"
    if exact and (np.dtype(name).kind in "iub"):
        return name  # Zeros, Ones, Constant: integer and bool weights too (Keras's)
    if name not in _DTYPES:
        raise ValueError(f"[{cls}] dtype must be a float dtype ({', '.join(_DTYPES)}), got "
                         f"{dtype!r}")
    return name


def _seed(cls: str, seed) -> Optional[int]:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"[{cls}] seed must be None or an int >= 0, got {seed!r}")
    return int(seed)


def _axes(cls: str, name: str, axes) -> Optional[list]:
    if axes is None:
        return None
    try:
        out = [operator.index(a) for a in axes]
    except TypeError:
        raise TypeError(f"[{cls}] {name} must be None or a list of ints, got {axes!r}") from None
    if any(isinstance(a, bool) for a in axes):
        raise TypeError(f"[{cls}] {name} must be None or a list of ints, got {axes!r}")
    return out


def _with_fan_axes(init, input_axes, output_axes):
    """An EinsumDense kernel's initializer: a VarianceScaling family one (a name or an
    object) takes its fans from the kernel's input and output axes, as Keras's; any
    other is returned as given."""
    resolved = get(init) if isinstance(init, str) else init
    if isinstance(resolved, VarianceScaling):
        return resolved.with_axes(input_axes, output_axes)
    return init


def _number(cls: str, name: str, value, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value) or (positive and value <= 0):
        what = "a positive number" if positive else "a finite number"
        raise ValueError(f"[{cls}] {name} must be {what}, got {value!r}")
    return float(value)


def _mix(seed: int, k: int) -> int:
    """A derived seed (for the redraws of a truncated normal): splitmix64."""
    z = (seed + 0x9E3779B97F4A7C15 * (k + 1)) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) >> 1  # non-negative int64


def _draw_seed() -> int:
    """A seed from tessera's global generator (utils.set_random_seed repeats it)."""
    u = _core.call_primitive("random_uniform", [[1]], {"low": 0.0, "high": 2.0 ** 31,
                                                       "dtype": "float64"})
    return int(np.asarray(u)[0])


def _normal(shape, mean, std, seed, dtype):
    attrs = {"mean": float(mean), "std": float(std), "dtype": dtype}
    if seed is not None:
        attrs["seed"] = seed
    return np.asarray(_core.call_primitive("random_normal", [list(shape)], attrs))


def _uniform(shape, low, high, seed, dtype):
    attrs = {"low": float(low), "high": float(high), "dtype": dtype}
    if seed is not None:
        attrs["seed"] = seed
    return np.asarray(_core.call_primitive("random_uniform", [list(shape)], attrs))


def _truncated_normal(shape, mean, std, seed, dtype):
    """A normal draw whose values beyond 2 stddev are redrawn (Keras's
    truncated_normal), the redraws from seeds derived from ``seed``."""
    x = _normal(shape, 0.0, 1.0, seed, "float64")
    k = 0
    while True:
        bad = np.abs(x) > 2.0
        n = int(bad.sum())
        if not n:
            break
        x[bad] = _normal((n,), 0.0, 1.0, None if seed is None else _mix(seed, k), "float64")
        k += 1
    return (mean + std * x).astype(dtype)


class Initializer(Configurable):
    """An initializer: ``init(shape, dtype="float32")`` returns a NumPy array.
    ``get_config()`` names the class (``"class"``) and the arguments;
    ``from_config`` (or the module's ``deserialize``) rebuilds it."""

    seed: Optional[int] = None
    _draws = False  # a random initializer (it takes a seed)
    _any_dtype = False  # makes integer and bool values too (Zeros, Ones, Constant)

    def __call__(self, shape, dtype="float32") -> np.ndarray:
        # As Keras's: an unseeded random initializer draws one seed (here from tessera's
        # global generator, at its first call) and gives the same values at every call;
        # set_random_seed repeats them. (A layer's weights take their own seeds: generate.)
        seed = None
        if self._draws and self.seed is None:
            if getattr(self, "_drawn_seed", None) is None:
                self._drawn_seed = _draw_seed()
            seed = self._drawn_seed
        return self.generate(shape, dtype, seed)

    def generate(self, shape, dtype="float32", seed: Optional[int] = None) -> np.ndarray:
        """The values for ``shape``, drawn with the initializer's own seed if it
        has one, else with ``seed`` (None: tessera's global random state)."""
        cls = type(self).__name__
        shape, dtype = _shape(cls, shape), _dtype(cls, dtype, self._any_dtype)
        own = self.seed if self.seed is not None else _seed(cls, seed)
        return self._generate(shape, dtype, own)

    def _generate(self, shape, dtype, seed) -> np.ndarray:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {"class": type(self).__name__}



class Constant(Initializer):
    """Every value ``value``: a number, or as Keras an array broadcast to the shape
    asked for (PointNet's identity-matrix bias, ``Constant(np.eye(k).flatten())``)."""

    _any_dtype = True

    def __init__(self, value=0.0):
        if np.ndim(value) == 0:
            self.value = _number("Constant", "value", value)
            return
        try:
            array = np.asarray(value, dtype="float64")
        except (TypeError, ValueError):
            raise ValueError(f"[Constant] value must be a finite number or an array of them, "
                             f"got {value!r}") from None
        if not np.isfinite(array).all():
            raise ValueError(f"[Constant] value must be a finite number or an array of them, "
                             f"got an array holding {array[~np.isfinite(array)][0]!r}")
        self.value = array

    def _generate(self, shape, dtype, seed):
        if isinstance(self.value, float):
            return np.full(shape, self.value, dtype=dtype)
        try:
            return np.array(np.broadcast_to(self.value, shape), dtype=dtype)
        except ValueError:
            raise ValueError(f"[Constant] a value of shape {self.value.shape} does not broadcast "
                             f"to the weight's shape {tuple(shape)}") from None

    def get_config(self):
        value = self.value if isinstance(self.value, float) else self.value.tolist()
        return {"class": "Constant", "value": value}


class Zeros(Initializer):
    """Zeros."""

    _any_dtype = True

    def _generate(self, shape, dtype, seed):
        return np.zeros(shape, dtype=dtype)


class Ones(Initializer):
    """Ones."""

    _any_dtype = True

    def _generate(self, shape, dtype, seed):
        return np.ones(shape, dtype=dtype)


class RandomNormal(Initializer):
    """Normal values with ``mean`` and ``stddev`` (Keras's defaults 0, 0.05)."""

    _draws = True

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        cls = type(self).__name__
        self.mean = _number(cls, "mean", mean)
        self.stddev = _number(cls, "stddev", stddev, positive=True)
        self.seed = _seed(cls, seed)

    def _generate(self, shape, dtype, seed):
        return _normal(shape, self.mean, self.stddev, seed, dtype)

    def get_config(self):
        return {"class": type(self).__name__, "mean": self.mean, "stddev": self.stddev,
                "seed": self.seed}


class TruncatedNormal(RandomNormal):
    """Normal values with ``mean`` and ``stddev``, those more than 2 stddev from
    the mean redrawn (Keras's defaults 0, 0.05)."""

    def _generate(self, shape, dtype, seed):
        return _truncated_normal(shape, self.mean, self.stddev, seed, dtype)


class RandomUniform(Initializer):
    """Uniform values in [minval, maxval) (Keras's defaults -0.05, 0.05)."""

    _draws = True

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval = _number("RandomUniform", "minval", minval)
        self.maxval = _number("RandomUniform", "maxval", maxval)
        if self.maxval < self.minval:
            raise ValueError(f"[RandomUniform] maxval must be >= minval, got minval={minval!r}, "
                             f"maxval={maxval!r}")
        self.seed = _seed("RandomUniform", seed)

    def _generate(self, shape, dtype, seed):
        return _uniform(shape, self.minval, self.maxval, seed, dtype)

    def get_config(self):
        return {"class": "RandomUniform", "minval": self.minval, "maxval": self.maxval,
                "seed": self.seed}


class VarianceScaling(Initializer):
    """Keras's VarianceScaling: ``scale`` divided by the fan of ``mode``
    ("fan_in", "fan_out", "fan_avg": their mean, each at least 1) is the
    variance of ``distribution``: "truncated_normal" (stddev sqrt(scale) /
    0.8796..., the stddev of a unit normal truncated at 2), "untruncated_normal"
    (stddev sqrt(scale); "normal" means "truncated_normal", as in Keras) or
    "uniform" (in +-sqrt(3 scale))."""

    _draws = True

    _modes = ("fan_in", "fan_out", "fan_avg")
    _distributions = ("truncated_normal", "untruncated_normal", "uniform")

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 input_axes=None, output_axes=None):
        cls = type(self).__name__
        self.input_axes = _axes(cls, "input_axes", input_axes)
        self.output_axes = _axes(cls, "output_axes", output_axes)
        self.scale = _number(cls, "scale", scale, positive=True)
        mode = mode.lower() if isinstance(mode, str) else mode
        if mode not in self._modes:
            raise ValueError(f"[{cls}] mode must be one of {list(self._modes)}, got {mode!r}")
        dist = distribution.lower() if isinstance(distribution, str) else distribution
        if dist == "normal":
            dist = "truncated_normal"
        if dist not in self._distributions:
            raise ValueError(f"[{cls}] distribution must be one of {list(self._distributions)}, "
                             f"got {distribution!r}")
        self.mode, self.distribution = mode, dist
        self.seed = _seed(cls, seed)

    def _generate(self, shape, dtype, seed):
        axes = (self.input_axes, self.output_axes)
        if None not in axes and any(not -len(shape) <= a < len(shape) for a in sum(axes, [])):
            raise ValueError(f"[{type(self).__name__}] input_axes {axes[0]} / output_axes "
                             f"{axes[1]} do not fit a weight of shape {tuple(shape)}")
        fan_in, fan_out = compute_fans(shape, *axes)
        fan = {"fan_in": fan_in, "fan_out": fan_out,
               "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, fan)
        if self.distribution == "truncated_normal":
            return _truncated_normal(shape, 0.0, math.sqrt(scale) / 0.87962566103423978, seed,
                                     dtype)
        if self.distribution == "untruncated_normal":
            return _normal(shape, 0.0, math.sqrt(scale), seed, dtype)
        limit = math.sqrt(3.0 * scale)
        return _uniform(shape, -limit, limit, seed, dtype)

    def get_config(self):
        return {"class": "VarianceScaling", "scale": self.scale, "mode": self.mode,
                "distribution": self.distribution, "seed": self.seed, **self._axes_config()}

    def _axes_config(self) -> dict:
        # (Keras 3.15's configs hold both, None when not given)
        return {"input_axes": self.input_axes, "output_axes": self.output_axes}

    def with_axes(self, input_axes, output_axes):
        """This initializer with the fans of an EinsumDense kernel's axes, unless it
        has axes of its own (Keras's EinsumDense._update_kernel_initializer: the
        query projection (dim, heads, size) of MultiHeadAttention has fan_in dim and
        fan_out heads * size). A copy: the same seed, the same draws otherwise."""
        if self.input_axes is not None and self.output_axes is not None:
            return self
        clone = copy.copy(self)
        clone.input_axes, clone.output_axes = list(input_axes), list(output_axes)
        return clone


class _Fixed(VarianceScaling):
    """A VarianceScaling preset: only the seed (and Keras's fan axes) are arguments."""

    _preset = (1.0, "fan_in", "truncated_normal")

    def __init__(self, seed=None, input_axes=None, output_axes=None):
        super().__init__(*self._preset, seed=seed, input_axes=input_axes,
                         output_axes=output_axes)

    def get_config(self):
        return {"class": type(self).__name__, "seed": self.seed, **self._axes_config()}


class GlorotUniform(_Fixed):
    """Uniform in +-sqrt(6 / (fan_in + fan_out)) (Keras's default kernel initializer)."""

    _preset = (1.0, "fan_avg", "uniform")


class GlorotNormal(_Fixed):
    """Truncated normal with stddev sqrt(2 / (fan_in + fan_out))."""

    _preset = (1.0, "fan_avg", "truncated_normal")


class HeNormal(_Fixed):
    """Truncated normal with stddev sqrt(2 / fan_in)."""

    _preset = (2.0, "fan_in", "truncated_normal")


class HeUniform(_Fixed):
    """Uniform in +-sqrt(6 / fan_in)."""

    _preset = (2.0, "fan_in", "uniform")


class LecunNormal(_Fixed):
    """Truncated normal with stddev sqrt(1 / fan_in)."""

    _preset = (1.0, "fan_in", "truncated_normal")


class LecunUniform(_Fixed):
    """Uniform in +-sqrt(3 / fan_in)."""

    _preset = (1.0, "fan_in", "uniform")


class Orthogonal(Initializer):
    """Keras's Orthogonal: the shape flattened to (prod(shape[:-1]), shape[-1]),
    a normal matrix's QR factor Q (signs fixed by R's diagonal), times ``gain``:
    orthonormal columns (or rows, when there are fewer rows than columns)."""

    _draws = True

    def __init__(self, gain=1.0, seed=None):
        self.gain = _number("Orthogonal", "gain", gain)
        self.seed = _seed("Orthogonal", seed)

    def _generate(self, shape, dtype, seed):
        if len(shape) < 2:
            raise ValueError(f"[Orthogonal] needs a shape of at least 2 dimensions, got {shape}")
        rows, cols = math.prod(shape[:-1]), shape[-1]
        a = _normal((max(rows, cols), min(rows, cols)), 0.0, 1.0, seed, "float64")
        q, r = np.linalg.qr(a)
        q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
        if rows < cols:
            q = q.T
        return (self.gain * q).reshape(shape).astype(dtype)

    def get_config(self):
        return {"class": "Orthogonal", "gain": self.gain, "seed": self.seed}


class Identity(Initializer):
    """``gain`` times the identity matrix (2-d shapes only, as in Keras)."""

    def __init__(self, gain=1.0):
        self.gain = _number("Identity", "gain", gain)

    def _generate(self, shape, dtype, seed):
        if len(shape) != 2:
            raise ValueError(f"[Identity] needs a 2-d shape, got {shape}")
        return (self.gain * np.eye(*shape)).astype(dtype)

    def get_config(self):
        return {"class": "Identity", "gain": self.gain}


# scipy.signal.get_window's cosine-sum windows: coefficients a_k of sum (-1)^k a_k cos(k x)
_COSINE_WINDOWS = {"hann": (0.5, 0.5), "hanning": (0.5, 0.5), "hamming": (0.54, 0.46),
                   "blackman": (0.42, 0.5, 0.08)}
_WINDOWS = sorted(_COSINE_WINDOWS) + ["bartlett", "boxcar", "rectangular", "ones"]


def signal_window(window, length: int, periodic: bool, where: str) -> np.ndarray:
    """A window of `length` samples in float64, as scipy.signal.get_window(window,
    length, fftbins=periodic) gives it for the names tessera knows (hann, hamming,
    blackman, bartlett, boxcar); a periodic window is the symmetric one of length + 1
    without its last sample."""
    if not isinstance(window, str):
        raise TypeError(f"[{where}] window must be a name, got {type(window).__name__}")
    name = window.lower()
    if name not in _WINDOWS:
        raise ValueError(f"[{where}] window {window!r} is not supported; the windows are "
                         f"{_WINDOWS} (or give the window's values as an array)")
    if length == 1:
        return np.ones(1)
    m = length + 1 if periodic else length
    n = np.arange(m, dtype=np.float64)
    if name in _COSINE_WINDOWS:
        x = np.linspace(-np.pi, np.pi, m)
        w = sum(a * np.cos(k * x) for k, a in enumerate(_COSINE_WINDOWS[name]))
    elif name == "bartlett":
        w = np.where(n <= (m - 1) / 2.0, 2.0 * n / (m - 1), 2.0 - 2.0 * n / (m - 1))
    else:
        w = np.ones(m)
    return w[:length]


class STFT(Initializer):
    """Keras's STFT initializer (STFTInitializer): the real (cos) or imaginary
    (-sin) DFT kernels of shape (frame_length, 1, bins), each frame sample times
    the window, divided by the window's L2 norm (scaling "density") or its sum
    ("spectrum"): the kernels of layers.STFTSpectrogram. The angles are computed
    in the requested dtype, in Keras's order, so float32 kernels equal Keras's."""

    def __init__(self, side="real", window="hann", scaling="density", periodic=False):
        if side not in ("real", "imag"):
            raise ValueError(f"[STFT] side must be 'real' or 'imag', got {side!r}")
        if isinstance(window, str):
            signal_window(window, 1, False, "STFT")  # an unknown name fails now, as Keras's
        if scaling not in (None, "density", "spectrum"):
            raise ValueError(f"[STFT] scaling must be None, 'density' or 'spectrum', got "
                             f"{scaling!r}")
        self.side, self.window, self.scaling = side, window, scaling
        self.periodic = bool(periodic)

    def _generate(self, shape, dtype, seed):
        if len(shape) != 3:
            raise ValueError(f"[STFT] shape must be (frame_length, 1, fft_length // 2 + 1), "
                             f"got {shape}")
        frame_length, _, bins = shape
        t = np.dtype(dtype).type
        win = None
        if self.window is not None:
            if isinstance(self.window, str):
                win = signal_window(self.window, frame_length, self.periodic, "STFT")
            else:
                win = np.asarray(self.window, dtype=np.float64)
            win = win.astype(dtype)
            if win.ndim != 1 or win.shape[0] != frame_length:
                raise ValueError(f"[STFT] the window must have shape ({frame_length},) (the "
                                 f"frame length), got {win.shape}")
            win = win.reshape(frame_length, 1, 1)
        freq = np.arange(bins, dtype=dtype).reshape(1, 1, bins) / t((bins - 1) * 2)
        time = np.arange(frame_length, dtype=dtype).reshape(frame_length, 1, 1)
        args = (t(-2) * time) * freq * np.arccos(t(-1))
        kernel = (np.cos(args) if self.side == "real" else np.sin(args)).astype(dtype)
        if win is not None:
            scale = t(1)
            if self.scaling == "density":
                scale = np.sqrt(np.sum(np.square(win)))
            elif self.scaling == "spectrum":
                scale = np.sum(np.abs(win))
            kernel = (kernel * win) / scale
        return np.broadcast_to(kernel, shape).astype(dtype)

    def get_config(self):
        window = self.window
        if window is not None and not isinstance(window, str):
            window = np.asarray(window).tolist()
        return {"class": "STFT", "side": self.side, "window": window,
                "periodic": self.periodic, "scaling": self.scaling}


_CLASSES = {c.__name__: c for c in (
    Zeros, Ones, Constant, RandomNormal, RandomUniform, TruncatedNormal, VarianceScaling,
    GlorotUniform, GlorotNormal, HeNormal, HeUniform, LecunNormal, LecunUniform, Orthogonal,
    Identity, STFT)}

# Keras's snake_case names (and its aliases).
_BY_NAME = {
    "zeros": Zeros, "zero": Zeros, "ones": Ones, "one": Ones, "constant": Constant,
    "random_normal": RandomNormal, "normal": RandomNormal, "random_uniform": RandomUniform,
    "uniform": RandomUniform, "truncated_normal": TruncatedNormal,
    "variance_scaling": VarianceScaling, "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal, "he_normal": HeNormal, "he_uniform": HeUniform,
    "lecun_normal": LecunNormal, "lecun_uniform": LecunUniform, "orthogonal": Orthogonal,
    "identity": Identity, "stft": STFT,
}


# Keras's module-level aliases: the snake_case names (keras.initializers.he_normal is
# the class HeNormal) and OrthogonalInitializer / IdentityInitializer.
zeros, ones, constant = Zeros, Ones, Constant
random_normal, random_uniform, truncated_normal = RandomNormal, RandomUniform, TruncatedNormal
variance_scaling, glorot_uniform, glorot_normal = VarianceScaling, GlorotUniform, GlorotNormal
he_normal, he_uniform, lecun_normal, lecun_uniform = HeNormal, HeUniform, LecunNormal, LecunUniform
orthogonal = OrthogonalInitializer = Orthogonal
identity = IdentityInitializer = Identity
stft = STFTInitializer = STFT


def serialize(initializer: Initializer) -> dict:
    """``initializer.get_config()``."""
    return initializer.get_config()


def deserialize(config) -> Initializer:
    """The initializer a ``get_config()`` dict (or Keras's ``{"class_name": ...,
    "config": {...}}``) describes."""
    user = None if not isinstance(config, dict) or config.get("class_name") in _CLASSES else \
        registered_class(config)  # (a user's class: registered, or in a custom_object_scope)
    if user is not None:
        return user.from_config(dict(config.get("config") or {}))
    config = dict(config)
    if "class_name" in config and "class" not in config:
        config = {"class": config["class_name"], **(config.get("config") or {})}
    name = config.get("class")
    cls = _CLASSES.get(name)
    if cls is None:
        raise ValueError(f"[initializers.deserialize] unknown initializer class {name!r}"
                         f"{_hint(str(name), _CLASSES)} Known: {sorted(_CLASSES)}")
    return cls.from_config(config)


def _hint(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def get(identifier):
    """An initializer from Keras's snake_case name (``"glorot_uniform"``,
    ``"he_normal"``, ``"zeros"``, ...; a class name such as ``"HeNormal"`` too),
    a config dict, or an initializer or other callable (returned as is)."""
    if identifier is None:
        return None
    if isinstance(identifier, Initializer) or (callable(identifier) and
                                               not isinstance(identifier, type)):
        return identifier
    if isinstance(identifier, type) and issubclass(identifier, Initializer):
        return identifier()
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier.lower()) or _CLASSES.get(identifier)
        if cls is None:
            raise ValueError(f"[initializers.get] unknown initializer {identifier!r}"
                             f"{_hint(identifier.lower(), _BY_NAME)} Known: {sorted(_BY_NAME)}")
        return cls()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    raise TypeError(f"[initializers.get] expected an initializer name, config dict or "
                    f"initializer, got {identifier!r}")
