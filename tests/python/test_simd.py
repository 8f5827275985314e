"""The elementwise and fused kernels at every SIMD level this CPU runs
(kernels/simd.hpp: baseline SSE2, AVX2, AVX-512, chosen at run time).

Every level must give the same bits: checked against NumPy (bit for bit for
the IEEE operations, + - * / sqrt, where NumPy is exact too), against the SSE2
level for every operation, and for fused expressions against the unfused
operations (TESSERA_FUSION=0) at every level. Lengths cover the vector loops'
remainders, operands cover broadcasting and buffers reused in place."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tessera

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = ["sse2", "avx2", "avx512"]
LEVELS = ORDER[: ORDER.index(tessera.simd_best()) + 1]


@pytest.fixture
def restore_level():
    before = tessera.simd_level()
    yield
    tessera.set_simd_level(before)


def _values(n, dtype, seed):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, -1e308, 2.5, -3.5])
    v[: min(n, len(special))] = special[: min(n, len(special))]
    rng.shuffle(v)
    return v.astype(dtype)


def _bits(x):
    x = np.ascontiguousarray(np.asarray(x))
    return x.dtype.str, x.shape, x.tobytes()


BINARY_EXACT = ["add", "subtract", "multiply", "divide"]
BINARY_OTHER = ["maximum", "minimum", "fmax", "fmin", "floor_divide", "mod", "power",
                "copysign", "hypot", "arctan2", "less", "greater_equal", "equal"]
UNARY_EXACT = ["sqrt", "negative", "abs", "square"]
UNARY_OTHER = ["floor", "ceil", "rint", "trunc", "sign", "reciprocal", "exp", "log", "isnan",
               "isfinite", "tanh"]
LENGTHS = [1, 3, 7, 8, 15, 16, 17, 31, 33, 63, 65, 1000, 1003]


# NumPy's own transcendental loops (SVML on AVX-512 machines) may differ from
# glibc's by an ulp: these are compared by value; the others bit for bit or
# exactly (NaN where NumPy has NaN).
TRANSCENDENTAL = {"power", "hypot", "arctan2", "exp", "log", "tanh"}


def _compare(op, got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if op in BINARY_EXACT or op in UNARY_EXACT:
        assert _bits(got) == _bits(want), what
    elif op in TRANSCENDENTAL:
        rtol = 4 * np.finfo(want.dtype).eps
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _call(name, *args):
    return np.asarray(tessera.call_primitive(name, list(args)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_kernels_match_numpy_at_every_level(dtype, restore_level):
    with np.errstate(all="ignore"):
        for level in LEVELS:
            tessera.set_simd_level(level)
            assert tessera.simd_level() == level
            for n in LENGTHS:
                x, y = _values(n, dtype, n), _values(n, dtype, n + 1)
                for op in BINARY_EXACT + BINARY_OTHER:
                    for a, b in ((x, y), (x, y[:1].reshape(())), (x[:1].reshape(()), y)):
                        got, want = _call(op, a, b), getattr(np, op)(a, b)
                        _compare(op, got, want, f"{level} {op} {n}")
                for op in UNARY_EXACT + UNARY_OTHER:
                    _compare(op, _call(op, x), getattr(np, op)(x), f"{level} {op} {n}")


def test_every_level_gives_the_bits_of_sse2(restore_level):
    """All operations, float64/float32/int64/bool, against the baseline level."""
    cases = []
    for n in LENGTHS:
        for dtype in (np.float64, np.float32):
            cases.append((_values(n, dtype, 3 * n), _values(n, dtype, 3 * n + 1)))
        rng = np.random.default_rng(n)
        ints = rng.integers(-2**62, 2**62, n)
        cases.append((ints, rng.integers(1, 1000, n) * rng.choice([-1, 1], n)))
        cases.append((rng.random(n) < 0.5, rng.random(n) < 0.5))
    ops = BINARY_EXACT + BINARY_OTHER
    runs = {}
    with np.errstate(all="ignore"):
        for level in LEVELS:
            tessera.set_simd_level(level)
            out = []
            for x, y in cases:
                for op in ops:
                    if x.dtype == bool and op in ("subtract", "floor_divide", "mod", "power"):
                        continue
                    b = np.abs(y) % 7 if x.dtype.kind == "i" and op == "power" else y
                    out.append(_bits(_call(op, x, b)))
                for op in UNARY_EXACT + UNARY_OTHER:
                    if x.dtype == bool and op in ("negative", "sign", "reciprocal"):
                        continue
                    if x.dtype.kind in "ib" and op in ("reciprocal", "tanh", "exp", "log"):
                        continue
                    out.append(_bits(_call(op, x)))
            runs[level] = out
    for level in LEVELS[1:]:
        assert runs[level] == runs["sse2"], level


def test_nan_and_nan_give_the_first_operand_at_every_level(restore_level):
    """x + y and x * y of two NaNs of different signs: x's NaN, in every loop
    (contiguous, scalar operand, strided), fused or not, at every level."""

    def fused(x, y):
        return (x + y) * (x * y) - y

    g = tessera.jit(fused)
    for dtype in (np.float64, np.float32):
        neg = -dtype(np.nan)
        x = np.array([neg, np.nan] * 40, dtype=dtype)
        y = np.array([np.nan, neg] * 40, dtype=dtype)
        for level in LEVELS:
            tessera.set_simd_level(level)
            for op in ("add", "multiply"):
                for a, b in ((x, y), (x, y[:1].reshape(())), (x[::2], y[1::2])):
                    got = _call(op, a, b)
                    assert np.array_equal(np.signbit(got), np.signbit(np.broadcast_to(a, got.shape))), \
                        (level, op, dtype)
            assert np.array_equal(np.signbit(np.asarray(g(x, y))), np.signbit(x)), (level, dtype)


def test_buffers_reused_in_place_at_every_level(restore_level):
    """x = x + y in a loop reuses x's buffer (its only owner): the results are NumPy's."""

    def f(x, y, c, steps):
        for _ in range(steps):
            x = x * c + y
            x = np.sqrt(np.abs(x))
            x = x - y
        return x

    g = tessera.jit(f)
    for level in LEVELS:
        tessera.set_simd_level(level)
        for n in (5, 1000, 1003):
            x, y = _values(n, np.float64, 1), np.abs(_values(n, np.float64, 2))
            x, y = np.nan_to_num(x), np.nan_to_num(y)
            with np.errstate(all="ignore"):
                want = f(x.copy(), y, 0.75, 20)
            xc = x.copy()
            got = g(xc, y, 0.75, 20)
            assert _bits(got) == _bits(want), (level, n)
            assert _bits(xc) == _bits(x), "the caller's array was written"


def _fusion_script(levels):
    return textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {HERE!r})
        import numpy as np
        import tessera
        import test_fusion as t
        from jit_check import numpy_fn
        out = {{}}
        for level in {levels!r}:
            tessera.set_simd_level(level)
            rows = []
            with np.errstate(all="ignore"):
                for expr, params, build in t.EXPRESSIONS:
                    r = np.asarray(tessera.jit(numpy_fn(expr, params))(*build(*t._inputs())))
                    rows.append([str(r.dtype), list(r.shape), r.tobytes().hex()])
            out[level] = rows
        print(json.dumps(out))
    """)


