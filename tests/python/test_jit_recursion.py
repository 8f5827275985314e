"""Recursive and mutually recursive jit functions (docs/runtime.md, "Calls and
recursion"): each case against plain Python, at 1 and 2 threads, with native
code, the loop interpreter and the general evaluation; the scalar ones
compiled to native functions (native_calls.cpp)."""
import copy
import warnings

import numpy as np
import pytest

import tessera
from jit_check import PATHS, cases_script, check, run_script


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def fib_float(x):
    if x < 2.0:
        return x
    return fib_float(x - 1.0) + fib_float(x - 2.0) * 0.5


def ackermann(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ackermann(m - 1, 1)
    return ackermann(m - 1, ackermann(m, n - 1))


def gcd(a, b):
    if b == 0:
        return a
    return gcd(b, a % b)


def power(x, k):
    if k == 0:
        return 1
    half = power(x, k // 2)
    if k % 2 == 0:
        return half * half
    return half * half * x


def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


def collatz_steps(n):
    if n == 1:
        return 0
    if n % 2 == 0:
        return 1 + collatz_steps(n // 2)
    return 1 + collatz_steps(3 * n + 1)


def floor_rec(a, b):
    if a < 0 and b > 0:
        return a // b + floor_rec(-a, b)
    return a % b - a // 7


def signed_ops(a, b):
    # Python's floor division and modulo of negative ints (C's truncate).
    if a > 20:
        return 0
    return a % b + 10 * (a // b) + 100 * (-a % 7) + 1000 * (a // -6) + signed_ops(a + 3, b)


def big_product(n):
    # Past 20, Python's int grows beyond int64: tessera's ints are 64 bits and
    # the general path raises there (test_overflow_of_python_int_is_an_error).
    if n <= 1:
        return 1
    return n * big_product(n - 1)


def div_down(n):
    if n == 0:
        return 1 // n
    return div_down(n - 1) + 1


def wrap_np(n, acc, x):
    # x[0] is NumPy's int64: the product wraps around as NumPy's does.
    if n == 0:
        return acc
    return wrap_np(n - 1, acc * x[0], x)


def down(n):
    # Never reaches its base case: Python's RecursionError, tessera's too at
    # its call depth limit (test_unbounded_recursion...).
    if n < -10:
        return n
    return down(n + 1) + 1


def range_sum(x, lo, hi):
    if hi - lo == 1:
        return x[lo]
    mid = (lo + hi) // 2
    return range_sum(x, lo, mid) + range_sum(x, mid, hi)


def quicksort(a, lo, hi):
    if lo >= hi:
        return 0
    pivot = a[hi]
    i = lo
    for j in range(lo, hi):
        if a[j] < pivot:
            a[i], a[j] = a[j], a[i]
            i += 1
    a[i], a[hi] = a[hi], a[i]
    quicksort(a, lo, i - 1)
    quicksort(a, i + 1, hi)
    return i


def queens(n, row, cols, d1, d2, out):
    if row == n:
        out.append(1)
        return 1
    count = 0
    for c in range(n):
        if not (cols >> c) & 1 and not (d1 >> (row + c)) & 1 and not (d2 >> (row - c + n)) & 1:
            count += queens(n, row + 1, cols | (1 << c), d1 | (1 << (row + c)),
                            d2 | (1 << (row - c + n)), out)
    return count


def queens_bits(n, row, cols, d1, d2):
    if row == n:
        return 1
    count = 0
    for c in range(n):
        if not (cols >> c) & 1 and not (d1 >> (row + c)) & 1 and not (d2 >> (row - c + n)) & 1:
            count += queens_bits(n, row + 1, cols | (1 << c), d1 | (1 << (row + c)),
                                 d2 | (1 << (row - c + n)))
    return count


def digits_loop(n, skip):
    # A loop with break and continue inside a recursive function.
    if n < 10:
        return n
    total = 0
    k = n
    while True:
        d = k % 10
        k //= 10
        if d == skip:
            continue
        total += d
        if k == 0:
            break
    return digits_loop(total, skip) + (-n >> 3) + (n ^ 5) + ((n > 3) & (n < 99))


def shift_bad(n):
    if n < 0:
        return 1 >> n
    return shift_bad(n - 1)


def mergesort(a, tmp, lo, hi):
    # Sorts a[lo:hi] by index ranges through tmp (writes to two arrays).
    if hi - lo < 2:
        return 0
    mid = (lo + hi) // 2
    mergesort(a, tmp, lo, mid)
    mergesort(a, tmp, mid, hi)
    i = lo
    j = mid
    k = lo
    while k < hi:
        if j >= hi or (i < mid and a[i] <= a[j]):
            tmp[k] = a[i]
            i += 1
        else:
            tmp[k] = a[j]
            j += 1
        k += 1
    for k in range(lo, hi):
        a[k] = tmp[k]
    return hi - lo


def bsearch(a, x, lo, hi):
    if lo >= hi:
        return lo
    m = (lo + hi) // 2
    if a[m] < x:
        return bsearch(a, x, m + 1, hi)
    return bsearch(a, x, lo, m)


def flood(g, seen, i, j):
    # Counts the nonzero cells 4-connected to (i, j), marking them in seen.
    if i < 0 or j < 0 or i >= g.shape[0] or j >= g.shape[1]:
        return 0
    if seen[i, j] or g[i, j] == 0:
        return 0
    seen[i, j] = True
    return (1 + flood(g, seen, i + 1, j) + flood(g, seen, i - 1, j) + flood(g, seen, i, j + 1)
            + flood(g, seen, i, j - 1))


def seg_build(tree, a, node, lo, hi):
    # A segment tree of sums over a[lo..hi]: NumPy's kinds and dtype throughout.
    if lo == hi:
        tree[node] = a[lo]
        return tree[node]
    mid = (lo + hi) // 2
    s = seg_build(tree, a, 2 * node, lo, mid) + seg_build(tree, a, 2 * node + 1, mid + 1, hi)
    tree[node] = s
    return s


def tail_sum(x, i):
    # Negative indices, from the end, and len.
    if i == -len(x):
        return x[i]
    return x[i] * 2 + tail_sum(x, i - 1)


def scale_down(a, i, k):
    # Writes then runs past the end: IndexError, the writes before it kept.
    a[i] = a[i] * k
    return scale_down(a, i + 1, k)


def count_true(b, i):
    if i == len(b):
        return 0
    return count_true(b, i + 1) + (1 if b[i] else 0)


def put_big(a, i, v):
    # v * v beyond int32 written to an int32 array: NumPy's OverflowError.
    if i == a.shape[0]:
        return 0
    a[i] = v
    return put_big(a, i + 1, v * v)


def scale_sum(a, s, i):
    # s is NumPy's scalar passed in: its kind is the call's signature.
    if i == len(a):
        return s * 0
    return a[i] * s + scale_sum(a, s, i + 1)


def _grid():
    g = (np.random.default_rng(3).random((9, 11)) < 0.6).astype(np.int32)
    return g


CASES = [(queens_bits, (6, 0, 0, 0, 0)), (digits_loop, (987654321, 4)), (shift_bad, (2,)),
         (fib, (15,)), (fib, (0,)), (fib_float, (12.0,)), (ackermann, (2, 3)),
         (gcd, (1071, 462)), (gcd, (-48, 18)), (power, (3, 13)), (power, (-2, 63)),
         (is_even, (41,)), (is_odd, (41,)), (collatz_steps, (27,)), (floor_rec, (-17, 5)),
         (signed_ops, (-20, 3)), (signed_ops, (-20, -4)),
         (big_product, (20,)), (div_down, (5,)), (wrap_np, (5, 1, np.array([1_000_003], dtype=np.int64))),
         (range_sum, (np.arange(10.0), 0, 10)), (range_sum, (np.arange(10.0), 0, 11)),
         (quicksort, (np.array([5.0, 1.0, 4.0, 2.0, 8.0, 0.5]), 0, 5)),
         (queens, (5, 0, 0, 0, 0, [])),
         (mergesort, (np.random.default_rng(1).random(37), np.zeros(37), 0, 37)),
         (mergesort, (np.random.default_rng(2).integers(-50, 50, 40), np.zeros(40, np.int64), 0, 40)),
         (bsearch, (np.arange(0.0, 50.0, 0.5), 17.25, 0, 100)),
         (bsearch, (np.arange(-40, 60, 3, dtype=np.int32), 11, 0, 34)),
         (flood, (_grid(), np.zeros((9, 11), bool), 4, 5)),
         (flood, (_grid().T, np.zeros((11, 9), bool), 2, 3)),
         (seg_build, (np.zeros(64), np.random.default_rng(4).random(29), 1, 0, 28)),
         (seg_build, (np.zeros(64, np.float32), np.random.default_rng(5).random(29).astype(np.float32), 1, 0, 28)),
         (seg_build, (np.zeros(32, np.int32), np.arange(13, dtype=np.int32), 1, 0, 12)),
         (range_sum, (np.arange(30.0).reshape(5, 6)[:, 2], 0, 5)),
         (quicksort, (np.random.default_rng(6).random((4, 12))[1, ::-1], 0, 11)),
         (quicksort, (np.random.default_rng(7).integers(0, 9, 25).astype(np.int32), 0, 24)),
         (tail_sum, (np.arange(7.0) - 3, -1)), (tail_sum, (np.arange(7), -1)),
         (scale_down, (np.arange(6.0), 0, 3.0)),
         (count_true, (np.random.default_rng(8).random(20) < 0.5, 0)),
         (put_big, (np.zeros(5, np.int32), 0, 7)),
         (bsearch, (np.arange(0, 50, 0.5, dtype=np.float32), np.float32(17.25), 0, 100)),
         (scale_sum, (np.arange(5, dtype=np.int32), np.int32(3), 0)),
         (scale_sum, (np.arange(5.0, dtype=np.float32), np.float32(0.5), 0)),
         (scale_sum, (np.arange(5), np.int64(-2), 0)),
         (scale_sum, (np.arange(5.0), np.array(1.5), 0))]


@pytest.mark.parametrize("f,args", CASES, ids=[f"{f.__name__}{i}" for i, (f, _) in enumerate(CASES)])
def test_same_as_python(f, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's overflow warning of the wrapping case
        check(f, *args)


def _python_records():
    """(name, exception kind or None, what the case script prints after the name)."""
    out = []
    for _ in (1, 2):
        for f, args in CASES:
            a = copy.deepcopy(args)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = f(*a)
                out.append((f.__name__, None, f"{r!r} {a!r}"))
            except Exception as e:  # noqa: BLE001 - mirrored below
                out.append((f.__name__, type(e).__name__, repr(a)))
    return out


def _records(stdout):
    """The case script's output cut into one record per case (an array's repr
    spans lines): [(name, rest)]."""
    names = {f.__name__ for f, _ in CASES}
    out = []
    for line in stdout.splitlines():
        head = line.split(" ", 1)
        if head[0] in names and len(head) == 2:
            out.append([head[0], head[1]])
        else:
            out[-1][1] += "\n" + line
    return out


def test_every_path_prints_what_python_does():
    # Results, the arrays written in place, and after an exception its kind
    # and the arrays as the writes before it left them.
    expected = _python_records()
    for mode, env in PATHS.items():
        stdout, stderr = run_script(cases_script("test_jit_recursion"), **env)
        got = _records(stdout)
        assert len(got) == len(expected), (mode, stdout, stderr)
        for (g_name, g_rest), (e_name, e_kind, e_rest) in zip(got, expected):
            assert g_name == e_name, (mode, g_name, e_name)
            if e_kind is None:
                assert g_rest == e_rest, (mode, g_name, g_rest, e_rest)
            else:
                assert g_rest.startswith(e_kind + " ") and g_rest.endswith(e_rest), (
                    mode, g_name, g_rest, e_kind, e_rest)


def test_scalar_recursion_is_compiled_to_native_code():
    script = """
import sys; sys.path.insert(0, {here!r})
import tessera, test_jit_recursion as t
for f, args in [(t.fib, (20,)), (t.ackermann, (2, 3)), (t.gcd, (1071, 462)),
                (t.queens_bits, (6, 0, 0, 0, 0)), (t.digits_loop, (987654321, 4)),
                (t.signed_ops, (-20, 3)), (t.power, (3, 13)), (t.is_even, (41,)), (t.fib_float, (12.0,))]:
    print(tessera.jit(f)(*args))
"""
    stdout, stderr = run_script(script, **PATHS["native"])
    for name in ("fib", "ackermann", "gcd", "queens_bits", "digits_loop", "signed_ops", "py_power",
                 "is_even", "fib_float"):
        assert f"native code for the call of '{name}'" in stderr, stderr
    assert stdout.split() == [str(v) for v in (fib(20), ackermann(2, 3), gcd(1071, 462),
                                              queens_bits(6, 0, 0, 0, 0),
                                              digits_loop(987654321, 4), signed_ops(-20, 3),
                                              power(3, 13), is_even(41), fib_float(12.0))]


def test_recursion_over_arrays_is_compiled_to_native_code():
    # Every array case runs as native code (no fall-back); each case's values
    # are compared with Python's in test_every_path_prints_what_python_does.
    script = """
import copy, sys, warnings; sys.path.insert(0, {here!r})
import tessera, test_jit_recursion as t
warnings.simplefilter("ignore")
for f, args in t.CASES:
    try:
        tessera.jit(f)(*copy.deepcopy(args))
    except Exception:
        pass
"""
    _, stderr = run_script(script, **PATHS["native"])
    for name in ("range_sum", "quicksort", "mergesort", "bsearch", "flood", "seg_build",
                 "tail_sum", "scale_down", "count_true", "put_big", "scale_sum"):
        assert f"native code for the call of '{name}'" in stderr, (name, stderr)
        assert f"'{name}' stays on the general path" not in stderr, (name, stderr)


def test_read_only_array_is_the_general_paths_error():
    a = np.arange(6.0)
    a.flags.writeable = False
    with pytest.raises(ValueError) as expected:
        scale_down(a, 0, 2.0)
    with pytest.raises(ValueError, match=r"test_jit_recursion.py:\d+"):
        tessera.jit(scale_down)(a, 0, 2.0)
    assert "read-only" in str(expected.value)
    np.testing.assert_array_equal(a, np.arange(6.0))


def test_writes_before_an_error_are_kept_once():
    # Native code bails at the bound; its writes are undone and the general
    # path runs the call again: each element is scaled once, as in Python.
    for k in (3.0, 2):
        a, b = np.arange(1.0, 7.0), np.arange(1.0, 7.0)
        with pytest.raises(IndexError):
            scale_down(a, 0, k)
        with pytest.raises(IndexError, match=r"test_jit_recursion.py:\d+"):
            tessera.jit(scale_down)(b, 0, k)
        np.testing.assert_array_equal(b, a)


def churn(a, b, k):
    # k passes of writes to a and b, then an IndexError: 240,000 writes
    # outgrow the undo log (4 MB), which turns into copies of the arrays.
    if k == 0:
        return a[len(a)]
    for j in range(len(a)):
        a[j] = a[j] + 1.0
        b[j] = b[j] * 0.5
    return churn(a, b, k - 1)


@pytest.mark.parametrize("alias", ["apart", "reversed view"])
def test_many_writes_before_an_error_are_undone_from_copies(alias):
    def make():
        x = np.random.default_rng(9).random(2000)
        if alias == "same":
            return x, x
        if alias == "reversed view":
            return x, x[::-1]
        return x, x.copy()

    a, b = make()
    with pytest.raises(IndexError):
        churn(a, b, 60)
    c, d = make()
    with pytest.raises(IndexError, match=r"test_jit_recursion.py:\d+"):
        tessera.jit(churn)(c, d, 60)
    np.testing.assert_array_equal(c, a)
    np.testing.assert_array_equal(d, b)


def test_errors_name_the_line_of_the_recursive_call():
    with pytest.raises(ZeroDivisionError, match=r"test_jit_recursion.py:\d+"):
        tessera.jit(div_down)(3)
    with pytest.raises(IndexError, match=r"test_jit_recursion.py:\d+"):
        tessera.jit(range_sum)(np.arange(4.0), 0, 6)


def test_unbounded_recursion_raises_instead_of_crashing():
    script = """
import sys; sys.path.insert(0, {here!r})
import tessera, test_jit_recursion as t

try:
    tessera.jit(t.down)(0)
    print("no error")
except Exception as e:
    print(type(e).__name__, isinstance(e, RuntimeError), "depth" in str(e),
          "test_jit_recursion.py" in str(e))
print("alive")
"""
    with pytest.raises(RecursionError):
        down(0)
    for env in PATHS.values():
        stdout, _ = run_script(script, **env)
        assert stdout.split() == ["RecursionError", "True", "True", "True", "alive"], stdout


def test_overflow_of_python_int_is_an_error_on_every_path():
    script = """
import sys; sys.path.insert(0, {here!r})
import tessera, test_jit_recursion as t
try:
    print(tessera.jit(t.big_product)(25))
except OverflowError as e:  # Python's int would grow: its OverflowError, not a ValueError
    print("OverflowError", isinstance(e, ValueError), "integer overflow" in str(e),
          "test_jit_recursion.py" in str(e))
"""
    for mode, env in PATHS.items():
        stdout, _ = run_script(script, **env)
        assert stdout.split() == ["OverflowError", "False", "True", "True"], (mode, stdout)
