"""Fused elementwise expressions (docs/runtime.md, "Fused expressions").

A nested expression of elementwise arithmetic runs as one fused call. These
tests check it three ways: against NumPy (values, dtypes and every argument
afterwards, through jit_check.check), bit for bit against the same programs
with fusion off (TESSERA_FUSION=0 in a subprocess), and in the counters (the
fused call ran, for arrays; the unfused operations ran, for scalars)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tessera
from jit_check import check, numpy_body, numpy_fn

HERE = os.path.dirname(os.path.abspath(__file__))


def _inputs():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((40, 50))
    b = rng.standard_normal((40, 50))
    # Special values where the float functions and the power shortcuts differ
    # from the general formulas: signed zeros, infinities, NaN.
    s = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.25, 4.0, 1e300, -1e-300] * 60)
    return a, b, s


# (expression, parameters, argument builder): the builders take (a, b, s).
EXPRESSIONS = [
    # Stencils through views: slices, steps, a transposed view.
    ("0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1] + a[:-2, 1:-1])", "a",
     lambda a, b, s: (a,)),
    ("a[::2, ::3] * 2.0 - b[1::2, ::3] / 3.0 + 1", "a, b", lambda a, b, s: (a, b)),
    ("a.T * 3.0 + b.T ** 2", "a, b", lambda a, b, s: (a, b)),
    ("(a - a.mean(axis=0)) / (a.std(axis=0) + 1e-8)", "a", lambda a, b, s: (a,)),
    # Broadcasting: a column against a row, a 0-d array, size-1 arrays.
    ("np.minimum(a, a[:, 3, np.newaxis] + a[np.newaxis, 3, :50])", "a", lambda a, b, s: (a,)),
    ("a[:, :1] * b[:1, :] + a[:, :1] - b[:1, :]", "a, b", lambda a, b, s: (a, b)),
    ("a * np.float64(2.5) + b.sum() * a", "a, b", lambda a, b, s: (a, b)),
    ("x * y + x", "x, y", lambda a, b, s: (a, np.array([[3.0]]))),
    # Every fusable unary and binary operation on special values.
    ("np.sqrt(np.abs(s)) + np.exp(-np.abs(s)) * np.sign(s) - np.floor(s) + np.ceil(s) * np.rint(s)",
     "s", lambda a, b, s: (s,)),
    ("np.trunc(s) + np.tanh(s) - np.arctan(s) * np.square(s) + np.reciprocal(s) - np.log1p(np.abs(s))",
     "s", lambda a, b, s: (s,)),
    ("np.maximum(s, -s * 0.5) + np.minimum(s, 1.0) - np.fmax(s, 2.0) + np.fmin(-s, s)", "s",
     lambda a, b, s: (s,)),
    ("np.hypot(s, 3.0) + np.arctan2(s, 2.0) + np.copysign(1.5, s) - s // 0.7 + s % 0.7", "s",
     lambda a, b, s: (s,)),
    ("np.deg2rad(s) * 2 + np.rad2deg(s) / 3 + -s + +s", "s", lambda a, b, s: (s,)),
    # power: the shortcuts (2, 3, 0.5, 1, -1) and the general pow.
    ("s ** 2 + s ** 3 - s ** 0.5 + s ** 1 + s ** -1 + np.abs(s) ** 1.7", "s",
     lambda a, b, s: (s,)),
    ("(s * 1.0) ** e + s", "s, e", lambda a, b, s: (s, np.array([0.5]))),
    ("(s * 1.0) ** (e * 1.0) + s", "s, e", lambda a, b, s: (s, np.array([2.0]))),
    # float32 stays float32 with Python scalars (weak); a float64 array promotes.
    ("a * 0.1 + b * 3 - a / 7", "a, b",
     lambda a, b, s: (a.astype(np.float32), b.astype(np.float32))),
    ("a * 0.1 + b * 3 - a / 7", "a, b", lambda a, b, s: (a.astype(np.float32), b)),
    ("np.sqrt(a * a + b * b) + 1", "a, b",
     lambda a, b, s: (a.astype(np.float32), b.astype(np.float32))),
    # Integers, bools and mixed dtypes: the operations one at a time.
    ("x * 3 + y // 2 - x % 5", "x, y",
     lambda a, b, s: (np.arange(-50, 50), np.arange(100, 0, -1))),
    ("x * 2.5 + y - 1", "x, y", lambda a, b, s: (np.arange(100), np.linspace(0, 1, 100))),
    ("x * 2 + y * 3", "x, y",
     lambda a, b, s: (np.arange(100, dtype=np.int8), np.arange(100, dtype=np.int8))),
    ("(x + y) * 1.5", "x, y", lambda a, b, s: (a > 0, b > 0)),
    ("np.sqrt(x * 1.0) + x", "x", lambda a, b, s: (np.arange(100, dtype=np.uint16),)),
    ("(z * 2 + 1j) * z", "z", lambda a, b, s: (a[0] + 1j * b[0],)),
    # Python numbers only, and lists: Python's rules.
    ("(x * 2 + 1) / 4 - x ** 2", "x", lambda a, b, s: (7,)),
    ("(x + [1, 2]) * 2", "x", lambda a, b, s: ([3],)),
    ("np.sqrt(x + [1.0, 2.0]) * 2", "x", lambda a, b, s: (np.array([3.0, 4.0]),)),
    # Empty and one-element arrays.
    ("x * 2 + x / 3", "x", lambda a, b, s: (np.zeros((0, 3)),)),
    ("x * 2 + x / 3", "x", lambda a, b, s: (np.array([1.5]),)),
    ("x * 2 + x / 3", "x", lambda a, b, s: (np.float64(1.5) * np.ones(()),)),
]


@pytest.mark.parametrize("expr, params, build", EXPRESSIONS, ids=[e[0][:50] for e in EXPRESSIONS])
def test_fused_expressions_match_numpy(expr, params, build):
    with np.errstate(all="ignore"):
        check(numpy_fn(expr, params), *build(*_inputs()))


def _results_script(flag):
    """A script that runs EXPRESSIONS through tessera.jit and prints the
    results' bytes (hex), dtypes and shapes as JSON."""
    return textwrap.dedent(f"""
        import json, os, sys
        os.environ["TESSERA_FUSION"] = "{flag}"
        sys.path.insert(0, {HERE!r})
        import numpy as np
        import tessera
        import test_fusion as t
        from jit_check import numpy_fn
        out = []
        for expr, params, build in t.EXPRESSIONS:
            r = tessera.jit(numpy_fn(expr, params))(*build(*t._inputs()))
            r = np.asarray(r)
            out.append([str(r.dtype), list(r.shape), r.tobytes().hex()])
        print(json.dumps(out))
    """)


