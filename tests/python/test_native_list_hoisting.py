"""Flat lists of numbers asked for once before a range loop (docs/runtime.md, "Flat lists
asked for once before a loop"): a list held unboxed that the loop uses only as xs[i],
xs[i] = v and len(xs) is read and written at its items' address with no check per access
when its indices are provable from the range, with Python's negative indices and IndexError
(at its line) otherwise, its writes logged before the loop. Results (the kinds of the items
included), Python's ints past int64, errors and the lists afterwards are Python's, the same
with native code, the register interpreter and the general evaluation at 1 and 2 threads;
the loops must be compiled with the hoisted version where the lists allow it, and without
it where they do not (an append, a rebinding, a list passed on)."""

import copy
import os
import sys

import pytest
from jit_check import assert_identical, cases_script, loop_log_lines, run_on_every_path, run_script

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from published_kernels import coin_sums  # noqa: E402 - bench/


def prefix_sums(n):
    # Both indices provable: i in [1, n - 1], i - 1 in [0, n - 2], len n.
    xs = [0] * n
    for i in range(1, n):
        xs[i] = xs[i - 1] + i
    return xs[-3:], sum(xs)


def two_lists(n):
    # One list only read, another written; floats and ints.
    w = [0.5] * n
    acc = [0] * n
    s = 0.0
    for i in range(n):
        acc[i] = acc[max(i - 1, 0)] + i * 3
        s += w[n - 1 - i] * i
    return acc[-2:], s


def backwards(n):
    # A negative step: xs[i] and xs[i - 2] for i = n - 1, n - 2, ..., 2.
    xs = [1] * n
    for i in range(n - 1, 1, -1):
        xs[i] = xs[i] * 3 - xs[i - 2]
    return xs[:4], xs[-4:]


def from_the_end(n, k):
    # An index the range does not prove (wraps to negative): Python's xs[-j].
    xs = list(range(100)) + [0]
    s = 0
    for i in range(k):
        s += xs[i % 7 - 3]
        xs[-1 - i % 5] = xs[-1 - i % 5] + i
    return s, xs[-6:]


def negative_at_the_start(n):
    # xs[i - 3] is xs[-3], xs[-2], xs[-1] in the first turns: the check before the loop
    # fails and the per-access code gives Python's items from the end.
    xs = [1] * 70 + [5, 6, 7]
    for i in range(n):
        xs[i] = xs[i] + xs[i - 3]
    return xs[:6], xs[-3:]


def past_the_end(n):
    xs = [0] * 80
    for i in range(n):
        xs[i] = i
    return xs[-1]


def read_past_the_end(n, m):
    xs = [2] * 80
    s = 0
    for i in range(n):
        s += xs[i * m % 97]
    return s


def overflows(n):
    # Past int64 the native code bails, with no wrapped number written: tessera's ints are
    # int64, so the general path raises OverflowError at the line (Python's int would grow).
    xs = [1] * 100
    for i in range(1, n):
        xs[i] = xs[i - 1] * 2 + xs[i]
    return xs[n - 1], xs[60]


def bails_in_a_long_list(n):
    # A short loop over a long list (the written span alone logged before it), then a
    # float into the ints late: the call's writes taken back (each would count twice
    # otherwise) before the interpreter redoes the turns.
    xs = [3] * 10_000
    for i in range(5000, 5000 + n):
        xs[i] = (xs[i] * 3 + xs[i - 1]) % 1_000_003
        if i == 5000 + n - 3:
            xs[i + 1] = 0.25
    return xs[5000 + n - 4:5000 + n + 1], sum(xs[:5000]), sum(xs[5000 + n:])


def long_then_bails(n):
    # A loop that is the whole function, past a checkpoint (16,384 turns: the
    # writes of each call's turns logged before them), then a float into the ints: the
    # last call's writes taken back before the interpreter redoes its turns.
    xs = [1] * n
    for i in range(1, n):
        xs[i] = (xs[i] * 7 + xs[i - 1]) % 1_000_003
        if i == n - 3:
            xs[i + 1] = 0.5
    return xs[-5:], sum(xs[:-2])


def float_into_ints(n):
    # A float written into a list of ints held unboxed: the native code bails there;
    # the interpreter writes it, and the list holds both kinds, as Python's.
    xs = [0] * 100
    for i in range(n):
        xs[i] = xs[i] + i
        if i == 50:
            xs[i] = 0.5
    return xs[48:53]


def grows(n):
    # An append in the loop: the list may move, nothing asked for once.
    xs = [0] * 70
    for i in range(n):
        xs[i] = xs[i] + i
        xs.append(i)
    return len(xs), xs[-3:], xs[:3]


def shrinks(n):
    xs = [1] * 100
    s = 0
    for i in range(n):
        s += xs[i]
        xs.pop()
    return s, len(xs)


def rebound(n):
    # `ways = ...` in the loop: another list on later turns.
    ways = [1] * 100
    s = 0
    for i in range(n):
        s += ways[i]
        if i == 10:
            ways = [2] * 100
        ways[i] = s
    return s, ways[:12]


def bump(xs, i):
    xs[i] = xs[i] + 1
    return xs


def through_a_helper(n):
    # A jit function called in the loop that writes the list.
    xs = [0] * 100
    for i in range(n):
        xs = bump(xs, i)
        xs[i] = xs[i] * 5
    return xs[:5]


