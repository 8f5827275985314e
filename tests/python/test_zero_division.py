"""Division by zero: Python's numbers raise ZeroDivisionError as Python does
(`/`, `//`, `%` of Python ints and floats, `0.0 ** -1`), on the general path,
the loop interpreter and native code alike, with the line; NumPy's floats
(array elements, arrays) keep NumPy's inf and nan; integer arrays raise
ZeroDivisionError where NumPy warns and gives 0 (docs/python.md)."""

import inspect

import numpy as np
import pytest
from jit_check import cases_script, run_script

import tessera


def divide(a, b):
    return a / b


def floor_divide(a, b):
    return a // b


def modulo(a, b):
    return a % b


def power(a, b):
    return a ** b


@pytest.mark.parametrize("f", [divide, floor_divide, modulo])
@pytest.mark.parametrize("a, b", [(1.0, 0.0), (1, 0), (1, 0.0), (-2.5, -0.0), (True, False)])
def test_python_numbers_raise_as_python(f, a, b):
    with pytest.raises(ZeroDivisionError):
        f(a, b)
    with pytest.raises(ZeroDivisionError) as e:
        tessera.jit(f)(a, b)
    assert "by zero" in str(e.value) or "modulo" in str(e.value)
    assert f"test_zero_division.py:{f.__code__.co_firstlineno + 1}" in str(e.value)


def test_zero_to_a_negative_power_raises_as_python():
    for a, b in ((0.0, -1.0), (0, -1), (0.0, -0.5)):
        with pytest.raises(ZeroDivisionError):
            power(a, b)
        with pytest.raises(ZeroDivisionError):
            tessera.jit(power)(a, b)
    assert tessera.jit(power)(0.0, 0.0) == 1.0 and tessera.jit(power)(2, -1) == 0.5


@pytest.mark.filterwarnings("ignore")
def test_numpy_floats_keep_inf_and_nan():
    x = np.array([1.0, -1.0, 0.0])
    for f in (divide, floor_divide, modulo):
        want = f(x, 0.0)
        got = tessera.jit(f)(x, 0.0)
        np.testing.assert_array_equal(got, want)

    def element(x):
        return x[0] / 0.0, x[1] // 0.0, x[2] % 0.0

    with np.errstate(all="ignore"):
        want = element(x)
    got = tessera.jit(element)(x)
    np.testing.assert_array_equal(np.array(got, dtype=float), np.array(want, dtype=float))


def test_integer_arrays_raise():
    with pytest.raises(ZeroDivisionError):
        tessera.jit(floor_divide)(np.arange(3), 0)
    with pytest.raises(ZeroDivisionError):
        tessera.jit(modulo)(np.arange(3), np.zeros(3, dtype=np.int64))


def loop_of_python_floats(n, d):
    # Python floats in a scalar loop (native code): the division by zero at
    # turn n - 1 is Python's ZeroDivisionError.
    s = 0.0
    for i in range(n):
        s += 1.0 / (d - i * 1.0)
    return s


def loop_of_numpy_floats(x, d):
    # NumPy's floats (the elements): inf at the zero, as NumPy.
    s = 0.0
    for i in range(len(x)):
        s += x[i] / (d - i)
    return s


def loop_of_powers(n):
    s = 0.0
    for i in range(n):
        s += (3.0 - i) ** -1.0
    return s


CASES = [(loop_of_python_floats, (40000, 39999.0)),
         (loop_of_python_floats, (40000, 50000.0)),
         (loop_of_numpy_floats, (np.ones(100), 99.0)),
         (loop_of_powers, (2,)),
         (loop_of_powers, (5,))]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_loops_divide_as_python(f, args, threads):
    try:
        with np.errstate(all="ignore"):
            want = f(*args)
    except ZeroDivisionError:
        with pytest.raises(ZeroDivisionError) as e:
            tessera.jit(f)(*args)
        lines, first = inspect.getsourcelines(f)
        line = first + next(k for k, t in enumerate(lines) if "s += " in t)
        assert f"test_zero_division.py:{line}" in str(e.value)
        return
    assert tessera.jit(f)(*args) == want


_SCRIPT = cases_script("test_zero_division")


def test_native_interpreter_and_general_print_the_same():
    native, log = run_script(_SCRIPT, TESSERA_NATIVE="debug", TESSERA_CACHE_DIR="0")
    interp, _ = run_script(_SCRIPT, TESSERA_NATIVE="0")
    general, _ = run_script(_SCRIPT, TESSERA_FAST_LOOPS="0")
    assert native == interp == general
    assert "ZeroDivisionError" in native and "inf" in native
    assert "native code compiled" in log, log