def test_fused_results_are_bitwise_those_of_the_unfused_operations():
    runs = {}
    for flag in ("0", "1"):
        env = dict(os.environ, TESSERA_FUSION=flag)
        r = subprocess.run([sys.executable, "-c", _results_script(flag)], env=env,
                           capture_output=True, text=True, timeout=300, cwd=HERE)
        assert r.returncode == 0, r.stderr
        runs[flag] = json.loads(r.stdout.strip().splitlines()[-1])
    for (expr, _, _), off, on in zip(EXPRESSIONS, runs["0"], runs["1"]):
        assert on == off, f"{expr}: fused {on[:2]} differs from unfused {off[:2]}"


def _evaluations(f):
    rows = f.counters(parsed=True)
    return {r["name"]: r["evaluations"] for r in rows}


def test_an_array_expression_runs_as_one_fused_call():
    src = numpy_fn("0.5 * (u[:-2] + u[2:]) - np.sqrt(np.abs(u[1:-1]))", "u")
    f = tessera.jit(src, performance=True)
    u = np.linspace(-1, 1, 10_000)
    check(src, u)
    f(u)
    ev = _evaluations(f)
    assert ev.get("fused(add+multiply+absolute+sqrt+subtract)") == 1, ev
    assert ev.get("add") == 0 and ev.get("sqrt") == 0, ev


