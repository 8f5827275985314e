"""np.searchsorted and early returns in native loops (docs/runtime.md, "Native
loops"): `np.searchsorted(a, v, side)` of a 1-d array or a row of a 2-d one
(`cdf[X[t]]`) and one number runs as a binary search in the generated code,
comparing as NumPy does (the array's dtype promoted with the value's; NaN after
every number); a function called from a loop may `return` from inside its own
loops and branches (bench/published_kernels.py's binary_search). Results,
arrays written in place and errors are NumPy's and CPython's, with native code,
the loop interpreter and the general evaluation, at 1 and 2 threads; the loops
must run as native code (the debug log)."""

import numpy as np
import pytest
from jit_check import cases_script, check, loop_log_lines, run_on_every_path

import tessera

# ---------------------------------------------------------------- searchsorted


def search_rows(table, values):
    out = np.zeros((len(values), 2), dtype=np.int64)
    for i in range(len(values)):
        r = i % table.shape[0]
        out[i, 0] = np.searchsorted(table[r], values[i])
        out[i, 1] = np.searchsorted(table[r], values[i], side="right")
    return out


def search_1d(a, values):
    out = np.zeros((len(values), 2), dtype=np.int64)
    for i in range(len(values)):
        out[i, 0] = np.searchsorted(a, values[i], "left")
        out[i, 1] = np.searchsorted(a, values[i], side="right")
    return out


def search_constant(table):
    t = 0
    for i in range(table.shape[0]):
        t += np.searchsorted(table[i], 0.5) * 10 + np.searchsorted(table[-1 - i], 1, "right")
    return t


def search_row_variable(table, values):
    # A variable holding a row (no array made per turn), and `for row in table`.
    t = 0
    for i in range(len(values)):
        row = table[i % table.shape[0]]
        t += np.searchsorted(row, values[i], side="right") * (i + 1)
    for row in table:
        t += np.searchsorted(row, 0.25)
    return t, row


def markov_chain(P, x0, draws):
    cdf = np.cumsum(P, axis=1)
    n = len(draws)
    X = np.empty(n + 1, dtype=np.int64)
    X[0] = x0
    for t in range(n):
        X[t + 1] = np.searchsorted(cdf[X[t]], draws[t])
    return X


def row_out_of_range(table, rows):
    t = 0
    for i in range(len(rows)):
        t += np.searchsorted(table[rows[i]], 0.0)
    return t


def search_2d(table, v):
    t = 0
    for i in range(3):
        t += np.searchsorted(table, v)  # not 1-d: NumPy's ValueError
    return t


_DTYPES = [np.float64, np.float32, np.int64, np.int32, np.bool_]


def _sorted_table(dtype, rows=5, cols=9, seed=0):
    r = np.random.default_rng(seed)
    if dtype == np.bool_:
        t = r.random((rows, cols)) < 0.5
    elif np.issubdtype(dtype, np.integer):
        t = r.integers(-4, 5, (rows, cols)).astype(dtype)  # repeated values
    else:
        t = np.round(r.normal(size=(rows, cols)), 1).astype(dtype)
        t[1, -3:] = np.nan  # NaN sorts last
        t[2, :] = np.nan
        t[3, 0] = -np.inf
        t[3, -1] = np.inf
    return np.sort(t, axis=1)


def _values(kind, n=40, seed=1):
    r = np.random.default_rng(seed)
    base = np.concatenate([np.round(r.normal(size=n - 8), 1),
                           [0.0, 1.0, -4.0, 4.0, 10.0, -10.0, 0.1, 2.5]])
    if kind == "float":
        return [float(v) for v in base] + [float("nan"), float("inf"), -float("inf")]
    if kind == "int":
        return [int(v) for v in np.round(base)] + [2 ** 40, -(2 ** 40)]
    if kind == "bool":
        return [bool(v > 0) for v in base]
    if kind == np.bool_:
        return base > 0
    if np.issubdtype(kind, np.integer):
        return np.round(base).astype(kind)
    return np.concatenate([base, [np.nan, np.inf, -np.inf]]).astype(kind)


