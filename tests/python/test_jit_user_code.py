"""Small functions written the way NumPy users write them (Stack Overflow and
scientific-Python style), each run under @tessera.jit and as plain Python/NumPy:
results and the arguments they modify must match (issue 31)."""

import math

import numpy as np
import pytest
from jit_check import check

import tessera
from tessera.jit import UnsupportedError

def h01_format(x):
    m, s = x.mean(), x.std()
    return f"mean={m:.3f} std={s:.3f}", "n=%d" % len(x), "{:>8.2f}".format(x.max())

def h02_tuple_unpack(x):
    lo, hi = x.min(), x.max()
    (a, b), c = (lo, hi), x.sum()
    return (x - lo) / (hi - lo), a + b + c

def h03_enumerate_zip(x, y):
    total = 0.0
    for i, (a, b) in enumerate(zip(x, y)):
        total += i * a * b
    return total

def h04_listcomp(x):
    rows = [np.sum(r ** 2) for r in x]
    return np.array(rows), np.array([[i * j for j in range(3)] for i in range(4)])

def h05_dict_accum(labels, values):
    sums = {}
    for l, v in zip(labels, values):
        k = int(l)
        sums[k] = sums.get(k, 0.0) + v
    return sorted(sums.items())

def h06_where_one(x):
    idx = np.where(x > 0.5)
    return idx, x[idx]

def h07_mask_assign(x):
    y = x.copy()
    y[y < 0] = 0.0
    x[x > 0.8] = -1.0
    return y

def h08_fancy_list(x):
    return x[[0, 2, 1]], x[:, [1, 0]], x[[0, 1], [1, 2]]

def h09_unique_counts(a):
    vals, counts = np.unique(a, return_counts=True)
    return vals, counts, vals[np.argmax(counts)]

def h10_linalg(a, b):
    x = np.linalg.solve(a, b)
    return x, np.linalg.norm(a @ x - b), np.linalg.det(a), np.linalg.inv(a)

def h11_einsum(a, b):
    return np.einsum("ij,jk->ik", a, b), np.einsum("ii->", a), np.einsum("ij->j", a)

def h12_reshape_neg(x):
    return x.reshape(-1), x.reshape(2, -1), np.reshape(x, (-1, 3))

def h13_inplace_slice(x):
    x[1:] -= x[:-1].copy()
    x[0] *= 2
    x[::2] += 1
    return x

def h14_early_return(x, t):
    for i in range(len(x)):
        if x[i] > t:
            return i
    return -1

def h15_while_break(n):
    k = 0
    s = 0
    while True:
        k += 1
        if k * k > n:
            break
        s += k
    return k, s

def h16_closure(x):
    scale = 3.0
    def f(v):
        return v * scale
    g = lambda v: f(v) + 1
    return g(x)

def _helper(x, p=2, *, axis=0):
    return np.sum(np.abs(x) ** p, axis=axis) ** (1.0 / p)

def h17_defaults_kwonly(x):
    return _helper(x), _helper(x, 1), _helper(x, p=3, axis=1)

def _sum_all(*args):
    t = 0.0
    for a in args:
        t += a
    return t

def h18_varargs(x):
    return _sum_all(x[0], x[1], x[2])

def h19_raise_fstring(x):
    if x.ndim != 2:
        raise ValueError(f"expected a matrix, got {x.ndim} dimensions")
    return x.T

def h20_cumsum_argsort(x):
    order = np.argsort(x)[::-1]
    return order, np.cumsum(x[order]), np.searchsorted(np.sort(x), 0.5)

def h21_bool_any_all(x):
    ok = np.all(np.isfinite(x)) and not np.any(x < -5)
    return bool(ok), np.count_nonzero(x > 0)

def h22_stack_loop(n):
    rows = []
    for i in range(n):
        rows.append(np.full(3, i, dtype=float))
    return np.vstack(rows), np.stack(rows, axis=1)

def h23_nested_loops(a):
    n, m = a.shape
    out = np.zeros((n, m))
    for i in range(n):
        for j in range(m):
            out[i, j] = a[i, j] * (i + j)
    return out

def h24_str_join(x):
    return ", ".join(str(round(v, 2)) for v in x), ", ".join(f"{v:.1f}" for v in x)

def h25_minmax_key(x):
    best = max(range(len(x)), key=lambda i: x[i])
    return best

def h26_sorted_key(pairs):
    return sorted(pairs, key=lambda p: p[1])

def h27_outer_broadcast(x):
    d = x[:, None, :] - x[None, :, :]
    return np.sqrt((d ** 2).sum(-1))

def h28_percent_format(x):
    return "%.2f%%" % (100 * x.mean()), "%s: %5.1f" % ("max", x.max())

def h29_clip_round(x):
    return np.clip(x, 0.2, 0.8).round(2), np.round(x * 100).astype(int)