def test_scalar_operands_use_the_unfused_operations():
    src = numpy_fn("x * 3 + 1", "x")
    f = tessera.jit(src, performance=True)
    assert f(2) == 7 and isinstance(f(2), int)
    ev = _evaluations(f)
    assert ev.get("multiply") == 1 and ev.get("add") == 1, ev
    assert ev.get("fused(multiply+add)") == 0, ev


def test_errors_name_the_operation_that_fails():
    # The add does not broadcast: its position (column) is reported, as unfused.
    src = numpy_fn("(x + y) * 2.0 - 1.0", "x, y")
    with pytest.raises(ValueError, match=r"\[add\].*could not be broadcast.*\(at gen_\w+\.py:5\)") as e:
        tessera.jit(src)(np.ones(3), np.ones(4))
    assert "shapes (3,) and (4,)" in str(e.value)
    src = numpy_fn("(x * 2.0 + y) - 1.0", "x, y")
    with pytest.raises(ValueError, match=r"\[add\]"):
        tessera.jit(src)(np.ones((2, 3)), np.ones((3, 2)))


def test_a_leaf_that_writes_is_not_fused_past():
    # x * 2 is computed before g writes x (Python's order): the call is a
    # leaf that writes, so the expression is not fused across it.
    src = numpy_body("def g(v):\n    v[0] = 100.0\n    return v.sum()\nreturn x * 2 + g(x)", "x")
    check(src, np.arange(5.0))


def test_random_leaves_draw_in_order():
    src = numpy_body("np.random.seed(3)\nreturn np.random.rand(1000) * 2 + np.random.rand(1000) ** 2",
                     "")
    f = tessera.jit(src)
    r1, r2 = f(), f()
    np.testing.assert_array_equal(r1, r2)
    assert r1.shape == (1000,) and 0 <= r1.min() and r1.max() <= 3


def test_long_sums_fuse_in_pieces():
    terms = " + ".join(f"x * {k}.0" for k in range(200))
    check(numpy_fn(terms, "x"), np.linspace(0, 1, 5000))


def test_fusion_in_loops_and_in_place_updates():
    body = ("for _ in range(20):\n"
            "    u[1:-1] = u[1:-1] + 0.1 * (u[:-2] - 2 * u[1:-1] + u[2:])\n"
            "v = u * 1.0\n"
            "v += 0.5 * v ** 2\n"
            "return v")
    check(numpy_body(body, "u"), np.sin(np.linspace(0, 3, 3000)))


def test_scalar_loop_with_fused_expressions():
    body = ("n = 0\nzr = 0.0\nzi = 0.0\n"
            "while n < 50 and zr * zr + zi * zi <= 4.0:\n"
            "    zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci\n"
            "    n += 1\n"
            "return n, zr * zr + zi * zi")
    for c in ((-0.5, 0.5), (0.3, 0.6), (-1.0, 0.0)):
        check(numpy_body(body, "cr, ci"), *c)


# Single operations and dot on strided views read the view in place (no
# packed copy); the result is a new array that writes do not share.
VIEW_CASES = [
    ("x[::-1] * 2.0", "x", lambda: (np.linspace(-3, 3, 1001),)),
    ("np.sqrt(np.abs(x[:, 1]))", "x", lambda: (np.arange(60.0).reshape(20, 3) - 30,)),
    ("x.T - 1.5", "x", lambda: (np.arange(12.0).reshape(3, 4),)),
    ("x[1::3, ::2] ** 2", "x", lambda: (np.arange(200.0).reshape(10, 20),)),
    ("x[:, 0] ** y[0]", "x, y", lambda: (np.arange(1.0, 41.0).reshape(20, 2), np.array([0.5]))),
    ("x[::2] / x[1::2]", "x", lambda: (np.arange(1.0, 101.0, dtype=np.float32),)),
    ("x[::2] + 1", "x", lambda: (np.arange(100),)),
    ("x[::2] * 1.5", "x", lambda: (np.arange(100, dtype=np.int8),)),
    ("-x[::3]", "x", lambda: (np.arange(30, dtype=np.uint8),)),
    ("x[::2] * 1j + x[1::2]", "x", lambda: (np.arange(20.0),)),
    ("np.abs(z[::2])", "z", lambda: (np.arange(10.0) + 1j * np.arange(10.0)[::-1],)),
    ("x[::2] > x[1::2]", "x", lambda: (np.sin(np.arange(100.0)),)),
    ("np.dot(q[:, 1], q[:, 2])", "q", lambda: (np.random.default_rng(1).random((500, 4)),)),
    ("np.dot(q[::-1, 0], q[:, 3]) * q[:, 1]", "q",
     lambda: (np.random.default_rng(2).random((300, 4)),)),
    ("np.dot(q[:, 1], q[:, 2])", "q", lambda: (np.arange(40).reshape(10, 4),)),
    ("np.dot(q[:, 1], q[:, 2])", "q", lambda: (np.arange(40, dtype=np.float32).reshape(10, 4),)),
    ("np.dot(q.T, q[:, 1])", "q", lambda: (np.random.default_rng(3).random((30, 4)),)),
    ("np.dot(q[:, 1], q[:3, 2])", "q", lambda: (np.ones((10, 4)),)),
]


