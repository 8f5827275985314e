"""Flat lists of numbers in native loops (docs/runtime.md, "Flat lists read and written in
place"): `xs[i]` reads and `xs[i] = v` / `xs[i] += v` writes of a list of ints or floats
done by the generated code on the list's own items, their old bytes logged. Results
(the kinds of the items included), the list arguments afterwards and errors (IndexError
at its line) are Python's, the same with native code, the register interpreter and the
general evaluation, at 1 and 2 threads; the loops must run as native code (the log)."""

import copy
import os
import sys

import numpy as np
import pytest
from jit_check import assert_identical, cases_script, loop_log_lines, run_on_every_path

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import coin_sums, primes_list  # noqa: E402 - bench/


def prefix(xs):
    # Reads of the item just written and a write of each: the caller's list in place.
    for i in range(1, len(xs)):
        xs[i] += xs[i - 1]
    return xs[-1]


def from_the_end(xs, n):
    # Negative indices on both sides, a read and a write of one item in a turn.
    for k in range(n):
        xs[-1 - k % len(xs)] = xs[-1 - k % len(xs)] * 2 - xs[k % len(xs)]
    return xs[0]


def floats(xs, n):
    s = 0.0
    for k in range(n):
        xs[k % len(xs)] = xs[k % len(xs)] * 0.5 + k
        s += xs[(k + 1) % len(xs)]
    return s


def made_here(n):
    # coin_sums's table: made by the function, then read and written by the loop.
    ways = [1] + [0] * n
    for step in (1, 3, 7):
        for i in range(step, n + 1):
            ways[i] += ways[i - step]
    return ways


def read_past_the_end(xs, n):
    s = 0
    for i in range(n):
        s += xs[i]
    return s


def write_past_the_end(xs, n):
    for i in range(n):
        xs[i] = i
    return xs


def negative_past_the_start(xs, n):
    for i in range(n):
        xs[-1 - i] = xs[-1 - i] + 1
    return xs


def int_gets_a_float(xs, n):
    # An int list that gets a float late (n - 3 turns of in-place writes before):
    # the code compiled for ints bails there, its writes taken back, and the
    # interpreter redoes the turns (each would count twice otherwise).
    for i in range(n):
        xs[i % len(xs)] = xs[i % len(xs)] + 1
        if i == n - 3:
            xs[1] = xs[1] + 0.5
    return xs


def made_then_bails(n):
    # A list the function made, written in place (its old bytes logged, then its
    # numbers as one range), then a float read as the int compiled for, late: the
    # call's writes are taken back before the interpreter redoes its turns.
    xs = [0] * 5
    total = 0
    for i in range(n):
        k = 0 if i < 10 else i % 5  # item 0 alone first: the range holds the others
        xs[k] = xs[k] + i
        if i == n - 3:
            xs[2] = xs[2] + 0.5
        total += xs[2]
    return xs, total


def int_gets_a_str(xs, n):
    s = 0
    for i in range(n):
        xs[i % len(xs)] = xs[i % len(xs)] + 1
        if i == n - 5:
            xs[2] = "two"
        if i < n - 5:
            s += xs[2]
    return xs, s


def int_gets_a_list(xs, n):
    for i in range(n):
        xs[i % len(xs)] = xs[i % len(xs)] + 1
        if i == n - 2:
            xs[0] = [i]
    return xs


def float_into_ints(xs, n):
    # A float written into an int item: no longer in place (the kind changes);
    # the items read after as the ints compiled for bail to the interpreter.
    s = 0
    for i in range(n):
        xs[i % 3] = xs[i % 3] * 2 % 1000
        if i == n // 2:
            xs[0] = 0.25
        s += xs[i % 3]
    return s, xs


def fails_late(xs, n):
    # Many writes in place, then ZeroDivisionError: the caller's list as it was.
    x = 0
    for i in range(n):
        xs[i % len(xs)] += 1
        x = 1 // (n - 3 - i)
    return x


