"""The entry of a jit call (tessera/python/jit_entry.cpp, sigint.cpp): a call
whose argument types were seen before runs its program from the C entry,
without jit.py's Python dispatch, and SIGINT is watched without a system call
per call. Everything must be as on the Python dispatch: values and their
kinds, new programs when argument types change, exceptions with file:line,
arguments changed in place, calls from two threads, the settings of a
function, Ctrl-C in a long loop after many short calls and a user's SIGINT
handler installed between calls. At 1 and 2 threads, against plain Python,
the loop interpreter and the general path (TESSERA_NATIVE=0,
TESSERA_FAST_LOOPS=0)."""

import copy
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from jit_check import assert_identical, loop_log_lines, run_on_every_path

import tessera
from tessera import _core
from tessera.jit import JitFunction


def add(a, b):
    return a + b


def scale_first(x, k):
    x[0] = x[0] * k  # in place: the caller's array changes
    return x.sum() + k


def pick(x, i):
    return x[i]


def checked(n):
    assert n >= 0, "n must not be negative"
    return n * 2


def count_to(n):
    i = 0
    s = 0
    while i < n:
        s += i
        i += 1
    return s


# Calls in an order that changes the argument types between calls (and back):
# each must give what Python gives, a new program for a new key.
CALLS = [
    (add, (1, 2)), (add, (1, 2)), (add, (1.5, 2)), (add, (True, 2)), (add, (np.int64(3), 2)),
    (add, (np.float32(0.25), 1)), (add, (1, 2)), (add, (np.arange(3.0), 1)),
    (add, (np.arange(3), 1)), (add, (np.ones((2, 2), np.float32), 1.0)), (add, (2**40, 2**40)),
    (add, ("ab", "cd")), (add, (1, 2)), (count_to, (1000,)), (count_to, (10,)),
    (pick, (np.arange(5.0), 3)), (pick, (np.arange(5), -1)),
]


@pytest.fixture
def slow_calls(monkeypatch):
    """Counts the calls that reach jit.py's Python dispatch (JitFunction._call)."""
    seen = []
    original = JitFunction._call

    def counting(self, args, kwargs):
        seen.append(self.__name__)
        return original(self, args, kwargs)

    monkeypatch.setattr(JitFunction, "_call", counting)
    return seen


def test_calls_of_changing_types_match_python(threads):
    jitted = {}
    for f, args in CALLS:
        g = jitted.setdefault(f, tessera.jit(f))
        for _ in range(3):  # the first call of a key registers it, the next ones take the entry
            assert_identical(g(*args), f(*args))


def test_a_repeated_call_takes_the_c_entry(slow_calls, threads):
    g = tessera.jit(add)
    x = np.arange(4.0)
    for _ in range(5):
        g(1, 2)
        g(x, 1.0)
        g(np.float64(1.0), 2)
    assert slow_calls == ["add"] * 3  # once per key
    g(x.astype(np.float32), 1.0)  # a new key: the Python dispatch again
    assert slow_calls == ["add"] * 4
    g(b=2, a=1)  # keywords are bound in Python
    g(1, b=2)
    assert slow_calls == ["add"] * 6


def test_functions_lists_and_settings_keep_the_python_dispatch(slow_calls):
    def apply(f, x):
        return f(x)

    g = tessera.jit(apply)
    for _ in range(3):
        assert g(np.sqrt, 4.0) == 2.0
        assert g(np.abs, -3.0) == 3.0
    assert len(slow_calls) == 6  # a function argument's key is not its type

    def append_one(xs):
        xs.append(1)
        return len(xs)

    h = tessera.jit(append_one)
    xs = []
    for k in range(3):
        assert h(xs) == k + 1
    assert xs == [1, 1, 1]

    p = tessera.jit(count_to)
    p(10)
    p(10)
    p.performance = True  # counters are reset by the Python dispatch: registrations forgotten
    n_before = len(slow_calls)
    p(10)
    p(10)
    assert len(slow_calls) == n_before + 2
    assert p.counters()


def test_threads_of_a_function_are_set_by_the_entry(slow_calls):
    before = _core.num_threads()
    one, two = tessera.jit(count_to, threads=1), tessera.jit(count_to, threads=2)
    try:
        for f, n in [(one, 1), (two, 2), (one, 1), (two, 2), (one, 1)]:
            assert f(100) == sum(range(100))
            assert _core.num_threads() == n
        assert slow_calls == ["count_to", "count_to"]  # one per function
        bad = tessera.jit(count_to, threads=0)
        for _ in range(2):
            with pytest.raises(ValueError, match="set_num_threads"):
                bad(3)
    finally:
        _core.set_num_threads(before)


def test_a_copy_registers_its_own_programs(slow_calls):
    g = tessera.jit(add)
    g(1, 2)
    h = copy.copy(g)
    assert h is not g and h.__wrapped__ is add
    for _ in range(3):
        assert h(1, 2) == 3 and g(1, 2) == 3
    assert slow_calls == ["add", "add"]  # g's first call, h's first call