def h30_dict_of_arrays(x):
    stats = {"mean": x.mean(axis=0), "max": x.max(axis=0)}
    return stats["mean"] + stats["max"], list(stats.keys())

def h31_list_sum_len(xs):
    return sum(xs) / len(xs), max(xs), min(xs)

def h32_ternary_chain(x):
    return ["neg" if v < 0 else "zero" if v == 0 else "pos" for v in x]

def h33_any_gen(x):
    return any(v > 0.9 for v in x), all(v >= 0 for v in x)

def h34_argwhere_nonzero(x):
    return np.argwhere(x > 0.5), np.nonzero(x > 0.5)[0], np.flatnonzero(x > 0.5)

def h35_swap_rows(a):
    a[[0, 1]] = a[[1, 0]]
    return a

def h36_setdefault(keys):
    groups = {}
    for k in keys:
        groups.setdefault(k % 3, []).append(k)
    return groups



def h37_sort_reverse_stable(words):
    by_len = sorted(words, key=len, reverse=True)
    return by_len, sorted(words, key=lambda w: w[-1]), sorted(words, reverse=True)


def h38_min_max_forms(xs):
    return (min(xs, key=abs), max(xs, key=lambda v: v * v), max([], default=-1.0),
            min(3, 1, 2, key=lambda v: -v), max(xs, default=0.0))


def h39_max_empty(xs):
    return max(xs[:0], key=abs)


def h40_entry_varargs(a, *rest):
    return a, rest, len(rest)


def h41_varargs_kwonly(x):
    def combine(*parts, weight=1.0):
        return sum(p * weight for p in parts)
    return combine(x, x, weight=0.5), combine()


_RNG = np.random.default_rng(0)

X1 = _RNG.random(6)
X2 = _RNG.random((3, 4))
A = _RNG.random((3, 3)) + 3 * np.eye(3)
B = _RNG.random(3)
CASES = [
    (h01_format, (X1,)),
    (h02_tuple_unpack, (X1,)),
    (h03_enumerate_zip, (X1, X1[::-1].copy())),
    (h04_listcomp, (X2,)),
    (h05_dict_accum, (np.array([1, 0, 1, 2, 0, 1]), X1)),
    (h06_where_one, (X2,)),
    (h07_mask_assign, (X2 - 0.3,)),
    (h08_fancy_list, (X2,)),
    (h09_unique_counts, (np.array([3, 1, 3, 2, 3, 1]),)),
    (h10_linalg, (A, B)),
    (h11_einsum, (A, A)),
    (h12_reshape_neg, (np.arange(6.0),)),
    (h13_inplace_slice, (np.arange(6.0),)),
    (h14_early_return, (X1, 0.5)),
    (h15_while_break, (50,)),
    (h16_closure, (X1,)),
    (h17_defaults_kwonly, (X2,)),
    (h18_varargs, (X1,)),
    (h19_raise_fstring, (X1,)),
    (h20_cumsum_argsort, (X1,)),
    (h21_bool_any_all, (X1,)),
    (h22_stack_loop, (4,)),
    (h23_nested_loops, (X2,)),
    (h24_str_join, (X1,)),
    (h25_minmax_key, (X1,)),
    (h26_sorted_key, ([(1, 3.0), (2, 1.0), (3, 2.0)],)),
    (h27_outer_broadcast, (X2,)),
    (h28_percent_format, (X1,)),
    (h29_clip_round, (X1,)),
    (h30_dict_of_arrays, (X2,)),
    (h31_list_sum_len, ([1.0, 4.0, 2.5],)),
    (h32_ternary_chain, (np.array([-1.0, 0.0, 2.0]),)),
    (h33_any_gen, (X1,)),
    (h34_argwhere_nonzero, (X1,)),
    (h35_swap_rows, (X2,)),
    (h36_setdefault, ([1, 2, 3, 4, 5, 6],)),
    (h37_sort_reverse_stable, (["pear", "fig", "apple", "kiwi", "date"],)),
    (h38_min_max_forms, ([3.0, -4.0, 1.0, -2.0],)),
    (h39_max_empty, ([1.0],)),
    (h40_entry_varargs, (1.0,)),
    (h40_entry_varargs, (1.0, np.ones(2), "s")),
    (h41_varargs_kwonly, (np.arange(3.0),)),
]


