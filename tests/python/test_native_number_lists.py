"""Lists of numbers held unboxed (docs/runtime.md, "Lists of numbers held unboxed"):
`[0] * n`, `[x] + [0] * n` and lists native loops append numbers to keep their items as
8-byte numbers of one kind (Python's bool, int, float, or a NumPy scalar of a dtype),
written out as Values only when code that does not know that form asks. Every item must
read back as what it was (np.float64 stays np.float64, a bool stays a bool); results, the
kinds of their items, list arguments afterwards and errors are Python's, the same with
native code, the loop interpreter and the general evaluation, at 1 and 2 threads; the
loops must compile, and coin_sums's and select_to_list's lists must stay unboxed."""

import copy
import os
import sys

import numpy as np
import pytest
from jit_check import assert_identical, cases_script, loop_log_lines, run_on_every_path

import tessera
from tessera import _core

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import coin_sums, select_to_list  # noqa: E402 - bench/


def appended(x, ix, x32, kind):
    # Items of one kind appended by the loop: each reads back as that kind.
    out = []
    for i in range(len(x)):
        if kind == 0:
            out.append(i)
        elif kind == 1:
            out.append(i * 0.5)
        elif kind == 2:
            out.append(i % 3 == 0)
        elif kind == 3:
            out.append(x[i] * 2.0)  # np.float64
        elif kind == 4:
            out.append(ix[i] * 3)  # np.int64
        elif kind == 5:
            out.append(x32[i] + x32[i])  # np.float32
        else:
            out.append(ix[i] > 50)  # np.bool
    return out, np.array(out), out[-1], len(out)


def mixed(x, n):
    # An int list that gets a float, then a bool, then an np.float64: a list of
    # Values from there on, each item still what it was.
    out = []
    for i in range(n):
        out.append(i)
        if i == n // 2:
            out.append(0.25)
        if i == n - 3:
            out.append(True)
    out.append(x[1] * 2.0)
    return out


def repeated(n):
    # `[x] * n` of each Python kind, joined, indexed, written and measured.
    a = [0] * n
    b = [1.5] * n
    c = [True] * n
    d = [1] + a
    e = b + [2.5]
    f = a + [0.5]  # another kind: a list of Values
    d[3] = 7
    e[-1] += 1.0
    a[0] = -1
    return a[:3], b[-2:], c[:2], d[:5], e[-3:], f[-2:], len(d), len(e), len(f), sum(d)


def written_in_place(n):
    # coin_sums's pattern on a float table and an int table the function made.
    ways = [1] + [0] * n
    acc = [0.0] * (n + 1)
    for step in (1, 3, 7):
        for i in range(step, n + 1):
            ways[i] += ways[i - step]
            acc[i] = acc[i - step] * 0.5 + i
    return ways[-3:], acc[-3:], ways[n], acc[n]


def aliased(n):
    # Two names for one list and the list inside another, read; a list made from
    # it written (lists are values: the others keep their items).
    xs = [0] * n
    ys = xs
    box = [xs, 5]
    s = 0
    for i in range(n):
        s += xs[i] + ys[n - 1 - i] + box[0][i]
    zs = xs + [1]
    for i in range(n):
        zs[i] = i * 2
    return s, xs[-2:], ys[-2:], box[0][-2:], zs[-3:], len(box[0])


def rows(n, m):
    # A table of rows made by `[0] * m` (unboxed rows), written in place.
    t = [[0] * m for _ in range(n)]
    for i in range(1, n):
        for j in range(1, m):
            t[i][j] = (t[i - 1][j] + t[i][j - 1] + 1) % 1000
    return t[n - 1][-3:], len(t), len(t[0])


def to_the_caller(xs, n):
    # The caller's list read and appended to; the list returned is the caller's.
    for i in range(n):
        xs.append(xs[i] + 1)
    return xs


def float_into_ints(n):
    # A float written into an unboxed int list mid-loop: the interpreter's answer.
    xs = [0] * n
    s = 0
    for i in range(n):
        xs[i] = xs[i - 1] + 1
        if i == n - 5:
            xs[i] = 0.5
        s += xs[i]
    return s, xs[-6:]


def out_of_range(n):
    xs = [0] * n
    for i in range(n + 1):
        xs[i] = i
    return xs


def bails_late(n):
    # Appends, then an error past several checkpoints: nothing half done.
    out = []
    x = 0
    for i in range(n):
        out.append(i * 1.5)
        x += 1 // (n - 3 - i)
    return out, x


