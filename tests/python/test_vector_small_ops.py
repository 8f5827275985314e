"""Small vectorised operations in jit functions (docs/runtime.md, "Native loops", the part on
vectorised kernels): a scalar written into a strided slice (`is_prime[i * i::i] = False`),
np.nonzero / np.argwhere / np.flatnonzero, and `x OP= a OP2 b` computed in one pass into x
(Gram-Schmidt's `v -= np.dot(Q[:, i], a) * Q[:, i]`, columns read in place). Values, kinds
and the arrays changed in place are NumPy's, with overlapping operands (`v -= 0.5 * v[::-1]`
takes NumPy's temporary) and every fallback (other dtypes, shapes, numbers), at 1 and 2
threads and on the three paths a loop can take; the fused in-place call is checked to run."""

import copy
import re

import numpy as np
import pytest
from jit_check import assert_identical, run_on_every_path

import tessera


def strided_fill(x, start, stop, step, value):
    x[start:stop:step] = value
    return x


def sieve(n):
    is_prime = np.ones(n + 1, dtype=bool)
    is_prime[:2] = False
    for i in range(2, int(n ** 0.5) + 1):
        if is_prime[i]:
            is_prime[i * i::i] = False
    return np.nonzero(is_prime)[0]


def fill_2d(a):
    a[::2, 1::3] = 7
    a[::-1, ::-2] = a[0, 0] + 1
    return a


def nonzero_of(x):
    return np.nonzero(x)


def argwhere_of(x):
    return np.argwhere(x)


def flatnonzero_of(x):
    return np.flatnonzero(x)


def gram_schmidt(A):
    m, n = A.shape
    Q = np.zeros((m, n))
    for j in range(n):
        v = A[:, j].copy()
        for i in range(j):
            v -= np.dot(Q[:, i], A[:, j]) * Q[:, i]
        Q[:, j] = v / np.linalg.norm(v)
    return Q


def column_update(v, Q, a):
    # v, an argument, changed in place by strided columns and a 0-d scalar.
    for i in range(Q.shape[1]):
        v -= np.dot(Q[:, i], a) * Q[:, i]
    return v


def each_operator(v, w, s):
    v += s * w
    v -= w / s
    v *= w + 1.0
    v /= 2.0 - w
    return v


def onto_a_column(A, w):
    c = A[:, 1]
    c -= 0.25 * w
    c += A[:, 2] * 3.0
    return A


def itself(v):
    v -= v * 2.0  # v read at the element written, as NumPy's temporary holds it
    return v


def reversed_view(v):
    v -= 0.5 * v[::-1]  # overlaps v elsewhere: NumPy's temporary, not one pass
    return v


def shifted(v):
    v[1:] -= 2.0 * v[:-1]
    return v


def first_element(v, w):
    v += v[0] * w
    return v


def float32_with_float64(v, w):
    v -= np.float64(0.5) * w  # float32 v, float64 product: NumPy's casts, no one pass
    return v


def ints_and_floats(v, w):
    v -= 2 * w
    return v


def int_array_float_value(v, w):
    v -= 0.5 * w  # TypeError: float64 output cast to int64 under 'same_kind'
    return v


def wrong_shape(v, w):
    v -= 2.0 * w
    return v


def number_rebound(w):
    v = 1.5
    v -= 2.0 * w
    return v


def two_d(V, W):
    V -= 0.5 * W
    V += W[0] * 2.0
    return V


def scalars_only(n):
    s = 0.0
    for i in range(n):
        s -= 0.5 * i
    return s


_R = np.random.default_rng(7)
_Q = _R.random((50, 6))
CASES = [
    (strided_fill, (np.ones(40, dtype=bool), 4, None, 4, False)),
    (strided_fill, (np.arange(30), 25, 2, -3, -1)),
    (strided_fill, (np.linspace(0, 1, 17), 3, None, 50, 2.5)),
    (strided_fill, (np.ones(10), 20, None, 3, 0.0)),
    (strided_fill, (np.zeros(0, dtype=bool), 0, None, 2, True)),
    (sieve, (1000,)),
    (fill_2d, (np.zeros((6, 8), dtype=np.int64),)),
    (nonzero_of, (np.array([0, 3, 0, 0, -1, 2]),)),
    (nonzero_of, (np.array([[0.0, -0.0, np.nan], [1.5, 0.0, 2.0]]),)),
    (argwhere_of, (np.array([[True, False], [False, True], [True, True]]),)),
    (flatnonzero_of, (np.array([0.0, 1e-300, 0.0, -3.0]),)),
    (gram_schmidt, (_R.random((40, 5)),)),
    (column_update, (_R.random(50), _Q, _R.random(50))),
    (each_operator, (_R.random(30), _R.random(30), 3.0)),
    (onto_a_column, (_R.random((20, 4)), _R.random(20))),
    (itself, (_R.random(25),)),
    (reversed_view, (_R.random(25),)),
    (shifted, (_R.random(25),)),
    (first_element, (_R.random(25), _R.random(25))),
    (float32_with_float64, (_R.random(25).astype(np.float32), _R.random(25))),
    (ints_and_floats, (_R.random(10), np.arange(10))),
    (int_array_float_value, (np.arange(10), np.ones(10))),
    (wrong_shape, (np.ones(5), np.ones(6))),
    (number_rebound, (_R.random(8),)),
    (two_d, (_R.random((7, 9)), _R.random((7, 9)))),
    (scalars_only, (50,)),
]


