"""Tiered compilation of native loops (docs/runtime.md, "Native loops", "Compile
time"): a loop's first code comes from a quick tier and runs at once, its -O3
code is compiled on a background thread and swapped in. Values equal to Python
and to the interpreter (TESSERA_NATIVE=0) from the quick tier, across the swap
and from the optimised tier, at 1 and 2 threads; the switch
TESSERA_NATIVE_TIERS=0; the disk cache holding the optimised code only (a
second process loads it and compiles nothing); the cache's mark that a loop
needs its whole code; a process ending while a background compile runs."""

import os
import subprocess
import sys

import numpy as np
from jit_check import run_script


def float_loop(xs, n):
    # a float recurrence per element, written into an array in place
    total = 0.0
    for i in range(n):
        z = xs[i]
        for k in range(20):
            z = z * z * 0.25 + 0.5
        xs[i] = z
        total += z
    return total


def int_nest(a, m):
    # a nest with int arithmetic, an accumulator and Python ints out
    s = 0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            s += (a[i, j] * (i + 1)) % m
    return s


def overflowing(a):
    # np.int64 overflow: NumPy's warning and wrapped value, on the general path
    s = np.int64(1)
    for i in range(a.shape[0]):
        s = s * a[i]
    return s


def indexing(a, k):
    # an IndexError at this function's line when k is past the end
    s = 0.0
    for i in range(k):
        s += a[i]
    return s


def guarded(x, k):
    # x[i + k] is out of bounds for the last k turns (only the `if` keeps it
    # in): the partial code's check before the loop fails, the whole code runs
    s = 0.0
    for i in range(x.shape[0]):
        if i + k < x.shape[0]:
            s += x[i + k]
    return s


NEEDS_WHOLE = (guarded, (np.arange(10.0), 3))


def cases():
    rng = np.random.default_rng(3)
    return [
        (float_loop, (rng.random(500), 500)),
        (int_nest, (np.arange(1200, dtype=np.int64).reshape(30, 40), 7)),
        (overflowing, (np.full(80, 3, dtype=np.int64),)),
        (indexing, (np.arange(10.0), 12)),
    ]


# Each case at 1 and 2 threads: the first call (quick tier), calls while the
# background compile runs (across the swap), then after it (optimised tier).
SCRIPT = """
import copy, json, sys, warnings, numpy as np, tessera
from tessera import _core
warnings.simplefilter("ignore")
sys.path.insert(0, {here!r})
import test_native_tiers as t
stats = _core._native_tier_stats
wait = _core._native_tiers_wait
out = []
def call(g, f, args):
    a = copy.deepcopy(args)
    try:
        r = g(*a)
        return [f.__name__, repr(r), type(r).__name__, repr(a)]
    except Exception as e:
        return [f.__name__, type(e).__name__, str(e), repr(a)]
during = 0
import os
for threads in [int(x) for x in os.environ["TIER_THREADS"].split(",")]:
    _core.set_num_threads(threads)
    for f, args in t.cases()[:int(os.environ.get("TIER_CASES", "4"))]:
        g = tessera.jit(f, threads=threads)
        out.append(call(g, f, args))
        for _ in range(200):
            if not stats().get("pending"):
                break
            during += 1
            out.append(call(g, f, args))
        wait()
        out.append(call(g, f, args))
print(json.dumps(dict(results=out, stats=stats(), during=during)))
"""


def _run(threads="1,2", **env):
    import json

    stdout, stderr = run_script(SCRIPT, TESSERA_CACHE_DIR="0", TIER_THREADS=threads, **env)
    return json.loads(stdout), stderr


