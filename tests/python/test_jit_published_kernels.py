"""Published NumPy kernels nobody here wrote (issue 31), with only @tessera.jit
added: what they needed fixed, each compared with plain Python/NumPy at 1 and
2 threads (the kernels themselves are in bench/published_kernels.py, raced by
bench_numpy_kernels.py as its "published" category; run here at their quick sizes).

- Lists, tuples and dicts a function changes in place are given back to the
  caller (the benchmarks game's n-body over lists of floats left the caller's
  lists unchanged): tessera/_list_args.py.
- math.erf and math.erfc (refused), in loops that stay native code.
- np.lib.stride_tricks.sliding_window_view (refused).
- `-x` and `not x` of a number in a loop: native code (they sent insertion
  sorts, Black-Scholes loops and bubble sorts to the interpreter), and so is
  the check of a range's bound in a helper called from a loop (the spectral
  norm's nest ran on the interpreter); the same results with native code, the
  register interpreter and the general evaluation.
"""

import copy
import math
import os
import sys

import numpy as np
import pytest
from jit_check import assert_same, check, run_json_on_every_path

import tessera
from tessera import _core

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))

import bench_numpy_kernels as suite  # noqa: E402
import published_kernels as suite_kernels  # noqa: E402


@pytest.fixture(params=[1, 2], ids=["1t", "2t"])
def threads(request):
    before = _core.num_threads()
    _core.set_num_threads(request.param)
    yield request.param
    _core.set_num_threads(before)


def same_as_python(f, *args, rtol=1e-12):
    """f under tessera.jit and as plain Python on copies of args: the results
    and every argument afterwards (lists and dicts included) must agree."""
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    expected = f(*theirs)
    got = tessera.jit(f)(*mine)
    assert_same(got, expected, rtol=rtol)
    for i, (g, e) in enumerate(zip(mine, theirs)):
        if isinstance(e, dict):
            assert g.keys() == e.keys(), f"argument {i}"
            for k in e:
                assert_same(g[k], e[k], rtol=rtol, path=f"argument {i}[{k!r}]")
        else:
            assert_same(g, e, rtol=rtol, path=f"argument {i} after the call")
    return mine


# ---------------------------------------------------------------- lists given back


def nbody_lists(positions, velocities, masses, steps, dt):
    n = len(masses)
    for _ in range(steps):
        for i in range(n):
            for j in range(i + 1, n):
                dx = positions[i][0] - positions[j][0]
                dy = positions[i][1] - positions[j][1]
                mag = dt * ((dx * dx + dy * dy) ** -1.5)
                velocities[i][0] -= dx * masses[j] * mag
                velocities[i][1] -= dy * masses[j] * mag
                velocities[j][0] += dx * masses[i] * mag
                velocities[j][1] += dy * masses[i] * mag
        for i in range(n):
            positions[i][0] += dt * velocities[i][0]
            positions[i][1] += dt * velocities[i][1]
    return len(positions)


def push_and_set(xs, v):
    xs[0] = v
    xs.append(v * 2)
    return len(xs)


def pop_last(xs):
    last = xs.pop()
    xs.insert(0, last)
    return last


def count_words(counts, words):
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    return len(counts)


def early_return(xs, n):
    for i in range(n):
        xs[i] += 1.0
        if xs[i] > 3.0:
            return i
    return -1


def rebinds(xs):
    xs = list(xs)  # a new list: the caller's stays as it was
    xs[0] = 99.0
    return xs


def arrays_in_a_list(arrs):
    arrs[0][1] = 5.0  # the caller's array, written in place
    arrs[1] = arrs[1] * 2.0  # the list's element rebound
    return 0


def test_nbody_over_lists_gives_the_lists_back(threads):
    r = np.random.default_rng(3)
    pos = r.random((5, 2)).tolist()
    vel = (r.random((5, 2)) * 0.01).tolist()
    inner = [row for row in vel]
    got = same_as_python(nbody_lists, pos, vel, list(r.random(5) + 0.5), 20, 0.01)
    # the caller's inner lists are updated in place, not replaced
    caller_vel = copy.deepcopy(vel)
    kept = [row for row in caller_vel]
    tessera.jit(nbody_lists)(copy.deepcopy(pos), caller_vel, list(r.random(5) + 0.5), 2, 0.01)
    assert all(a is b for a, b in zip(caller_vel, kept))
    assert got[1] != inner


