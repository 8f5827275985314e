"""Native loops specialised on the arrays' layout (tessera/lang/native.cpp,
docs/runtime.md "Native loops"): an array whose last dimension has unit
stride (or at most one element) is compiled with the constant stride 1, and
the signature of kinds says so, so the same function called with a view
whose last stride is not 1 (a transpose, a step, a column) gets code of its
own. These loops must give what Python/NumPy give and what the register
interpreter (TESSERA_NATIVE=0) gives, for every layout, in either order of
calls, at 1 and 2 threads; a register compiled for unit stride that is
assigned an array without it (a copy keeping a transposed order) goes back
to the interpreter, with the same results."""

import copy
import inspect

import numpy as np
import pytest
from jit_check import check, run_script

import tessera


def conv2d(img, k):
    h = img.shape[0] - k.shape[0] + 1
    w = img.shape[1] - k.shape[1] + 1
    out = np.zeros((h, w))
    for i in range(h):
        for j in range(w):
            s = 0.0
            for a in range(k.shape[0]):
                for b in range(k.shape[1]):
                    s += img[i + a, j + b] * k[a, b]
            out[i, j] = s
    return out


def lcs(a, b):
    n = len(a)
    m = len(b)
    L = np.zeros((n + 1, m + 1), dtype=np.int64)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if a[i - 1] == b[j - 1]:
                L[i, j] = L[i - 1, j - 1] + 1
            else:
                L[i, j] = max(L[i - 1, j], L[i, j - 1])
    return L


def axpy(a, x, y):
    for i in range(len(x)):
        y[i] = a * x[i] + y[i]
    return y


def wave(u, u_prev, c2, steps):
    n = len(u)
    for t in range(steps):
        u_next = np.zeros(n)
        for i in range(1, n - 1):
            u_next[i] = 2.0 * u[i] - u_prev[i] + c2 * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u_prev = u
        u = u_next
    return u


def rebind_to_copy(m, steps):
    # `cur` starts as the (C-ordered) argument; np.copy keeps a transposed
    # array's order ('K'), so after the first turn `cur` may be an array
    # whose last stride is not 1.
    cur = m
    mt = m.T
    total = 0.0
    for t in range(steps):
        for i in range(cur.shape[0]):
            for j in range(cur.shape[1]):
                total += cur[i, j] * (t + 1)
        cur = np.copy(mt)
    return total, cur


def switch_arrays(a, b, steps):
    # `cur` is compiled for `a`'s unit last stride; the turn that assigns it
    # `b` (a stepped view) goes back to the interpreter.
    cur = a
    total = 0.0
    for t in range(steps):
        for i in range(cur.shape[0]):
            for j in range(cur.shape[1]):
                total += cur[i, j] * (t + 1) + j
        cur = b
    return total


