"""Fast loops and native code while a trace records (docs/tracing.md, "Native loops
in a trace"): the loops run as they do untraced (native code, the loop interpreter),
each run of a loop is one `loop` event, each native compile or cache load a `compile`
event with its steps, and the report gives the compile total. Values against Python,
NumPy, the loop interpreter and the general evaluation, at 1 and 2 threads."""

import json
import os

import numpy as np
import pytest
from jit_check import PATHS, run_script

CALLS = 3


def dot_loop(x, y):
    s = 0.0
    for i in range(len(x)):
        s += x[i] * y[i]
    return s


def shift_sum(x, k):
    # x[i + k]: IndexError at this line once i + k reaches len(x)
    s = 0.0
    for i in range(len(x)):
        s += x[i + k]
    return s


SCRIPT = """
import json, os, sys, tempfile, numpy as np, tessera
sys.path.insert(0, {here!r})
import test_trace_native as t

x = np.linspace(0.0, 1.0, 500)
y = np.cos(x)
out = {{}}
for threads in (1, 2):
    f = tessera.jit(t.dot_loop, threads=threads)
    d = tempfile.mkdtemp(prefix="tessera-trace-native-")
    with tessera.trace(d) as tr:
        traced = [f(x, y) for _ in range(t.CALLS)]
    untraced = f(x, y)
    doc = json.loads(tr.chrome())
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    g = tessera.jit(t.shift_sum, threads=threads)
    with tessera.trace(tempfile.mkdtemp(prefix="tessera-trace-native-")) as tr2:
        try:
            g(x, 1)
            error = None
        except IndexError as e:
            error = str(e)
    out[threads] = {{
        "traced": traced, "untraced": untraced, "error": error,
        "loops": [e for e in events if e["cat"] == "loop"],
        "compiles": [e for e in events if e["cat"] == "compile" and "loop" in e["args"]],
        "translations": [e["name"] for e in events if e["cat"] == "compile" and "function" in e["args"]],
        "primitives": sum(1 for e in events if e["cat"] == "primitive"),
        "native": tr.native,
        "error_loops": [e for e in json.loads(tr2.chrome())["traceEvents"]
                        if e.get("ph") == "X" and e["cat"] == "loop"],
    }}
print(json.dumps(out))
"""


def run(**env):
    stdout, stderr = run_script(SCRIPT, **env)
    return {int(k): v for k, v in json.loads(stdout).items()}, stderr


def line_of(f, text):
    import inspect

    lines, first = inspect.getsourcelines(f)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def where(f, text):
    return f"{os.path.basename(__file__)}:{line_of(f, text)}"


def expected_values():
    x = np.linspace(0.0, 1.0, 500)
    y = np.cos(x)
    return dot_loop(x, y), float(np.dot(x, y))


def check_values(out, fast=True):
    python, numpy = expected_values()
    for threads, r in out.items():
        for v in r["traced"] + [r["untraced"]]:
            assert v == python, (threads, v, python)
            assert v == pytest.approx(numpy, rel=1e-12)
        # The IndexError of the general path, at the line that indexes.
        assert r["error"] is not None and where(shift_sum, "s += x[i + k]") in r["error"], r["error"]
        # The run that met it: one event, not finished (the general path went on).
        runs = [e for e in r["error_loops"] if e["args"]["loop"] == where(shift_sum, "for i in range")]
        if fast:
            assert len(runs) == 1 and not runs[0]["args"]["finished"], r["error_loops"]
        else:
            assert runs == [], r["error_loops"]


def check_translations(out):
    """The jit's translation of the function (a first call in the trace) is an event."""
    line = line_of(dot_loop, "def dot_loop")
    name = f"jit translation dot_loop ({os.path.basename(__file__)}:{line})"
    for threads, r in out.items():
        assert r["translations"] == [name], (threads, r["translations"])
        assert r["native"]["translated"] == 1 and r["native"]["translate_ns"] > 0


def check_loop_runs(out):
    """One event per run (a run per call), native, finished; none per turn."""
    loop_at = where(dot_loop, "for i in range")
    for threads, r in out.items():
        runs = [e for e in r["loops"] if e["args"]["loop"] == loop_at]
        # One event per run (a run per call), native, finished; none per turn.
        assert len(runs) == CALLS, (threads, r["loops"])
        for e in runs:
            assert e["name"] == f"loop {loop_at}"
            assert e["args"]["kind"].startswith("native"), e
            assert e["args"]["native_calls"] >= 1 and e["args"]["finished"], e
        assert r["primitives"] < 50, "the loop's turns ran on the general evaluation"
        assert r["native"]["loops"][0]["runs"] >= CALLS


def check_compiles(out):
    """A compile event at the first traced call, then hits."""
    first = [e for e in out[1]["compiles"] if e["args"]["loop"] == where(dot_loop, "for i in range")]
    assert len(first) >= 1
    c = first[0]
    assert c["args"]["cache"] == "miss: compiled", c
    assert c["args"]["ir_bytes"] > 0 and c["args"]["mode"] in ("whole", "partial"), c
    assert "x: float64[1d]" in c["args"]["signature"], c
    for step in ("generate_ms", "optimise_ms", "codegen_ms"):
        assert c["args"][step] is not None and c["args"][step] >= 0, c
    assert c["dur"] >= c["args"]["optimise_ms"] * 1000 * 0.99
    n = out[1]["native"]
    assert n["compiled"] >= 1 and n["compile_ns"] > 0
    assert " compiled in " in n["text"] and "cache: " in n["text"], n["text"]
    assert f"loop {where(dot_loop, 'for i in range')}: " in n["text"], n["text"]
    assert " compiled " in n["text"].split(where(dot_loop, "for i in range"))[1], n["text"]
    # The 2-thread function is another tree: its code comes from this process.
    again = [e for e in out[2]["compiles"] if e["args"]["loop"] == where(dot_loop, "for i in range")]
    assert again and all(e["args"]["cache"] != "miss: compiled" for e in again), again


def test_traced_native_code_compile_then_cache_load(tmp_path):
    # Two processes on one cache: the first compiles, the second loads.
    out, _ = run(**PATHS["native"], TESSERA_CACHE_DIR=str(tmp_path))
    check_values(out)
    check_loop_runs(out)
    check_compiles(out)
    check_translations(out)
    assert out[1]["native"]["compiled"] >= 1
    out, _ = run(**PATHS["native"], TESSERA_CACHE_DIR=str(tmp_path))
    check_values(out)
    check_loop_runs(out)
    compiles = out[1]["compiles"]
    assert compiles, "no cache-load event"
    assert all(e["args"]["cache"] == "hit: disk cache" for e in compiles), compiles
    assert all(e["args"]["optimise_ms"] is None for e in compiles), compiles
    assert out[1]["native"]["disk_loads"] >= 1 and out[1]["native"]["compiled"] == 0


def test_without_native_code_no_compile_event_and_same_values():
    out_i, _ = run(**PATHS["interpreter"])
    check_values(out_i)
    check_translations(out_i)
    out_g, _ = run(**PATHS["general"])
    check_values(out_g, fast=False)
    for threads in (1, 2):
        assert out_i[threads]["compiles"] == []
        runs = out_i[threads]["loops"]
        assert len([e for e in runs if e["args"]["loop"] == where(dot_loop, "for i in range")]) == CALLS
        assert all(e["args"]["kind"] == "interpreter" for e in runs)
        # TESSERA_FAST_LOOPS=0: no fast loop at all, every turn on the general evaluation.
        assert out_g[threads]["loops"] == [] and out_g[threads]["compiles"] == []
        assert out_g[threads]["traced"] == out_i[threads]["traced"]