@pytest.mark.parametrize("f, args", CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_user_function(f, args):
    check(f, *args)


def test_star_args_in_a_lambda_is_refused_by_name():
    def f(x):
        g = lambda *a: len(a)  # noqa: E731
        return g(x, x)
    with pytest.raises(UnsupportedError, match=r"\*args in a lambda.*test_jit_user_code.py:\d+"):
        tessera.jit(f)(1.0)


def h42_lists_in_containers(keys):
    groups = {0: [], 1: [], 2: []}
    rows = [[], []]
    for k in keys:
        groups[k % 3].append(k)
        rows[k % 2].extend([k, -k])
    first = groups.setdefault(0, [99])
    fresh = groups.setdefault(7, [99])
    return groups, rows, first, fresh


def h43_append_to_array_element(x):
    holder = [x]
    holder[0].append(1.0)  # an ndarray has no append: Python's AttributeError
    return holder


def test_lists_in_containers():
    check(h42_lists_in_containers, [1, 2, 3, 4, 5, 6])
    check(h43_append_to_array_element, np.ones(2))


def h44_python_numbers(x):
    return (int(x[0]), float(x[-1]), int(x.sum()), bool(x[0]), bool([]), bool("a"),
            bool(None), int(2.9), float(3), int(-2.5))


def h45_int_of_an_array(x):
    return int(x)


def h46_float_of_an_array(x):
    return float(x)


def h47_bool_of_an_array(x):
    return bool(x)


@pytest.mark.parametrize("x", [np.array([3.7, -1.2]), np.array([2, 0]), np.array([0.5])])
def test_python_number_conversions(x):
    check(h44_python_numbers, x)
    # NumPy 2: an array of one or more dimensions is a TypeError (bool: ambiguous
    # truth, a ValueError, unless it has one element)
    check(h45_int_of_an_array, x)
    check(h46_float_of_an_array, x)
    check(h47_bool_of_an_array, x)


# ---------------------------------------------------------------- a second batch

def n01(a, b):
    return {k: v for k, v in zip(a.tolist(), b.tolist())}
def n02(x):
    u, inv = np.unique(x, return_inverse=True)
    return u, inv
def n03(x):
    return np.where(x > 0.5, x, -x), np.where((x > 0.2) & (x < 0.8))[0]
def n04(x):
    i = 0
    while i < len(x) and x[i] < 0.7:
        i += 1
    return i
def n05(x):
    out = []
    def add(v):
        out.append(v * 2)
    for v in x:
        add(v)
    return out
def n06(x):
    return "{:.2e} {:+.1f} {:08.3f}".format(x[0], x[1], x[2])
def n07(m):
    w, v = np.linalg.eigh(m @ m.T)
    return w, np.abs(v[:, -1])
def n08(x):
    y = x.copy()
    y[[0, 2]] = 0.0
    y[y > 0.5] *= 2
    return y
def n09(x):
    total = 0
    for i, row in enumerate(x):
        for j, v in enumerate(row):
            if v > 0.5:
                total += i * 10 + j
    return total
def n10(n):
    fib = [0, 1]
    while len(fib) < n:
        fib.append(fib[-1] + fib[-2])
    return fib[:n]
def n11(x):
    try:
        return 1.0 / x
    except ZeroDivisionError:
        return 0.0
def n12(x):
    return [v * 2 for v in set(x.tolist())]

def n13(x):
    a, *rest = x.tolist()
    return a, rest
def n14(x):
    return np.mean(x, axis=0).round(3).tolist(), np.percentile(x, [25, 75])
def n15(words):
    return [w.upper() for w in words if w.startswith("a")], " ".join(reversed(words))
def n16(x):
    cols = list(zip(*x.tolist()))
    return cols
def n17(x):
    return np.array([v for v in x if v > 0.3]), np.concatenate([x, x[:1]])
def n18(x):
    n = x.size
    return f"{n} items, mean {x.mean():.2f}, range [{x.min():.1f}, {x.max():.1f}]"
def n19(x):
    return x.argmax(), np.unravel_index(x.argmax(), x.shape)
def n20(x):
    return np.cumprod(1 + x) - 1, np.diff(x, n=2), np.gradient(x)


_X6 = np.random.default_rng(1).random(6)
_M3 = np.random.default_rng(2).random((3, 3))
CASES2 = [(n01, (np.arange(3), _X6[:3])), (n02, (np.array([3, 1, 3, 2]),)), (n03, (_X6,)),
          (n04, (_X6,)), (n05, (_X6,)), (n06, (_X6,)), (n07, (_M3,)), (n08, (_X6,)), (n09, (_M3,)),
          (n10, (10,)), (n13, (_X6,)), (n13, (np.array([1.0]),)), (n13, (np.zeros(0),)),
          (n14, (_M3,)),
          (n15, (["apple", "bob", "avocado"],)), (n17, (_X6,)), (n18, (_X6,)), (n19, (_M3,)),
          (n20, (_X6,))]


@pytest.mark.parametrize("f, args", CASES2,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES2)])
def test_user_function_second_batch(f, args):
    check(f, *args)


@pytest.mark.parametrize("f, construct", [(n11, "try statement"), (n12, "use sorted(s)"),
                                          (n16, "star-args (*x) in a call")])