def test_list_and_dict_arguments_changed_in_place(threads):
    same_as_python(push_and_set, [1.0, 2.0, 3.0], 7.5)
    same_as_python(push_and_set, [[1], [2]], [3])
    same_as_python(pop_last, [1, 2, 3, 4])
    same_as_python(count_words, {"a": 1}, ["a", "b", "a", "c"])
    same_as_python(early_return, [0.5, 1.5, 2.5, 3.5, 0.0], 5)
    same_as_python(early_return, [0.5, 0.5], 2)
    same_as_python(rebinds, [1.0, 2.0])
    same_as_python(arrays_in_a_list, [np.zeros(3), np.ones(2)])


def advance_each(bodies, dt):
    for b in bodies:  # the benchmarks game's idiom: b is the caller's inner list
        b[0] += dt
    return 0


def advance_all(bodies, dt):
    step(bodies, dt)  # a helper changing the list passed to it
    return bodies[0][0]


def step(bodies, dt):
    bodies[0][0] += dt


def first_row_alias(rows):
    row = rows[0]
    row.append(9)
    return rows


def unpacked_alias(pair):
    a, b = pair
    a += [1]
    return pair


def fresh_copy(rows):
    row = list(rows[0])  # a new list: changing it is Python's meaning too
    row.append(9)
    return row, rows


def append_computed(x, n):
    out = []
    for i in range(n):
        if x[i] > 0.25:
            out.append(x[i] * 2.0 - i)
        else:
            out.append(float(i))
    return out


def append_draws(n):
    # Each item evaluated once: the list's draws are the stream's first n.
    np.random.seed(7)
    out = []
    for i in range(n):
        out.append(np.random.random() + i)
    return out, np.random.random()


def draw_array(n):
    np.random.seed(7)
    a = np.empty(n)
    for i in range(n):
        a[i] = np.random.random()
    return a


def test_append_of_computed_items(threads):
    x = np.random.default_rng(2).random(400)
    same_as_python(append_computed, x, 400)
    with pytest.raises(IndexError):
        tessera.jit(append_computed)(x, 401)
    got, after = tessera.jit(append_draws)(300)
    stream = tessera.jit(draw_array)(301)  # tessera's own stream (not NumPy's)
    assert len(got) == 300
    np.testing.assert_allclose(np.array(got) - np.arange(300), stream[:300], rtol=0, atol=1e-12)
    assert after == stream[300]


def test_changing_an_element_list_in_place_is_refused(threads):
    # Python changes the object the element came from; a program's lists are
    # values, so these are refused (UnsupportedError at the line), not computed
    # differently; the same code over arrays changes them in place.
    for f, args, line in ((advance_each, ([[1.0], [2.0]], 0.5), 2),
                          (advance_all, ([[1.0], [2.0]], 0.5), 0),
                          (first_row_alias, ([[1], [2]],), 2),
                          (unpacked_alias, (([0], [1]),), 2)):
        with pytest.raises(tessera.UnsupportedError) as e:
            tessera.jit(f)(*copy.deepcopy(args))
        where = step if f is advance_all else f
        assert "changing the list or dict" in str(e.value)
        assert f"test_jit_published_kernels.py:{where.__code__.co_firstlineno + line}" in str(
            e.value)
    check(advance_each, np.array([[1.0], [2.0]]), 0.5)
    check(advance_all, np.array([[1.0], [2.0]]), 0.5)
    check(first_row_alias, np.zeros((2, 3)))
    same_as_python(fresh_copy, [[1], [2]])


def test_arrays_are_still_written_in_place(threads):
    # the same functions given arrays: no list is given back, arrays are shared
    x = np.array([0.5, 1.5, 2.5, 3.5])
    check(early_return, x, 4)


# ---------------------------------------------------------------- math.erf and math.erfc


