"""isinstance, hasattr and callable inside @tessera.jit, against plain Python/NumPy."""

import numbers

import numpy as np
import pytest
from jit_check import check

import tessera
from tessera.jit import UnsupportedError


def _tests(x):
    return [
        isinstance(x, np.ndarray),
        isinstance(x, (int, float)),
        isinstance(x, int),
        isinstance(x, bool),
        isinstance(x, float),
        isinstance(x, numbers.Number),
        isinstance(x, numbers.Integral),
        isinstance(x, (list, tuple)),
        isinstance(x, dict),
        isinstance(x, str | None),
        isinstance(x, object),
        hasattr(x, "shape"),
        hasattr(x, "__len__"),
        hasattr(x, "keys"),
        callable(x),
    ]


def _element_tests(x):
    # element reads and reductions are NumPy scalars: np.float64 is a float,
    # np.int64 is not an int
    e, s = x[0], x.sum()
    return [isinstance(e, float), isinstance(e, int), isinstance(e, np.integer),
            isinstance(e, np.floating), isinstance(s, np.generic), isinstance(e, np.ndarray),
            isinstance(e, np.bool_), hasattr(e, "dtype"), isinstance(len(x), int),
            isinstance(x.shape, tuple), isinstance(x.tolist(), list)]


@pytest.mark.parametrize("value", [
    np.arange(3.0), np.arange(4).reshape(2, 2), 3, 2.5, True, [1, 2], (1, 2), "ab", None,
    {"a": 1},
])
def test_kinds_of_arguments(value):
    check(_tests, value)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "uint8", "bool"])
def test_numpy_scalars(dtype):
    check(_element_tests, np.arange(3).astype(dtype))


def _dispatch(x):
    # the style of library code: accept a scalar or a sequence
    if isinstance(x, (int, float)):
        return float(x) * 2.0
    if isinstance(x, (list, tuple)):
        return np.asarray(x, dtype=np.float64) * 2.0
    if hasattr(x, "shape") and x.ndim == 2:
        return x.sum(axis=1)
    return x * 2.0


@pytest.mark.parametrize("value", [3, 1.5, [1, 2, 3], (4.0, 5.0), np.arange(4.0),
                                   np.ones((2, 3))])
def test_dispatch_on_kind(value):
    check(_dispatch, value)


def test_callable():
    @tessera.jit
    def g(x):
        h = lambda v: v + 1  # noqa: E731
        return callable(h), callable(x), callable(np.sin)
    assert g(np.ones(2)) == (True, False, True)


def _bad_class(x):
    classes = (int, float)
    return isinstance(x, classes)


def _bad_attr(x, name):
    return hasattr(x, name)


def test_refusals_name_the_construct():
    with pytest.raises(UnsupportedError, match=r"isinstance\(\) with the class argument "
                                               r"'classes'.*test_jit_type_tests.py:\d+"):
        tessera.jit(_bad_class)(1)
    with pytest.raises(UnsupportedError, match=r"hasattr\(\) with an attribute name.*"
                                               r"test_jit_type_tests.py:\d+"):
        tessera.jit(_bad_attr)(1, "shape")