def test_eager_mode_is_seen_by_the_entry():
    # Python's int grows past int64, tessera's does not: which one ran shows.
    g = tessera.jit(add)
    for _ in range(2):
        with pytest.raises(OverflowError):
            g(2**62, 2**62)
    tessera.set_eager(True)
    try:
        assert g(2**62, 2**62) == 2**63
    finally:
        tessera.set_eager(False)
    with pytest.raises(OverflowError):
        g(2**62, 2**62)
    g.eager = True
    assert g(2**62, 2**62) == 2**63


def test_arguments_changed_in_place_and_results(threads):
    g = tessera.jit(scale_first)
    for k in range(4):
        x, y = np.arange(4.0), np.arange(4.0)
        assert_identical(g(x, 3.0), scale_first(y, 3.0))
        np.testing.assert_array_equal(x, y)
        noncontiguous, expected = np.arange(8.0)[::2], np.arange(8.0)[::2]
        assert_identical(g(noncontiguous, 2.0), scale_first(expected, 2.0))
        np.testing.assert_array_equal(noncontiguous, expected)


def test_exceptions_keep_their_kind_and_line(threads):
    g = tessera.jit(pick)
    c = tessera.jit(checked)
    line = pick.__code__.co_firstlineno + 1
    for _ in range(3):
        with pytest.raises(IndexError, match=rf"test_jit_entry.py:{line}"):
            g(np.arange(3.0), 7)
        with pytest.raises(AssertionError, match="n must not be negative") as info:
            c(-1)
        assert info.value.__cause__ is None and info.value.__suppress_context__
        assert c(2) == 4
        with pytest.raises(TypeError):
            c()
        with pytest.raises(TypeError):
            c(1, 2)


def test_two_threads_calling_at_once():
    g = tessera.jit(pick)
    h = tessera.jit(count_to)
    failures = []

    def work(k):
        try:
            x = np.arange(6.0) * k
            for i in range(1500):
                assert g(x, i % 6) == (i % 6) * k
                assert h(i % 50) == sum(range(i % 50))
        except Exception as e:  # reported below: a thread's assert does not fail the test
            failures.append(repr(e))

    workers = [threading.Thread(target=work, args=(k,)) for k in range(1, 4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert failures == []


def test_a_user_handler_is_left_in_place():
    g = tessera.jit(add)
    g(1, 2)

    def mine(signum, frame):
        pass

    old = signal.signal(signal.SIGINT, mine)
    try:
        for _ in range(100):
            g(1, 2)
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, old)
    g(1, 2)
    assert signal.getsignal(signal.SIGINT) is old


SCRIPT = """
import sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_jit_entry as t
for threads in (1, 2):
    tessera._core.set_num_threads(threads)
    fs = {{}}
    for f, args in t.CALLS:
        g = fs.setdefault(f, tessera.jit(f))
        for _ in range(3):
            try:
                r = g(*args)
                print(f.__name__, type(r).__name__, repr(r))
            except Exception as e:
                print(f.__name__, type(e).__name__, e)
"""


def test_every_path_gives_the_same():
    outs = run_on_every_path(SCRIPT)
    expected = "".join(f"{f.__name__} {type(f(*args)).__name__} {f(*args)!r}\n"
                       for _ in (1, 2) for f, args in CALLS for _ in range(3))
    for mode, (out, _) in outs.items():
        assert out == expected, mode
    # every call of count_to ran its loop as native code, the entry's calls too
    returned = loop_log_lines(outs["native"][1], count_to, "native code returned")
    assert len(returned) == 2 * 3 * sum(f is count_to for f, _ in CALLS), outs["native"][1]


CHILD = textwrap.dedent(
    """
    import signal, sys, time
    import tessera

    @tessera.jit
    def spin(n):
        i = 0
        while True:
            i += n
        return i

    @tessera.jit
    def add(a, b):
        return a + b

    class Mine(Exception):
        pass

    def mine(signum, frame):
        raise Mine("the user's handler")

    case = sys.argv[1]
    for i in range(5000):  # many short calls first (the C entry, no handler check each)
        add(i, 1)
    if case == "user":
        signal.signal(signal.SIGINT, mine)  # a new handler object between calls
    elif case == "restored":
        # Python's handler put back with the same object: getsignal shows no change
        signal.signal(signal.SIGINT, signal.signal(signal.SIGINT, mine))
    print("ready", flush=True)
    try:
        spin(1)
        print("returned", flush=True)
    except KeyboardInterrupt:
        print("caught KeyboardInterrupt", flush=True)
    except Mine as e:
        print("caught", e, flush=True)
    print("next", add(2, 3), flush=True)
    """
)


@pytest.mark.parametrize("case,expected", [("default", "caught KeyboardInterrupt"),
                                           ("user", "caught the user's handler"),
                                           ("restored", "caught KeyboardInterrupt")])
@pytest.mark.parametrize("n_threads", ["1", "2"])
def test_sigint_after_many_short_calls(case, expected, n_threads, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), case], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True,
                            env=dict(os.environ, TESSERA_THREADS=n_threads))
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln.strip()) for ln in proc.stdout],
                     daemon=True).start()
    try:
        assert lines.get(timeout=60) == "ready"
        time.sleep(0.5)  # looping by now
        assert proc.poll() is None
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        assert lines.get(timeout=10) == expected
        # 100 ms asked; the bound leaves room for a loaded machine
        assert time.monotonic() - sent < 0.5
        assert lines.get(timeout=10) == "next 5"
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