def _expected():
    rows = []
    for f, args in cases():
        import copy
        import warnings

        a = copy.deepcopy(args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                r = f(*a)
                rows.append([f.__name__, repr(r), type(r).__name__, repr(a)])
            except Exception as e:  # noqa: BLE001 - the exception is the result
                rows.append([f.__name__, type(e).__name__, str(e), repr(a)])
    return {r[0]: r for r in rows}


def _same_as_python(row, exp):
    # an exception: its type, Python's message within tessera's (which adds
    # the operation and the position: file.py:line)
    if row[1] == "IndexError":
        import inspect

        line = inspect.getsourcelines(indexing)[1] + 4
        assert exp[1] == "IndexError" and exp[2] in row[2], (row, exp)
        assert f"test_native_tiers.py:{line}" in row[2] and row[3] == exp[3], (row, line)
    else:
        assert row == exp, (row, exp)


def test_values_on_every_tier_equal_python_and_the_interpreter():
    expected = _expected()
    # the first jit function of a loop compiles its quick tier: at 1 thread
    # first, then at 2 threads first
    tiered, log = _run(TESSERA_NATIVE="debug")
    tiered2, log2 = _run("2,1", TESSERA_NATIVE="debug")
    interp, _ = _run(TESSERA_NATIVE="0")
    for row in tiered["results"] + tiered2["results"] + interp["results"]:
        _same_as_python(row, expected[row[0]])
    # and exactly the interpreter's (exceptions' messages and positions too);
    # the tiered runs have more rows (the calls during the background compile)
    def rows(r):
        return {tuple(x) for x in r["results"]}

    assert rows(tiered) == rows(interp) == rows(tiered2) and len(rows(interp)) == 4
    assert tiered2["stats"]["quick"] >= 3 and tiered2["stats"]["swapped"] >= 3
    # the quick tier ran, its optimised code came and was swapped in
    s = tiered["stats"]
    assert s["quick"] >= 3 and s["optimised"] >= 3 and s["swapped"] >= 3, s
    assert s["pending"] == 0, s
    assert "quick tier" in log and "swapped in" in log, log[-2000:]
    # errors keep their messages and lines from the quick tier (an index
    # out of range is the general path's IndexError at the function's line)
    assert expected["indexing"][1] == "IndexError"


def test_calls_across_the_swap():
    # a long first call keeps the background compile busy while the same
    # loop is called again and again: every result equal, before and after
    script = """
import json, numpy as np, tessera
from tessera import _core
import sys; sys.path.insert(0, {here!r})
import test_native_tiers as t
for threads in (1, 2):
    _core.set_num_threads(threads)
    g = tessera.jit(t.float_loop, threads=threads)
    xs0 = np.random.default_rng(5).random(20000)
    got, before = [], 0
    for k in range(60):
        xs = xs0.copy()
        pending = _core._native_tier_stats()["pending"]
        before += bool(pending)
        got.append((g(xs, 20000), float(xs.sum())))
    _core._native_tiers_wait()
    xs = xs0.copy()
    got.append((g(xs, 20000), float(xs.sum())))
    print(json.dumps(dict(got=got, before=before, stats=_core._native_tier_stats())))
"""
    stdout, _ = run_script(script, TESSERA_CACHE_DIR="0")
    xs0 = np.random.default_rng(5).random(20000)
    xs = xs0.copy()
    expected = [float_loop(xs, 20000), float(xs.sum())]
    import json

    for line in stdout.splitlines():
        r = json.loads(line)
        assert all(list(g) == expected for g in r["got"]), (r["got"][:3], expected)
        assert r["stats"]["swapped"] >= 1, r["stats"]
    assert any(json.loads(line)["before"] > 0 for line in stdout.splitlines()), stdout


def test_tiers_off_compiles_optimised_at_once():
    expected = _expected()
    r, log = _run(TESSERA_NATIVE="debug", TESSERA_NATIVE_TIERS="0", TIER_CASES="2")
    for row in r["results"]:
        _same_as_python(row, expected[row[0]])
    assert r["stats"]["quick"] == 0 and r["stats"]["optimised"] == 0, r["stats"]
    assert "quick tier" not in log and "native code compiled" in log


CACHE_SCRIPT = """
import json, sys, numpy as np, tessera
from tessera import _core
sys.path.insert(0, {here!r})
import test_native_tiers as t
got = [tessera.jit(f)(*a) for f, a in t.cases()[:2] + [t.NEEDS_WHOLE]]
_core._native_tiers_wait()
print(json.dumps(dict(got=[repr(x) for x in got], stats=_core._native_tier_stats())))
"""


def test_cache_holds_only_optimised_code_and_needs_whole_mark(tmp_path):
    import json

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    env = dict(TESSERA_CACHE_DIR=str(cache), TESSERA_NATIVE="debug")
    first, log1 = run_script(CACHE_SCRIPT, **env)
    first = json.loads(first)
    s1 = first["stats"]
    # guarded's partial code, made whole before the background thread took it, is not
    # optimised (it may have been taken already)
    assert s1["quick"] >= 3 and s1["optimised"] in (s1["quick"] - 1, s1["quick"]), s1
    objects = sorted((cache / "native").glob("*.o"))
    # one entry per optimised code, plus guarded's "needs whole" mark; no
    # quick code (its symbol ends in _quick and is never stored)
    assert len(objects) == s1["optimised"] + 1, (objects, s1)
    assert not any(b"_quick" in p.read_bytes() for p in objects)
    second, log2 = run_script(CACHE_SCRIPT, **env)
    second = json.loads(second)
    s2 = second["stats"]
    assert second["got"] == first["got"]
    # nothing compiled: every loop loaded optimised, guarded whole at once
    assert s2["quick"] == 0 and s2["optimised"] == 0 and s2["needs_whole"] == 1, s2
    assert "loaded from the cache" in log2 and "check before a loop failed" not in log2, log2


def test_exit_while_a_background_compile_runs():
    # the process ends right after a first call (its -O3 compile under way)
    code = (
        "import sys, numpy as np, tessera\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "import test_native_tiers as t\n"
        "from tessera import _core\n"
        "print(tessera.jit(t.int_nest)(np.arange(1200).reshape(30, 40), 7))\n"
        "print(_core._native_tier_stats()['pending'] > 0)\n"
    )
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, TESSERA_CACHE_DIR="0"))
        assert r.returncode == 0, r.stderr
        assert r.stdout.split()[0] == str(int_nest(np.arange(1200).reshape(30, 40), 7))