_KINDS = ["float", "int", "bool"] + _DTYPES


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("adt", _DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("vkind", _KINDS, ids=lambda k: k if isinstance(k, str) else np.dtype(k).name)
def test_searchsorted_agrees_with_numpy(adt, vkind, threads):
    table = _sorted_table(adt)
    check(search_rows, table, _values(vkind))
    check(search_1d, table[3], _values(vkind))
    check(search_1d, np.ascontiguousarray(table[:, ::2])[0], _values(vkind))


@pytest.mark.filterwarnings("ignore")
def test_searchsorted_edges(threads):
    t = _sorted_table(np.float64)
    check(search_rows, t[:, ::2], _values(np.float64))  # rows with a stride
    check(search_rows, np.zeros((3, 0)), _values("float"))  # empty rows
    check(search_1d, np.zeros(0, np.int64), _values(np.int64))
    check(search_1d, np.full(7, np.nan), _values("float"))
    check(search_1d, np.array([0.1, 0.2, 0.3], np.float32), [0.1, 0.2, 0.3])  # compared in float64
    check(search_1d, np.arange(10, dtype=np.int32)[::-2][::-1], _values(np.int32))
    check(search_constant, t)
    check(search_row_variable, t, _values(np.float64))
    check(search_row_variable, _sorted_table(np.int64), _values("int"))
    check(search_constant, _sorted_table(np.int32))
    check(row_out_of_range, t, np.array([0, -1, 4]))
    check(row_out_of_range, t, np.array([0, 5]))  # IndexError
    check(search_2d, t, 0.5)  # ValueError


def test_markov_chain_agrees_with_numpy(threads):
    r = np.random.default_rng(3)
    P = r.random((12, 12))
    P /= P.sum(axis=1, keepdims=True)
    check(markov_chain, P, 0, r.random(2000))


def test_index_error_of_a_row_names_its_line():
    with pytest.raises(IndexError) as e:
        tessera.jit(row_out_of_range)(_sorted_table(np.float64), np.array([0, 5]))
    line = row_out_of_range.__code__.co_firstlineno + 3
    assert f"test_native_search.py:{line}" in str(e.value)


# -------------------------------------------------- returns in called functions


def binary_search(a, x):
    lo, hi = 0, len(a) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        elif a[mid] > x:
            hi = mid - 1
        else:
            return mid
    return -1


def search_all(a, queries):
    out = np.empty(len(queries), dtype=np.int64)
    for i in range(len(queries)):
        out[i] = binary_search(a, queries[i])
    return out


def find_pair(a, target):
    # A return from inside two loops.
    n = len(a)
    for i in range(n):
        for j in range(i + 1, n):
            if a[i] + a[j] == target:
                return i * n + j
    return -1


def pairs_found(a, targets):
    t = 0
    for k in range(len(targets)):
        t = (t * 3 + find_pair(a, targets[k])) % 1000003
    return t


def first_above(a, x):
    # `while True` left only by returns, with a continue.
    i = 0
    while True:
        if i >= len(a):
            return -1
        if a[i] <= x:
            i += 1
            continue
        return i


def last_small(a, x):
    # A break (the loop's) and a return (the function's) in one loop.
    k = -1
    for i in range(len(a)):
        if a[i] > x:
            break
        if a[i] == x:
            return -i
        k = i
    return k


def sign_code(x):
    if x < 0:
        return -1
    elif x == 0:
        return 0
    return 1


def nested_helpers(a, x):
    # A function with returns calling functions with returns.
    k = binary_search(a, x)
    if k < 0:
        return sign_code(x - a[0]) * 1000 + first_above(a, x)
    return k + 100 + last_small(a, x)


def scan_helpers(a, xs):
    t = 0
    for i in range(len(xs)):
        t = (t * 5 + nested_helpers(a, xs[i]) + sign_code(xs[i] - 3)) % 1000003
    return t


def half_or_one(x):
    # Returns of two kinds: the value's register changes kind (a bail).
    if x > 0.5:
        return 1
    return x * 2.0


def sum_half_or_one(xs):
    t = 0.0
    for i in range(len(xs)):
        t += half_or_one(xs[i])
    return t


def mark_until(seen, a, x):
    # Writes into the caller's array before returning early.
    for i in range(len(a)):
        seen[i] += 1
        if a[i] >= x:
            return i
    return len(a)


def mark_all(seen, a, xs):
    t = 0
    for k in range(len(xs)):
        t += mark_until(seen, a, xs[k])
    return t


def read_or_zero(a, i):
    if i < 0:
        return 0
    return a[i]


def read_all(a, idx):
    t = 0
    for k in range(len(idx)):
        t += read_or_zero(a, idx[k])
    return t


def maybe_index(a, x):
    for i in range(len(a)):
        if a[i] == x:
            return i
    # falls off the end: None


def count_found(a, xs):
    c = 0
    for k in range(len(xs)):
        if maybe_index(a, xs[k]) is not None:
            c += 1
    return c


def first_negative(a):
    # A return in the jit function's own loop.
    for i in range(len(a)):
        if a[i] < 0:
            return i
    return -1


def fib(n):
    # Recursive, with an early return: not inlined (a native function of its own).
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def fib_sum(k):
    t = 0
    for i in range(k):
        t += fib(i)
    return t


_rng = np.random.default_rng(11)
_A = np.sort(_rng.integers(0, 60, 40))
_Q = _rng.integers(-5, 70, 300)
_F = np.sort(_rng.random(30))
RETURN_CASES = [(search_all, (_A, _Q)),
                (search_all, (_F, np.concatenate([_F[::3], _rng.random(20)]))),
                (search_all, (np.zeros(0, np.int64), _Q)),
                (pairs_found, (_A[:15], _rng.integers(0, 120, 40))),
                (scan_helpers, (_A, _Q)),
                (sum_half_or_one, (_rng.random(50),)),
                (mark_all, (np.zeros(40, np.int64), _A, _Q[:50])),
                (read_all, (_A, np.array([3, -1, 39, 0, -7]))),
                (read_all, (_A, np.array([3, 40]))),  # IndexError in the helper
                (count_found, (_A, _Q[:60])),
                (first_negative, (np.array([3.0, 1.0, -2.0, 4.0]),)),
                (first_negative, (np.ones(5),)),
                (fib_sum, (15,))]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", RETURN_CASES,
                         ids=[f.__name__ + str(i) for i, (f, _) in enumerate(RETURN_CASES)])
