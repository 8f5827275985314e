"""Loops whose bodies hold constants that are not numbers -- full slices
(`A[:, j]`), slices with steps, strings -- run on the scalar-loop fast path
(tessera/lang/fastloop.cpp, h_const_object) and give what NumPy gives: values,
arrays written in place, errors with their file:line; the same with the fast
path off (TESSERA_FAST_LOOPS=0), at 1 and 2 threads. And the cost the
execution tree's spawn rule sees (a cheap `np.zeros` before a loop is not
handed to another worker at 2 threads)."""

import os
import subprocess
import sys

import numpy as np
import pytest
from jit_check import check

import tessera
from tessera import _core


def gram_schmidt(A):
    m, n = A.shape
    Q = np.zeros((m, n))
    for j in range(n):
        v = A[:, j].copy()
        for i in range(j):
            v -= np.dot(Q[:, i], A[:, j]) * Q[:, i]
        Q[:, j] = v / np.linalg.norm(v)
    return Q


def column_writes(A, out):
    # Full slices read and written in place, a step slice, a reversed one.
    for j in range(A.shape[1]):
        out[:, j] = A[:, j] * (j + 1)
        out[::2, j] += 1.0
    for i in range(A.shape[0]):
        out[i, ::-1] = out[i, :] - A[i, :]
    return out


def string_constants(x):
    count = 0
    for i in range(len(x)):
        kind = "big" if x[i] > 2 else "small"
        if kind == "big":
            count += 1
    return count, kind


def slice_then_index_error(A, k):
    total = 0.0
    for j in range(k):
        total += np.sum(A[:, j])  # column k is past the end
    return total


def rows_by_slices(A):
    s = np.zeros(A.shape[1])
    for i in range(A.shape[0]):
        s = s + A[i, :] * 0.5
        s[1:] = s[1:] - A[i, :-1]
    return s


CASES = [
    (gram_schmidt, (np.random.default_rng(1).random((12, 6)),)),
    (column_writes, (np.arange(20.0).reshape(5, 4), np.zeros((5, 4)))),
    (string_constants, (np.array([0.5, 3.0, 2.5, 1.0]),)),
    (slice_then_index_error, (np.ones((3, 4)), 6)),
    (rows_by_slices, (np.random.default_rng(2).random((7, 5)),)),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ for f, _ in CASES])
def test_constants_in_loops_agree_with_numpy(f, args, threads):
    before = _core.num_threads()
    _core.set_num_threads(threads)
    try:
        check(f, *args)
    finally:
        _core.set_num_threads(before)


def test_an_index_error_names_the_line():
    f = tessera.jit(slice_then_index_error)
    with pytest.raises(IndexError) as e:
        f(np.ones((3, 4)), 6)
    line = slice_then_index_error.__code__.co_firstlineno + 3
    assert f"test_fast_loop_constants.py:{line}" in str(e.value)


_CODE = (
    "import sys, numpy as np, tessera\n"
    f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
    "import test_fast_loop_constants as t\n"
    "import copy\n"
    "for f, args in t.CASES:\n"
    "    a = copy.deepcopy(args)\n"
    "    try:\n"
    "        print(f.__name__, repr(tessera.jit(f)(*a)), repr(a))\n"
    "    except Exception as e:\n"
    "        print(f.__name__, type(e).__name__, str(e), repr(a))\n"
)


def _run(flag):
    env = dict(os.environ, TESSERA_FAST_LOOPS=flag)
    r = subprocess.run([sys.executable, "-c", _CODE], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def test_fast_path_on_and_off_print_the_same_and_take_the_slices():
    fast, general = _run("debug"), _run("0")
    assert fast.stdout == general.stdout
    assert "IndexError" in fast.stdout
    # The fast path took the loops: no slice or string constant was refused.
    assert "slice(" not in fast.stderr, fast.stderr
    assert "the constant \"" not in fast.stderr, fast.stderr


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
    return L[n, m]


def test_a_cheap_fill_before_a_loop_stays_inline_at_two_threads():
    # The zeros node's first evaluation may be slow (fresh pages); the spawn
    # rule judges it by its cheapest recent evaluation, so at 2 threads it
    # is not handed to a worker on later calls (its parent would only wait).
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 4, 120), rng.integers(0, 4, 100)
    before = _core.num_threads()
    _core.set_num_threads(2)
    try:
        f = tessera.jit(lcs, performance=True)
        for _ in range(3):
            assert f(a, b) == lcs(a, b)
        rows = [r for r in f.counters(parsed=True) if r["name"].startswith("zeros")]
        assert rows and all(r["execution"] == "inline" for r in rows), rows
    finally:
        _core.set_num_threads(before)