def test_fork_while_a_background_compile_runs():
    # os.fork() right after a first call: the child has the parent's queue but
    # not its compile thread. It runs the loop, compiles a new one, waits for
    # its queue and ends with sys.exit (its exit handler joined a thread that
    # did not exist in the child: the process aborted); the parent goes on.
    code = (
        "import os, sys, numpy as np, tessera\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "import test_native_tiers as t\n"
        "from tessera import _core\n"
        "a = np.arange(1200).reshape(30, 40)\n"
        "f = tessera.jit(t.int_nest)\n"
        "print('parent', f(a, 7), flush=True)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    xs = np.linspace(0.0, 1.0, 50)\n"
        "    print('child', f(a, 5), tessera.jit(t.float_loop)(xs, 50), flush=True)\n"
        "    _core._native_tiers_wait()\n"
        "    print('child', f(a, 3), _core._native_tier_stats()['pending'], flush=True)\n"
        "    sys.exit(0)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "_core._native_tiers_wait()\n"
        "print('parent', f(a, 11), os.waitstatus_to_exitcode(status), flush=True)\n"
    )
    a = np.arange(1200).reshape(30, 40)
    xs = np.linspace(0.0, 1.0, 50)
    want_float = float_loop(xs.copy(), 50)
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, TESSERA_CACHE_DIR="0"))
        assert r.returncode == 0, r.stderr
        lines = [ln.split() for ln in r.stdout.splitlines()]
        parents = [ln for ln in lines if ln[0] == "parent"]
        children = [ln for ln in lines if ln[0] == "child"]
        assert parents[0][1] == str(int_nest(a, 7)), r.stdout
        assert parents[1][1:] == [str(int_nest(a, 11)), "0"], r.stdout + r.stderr
        assert children[0][1] == str(int_nest(a, 5)), r.stdout
        assert float(children[0][2]) == want_float, r.stdout
        assert children[1][1:] == [str(int_nest(a, 3)), "0"], r.stdout