def erf_table(x):
    out = np.empty((len(x), 2))
    for i in range(len(x)):
        out[i, 0] = math.erf(x[i])
        out[i, 1] = math.erfc(x[i])
    return out


black_scholes_erf = suite_kernels.black_scholes_erf  # by math.erf in a loop


_ERF_POINTS = np.concatenate([np.linspace(-7.0, 30.0, 3701), [0.0, -0.0, 1e-300, -1e-8, 5.9999,
                                                               6.0, 2.9999, 3.0, np.inf, -np.inf]])


def erf_scalar(v):
    return math.erf(v), math.erfc(v)


def test_math_erf_and_erfc_match_python(threads):
    for v in (0.3, -0.5, 1.5, -2.5, 7.0, 0.0):
        got = tessera.jit(erf_scalar)(v)
        assert got == erf_scalar(v) or np.allclose(got, erf_scalar(v), rtol=1e-15, atol=0)
        assert all(type(g) is float for g in got), got  # Python's floats, as math gives
    got = tessera.jit(erf_table)(_ERF_POINTS)
    want = np.array([[math.erf(v), math.erfc(v)] for v in _ERF_POINTS])
    # erfc's relative precision holds down to the subnormals (x < 26.5)
    tiny = np.abs(want) < 1e-290
    np.testing.assert_allclose(np.where(tiny, 0.0, got), np.where(tiny, 0.0, want),
                               rtol=1e-13, atol=0.0)
    assert np.all(np.abs(got[tiny] - want[tiny]) < 1e-290)
    assert math.copysign(1.0, tessera.jit(erf_table)(np.array([-0.0]))[0, 0]) == -1.0
    assert np.isnan(tessera.jit(erf_table)(np.array([np.nan]))).all()


def test_black_scholes_with_erf(threads):
    r = np.random.default_rng(0)
    n = 500
    check(black_scholes_erf, r.uniform(5, 30, n), r.uniform(1, 100, n), r.uniform(0.25, 10, n),
          0.02, 0.3, rtol=1e-12)


# ---------------------------------------------------------------- sliding windows


def rolling_std(x, window):
    return np.lib.stride_tricks.sliding_window_view(x, window).std(axis=-1)


def windows_2d(x):
    from_both = np.lib.stride_tricks.sliding_window_view(x, (2, 3))
    along_0 = np.lib.stride_tricks.sliding_window_view(x, 3, axis=0)
    along_1 = np.lib.stride_tricks.sliding_window_view(x, (2,), axis=(1,))
    return from_both, along_0.sum(axis=-1), along_1


def windows_default(x, w):
    return np.lib.stride_tricks.sliding_window_view(x, w)


def test_sliding_window_view(threads):
    r = np.random.default_rng(1)
    check(rolling_std, r.random(200), 7, rtol=1e-12)
    check(windows_2d, r.random((5, 6)))
    check(windows_default, np.arange(10), 10)
    check(windows_default, np.arange(10), 0)
    # NumPy's errors: a window longer than the axis, a negative one, one
    # window for a 2-D array with axis=None
    check(windows_default, np.arange(5.0), 6)
    check(windows_default, np.arange(5.0), -1)
    check(windows_default, np.zeros((3, 3)), 2)


# ---------------------------------------------------------------- -x and not x, native


# The published sorts, as bench/published_kernels.py races them.
insertion_sort = suite_kernels.insertion_sort
bubble_sort = suite_kernels.bubble_sort


def negations(x, k):
    out = np.zeros((len(x), 4))
    total = 0
    for i in range(len(x)):
        v = x[i]
        out[i, 0] = -v
        out[i, 1] = -(v * k)
        out[i, 2] = -i
        out[i, 3] = not (v > 0.5)
        total += -k
    return out, total


def int_negations(a):
    s = 0
    t = a[0]
    for i in range(len(a)):
        s += -a[i]  # NumPy's int64: wraps at INT64_MIN as NumPy does
        t = -t
    return s, t


