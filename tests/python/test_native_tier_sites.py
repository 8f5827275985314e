"""Native loops' first calls (docs/runtime.md, "Native loops", "Compile time"): a partial
code whose check before an inner loop fails gets that loop's general version (and its
copies'), not the whole code; the cache's mark names those checks, so that a second process
compiles them at once; the optimised tier's background compile is a trace's compile event.
Values against Python and the loop interpreter (TESSERA_NATIVE=0) and the general
evaluation, at 1 and 2 threads."""

import json

import numpy as np
from jit_check import PATHS, loop_log_lines, run_on_every_path, run_script


def chain_order(p):
    # matrix_chain_order: j = i + length - 1 is not within an interval known before
    # the nest, so the inner `for i` loop's check fails at the first call
    n = len(p) - 1
    m = np.zeros((n, n), dtype=np.int64)
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            m[i, j] = 2**62
            for k in range(i, j):
                cost = m[i, k] + m[k + 1, j] + p[i] * p[k + 1] * p[j + 1]
                if cost < m[i, j]:
                    m[i, j] = cost
    return m[0, n - 1]


def _row_tail(a, r, k):
    # a[r, c + k] is past the row's end for the last k turns (only the `if` keeps
    # it in): the check before this loop fails
    s = 0.0
    for c in range(a.shape[1]):
        if c + k < a.shape[1]:
            s += a[r, c + k]
    return s


def two_copies(a, k):
    # _row_tail called inline twice: its two copies share one check (their shape),
    # so one completion serves both
    t = 0.0
    for r in range(a.shape[0]):
        t += _row_tail(a, r, k) - 0.5 * _row_tail(a, r, k + 1)
    return t


def dot_loop(x, y):
    s = 0.0
    for i in range(len(x)):
        s += x[i] * y[i]
    return s


def _cases():
    rng = np.random.default_rng(5)
    p = rng.integers(5, 60, 13).astype(np.int64)
    a = rng.random((9, 11))
    return [(chain_order, (p,)), (two_copies, (a, 2))]


CASES = _cases()

_SCRIPT = """
import copy, sys, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_tier_sites as t
for threads in (1, 2):
    for f, args in t.CASES:
        a = copy.deepcopy(args)
        print(f.__name__, repr(tessera.jit(f, threads=threads)(*a)), repr(a))
tessera._core._native_tiers_wait()
"""


def _python():
    import copy

    lines = []
    for _ in (1, 2):
        for f, args in CASES:
            a = copy.deepcopy(args)
            lines.append(f"{f.__name__} {f(*a)!r} {a!r}\n")
    return "".join(lines)


def test_failed_inner_check_adds_that_loop_only():
    out = run_on_every_path(_SCRIPT, TESSERA_CACHE_DIR="0", TESSERA_NATIVE="debug")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    assert native == _python()
    for f in (chain_order, two_copies):
        assert any("(partial" in ln for ln in loop_log_lines(log, f, "compiled in")), log
        added = loop_log_lines(log, f, "the general version of check")
        assert added, (f.__name__, log)
        assert not loop_log_lines(log, f, "the whole native code"), (f.__name__, log)
    # two_copies' two inner loops share one check (their shape): one completion per
    # jit function (1 and 2 threads), not one per copy
    checks = [ln.split("check ")[1].split()[0]
              for ln in loop_log_lines(log, two_copies, "the general version of check")]
    assert len(set(checks)) == 1, log


def test_the_cache_mark_names_the_checks(tmp_path):
    env = dict(TESSERA_CACHE_DIR=str(tmp_path), TESSERA_NATIVE="debug")
    first, log1 = run_script(_SCRIPT, **env)
    assert loop_log_lines(log1, chain_order, "the general version of check"), log1
    # a second process: the mark read, the same code compiled at once (loaded: the
    # background tier of the first process cached it), no failed check
    second, log2 = run_script(_SCRIPT, **env)
    assert first == second == _python()
    assert not loop_log_lines(log2, chain_order, "check before a loop failed"), log2
    assert loop_log_lines(log2, chain_order, "loaded from the cache"), log2
    assert "native code compiled" not in log2, log2


_TRACE = """
import json, sys, tempfile, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_native_tier_sites as t
x = np.linspace(0.0, 1.0, 300)
y = np.cos(x)
out = {{}}
for threads in (1, 2):
    f = tessera.jit(t.dot_loop, threads=threads)
    with tessera.trace(tempfile.mkdtemp(prefix="tessera-tier-trace-")) as tr:
        v = f(x, y)
        tessera._core._native_tiers_wait()
    doc = json.loads(tr.chrome())
    names = {{(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
              if e.get("ph") == "M" and e.get("name") == "thread_name"}}
    out[threads] = {{
        "value": v,
        "compiles": [dict(e["args"], thread=names.get((e["pid"], e["tid"])))
                     for e in doc["traceEvents"]
                     if e.get("ph") == "X" and e["cat"] == "compile" and "loop" in e["args"]],
        "native": {{k: v for k, v in tr.native.items() if k != "loops"}},
    }}
print(json.dumps(out))
"""


def test_the_background_compile_is_a_trace_event():
    stdout, _ = run_script(_TRACE, TESSERA_CACHE_DIR="0", **PATHS["native"])
    out = json.loads(stdout)
    x = np.linspace(0.0, 1.0, 300)
    for threads in ("1", "2"):
        o = out[threads]
        assert o["value"] == dot_loop(x, np.cos(x))
        modes = [c["mode"] for c in o["compiles"]]
        if threads == "1":  # the 2-thread function finds the code loaded already
            assert modes[0] in ("whole", "partial"), o  # the quick tier, on the caller
            assert "optimised tier (background)" in modes, o
            bg = [c for c in o["compiles"] if c["mode"] == "optimised tier (background)"]
            assert bg[0]["thread"] == "native tier", o
            assert bg[0]["optimise_ms"] is not None and bg[0]["ir_bytes"] > 0, bg
            assert "x: float64[1d]" in bg[0]["signature"], bg
            assert o["native"]["optimised"] == 1 and o["native"]["optimised_ns"] > 0, o
            assert "optimised tier: 1 compile in the background" in o["native"]["text"], o
