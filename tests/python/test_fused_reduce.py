"""Reductions of fused expressions (docs/runtime.md, "Fused expressions";
issue 31 item 2): `np.sum((a - b) ** 2, axis=1)` reduces the expression as
the fused pass computes it, without writing it as an array first.

Checked three ways, as test_fusion.py checks fused expressions: against NumPy
(values and dtypes, jit_check.check), bit for bit against the same programs
with fusion off (TESSERA_FUSION=0 in a subprocess, at 1 and 2 threads), and in
the counters (the fused reduction ran, the elementwise operations did not)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tessera
from jit_check import check, numpy_fn

HERE = os.path.dirname(os.path.abspath(__file__))


def _inputs():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((300, 70))
    b = rng.standard_normal((300, 70))
    # Long enough that a lane has several leaves of the reduction tree
    # (16,384 elements each) and they are computed in parallel (> 65,536).
    big = rng.standard_normal(200_003)
    s = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.25, 4.0, 1e300, -1e-300] * 30)
    return a, b, big, s


# (expression, parameters, argument builder): the builders take (a, b, big, s).
REDUCTIONS = [
    ("np.sum((a - b) ** 2)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.sum((a - b) ** 2, axis=1)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.sqrt(np.sum((a - b) ** 2, axis=-1))", "a, b", lambda a, b, big, s: (a, b)),
    ("((a * 0.5 + b) ** 2).sum(axis=1, keepdims=True)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.sum(a * b, axis=(0, 1))", "a, b", lambda a, b, big, s: (a, b)),
    ("np.mean((a - b) ** 2)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.mean(np.abs(a - b), axis=1)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.max(np.abs(a - b))", "a, b", lambda a, b, big, s: (a, b)),
    ("np.min(a * 2.0 - b, axis=1)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.amax(a + b, axis=-1, keepdims=True)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.prod(1.0 + a * 1e-3, axis=1)", "a", lambda a, b, big, s: (a,)),
    # Long lanes: leaves of the tree, in parallel.
    ("np.sum(np.sqrt(np.abs(x)) * 2.0 + 1.0)", "x", lambda a, b, big, s: (big,)),
    ("np.mean(x * x)", "x", lambda a, b, big, s: (big,)),
    ("np.max(x * -1.0 + 0.5)", "x", lambda a, b, big, s: (big,)),
    ("np.sum((x * 3.0)[::7] + 1.0)", "x", lambda a, b, big, s: (big,)),
    # Strided leaves and broadcasting.
    ("np.sum(a.T * 2.0 + b.T, axis=1)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.sum(a[:, ::3] - a[:, :1], axis=1)", "a", lambda a, b, big, s: (a,)),
    ("np.sum((a - a.mean(axis=0)) ** 2, axis=1)", "a", lambda a, b, big, s: (a,)),
    # Axes that are not trailing: the expression computed, then reduced.
    ("np.sum((a - b) ** 2, axis=0)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.max(a * b, axis=0)", "a, b", lambda a, b, big, s: (a, b)),
    # A dtype, float32, special values, integers, empty lanes.
    ("np.sum(a * 2.0 + b, dtype=np.float32)", "a, b", lambda a, b, big, s: (a, b)),
    ("np.sum(a * 0.1 + b * 3, axis=1)", "a, b",
     lambda a, b, big, s: (a.astype(np.float32), b.astype(np.float32))),
    ("np.mean(a * a + 1)", "a", lambda a, b, big, s: (a.astype(np.float32),)),
    ("np.sum(s * 2.0 + 1.0)", "s", lambda a, b, big, s: (s,)),
    ("np.max(s * 2.0 + 1.0)", "s", lambda a, b, big, s: (s,)),
    ("np.min(np.abs(s) - 1.0)", "s", lambda a, b, big, s: (s,)),
    ("np.sum(x * 3 + 1, axis=1)", "x", lambda a, b, big, s: (np.arange(60).reshape(6, 10),)),
    ("np.sum(x * 2.0 + 1.0, axis=1)", "x", lambda a, b, big, s: (np.zeros((4, 0)),)),
    ("np.sum(x * 2.0 + 1.0, axis=0)", "x", lambda a, b, big, s: (np.zeros((4, 0)),)),
]


@pytest.mark.parametrize("expr, params, build", REDUCTIONS, ids=[e[0][:50] for e in REDUCTIONS])
def test_fused_reductions_match_numpy(expr, params, build):
    args = build(*_inputs())
    # float32 sums: NumPy adds its buffered blocks of 8,192 in turn, tessera
    # by one pairwise tree (the bits are the unfused sum's: tested below).
    single = "float32" in expr or any(getattr(x, "dtype", None) == np.float32 for x in args)
    with np.errstate(all="ignore"):
        check(numpy_fn(expr, params), *args, rtol=2e-5 if single else 1e-12, atol=1e-300)


def _results_script(flag, threads):
    return textwrap.dedent(f"""
        import json, os, sys
        os.environ["TESSERA_FUSION"] = "{flag}"
        sys.path.insert(0, {HERE!r})
        import numpy as np
        import tessera
        import test_fused_reduce as t
        from jit_check import numpy_fn
        out = []
        with np.errstate(all="ignore"):
            for expr, params, build in t.REDUCTIONS:
                r = tessera.jit(numpy_fn(expr, params), threads={threads})(*build(*t._inputs()))
                r = np.asarray(r)
                out.append([str(r.dtype), list(r.shape), r.tobytes().hex()])
        print(json.dumps(out))
    """)


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_reductions_are_bitwise_those_of_the_unfused_ones(threads):
    runs = {}
    for flag in ("0", "1"):
        env = dict(os.environ, TESSERA_FUSION=flag)
        r = subprocess.run([sys.executable, "-c", _results_script(flag, threads)], env=env,
                           capture_output=True, text=True, timeout=300, cwd=HERE)
        assert r.returncode == 0, r.stderr
        runs[flag] = json.loads(r.stdout.strip().splitlines()[-1])
    for (expr, _, _), off, on in zip(REDUCTIONS, runs["0"], runs["1"]):
        assert on == off, f"{expr}: fused {on[:2]} differs from unfused {off[:2]}"


def test_the_reduction_runs_as_one_call():
    src = numpy_fn("np.sum((a - b) ** 2, axis=1)", "a, b")
    f = tessera.jit(src, performance=True)
    a, b, _, _ = _inputs()
    f(a, b)
    ev = {r["name"]: r["evaluations"] for r in f.counters(parsed=True)}
    assert ev.get("sum_fused(subtract+power)") == 1, ev
    assert ev.get("subtract") == 0 and ev.get("sum") == 0, ev


def test_reduction_errors_name_the_reduction():
    # NumPy's AxisError is an IndexError (and a ValueError); tessera's the IndexError,
    # naming the reduction and the user's line
    with pytest.raises(IndexError, match=r"\[sum\] axis 2 is out of bounds.*\(at gen_\w+\.py:\d+\)"):
        tessera.jit(numpy_fn("np.sum(a * 2.0 + 1.0, axis=2)", "a"))(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"zero-size array"):
        tessera.jit(numpy_fn("np.max(a * 2.0 + 1.0)", "a"))(np.ones((0,)))