def test_fused_expressions_at_every_level_are_the_unfused_bits():
    """Fused and unfused results are the same bytes at every level, NaNs
    included (+ and * of two NaNs return the first explicitly: which one the
    instruction returns depends on an operand order compilers choose)."""
    runs = {}
    for flag in ("0", "1"):
        env = dict(os.environ, TESSERA_FUSION=flag)
        r = subprocess.run([sys.executable, "-c", _fusion_script(LEVELS)], env=env,
                           capture_output=True, text=True, timeout=300, cwd=HERE)
        assert r.returncode == 0, r.stderr
        runs[flag] = json.loads(r.stdout.strip().splitlines()[-1])
    sys.path.insert(0, HERE)
    import test_fusion

    for level in LEVELS:
        for (expr, _, _), want, got, base in zip(test_fusion.EXPRESSIONS, runs["0"][level],
                                                 runs["1"][level], runs["0"]["sse2"]):
            assert got == want, f"{level}: fused {expr} {got[:2]} differs from unfused {want[:2]}"
            assert got == base, f"{level} differs from sse2: {expr}"


def _run(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=120)


def test_the_environment_chooses_the_level():
    code = ("import numpy as np, tessera; tessera.call_primitive('add', [np.ones(3), np.ones(3)]);"
            " print(tessera.simd_level(), tessera.simd_best())")
    r = _run(code, TESSERA_SIMD="sse2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["sse2", LEVELS[-1]]
    r = _run(code, TESSERA_SIMD="")
    assert r.stdout.split() == [LEVELS[-1]] * 2


def test_an_unknown_level_is_an_error_naming_it(restore_level):
    r = _run("import numpy as np, tessera; tessera.call_primitive('add', [np.ones(3), 1.0])",
             TESSERA_SIMD="avx9")
    assert r.returncode != 0
    assert "ValueError: [TESSERA_SIMD] unknown SIMD level 'avx9'" in r.stderr
    assert "expected sse2, avx2 or avx512" in r.stderr
    with pytest.raises(ValueError, match=r"\[set_simd_level\] unknown SIMD level 'neon'"):
        tessera.set_simd_level("neon")
    if LEVELS[-1] != "avx512":
        with pytest.raises(ValueError, match="this CPU does not run avx512"):
            tessera.set_simd_level("avx512")


def test_the_command_line_says_which_level_it_uses():
    exe = os.path.join(os.path.dirname(tessera.__file__), "bin", "tessera")
    build = os.path.join(HERE, "..", "..", "build", "tessera")
    exe = exe if os.path.exists(exe) else build
    if not os.path.exists(exe):
        pytest.skip("no tessera executable built beside this checkout")
    r = subprocess.run([exe, "--version"], env=dict(os.environ, TESSERA_SIMD="sse2"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"simd: sse2 (widest on this CPU: {LEVELS[-1]})" in r.stdout