# Their np.dot sums in another order than OpenBLAS's ddot (docs/runtime.md).
_DOTS = (gram_schmidt, column_update)


def _call(f, args):
    try:
        return f(*args), None
    except Exception as e:  # the same exception class as NumPy's is compared
        return None, e


@pytest.mark.parametrize("f, args", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_against_numpy(f, args, threads):
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    expected, error = _call(f, theirs)
    got, got_error = _call(tessera.jit(f, threads=threads), mine)
    if error is not None:  # NumPy's class or the builtin one it derives from
        base = next(c for c in type(error).__mro__ if c.__module__ == "builtins")
        assert isinstance(got_error, base), (got_error, error)
    else:
        assert got_error is None, got_error
        if f in _DOTS:  # np.dot's summation order is BLAS's: rtol 1e-12
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        else:
            assert_identical(got, expected)
    for m, t in zip(mine, theirs):  # arguments changed in place
        if isinstance(t, np.ndarray):
            assert m.dtype == t.dtype
            if f in _DOTS:
                np.testing.assert_allclose(m, t, rtol=1e-12, atol=1e-12)
            else:
                np.testing.assert_array_equal(m, t)


def test_large_sieve_and_nonzero(threads):
    # 2-D nonzero across rows; a long 1-D one with sparse and dense runs.
    x = np.zeros((300, 700))
    x[::7, ::11] = 1.0
    x[5] = 2.0
    j = tessera.jit(nonzero_of, threads=threads)
    for got, want in zip(j(x), np.nonzero(x)):
        assert_identical(got, want)
    assert_identical(tessera.jit(sieve, threads=threads)(200_000), sieve(200_000))


def _evaluations(tree: str, name: str) -> int:
    found = re.findall(re.escape(name) + r'\\n[^"]*?evals=(\d+)', tree)
    return sum(int(e) for e in found)


def test_the_fused_in_place_call_runs():
    # Gram-Schmidt's inner loop goes to the general evaluation once its array
    # operations outweigh the rest (fastloop.cpp); there its `v -= dot * column`
    # is one call, the multiply of the unfused tree not evaluated. The turns
    # before the switch, on the loop interpreter, count the unfused operations.
    j = tessera.jit(gram_schmidt, threads=2, performance=True)
    A = np.random.default_rng(1).random((200, 40))
    j(A)
    tree = j.tree()
    fused = _evaluations(tree, "isub_fused(multiply)")
    assert fused > 40 * 39 // 4
    assert fused + _evaluations(tree, "multiply") == 40 * 39 // 2


_PRINT_CASES = """
import copy, sys, numpy as np, tessera, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {here!r})
import test_vector_small_ops as t
for threads in (1, 2):
    for f, args in t.CASES:
        a = copy.deepcopy(args)
        g = tessera.jit(f, threads=threads)
        try:
            print(t.one_line(f, g(*a), a))
        except Exception as e:
            print(f.__name__, type(e).__name__)
"""


def one_line(f, result, args):
    return " ".join(f"{f.__name__} {result!r} {args!r}".split())


def test_every_path_gives_numpys_answer():
    lines = []
    for _threads in (1, 2):
        for f, args in CASES:
            a = copy.deepcopy(args)
            try:
                lines.append(one_line(f, f(*a), a))
            except Exception:
                lines.append(None)  # the error: the same on every path (below)
    runs = run_on_every_path(_PRINT_CASES)
    outputs = {mode: stdout.splitlines() for mode, (stdout, _stderr) in runs.items()}
    for mode, got in outputs.items():
        assert len(got) == len(lines), mode
        for k, (g, want) in enumerate(zip(got, lines)):
            if want is None:  # tessera's message, the same class on every path
                assert g.split()[:2] == outputs["general"][k].split()[:2], (mode, g)
                assert g.split()[1].endswith("Error"), (mode, g)
            elif not g.startswith(("gram_schmidt", "column_update")):  # rtol above
                assert g == want, (mode, g, want)
