"""A jit function's call cost (python/tessera/jit.py, _translate.py): the
cache key of the common call computed inline, and range's bound check left out
where the bound is an int whatever the arguments. Each shortcut must give
what Python/NumPy give, and the general case must still be checked."""

import inspect
import os

import numpy as np
import pytest

import tessera

FILE = os.path.basename(__file__)


def line_of(func, marker):
    lines, start = inspect.getsourcelines(func)
    for i, text in enumerate(lines):
        if marker in text:
            return start + i
    raise AssertionError(f"no {marker} in {func.__name__}")


def int_bounds(x, m):
    s = 0.0
    for i in range(len(x)):
        s += x[i]
    for i in range(1, len(x) - 1):
        s += 2.0 * x[i]
    for i in range(m.shape[0] // 2, m.shape[1] % 5 + len(x) * 2 - len(x)):
        s += m[i % m.shape[0], 0]
    return s


def float_bound(x):
    s = 0.0
    for i in range(len(x) / 2):  # the float bound
        s += x[i]
    return s


def shadowed_len(x):
    s = 0.0
    for i in range(len(x)):  # len is not the builtin
        s += 1.0
    return s


def apply(f, x):
    s = 0.0
    for i in range(len(x)):
        s += f(x[i])
    return s


def _double(v):
    return 2.0 * v


def _square(v):
    return v * v


def typed(x):
    s = x[0] * 0
    for i in range(len(x)):
        s = s + x[i]
    return s


def test_int_bounds_are_not_checked_and_agree_with_python():
    x = np.arange(9.0) ** 1.5
    m = np.arange(42.0).reshape(6, 7)
    f = tessera.jit(int_bounds)
    assert f(x, m) == int_bounds(x, m)
    assert "cannot be interpreted as an integer" not in f.code
    assert f(x[:0], m) == int_bounds(x[:0], m)


def test_other_bounds_are_still_ranges_type_error():
    x = np.arange(8.0)
    with pytest.raises(TypeError) as err:
        float_bound(x)
    with pytest.raises(TypeError) as jerr:
        tessera.jit(float_bound)(x)
    assert str(err.value) in str(jerr.value)
    assert f"{FILE}:{line_of(float_bound, 'the float bound')}" in str(jerr.value)


def test_a_global_named_len_keeps_the_check(monkeypatch):
    monkeypatch.setitem(globals(), "len", lambda x: 2.5)
    with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
        shadowed_len(np.arange(3.0))
    with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
        tessera.jit(shadowed_len)(np.arange(3.0))


@pytest.mark.filterwarnings("ignore")
def test_signatures_and_function_arguments_keep_their_programs():
    f = tessera.jit(typed)
    cases = [np.arange(5.0), np.arange(5, dtype=np.int64), np.arange(6, dtype=np.int32),
             np.arange(5.0, dtype=np.float32), np.array([2**62, 2**62, 5], dtype=np.int64),
             np.arange(5.0)]
    for x in cases:
        got, want = f(x), typed(x)
        assert got == want and type(got) is type(want), (x.dtype, got, want)
    g = tessera.jit(apply)
    x = np.linspace(-1.0, 2.0, 7)
    # The same types, another function: another program (a key of the
    # argument's type alone would run the first function again).
    for fn in (_double, _square, _double, tessera.jit(_square)):
        assert g(fn, x) == pytest.approx(apply(fn, x), rel=1e-15)