def column_sum(x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            s += x[i, j] * (j + 1)
    return s


def _rng(seed=0):
    return np.random.default_rng(seed)


def _img(layout):
    base = _rng().random((14, 22))
    if layout == "contiguous":
        return base[:, :11].copy()
    if layout == "transposed":
        return _rng().random((11, 14)).T
    if layout == "stepped":
        return base[:, ::2]
    raise ValueError(layout)


LAYOUTS = ("contiguous", "transposed", "stepped")


def _codes(n, seed, step=1):
    return _rng(seed).integers(0, 4, size=n * step)[::step]


def cases():
    out = []
    for layout in LAYOUTS:
        out.append((conv2d, (_img(layout), _rng(7).random((3, 3)))))
        out.append((conv2d, (_img("contiguous"), _rng(7).random((3, 6))[:, ::2])))
        out.append((column_sum, (_img(layout),)))
    out.append((lcs, (_codes(30, 3), _codes(25, 4))))
    out.append((lcs, (_codes(30, 3, step=3), _codes(25, 4, step=2))))
    x = _rng(1).random(40)
    out.append((axpy, (2.5, x, _rng(2).random(40))))
    out.append((axpy, (2.5, x[::2], _rng(2).random(60)[::3])))
    out.append((axpy, (2.5, x[::-1], _rng(2).random(40))))
    u = np.sin(np.linspace(0, 6, 50))
    out.append((wave, (u.copy(), u.copy(), 0.2, 4)))
    out.append((wave, (np.sin(np.linspace(0, 6, 100))[::2], u.copy(), 0.2, 4)))
    # A last extent of 1 whose stride is not 1 counts as unit stride.
    col = _rng(5).random((1, 9)).T
    out.append((column_sum, (col,)))
    out.append((column_sum, (_rng(5).random((9, 4))[:, :1],)))
    sq = _rng(6).random((5, 5))
    out.append((rebind_to_copy, (sq, 3)))
    out.append((switch_arrays, (sq, _rng(8).random((5, 10))[:, ::2], 4)))
    out.append((switch_arrays, (_rng(8).random((5, 10))[:, ::2], sq, 4)))
    return out


CASES = cases()


@pytest.mark.parametrize("f, args", CASES, ids=[f"{f.__name__}-{i}" for i, (f, _) in
                                                enumerate(CASES)])
def test_layouts_agree_with_numpy(f, args):
    check(f, *args, rtol=1e-12)


@pytest.mark.parametrize("first", LAYOUTS)
def test_one_function_called_with_every_layout(first):
    # One jit function: the code for one layout is not used for another.
    g = tessera.jit(conv2d)
    k = _rng(7).random((3, 3))
    order = [first] + [lay for lay in LAYOUTS if lay != first] + [first]
    for layout in order:
        img = _img(layout)
        np.testing.assert_allclose(g(img, k), conv2d(img, k), rtol=1e-12)
    c = tessera.jit(column_sum)
    for layout in order:
        img = _img(layout)
        assert c(img) == pytest.approx(column_sum(img), rel=1e-12)


_SCRIPT = """
import copy, sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_loops_hoist as t
for threads in (1, 2):
    for f, args in t.CASES:
        a = copy.deepcopy(args)
        g = tessera.jit(f, threads=threads)
        r = g(*a)
        print(f.__name__, repr(r), repr(a))
        print([",".join(l.split(",")[:3]) for l in g.counters().splitlines()])
"""


def test_native_and_interpreter_print_the_same():
    native, log = run_script(_SCRIPT, TESSERA_FAST_LOOPS="debug",
                             TESSERA_CACHE_DIR="0")
    interp, _ = run_script(_SCRIPT, TESSERA_NATIVE="0")
    assert native == interp
    # Every kernel was compiled, once per layout it met.
    compiled = [line for line in log.splitlines() if "native code compiled" in line]
    for f in (conv2d, lcs, axpy, wave, column_sum, rebind_to_copy, switch_arrays):
        lines = inspect.getsourcelines(f)
        inside = range(lines[1], lines[1] + len(lines[0]))
        assert any(f"test_native_loops_hoist.py:{n}:" in line
                   for line in compiled for n in inside), (f.__name__, log)
    assert "no native code" not in log, log


def test_arguments_are_not_copied_by_the_check():
    # The arrays the loops write are the caller's, whatever their layout.
    y = _rng(2).random(60)
    view = y[::3]
    expected = copy.deepcopy(y)
    axpy(2.5, np.arange(20.0), expected[::3])
    tessera.jit(axpy)(2.5, np.arange(20.0), view)
    np.testing.assert_allclose(y, expected, rtol=1e-15)


_SWITCH = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_loops_hoist as t
f, args = t.CASES[-2]
print(repr(tessera.jit(f)(*args)), repr(f(*args)))
"""


def test_a_strided_array_in_a_unit_stride_register_goes_back_to_the_interpreter():
    out, log = run_script(_SWITCH, TESSERA_FAST_LOOPS="debug", TESSERA_CACHE_DIR="0")
    got, expected = out.split()
    assert got == expected
    line = switch_arrays.__code__.co_firstlineno + 5  # `for t`
    assert f"test_native_loops_hoist.py:{line}: native code compiled" in log, log
    # The native code stopped (a bail) when `cur` became the stepped view.
    assert f"test_native_loops_hoist.py:{line}: native code returned 2" in log or \
        f"test_native_loops_hoist.py:{line}: native code returned 4" in log, log