def test_returns_in_called_functions_agree_with_python(f, args, threads):
    check(f, *args)


def test_index_error_in_a_helper_names_its_line():
    with pytest.raises(IndexError) as e:
        tessera.jit(read_all)(_A, np.array([3, 40]))
    line = read_or_zero.__code__.co_firstlineno + 3
    assert f"test_native_search.py:{line}" in str(e.value)


CASES = [(search_rows, (_sorted_table(np.float64), _values("float"))),
         (search_rows, (_sorted_table(np.int32), _values(np.float32))),
         (search_1d, (_sorted_table(np.bool_)[0], _values("int"))),
         (search_constant, (_sorted_table(np.float32),)),
         (search_row_variable, (_sorted_table(np.float64), _values("float"))),
         (markov_chain, (np.full((4, 4), 0.25), 1, _rng.random(500))),
         (row_out_of_range, (_sorted_table(np.float64), np.array([0, 5])))] + RETURN_CASES

_SCRIPT = cases_script("test_native_search")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native
    assert "searchsorted" not in log, log  # no refusal names it
    assert "a return before the end" not in log, log
    assert "nested more than 8 deep" not in log, log  # fib is not inlined into itself
    for f in (search_rows, search_1d, search_constant, search_row_variable, markov_chain,
              search_all, pairs_found,
              scan_helpers, mark_all, read_all):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
