"""Plain Python helpers are translated with the jit function that calls them
(as Numba compiles @njit callees), and functions are first-class values:
passed as arguments from Python or inside jit code, stored in lists and dicts."""

import os.path
import textwrap

import numpy as np
import pytest

import tessera
from jit_check import check


def square(x):
    return x * x


def sum_of_squares(x):
    return np.sum(square(x))  # a helper calling a helper


def factorial(n):
    if n <= 1:
        return 1
    return n * factorial(n - 1)


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


def scaled(x, factor=2.0, *, shift=0.0):
    return x * factor + shift


cube = lambda x: x * x * x  # noqa: E731


def f_calls_helpers(x):
    return sum_of_squares(x) + scaled(x, 3.0, shift=1.0)[0] + cube(x)[1]


def f_recursion(n):
    return factorial(n), is_even(n), is_odd(n)


def make_closure(offset):
    helper = lambda v: v + offset  # noqa: E731

    def inner(v):
        return v * 10

    def f(x):
        return helper(x) + inner(x)

    return f


def apply(fn, x):
    return fn(x)


def apply_twice(fn, x):
    return fn(fn(x))


def compose(f, g, x):
    return f(g(x))


def f_table(x):
    fs = [np.sin, square, cube, lambda v: v - 1]
    out = []
    for fn in fs:
        out.append(fn(x))
    return out


def f_passes_function(x):
    return apply(square, x) + apply_twice(cube, x)


def f_other_module(x):
    return textwrap.dedent("  a")  # HERE


def f_other_module_value(x):
    g = os.path.basename  # HERE
    return x


X = np.array([0.5, -1.5, 2.0])


def test_helpers_are_translated_transitively():
    check(f_calls_helpers, X)
    assert "sum_of_squares" in tessera.jit(f_calls_helpers).code


def test_recursive_and_mutually_recursive_helpers():
    check(f_recursion, 6)
    check(f_recursion, 7)


def test_closure_helpers():
    check(make_closure(3.0), X)


def test_functions_in_lists():
    check(f_table, X)


def test_functions_passed_inside_jit_code():
    check(f_passes_function, X)


@pytest.mark.parametrize("fn", [square, cube, np.sin, np.exp, lambda v: v + 1])
def test_plain_functions_as_arguments(fn):
    check(apply, fn, X)
    check(apply_twice, fn, X)


def test_jit_functions_as_arguments():
    jsq = tessera.jit(square)
    np.testing.assert_allclose(tessera.jit(apply)(jsq, X), X**2)
    got = tessera.jit(compose)(jsq, cube, X)
    np.testing.assert_allclose(got, (X**3) ** 2)
    # The cache key holds the function: another function gives another program.
    japply = tessera.jit(apply)
    np.testing.assert_allclose(japply(square, X), X**2)
    np.testing.assert_allclose(japply(cube, X), X**3)
    np.testing.assert_allclose(japply(square, X), X**2)


def test_functions_of_other_modules_are_unsupported_with_the_line():
    for f in (f_other_module, f_other_module_value):
        with pytest.raises(tessera.UnsupportedError) as info:
            tessera.jit(f)(X)
        msg = str(info.value)
        assert "of the module" in msg and "test_jit_helpers.py:" in msg
        line = int(msg.rsplit(":", 1)[1].rstrip(")"))
        with open(__file__) as fh:
            assert "# HERE" in fh.read().splitlines()[line - 1]