@pytest.mark.parametrize("expr, params, build", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_operations_on_views_match_numpy(expr, params, build):
    check(numpy_fn(expr, params), *build())


def test_a_result_computed_from_a_view_is_not_the_view():
    body = "y = x[::2] * 1.0\ny[0] = 99.0\nz = np.sqrt(x[1::2])\nz[1] = -1.0\nreturn y, z, x"
    check(numpy_body(body, "x"), np.arange(1.0, 11.0))


# x OP= y straight into x's buffer (float x, y of its dtype or a Python number,
# no overlap), and the general way for everything else.
INPLACE_CASES = [
    ("x -= y\nreturn x", "x, y", lambda: (np.linspace(0, 1, 1000), np.linspace(1, 2, 1000))),
    ("x += 0.1\nx *= 3\nx /= 7\nx **= 2\nreturn x", "x",
     lambda: (np.linspace(0, 1, 999, dtype=np.float32),)),
    ("x *= y[:, None]\nreturn x", "x, y", lambda: (np.ones((30, 40)), np.arange(30.0))),
    ("x[1:] += x[:-1]\nreturn x", "x", lambda: (np.arange(100.0),)),
    ("x += x\nx -= x[::-1]\nreturn x", "x", lambda: (np.arange(100.0),)),
    ("for t in range(4):\n    h[t + 1] += h[t] * 0.5\nreturn h", "h",  # rows of one buffer
     lambda: (np.arange(50.0).reshape(5, 10),)),
    ("x += y\nreturn x", "x, y", lambda: (np.linspace(0, 1, 100, dtype=np.float32),
                                          np.linspace(0, 1e-9, 100))),
    ("x.T[...] += 1\nv = x.T\nv += 2\nreturn x", "x", lambda: (np.zeros((5, 7)),)),
    ("x //= 0.3\nx %= 0.7\nreturn x", "x", lambda: (np.linspace(-3, 3, 500),)),
    ("x += y\nreturn x", "x, y", lambda: (np.ones(4), np.ones(5))),
    ("x += 1.5\nreturn x", "x", lambda: (np.arange(10),)),
    ("for _ in range(3):\n    u[1:-1, 1:-1] += 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] - 2 * u[1:-1, 1:-1])\n"
     "return u", "u", lambda: (np.random.default_rng(5).random((40, 30)),)),
    ("v = x[::2]\nv *= y\nx[1::2] -= 0.5\nreturn x", "x, y",
     lambda: (np.arange(20, dtype=np.float32), np.arange(10, dtype=np.float32))),
    ("x[:, 1] -= x[:, 0]\nx.T[0] /= 3\nreturn x", "x", lambda: (np.arange(12.0).reshape(4, 3),)),
    ("x -= y\nreturn x", "x, y", lambda: (np.zeros((3, 4)), np.ones((2, 3, 4)))),
]


@pytest.mark.parametrize("body, params, build", INPLACE_CASES, ids=[c[0] for c in INPLACE_CASES])
def test_in_place_operators_match_numpy(body, params, build):
    check(numpy_body(body, params), *build())


# x[indices] = fused expression: written straight into the selection when it
# is a float view of x's dtype that no leaf overlaps; assigned by setitem
# otherwise (overlap, casts, masks, broadcasting ranks, errors).
SETITEM_CASES = [
    ("b[1:-1] = (a[:-2] + a[1:-1] + a[2:]) / 3.0\nreturn b", "a, b",
     lambda: (np.linspace(0, 1, 1000), np.zeros(1000))),
    ("a[1:-1] = (a[:-2] + a[2:]) * 0.5\nreturn a", "a", lambda: (np.sin(np.arange(500.0)),)),
    ("x[::2] = x[1::2] * 2 + 1\nreturn x", "x", lambda: (np.arange(100.0),)),
    ("for t in range(9):\n    h[t + 1] = h[t] * (1 + r)\nreturn h", "h, r",
     lambda: (np.ones((10, 300)), np.linspace(0, 0.1, 300))),
    ("x[:, 1:] = y[None, :] * 2 + 1\nreturn x", "x, y", lambda: (np.zeros((4, 6)), np.arange(5.0))),
    ("x[0] = y * 2 + 1\nreturn x", "x, y", lambda: (np.zeros((3, 5)), np.ones((1, 5)))),
    ("x[1:] = y[1:] * 2 + 1\nreturn x", "x, y",
     lambda: (np.zeros(10, dtype=np.float32), np.linspace(0, 1, 10))),
    ("x[1:] = y[1:] * 2.5 + 1\nreturn x", "x, y", lambda: (np.zeros(10, dtype=np.int64),
                                                          np.linspace(0, 3, 10))),
    ("x[y > 0.5] = y[y > 0.5] * 2 + 1\nreturn x", "x, y", lambda: (np.zeros(10), np.linspace(0, 1, 10))),
    ("x[..., 2] = y * y - 1\nx[1, 2] = y[0] * 2 + 3\nreturn x", "x, y",
     lambda: (np.zeros((3, 4)), np.arange(3.0))),
    ("x[1:] = y * 2 + 1\nreturn x", "x, y", lambda: (np.zeros(10), np.ones(4))),
    ("v = x.T\nv[1:, :] = y.T * 3 - y.T\nreturn x", "x, y", lambda: (np.zeros((4, 5)), np.ones((5, 3)))),
]


@pytest.mark.parametrize("body, params, build", SETITEM_CASES, ids=[c[0] for c in SETITEM_CASES])
def test_assignments_of_fused_expressions_match_numpy(body, params, build):
    check(numpy_body(body, params), *build())


def test_an_assigned_expression_is_written_in_one_call():
    src = numpy_body("b[1:-1] = (a[:-2] + a[1:-1] + a[2:]) / 3.0\nreturn b", "a, b")
    f = tessera.jit(src, performance=True)
    a, b = np.linspace(0, 1, 10_000), np.zeros(10_000)
    f(a, b)
    ev = _evaluations(f)
    assert ev.get("setitem_fused(add+add+divide)") == 1, ev
    assert ev.get("setitem") == 0 and ev.get("add") == 0, ev
    np.testing.assert_allclose(b[1:-1], (a[:-2] + a[1:-1] + a[2:]) / 3.0, rtol=1e-15)


def _shared_scalar_int(a, bins):
    first = a.min() + 0.0
    last = a.max() + 0.0
    return (a - first) * (bins / (last - first))


def _shared_scalar_float(a, bins):
    first = a.min() * 1.0
    last = a.max() * 1.0
    return (a - first) * (bins / (last - first)) + first * first


def _shared_leaf_twice(a, s):
    t = s + 1.0
    return (a + t) * (t * t) - (a * a) / t


@pytest.mark.parametrize("f", [_shared_scalar_int, _shared_scalar_float, _shared_leaf_twice])
@pytest.mark.parametrize("dtype", ["int64", "float64", "float32"])
def test_a_value_read_by_several_steps(f, dtype):
    """A fused expression whose leaf (or small step) is read by several steps,
    some computed apart (scalars), some not fused (an integer array): each
    reader gets it (a step that moved it out crashed the process)."""
    a = (np.arange(-5, 9) * 3 % 11).astype(dtype)
    with np.errstate(all="ignore"):
        want = f(a, 5)
    got = tessera.jit(f)(a, 5)
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-15)
