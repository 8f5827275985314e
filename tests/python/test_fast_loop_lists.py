"""Lists built in scalar loops (docs/runtime.md, "Lists built by append"): `[]`,
`[a, b]`, `list()` and `xs.append(v)` run on the loop fast path's registers
(the list held as an object, appended in place, each append logged so that
a roll-back takes it back). The results — the lists returned, list arguments
changed in place, errors — are Python's, and the same on the fast path and
the general evaluation (TESSERA_FAST_LOOPS=0), at 1 and 2 threads; the debug
log must show the list loops ran on the fast path."""

import os
import sys

import numpy as np
import pytest
from jit_check import cases_script, check, run_script

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import count_prime_factors, select_to_list  # noqa: E402 - bench/


def select(x, threshold):
    out = []
    for i in range(len(x)):
        if x[i] > threshold:
            out.append(x[i] * 2.0)
    return np.array(out), len(out)


def mixed_items(n):
    out = [0, 1.5]
    for i in range(n):
        if i % 3 == 0:
            out.append(i)
        elif i % 3 == 1:
            out.append(i * 0.5)
        else:
            out.append(i > 4)
    return out


def appends_to_argument(xs, n):
    for i in range(n):
        xs.append(i * i)
    return len(xs)


def list_per_turn(x):
    total = 0.0
    for i in range(len(x) - 1):
        pair = [x[i], x[i + 1]]
        pair.append(x[i] * x[i + 1])
        total += pair[0] + pair[1] + pair[2] + len(pair)
    return total


def append_then_index_error(x, n):
    out = []
    for i in range(n):
        out.append(x[i])
    return out


def aliased(n):
    xs = []
    ys = xs
    for i in range(n):
        xs.append(i)
    return xs, ys


def rows_appended(x):
    out = []
    for i in range(0, len(x) - 1, 2):
        out.append(x[i:i + 2] * 2.0)
    return out


def nested_lists(n):
    out = []
    for i in range(n):
        out.append([i, i + 1])
    return out


CASES = [(select, (np.random.default_rng(1).random(3000), 0.5)),
         (mixed_items, (50,)),
         (count_prime_factors, (400,)),
         (select_to_list, (np.random.default_rng(2).random(2000), 0.3)),
         (appends_to_argument, ([1, 2, 3], 40)),
         (list_per_turn, (np.linspace(0.0, 2.0, 500),)),
         (append_then_index_error, (np.arange(10.0), 11)),
         (rows_appended, (np.arange(12.0),)),
         (nested_lists, (20,))]

# Lists are values in tessera (docs/python.md, "Differences from Python"):
# `ys = xs` then `xs.append(v)` leaves ys as it was. The fast path leaves
# such an append to the general evaluation, so both give the same answer.
EXTRA = [(aliased, (30,))]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_list_loops_agree_with_python(f, args, threads):
    check(f, *args)


def append_to_tuple(n):
    t = (1, 2)
    for i in range(n):
        t.append(i * 2.0)
    return t


def test_append_to_a_tuple_is_pythons_attribute_error(threads):
    with pytest.raises(AttributeError) as e:
        append_to_tuple(3)
    with pytest.raises(AttributeError) as e:
        tessera.jit(append_to_tuple)(3)
    line = append_to_tuple.__code__.co_firstlineno + 3
    assert "'tuple' object has no attribute 'append'" in str(e.value)
    assert f"test_fast_loop_lists.py:{line}" in str(e.value)


def test_the_callers_list_gets_the_appends():
    xs = [1, 2, 3]
    assert tessera.jit(appends_to_argument)(xs, 5) == 8
    assert xs == [1, 2, 3, 0, 1, 4, 9, 16]


_MANY = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_fast_loop_lists as t
x = np.linspace(0.0, 1.0, 100_001)
print(float(tessera.jit(t.list_per_turn)(x)), float(t.list_per_turn(x)))
"""


def test_many_lists_made_and_let_go():
    # 100,000 lists of three items made and dropped: released between turns
    # (the loop's table of 65,536 objects would otherwise fill up and send
    # the loop back to the general path), the same answer as Python.
    out, log = run_script(_MANY, TESSERA_FAST_LOOPS="debug")
    got, want = out.split()
    assert float(got) == pytest.approx(float(want), rel=1e-12)
    assert "rolled back" not in log, log


_SCRIPT = cases_script("test_fast_loop_lists", "t.CASES + t.EXTRA")


def test_fast_path_and_general_print_the_same():
    fast, log = run_script(_SCRIPT, TESSERA_FAST_LOOPS="debug")
    general, _ = run_script(_SCRIPT, TESSERA_FAST_LOOPS="0")
    assert fast == general
    assert "IndexError" in fast
    # The list loops ran on the fast path (the interpreter or native code),
    # not refused at compilation.
    assert "stays general" not in log, log
    for f in (select, count_prime_factors, select_to_list, list_per_turn):
        line = f.__code__.co_firstlineno
        where = os.path.basename(f.__code__.co_filename)
        assert any(f"{where}:{k}: " in log for k in range(line, line + 8)), (f, log)