def test_negation_and_not_match_numpy(threads):
    r = np.random.default_rng(2)
    check(negations, r.random(300) - 0.25, 3)
    check(negations, r.random(300), -2.5)
    check(int_negations, np.array([3, -5, np.iinfo(np.int64).min, 7]))
    check(insertion_sort, r.random(200))
    check(bubble_sort, r.integers(0, 1000, 150))
    check(bubble_sort, np.arange(40))  # sorted: the early break


def row_sums(n, reps):
    # The benchmarks game's spectral norm's shape: a nested helper looping over
    # range(n) of a closure variable, called in a loop (the bound's check, one
    # primitive now, no longer keeps the outer loop off native code).
    def times(u, out):
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += u[j] / ((i + j) * (i + j + 1) // 2 + i + 1)
            out[i] = s

    u = np.ones(n)
    v = np.zeros(n)
    for _ in range(reps):
        times(u, v)
        times(v, u)
    return u


def float_bound(x, n):
    total = 0.0
    for _ in range(2):
        total += helper_range(x, n)
    return total


def helper_range(x, n):
    s = 0.0
    for i in range(n):  # the TypeError's line
        s += x[i]
    return s


def test_range_bounds_of_helpers(threads):
    check(row_sums, 20, 3)
    check(row_sums, np.int64(7), 2)
    check(float_bound, np.arange(5.0), 3)
    check(float_bound, np.arange(5.0), True)
    check(float_bound, np.arange(5.0), np.int32(4))
    with pytest.raises(TypeError) as e:
        tessera.jit(float_bound)(np.arange(5.0), 2.5)
    assert "[range] 'float' object cannot be interpreted as an integer: 2.5" in str(e.value)
    line = helper_range.__code__.co_firstlineno + 2
    assert f"test_jit_published_kernels.py:{line}" in str(e.value)


_SCRIPT = """
import json, sys
sys.path.insert(0, {here!r})
import numpy as np
import tessera
import test_jit_published_kernels as t

r = np.random.default_rng(4)
out = {{}}
x = r.random(3000) - 0.25
res, total = tessera.jit(t.negations)(x, 3)
out["neg"] = res.tolist()
out["neg_total"] = [total, type(total).__name__]
s, v = tessera.jit(t.int_negations)(np.array([3, -5, np.iinfo(np.int64).min, 7]))
out["ints"] = [int(s), int(v), type(s).__name__, type(v).__name__]
out["insertion"] = tessera.jit(t.insertion_sort)(r.random(400)).tolist()
out["bubble"] = tessera.jit(t.bubble_sort)(r.integers(0, 1000, 300)).tolist()
out["erf"] = tessera.jit(t.erf_table)(np.linspace(-7.0, 30.0, 2000)).tolist()
out["bs"] = tessera.jit(t.black_scholes_erf)(r.uniform(5, 30, 500), r.uniform(1, 100, 500),
                                             r.uniform(0.25, 10, 500), 0.02, 0.3).tolist()
out["rows"] = tessera.jit(t.row_sums)(60, 3).tolist()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def runs():
    return run_json_on_every_path(_SCRIPT)


def test_the_same_on_every_path(runs):
    native = runs["native"][0]
    for mode in ("interpreter", "general"):
        assert runs[mode][0] == native, mode


def test_the_loops_run_native(runs):
    err = runs["native"][1]
    for fn in (negations, int_negations, insertion_sort, bubble_sort, erf_table,
               black_scholes_erf, row_sums):
        first = fn.__code__.co_firstlineno
        last = max(line for _, _, line in fn.__code__.co_lines() if line is not None)
        where = os.path.basename(fn.__code__.co_filename)
        assert any(f"{where}:{n}: native code" in err
                   for n in range(first, last + 1)), (fn.__name__, err)
    assert "has no native code" not in err, err


# ---------------------------------------------------------------- the suite's published kernels


@pytest.mark.parametrize("name", suite.PUBLISHED)
def test_published_kernel_agrees_with_numpy(name, threads):
    kernel = suite.by_name(name)
    args = kernel.setup(True)
    np.random.seed(0)
    expected_args = suite._copy(args)
    expected = kernel.func(*expected_args)
    got_args = suite._copy(args)
    got = tessera.jit(kernel.func)(*got_args)
    suite.compare(kernel, got, got_args, expected, expected_args, args)
