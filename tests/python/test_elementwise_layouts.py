"""Elementwise operations on the operand layouts that take the broadcast
layout's short path (operands of one shape, or 0-d scalars with arrays) and
the neighbouring general cases, against NumPy: values bit for bit, shapes and
dtypes, at 1 and 2 threads. Shapes include extents of 1, zero-size arrays, and
arrays of 1,000 elements (the size whose per-operation cost issue 31 item 5 is
about)."""

import numpy as np
import pytest

import tessera
from jit_check import numpy_body, numpy_fn

SHAPES = [(), (1,), (7,), (1000,), (1, 1000), (1000, 1), (3, 1, 4), (0,), (2, 0, 3), (1, 1)]

EXPRESSIONS = ["x + y", "x * y - x", "x / y", "np.maximum(x, y)", "x ** 2 + y",
               "np.sqrt(np.abs(x)) * y"]


def _values(shape, seed):
    return np.random.default_rng(seed).normal(size=shape) + 0.5


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("expr", EXPRESSIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_operands_of_one_shape(expr, shape, threads):
    f = numpy_fn(expr, "x, y")
    x, y = _values(shape, 1), _values(shape, 2)
    got = tessera.jit(f, threads=threads)(x, y)
    want = f(x, y)
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("scalar", [2.5, np.float64(-1.25), np.array(3.0)], ids=repr)
def test_an_array_and_a_scalar(shape, scalar, threads):
    f = numpy_fn("(x * s + s) / (s - x)", "x, s")
    x = _values(shape, 3)
    got = np.asarray(tessera.jit(f, threads=threads)(x, scalar))
    want = f(x, scalar)
    assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a, b", [((1000,), (1, 1000)), ((3, 1, 4), (1, 5, 4)), ((1,), (7,)),
                                  ((1000, 1), (1, 3)), ((0,), (1,)), ((2, 0, 3), (3,))],
                         ids=str)
def test_shapes_that_broadcast(a, b):
    f = numpy_fn("x * y + x", "x, y")
    x, y = _values(a, 4), _values(b, 5)
    got = np.asarray(tessera.jit(f)(x, y))
    want = f(x, y)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_a_loop_over_1000_element_arrays_is_numpys():
    f = numpy_body("for _ in range(50):\n    x = x * 0.999 + y\n    y = np.sqrt(np.abs(y))\n"
                 "return x, y", "x, y")
    x, y = _values(1000, 6), _values(1000, 7)
    got = tessera.jit(f)(x.copy(), y.copy())
    want = f(x.copy(), y.copy())
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_shapes_that_do_not_broadcast_still_raise():
    f = numpy_fn("x + y", "x, y")
    with pytest.raises(ValueError, match="broadcast"):
        tessera.jit(f)(np.ones(1000), np.ones(999))