def two_lists(xs, ys, n):
    for i in range(n):
        xs[i % len(xs)] = xs[i % len(xs)] + ys[i % len(ys)]
        ys[i % len(ys)] -= 1
    return xs, ys


def empty(xs, n):
    s = 0
    for i in range(n):
        if len(xs) > 0:
            xs[0] += i
        s += len(xs)
    return s, xs


def bools_and_ints(xs, n):
    # A bool item among ints (not of the kind written in place: the helper's).
    for i in range(n):
        xs[i % len(xs)] = xs[i % len(xs)] + 1
    return xs


def append_bails_late(n):
    # Appends to a list the function made (past several checkpoints), then a float
    # item read as the int compiled for: the appends since the last checkpoint are
    # cut back before the interpreter redoes those turns.
    out = []
    s = 0
    for i in range(n):
        out.append(i)
        if i == n - 3:
            out[0] = 0.5
        s += out[0]
    return s, len(out), out[-4:]


def append_fails_late(n):
    out = [7]
    x = 0
    for i in range(n):
        out.append(i * 2)
        x += 1 // (n - 3 - i)
    return out, x


def append_to_argument(xs, n):
    # The caller's list appended to and written, past checkpoints; an error late
    # leaves it as it was (test_a_late_error_leaves_the_callers_list).
    for i in range(n):
        xs.append(i % 5)
        xs[i % 3] += 1
        if i == n - 3:
            xs[1] = xs[1] + 1 // (n - 3 - i + (len(xs) < 0))
    return len(xs)


def select_numpy_floats(x, threshold):
    # np.float64 items appended: np.float64 when read back, and as an array after.
    out = []
    for i in range(len(x)):
        if x[i] > threshold:
            out.append(x[i] * 2.0)
    return out, np.array(out)


def joined(n):
    # `[x] + [0] * n` and `[0] * n + [x]` take x into the repeated list in place
    # (a temporary); a list a variable holds is copied, and each stays its own.
    zeros = [0] * n
    a = [1] + zeros
    b = [2] + [0] * n
    c = [0] * n + [3.5]
    d = [0] * n + zeros
    a[1] = 5
    b[1] = 6
    c[0] = 7
    d[-1] = 8
    return zeros[:3], zeros[-1], a[:3], b[:3], c[:3], c[-2:], d[-2:], len(a), len(b), len(c), len(d)


def grow_while_reading(n):
    # `for x in p` (items read in place) in a loop that appends to p: the items'
    # address looked up again after each append.
    p = [1]
    s = 0
    while len(p) < n:
        for x in p:
            s += x
            if s % 7 == 0:
                break
        p.append(len(p) * 2 + s % 5)
    return s, p


def read_while_another_grows(xs, n):
    out = []
    for k in range(n):
        for x in xs:
            out.append(x * k)
    return out


def mixed_items_read(xs):
    # An int among floats: read in place as the floats compiled for until it, then
    # the interpreter's (Python's int + float).
    s = 0.0
    for x in xs:
        s += x
    return s


def appended_to_itself(n):
    xs = [1, 2, 3]
    xs.append(xs)
    s = 0
    for i in range(n):
        xs[i % 3] = xs[i % 3] * 2 % 97
        s += xs[i % 3]
    return s, xs[:3], len(xs[3])