def test_refused_constructs_name_themselves(f, construct):
    line = f.__code__.co_firstlineno + 1
    with pytest.raises(UnsupportedError) as info:
        tessera.jit(f)(_M3 if f is n16 else np.array([1, 2]) if f is n12 else 2.0)
    assert construct in str(info.value)
    assert f"test_jit_user_code.py:{line}" in str(info.value), str(info.value)


# ---------------------------------------------------------------- a third batch

def t01(x):
    return np.fromfunction(lambda i, j: i * 10 + j, (3, 4))
def t03(x):
    return np.argsort(x)[-3:][::-1], np.bincount((x * 5).astype(int))
def t04(x):
    return np.tile(x[:2], 3), np.repeat(x[:2], 2), np.tile(x[:2], (2, 2))
def t05(a, b):
    return math.isclose(a, b, rel_tol=1e-3), np.isclose(a, b), np.allclose([a], [b])
def t06(x):
    x[:] = np.sort(x)
    x[0], x[-1] = x[-1], x[0]
    return None
def t07(x):
    return np.count_nonzero(np.diff(np.sign(x - 0.5)))
def t08(x):
    q = x.copy()
    q.sort()
    return np.median(q), q[len(q) // 2]
def t10(x):
    return np.round(np.std(x, ddof=1), 4), np.var(x), np.ptp(x)
def t11(x):
    hist, edges = np.histogram(x, bins=4, range=(0, 1))
    centers = (edges[:-1] + edges[1:]) / 2
    return hist, centers, centers[np.argmax(hist)]
def t12(n):
    return np.eye(n, k=1) + np.diag(np.arange(n)), np.triu(np.ones((n, n))), np.identity(n)
def t13(x):
    a = np.atleast_2d(x)
    return a.shape, np.expand_dims(x, 0).shape, x[np.newaxis, :].shape, np.squeeze(a).shape
def t15(x):
    return np.linalg.norm(x, ord=1), np.linalg.norm(x, np.inf), np.dot(x, x), np.outer(x[:2], x[:3])
def t16(x):
    return max(x), min(x), sum(x), sorted(x)[:2], len(x)
def t19(x):
    return np.clip(x, None, 0.5), np.maximum(x, 0.3), np.abs(x - 0.5).argmin()


def t21_fromfunction_forms(n):
    return (np.fromfunction(lambda i: i * i, (n,)), np.fromfunction(lambda i, j: i == j, (n, n)),
            np.fromfunction(lambda i, j, k: i + j * k, (2, n, 2), dtype=int))


def t22_isclose_forms(a, b):
    return (math.isclose(a, b), math.isclose(a, b, rel_tol=0.1), math.isclose(a, b, abs_tol=5.0),
            math.isclose(math.inf, math.inf), math.isclose(math.nan, math.nan),
            math.isclose(a, math.inf))


def t23_isclose_bad_tolerance(a, b):
    return math.isclose(a, b, rel_tol=-1.0)


_X8 = np.random.default_rng(3).random(8)
_M23 = np.random.default_rng(4).random((2, 3))
CASES3 = [(t01, (_X8,)), (t03, (_X8,)), (t04, (_X8,)), (t05, (1.0, 1.0005)), (t05, (1.0, 2.0)),
          (t06, (_X8,)), (t07, (_X8,)), (t08, (_X8,)), (t10, (_X8,)), (t11, (_X8,)), (t12, (3,)),
          (t13, (_X8,)), (t15, (_X8,)), (t16, (_X8,)), (t19, (_X8,)),
          (t21_fromfunction_forms, (3,)),
          (t22_isclose_forms, (1.0, 1.05)), (t22_isclose_forms, (3, 3)),
          (t23_isclose_bad_tolerance, (1.0, 1.0))]


@pytest.mark.parametrize("f, args", CASES3,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES3)])
def test_user_function_third_batch(f, args):
    check(f, *args)


def t24_ndenumerate(x):
    s = 0.0
    for idx, v in np.ndenumerate(x):
        s += v * (idx[0] + 1)
    return s


def t25_ndenumerate_unpacked(x):
    out = np.zeros_like(x)
    for (i, j), v in np.ndenumerate(x):
        out[i, j] = v * i + j
    return out


def t26_ndenumerate_of_an_expression(x):
    for idx, v in np.ndenumerate(x * 2):
        pass
    return x


@pytest.mark.parametrize("x", [np.arange(6.0).reshape(2, 3), np.array([[1, 5], [2, 0]])])
def test_ndenumerate(x):
    check(t24_ndenumerate, x)
    check(t25_ndenumerate_unpacked, x)
    check(t24_ndenumerate, x[0])
    with pytest.raises(UnsupportedError, match=r"np.ndenumerate other than.*"
                                               r"test_jit_user_code.py:\d+"):
        tessera.jit(t26_ndenumerate_of_an_expression)(x)
