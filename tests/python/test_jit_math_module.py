"""Python's math module under tessera.jit (python/tessera/_calls.py math_call):
math's functions convert their arguments with float() and compute in double,
giving Python's float (math.floor/ceil/trunc Python's int), whatever NumPy
scalar they are given: math.sqrt of a float32 or a uint8 element is the double
root, not NumPy's float32 or float16 one (until 2026-12-07 tessera gave NumPy's
ufunc result, np.float16(2.236) for math.sqrt(np.uint8(5))). Compared exactly,
types included, with Python, in a loop (native code) and outside one."""

import math

import numpy as np
import pytest

import tessera


def one_each(x, i):
    return (math.sqrt(x), math.exp(x), math.log(x), math.log(x, 2), math.sin(x),
            math.atan2(i, 2), math.hypot(i, 4), math.pow(i, 3), math.fabs(i), math.floor(x),
            math.ceil(x), math.trunc(float(i)), math.degrees(i), math.copysign(i, -1.0),
            math.isnan(x), math.isfinite(x), math.tanh(x))


def in_a_loop(xs):
    out = []
    t = 0.0
    for k in range(len(xs)):
        v = xs[k]
        t += math.sqrt(v) + math.log1p(v)
        out.append(math.sqrt(v))
        out.append(math.floor(v * 1.5))
    return out, t


ARGS = [(2.5, 3), (np.float32(2.5), np.int64(3)), (np.float64(7.25), np.int32(5)),
        (np.uint8(5), np.uint8(3)), (np.int16(9), np.int8(-4)), (np.float16(1.5), True)]


def _same(got, want):
    assert type(got) is type(want), (got, want)
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert got == want, (got, want)


@pytest.mark.parametrize("args", ARGS, ids=lambda a: "-".join(type(v).__name__ for v in a))
def test_math_functions_give_pythons_numbers(args):
    _same(tessera.jit(one_each)(*args), one_each(*args))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.uint8, np.int16, np.int64])
def test_math_in_a_native_loop(dtype):
    xs = (np.arange(1, 40) * 0.75).astype(dtype)
    _same(tessera.jit(in_a_loop)(xs), in_a_loop(xs))


def sqrt_of(a):
    return math.sqrt(a)


def test_an_array_is_refused_as_python_refuses_it():
    # float() of an array of one or more dimensions: Python's TypeError, raised
    # the same way (no elementwise math.sqrt over an array).
    with pytest.raises(TypeError):
        sqrt_of(np.ones(3))
    with pytest.raises(TypeError, match="0-dimensional"):
        tessera.jit(sqrt_of)(np.ones(3))