CASES = [(coin_sums, (200, [1, 2, 5, 10, 20, 50, 100, 200])),
         (prefix, ([3, 1, 4, 1, 5, 9, 2, 6],)),
         (from_the_end, ([1, 2, 3, 4, 5], 23)),
         (floats, ([0.5, 1.5, -2.0, 8.25], 41)),
         (made_here, (300,)),
         (read_past_the_end, ([1, 2, 3], 4)),
         (write_past_the_end, ([0] * 5, 6)),
         (negative_past_the_start, ([0] * 5, 6)),
         (int_gets_a_float, ([1, 2, 3, 4], 3000)),
         (made_then_bails, (3000,)),
         (made_then_bails, (40_000,)),
         (int_gets_a_str, ([1, 2, 3, 4], 300)),
         (int_gets_a_list, ([1, 2, 3, 4], 300)),
         (float_into_ints, ([1, 2, 3], 300)),
         (fails_late, ([0] * 7, 3000)),
         (two_lists, ([1, 2, 3], [10, 20], 50)),
         (empty, ([], 5)),
         (bools_and_ints, ([1, True, 3], 7)),
         (append_bails_late, (40_000,)),
         (append_bails_late, (3000,)),
         (joined, (2000,)),
         (primes_list, (300,)),
         (grow_while_reading, (400,)),
         (read_while_another_grows, ([1.5, -2.0, 4.25], 30)),
         (mixed_items_read, ([1.5, 2.5, 3, 4.5],)),
         (joined, (3,)),
         (append_fails_late, (40_000,)),
         (append_to_argument, ([1, 2, 3], 40_000)),
         (select_numpy_floats, (np.linspace(0.0, 1.0, 41), 0.5))]



@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_agrees_with_python(f, args, threads):
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    try:
        expected = f(*theirs)
    except Exception as e:  # noqa: BLE001 - the same exception is expected of the jit
        with pytest.raises(type(e)):
            tessera.jit(f)(*mine)
        assert mine == args  # a call that raises gives the caller's lists back as they were
        return
    got = tessera.jit(f)(*mine)
    assert_identical(got, expected)
    assert_identical(list(mine), list(theirs), "arguments")


def test_a_list_appended_to_itself_is_refused():
    # Python's xs would see its own later writes through xs[3]; tessera says it cannot.
    with pytest.raises(tessera.UnsupportedError, match="changed in place later"):
        tessera.jit(appended_to_itself)(50)


def test_the_same_list_twice():
    # One list passed as both arguments: Python's answer (the writes through xs seen
    # through ys), or tessera's refusal of a list changed through two names.
    def f(xs, ys, n):
        for i in range(n):
            xs[i % len(xs)] = xs[i % len(xs)] + ys[(i + 1) % len(ys)]
        return ys[0]

    a = [1, 2, 3]
    expected = f(a, a, 20)
    b = [1, 2, 3]
    try:
        got = tessera.jit(f)(b, b, 20)
    except tessera.UnsupportedError:
        return
    assert got == expected and b == a


@pytest.mark.parametrize("f, args, line", [(read_past_the_end, ([1, 2, 3], 4), 3),
                                           (write_past_the_end, ([0] * 5, 6), 2),
                                           (negative_past_the_start, ([0] * 5, 6), 2)])
def test_index_error_names_its_line(f, args, line):
    with pytest.raises(IndexError) as e:
        tessera.jit(f)(*args)
    assert f"test_native_flat_lists.py:{f.__code__.co_firstlineno + line}" in str(e.value)


def test_a_late_error_leaves_the_callers_list():
    xs = list(range(7))
    with pytest.raises(ZeroDivisionError):
        tessera.jit(fails_late)(xs, 20_000)
    assert xs == list(range(7))
    ys = [1, 2, 3]
    with pytest.raises(ZeroDivisionError):
        tessera.jit(append_to_argument)(ys, 40_000)
    assert ys == [1, 2, 3]


# (every path but the cases of 40,000 turns: the general path takes minutes on those; the
# native path runs them past its checkpoints in test_agrees_with_python)
_SCRIPT = cases_script("test_native_flat_lists",
                       "[c for c in t.CASES if not any(type(a) is int and a == 40_000 "
                       "for a in c[1])]")


def test_native_interpreter_and_general_print_theassert_identical():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native and "ZeroDivisionError" in native
    for f in (coin_sums, prefix, from_the_end, floats, made_here, int_gets_a_float,
              float_into_ints, fails_late, two_lists, append_bails_late, select_numpy_floats,
              primes_list, grow_while_reading, read_while_another_grows, made_then_bails):
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)