def nested_in_another(n):
    # The list held by another list too: lists are values (or tessera refuses).
    xs = [0] * 100
    box = [xs]
    for i in range(1, n):
        xs[i] = xs[i - 1] + i
    return box[0][n - 1], xs[n - 1]


def aliased(n):
    xs = [0] * 100
    ys = xs
    for i in range(1, n):
        xs[i] = xs[i - 1] + i
    return ys[n - 1], xs[n - 1]


def fails_late(n):
    # Writes logged before the loop, then a ZeroDivisionError: raised at its line.
    xs = [1] * 100
    x = 0
    for i in range(n):
        xs[i] += xs[max(i - 1, 0)]
        x = 1 // (n - 3 - i)
    return x, xs


CASES = [(coin_sums, (2000, [1, 2, 5, 10, 20, 50, 100, 200])),
         (prefix_sums, (500,)),
         (two_lists, (300,)),
         (backwards, (200,)),
         (from_the_end, (0, 300)),
         (negative_at_the_start, (73,)),
         (past_the_end, (81,)),
         (read_past_the_end, (70, 3)),
         (overflows, (100,)),
         (overflows, (62,)),
         (bails_in_a_long_list, (45,)),
         (long_then_bails, (20_000,)),
         (float_into_ints, (100,)),
         (grows, (60,)),
         (shrinks, (40,)),
         (rebound, (60,)),
         (through_a_helper, (50,)),
         (nested_in_another, (60,)),
         (aliased, (60,)),
         (fails_late, (90,))]

# The loops that take the hoisted version, and those that must not have one.
HOISTED = [coin_sums, prefix_sums, two_lists, backwards, from_the_end, negative_at_the_start,
           past_the_end, read_past_the_end, overflows, bails_in_a_long_list,
           float_into_ints, fails_late]
NOT_HOISTED = [grows]  # (shrinks, rebound: pop() and `ways = [...]` keep theirs on the interpreter)


def n_past_int64(n):
    return overflows(n)[0] >= 2**63


@pytest.mark.parametrize("f, args", CASES, ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_agrees_with_python(f, args, threads):
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    try:
        expected = f(*theirs)
        if f is overflows and n_past_int64(args[0]):
            raise OverflowError  # tessera's ints are int64: its OverflowError at the line
    except Exception as e:  # noqa: BLE001 - the same exception is expected of the jit
        if f is overflows:
            e = OverflowError()
            line = overflows.__code__.co_firstlineno + 5
        else:
            line = e.__traceback__.tb_next.tb_lineno
        with pytest.raises(type(e)) as got:
            tessera.jit(f)(*mine)
        if isinstance(e, (IndexError, ZeroDivisionError, OverflowError)):
            # at the line Python raises it
            assert f"test_native_list_hoisting.py:{line}" in str(got.value), str(got.value)
        return
    try:
        got = tessera.jit(f)(*mine)
    except tessera.UnsupportedError:
        assert f in (nested_in_another, aliased, through_a_helper), f.__name__
        return
    assert_identical(got, expected)
    assert_identical(list(mine), list(theirs), "arguments")


# (every path but the case of 20,000 turns, which the loop interpreter and the general path take
# seconds over: each of their writes copies the list; the native path runs it past its checkpoint
# in test_agrees_with_python)
_SCRIPT = cases_script("test_native_list_hoisting", "[c for c in t.CASES if c[1] != (20_000,)]")


def test_native_interpreter_and_general_print_the_same():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert "IndexError" in native and "ZeroDivisionError" in native and "OverflowError" in native
    for f in HOISTED + NOT_HOISTED:
        assert loop_log_lines(log, f, "native code compiled"), (f.__name__, log)


_IR_SCRIPT = """
import sys, tessera, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {here!r})
import test_native_list_hoisting as t
for f, args in t.CASES:
    if f in t.HOISTED + t.NOT_HOISTED:
        print("@@", f.__name__, file=sys.stderr, flush=True)
        try:
            tessera.jit(f)(*args)
        except Exception:
            pass
"""


def test_the_hoisted_version_is_compiled_where_the_lists_allow_it():
    # The optimised IR (TESSERA_NATIVE=ir) of each loop: the version whose list accesses
    # were asked for before it ("list_hoisted") is there, or absent where the loop
    # appends, pops or rebinds.
    # (one tier: the -O3 IR printed at the call, not the quick tier's then the
    # background's interleaved)
    _, err = run_script(_IR_SCRIPT, TESSERA_NATIVE="ir", TESSERA_CACHE_DIR="0",
                        TESSERA_NATIVE_TIERS="0")
    parts = {}
    for chunk in err.split("@@ ")[1:]:
        name, _, text = chunk.partition("\n")
        parts[name.strip()] = parts.get(name.strip(), "") + text
    # (the block before a loop that is the whole function and only reads its lists is
    # empty and merged into the next, "list_chunk")
    def hoisted(ir):
        return "list_hoisted" in ir or "list_chunk" in ir

    for f in HOISTED:
        assert hoisted(parts[f.__name__]), f.__name__
    for f in NOT_HOISTED:
        assert "define" in parts[f.__name__] and not hoisted(parts[f.__name__]), f.__name__