def appended_after(x, ix, x32, kind):
    # run_length_encode's shape: appends in a loop, then one more after it (the
    # general path's append) of the same kind, which keeps the list unboxed, or of
    # another (a NumPy int onto Python ints, a Python bool onto np.bool_s), which
    # writes it out; every item still what it was, and a list given back.
    out = []
    for i in range(len(x)):
        if kind == 0:
            out.append(ix[i] * 3)
        elif kind == 1:
            out.append(x32[i] * 2)
        elif kind == 2:
            out.append(i)
        elif kind == 3:
            out.append(ix[i] > 40)
        else:
            out.append(x[i] + 1.0)
    if kind == 0:
        out.append(ix[5])
    elif kind == 1:
        out.append(x32[3])
    elif kind == 2:
        out.append(ix[2])  # np.int64 onto Python ints
    elif kind == 3:
        out.append(True)  # a Python bool onto np.bool_s
    else:
        out.append(np.float64(2.5))
        out.append(np.float32(0.5))
    return out, out[-1], len(out)


X = np.linspace(0.0, 1.0, 101)
IX = np.arange(101)
X32 = np.linspace(0.0, 1.0, 101, dtype=np.float32)

CASES = [(coin_sums, (300, [1, 2, 5, 10, 20, 50, 100, 200])),
         (select_to_list, (X, 0.5)),
         (appended, (X, IX, X32, 0)),
         (appended, (X, IX, X32, 1)),
         (appended, (X, IX, X32, 2)),
         (appended, (X, IX, X32, 3)),
         (appended, (X, IX, X32, 4)),
         (appended, (X, IX, X32, 5)),
         (appended, (X, IX, X32, 6)),
         (mixed, (X, 200)),
         (repeated, (100,)),
         (repeated, (3,)),
         (written_in_place, (500,)),
         (aliased, (100,)),
         (rows, (30, 80)),
         (to_the_caller, ([1, 2, 3], 200)),
         (to_the_caller, ([0.5] * 70, 100)),
         (float_into_ints, (300,)),
         (out_of_range, (100,)),
         (bails_late, (3000,)),
         (appended_after, (X, IX, X32, 0)),
         (appended_after, (X, IX, X32, 1)),
         (appended_after, (X, IX, X32, 2)),
         (appended_after, (X, IX, X32, 3)),
         (appended_after, (X, IX, X32, 4))]



@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_agrees_with_python(f, args, threads):
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    try:
        expected = f(*theirs)
    except Exception as e:  # noqa: BLE001 - the same exception is expected of the jit
        with pytest.raises(type(e)):
            tessera.jit(f)(*mine)
        assert_identical(list(mine), list(args), "arguments")
        return
    got = tessera.jit(f)(*mine)
    assert_identical(got, expected)
    assert_identical(list(mine), list(theirs), "arguments")


def test_the_kernels_lists_stay_unboxed():
    # coin_sums's table and select_to_list's list are made unboxed and never
    # written out as Values (a spill per call would cost what the form saves).
    g, h = tessera.jit(coin_sums), tessera.jit(select_to_list)
    x = np.random.default_rng(1).random(5000)
    g(2000, [1, 2, 5])
    h(x, 0.5)
    made, written_out = _core._number_list_stats()
    assert g(2000, [1, 2, 5]) == coin_sums(2000, [1, 2, 5])
    assert np.array_equal(h(x, 0.5), select_to_list(x, 0.5))
    made2, written_out2 = _core._number_list_stats()
    assert made2 >= made + 2
    assert written_out2 == written_out


def test_an_append_after_the_loop_keeps_the_list_unboxed():
    # One item more of the same kind: no write-out (it cost a Value per item).
    g = tessera.jit(appended_after)
    x = np.linspace(0.0, 1.0, 5000)
    ix = np.arange(5000)
    x32 = x.astype(np.float32)
    g(x, ix, x32, 0)
    made, written_out = _core._number_list_stats()
    for kind in (0, 1):
        assert_identical(g(x, ix, x32, kind), appended_after(x, ix, x32, kind))
    made2, written_out2 = _core._number_list_stats()
    assert made2 >= made + 2
    assert written_out2 == written_out


def test_out_of_range_names_its_line():
    with pytest.raises(IndexError) as e:
        tessera.jit(out_of_range)(100)
    line = out_of_range.__code__.co_firstlineno + 3
    assert f"test_native_number_lists.py:{line}" in str(e.value)


_SCRIPT = cases_script("test_native_number_lists")


def test_native_interpreter_and_general_print_theassert_identical():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native and "ZeroDivisionError" in native
    for f in (coin_sums, select_to_list, appended, written_in_place, aliased, rows,
              float_into_ints, bails_late):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
