"""Complex numbers in scalar loops (tessera/lang/fastloop_complex.cpp, docs/runtime.md
"Complex numbers in loops"): `complex(x, y)`, elements of complex128 arrays and complex
variables are kept as their two parts, and + - * /, ** of a small integer, -z,
z.conjugate(), abs(), .real, .imag, == and != run on the parts with CPython's formulas
for Python's complex and NumPy's for np.complex128, so the loops run as native code. Each
loop gives exactly what Python/NumPy give (the bits of every part, the kinds: complex
against np.complex128, float against np.float64), including infinities, NaN and -0.0,
and raises where they raise (ZeroDivisionError, OverflowError); the native code, the
register interpreter and the general evaluation print the same at 1 and 2 threads, and
the loops that must compile do."""

import math
import os
import sys

import numpy as np
import pytest
from jit_check import assert_loops_end_natively, every_path_prints_the_same

import tessera

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
from unseen_kernels import newton_fractal  # noqa: E402 - bench/, on the path above


def mandelbrot_complex(w, h, max_iter):
    # The canonical Numba example, on Python's complex.
    out = np.zeros((h, w), dtype=np.int64)
    for i in range(h):
        for j in range(w):
            c = complex(-2.0 + 2.5 * j / w, -1.25 + 2.5 * i / h)
            z = 0j
            n = 0
            while abs(z) <= 2.0 and n < max_iter:
                z = z * z + c
                n += 1
            out[i, j] = n
    return out


def arithmetic(xs, ys):
    # Every operation on Python's complex, mixed with ints, floats and bools;
    # the results' parts and kinds are compared bit for bit.
    acc = complex(0.0, 0.0)
    parts = 0.0
    same = 0
    for k in range(len(xs)):
        z = complex(xs[k], ys[k])
        w = complex(ys[k], -xs[k] * 0.5)
        a = z + w - 2 + 1.5 * z - True
        b = z * w * 3 - z / (w + 0.25j)
        c = (z ** 3 - z ** 2 + z ** -2) / 7.0
        d = -z.conjugate() + 2.0 / z
        acc = acc + a + b + c + d
        parts += abs(a) + b.real - c.imag + abs(-d)
        if z == w or a != a or d == 2:
            same += 1
    return acc, parts, same, acc.real, abs(acc)


def numpy_complex(zs, xs):
    # np.complex128 elements and their mixtures: NumPy's division, kinds.
    acc = zs[0] * 0
    total = 0.0
    for k in range(len(zs)):
        z = zs[k]
        y = z * xs[k] + 1j - z / (zs[(k + 1) % len(zs)] + 0.5) + complex(1.0, 2.0) * z
        acc = acc + y
        total = total + abs(y) + y.imag
    return acc, total, abs(acc), acc.real


def specials(n):
    # Infinities, NaN and signed zeros through the formulas.
    vals = [0.0, -0.0, 1.0, -2.5, math.inf, -math.inf, math.nan, 1e308, 1e-320]
    out = []
    for i in range(n):
        for j in range(len(vals)):
            z = complex(vals[i % len(vals)], vals[j])
            w = complex(vals[j], vals[(i + j) % len(vals)])
            p = z * w
            q = z + w
            r = z - 0.0
            out.append(p.real)
            out.append(p.imag)
            out.append(q.imag)
            out.append(r.imag)
            if w != 0:
                s = z / w
                out.append(s.real)
                out.append(s.imag)
    return out


def carried(z, n):
    # A complex variable of the frame carried through the loop and given back.
    for i in range(n):
        z = z * complex(0.5, 0.5) + i
    return z


def divide_by_zero(n):
    z = complex(1.0, 1.0)
    for i in range(n):
        z = z / complex(n - 5 - i, 0.0)
    return z


def power_overflow(n):
    # (1e150)**3 is inf: Python's OverflowError (a NaN part is not one).
    s = complex(0.0, 0.0)
    for i in range(n):
        z = complex(10.0 ** (50 * i), 1.0)
        s = s + z ** 3
    return s


def whole_use(n):
    # A complex value given to a list: the loop keeps complex numbers as objects.
    out = []
    for i in range(n):
        out.append(complex(i, -i) * 2)
    return out


def np_power_stays_objects(zs):
    # ** of np.complex128 is not lowered (NumPy's algorithm): the same answer.
    s = zs[0] * 0
    for k in range(len(zs)):
        s = s + zs[k] ** 2
    return s


def inline_helper(xs):
    # A helper called inline computing on complex numbers, its result complex.
    def rot(z, k):
        return z * complex(math.cos(k), math.sin(k))

    s = 0j
    for i in range(len(xs)):
        s = s + rot(complex(xs[i], 1.0), 0.1 * i)
    return s


def escape_counts(cs):
    # A while loop whose condition is on complex numbers; the counts only.
    out = np.zeros(len(cs), dtype=np.int64)
    for k in range(len(cs)):
        z = 0j
        n = 0
        while abs(z) < 2 and n < 60:
            z = z * z + cs[k]
            n += 1
        out[k] = n
    return out


def prange_abs(xs):
    # A prange loop over complex values (its abs() may bail: run as range).
    out = np.empty(len(xs))
    for i in tessera.prange(len(xs)):
        z = complex(xs[i], 0.5)
        for _ in range(10):
            z = z * z * 0.5 + 0.1j
        out[i] = abs(z)
    return out


def across_checkpoints(n):
    # Past the native code's checkpoints: the parts go back and on.
    z = complex(0.0, 0.0)
    for i in range(n):
        z = z * 0.999 + complex(1.0, -1.0)
    return z


def python_then_numpy(cs, n):
    # 0j, then NumPy's complex128 once an element is added: the kind given
    # back is the last turn's (Python's when the loop does not run).
    z = 0j
    for k in range(n):
        z = z * 0.5 + cs[k]
    return z


def kinds_by_turns(zs):
    # Python's complex and NumPy's by turns: objects, the same answer.
    z = zs[0]
    for k in range(len(zs)):
        z = complex(1.0, 2.0) if k % 2 else zs[k]
    return z


def float32_mix(a):
    # A float32 element with a Python complex is complex64 in NumPy: objects.
    s = 0j
    for i in range(len(a)):
        s = s + a[i] * (1 + 1j)
    return s


ZS = (np.linspace(-2, 3, 40) + 1j * np.cos(np.arange(40.0))).astype(np.complex128)
XS = np.linspace(-3.0, 4.0, 40)
YS = np.sin(np.arange(40.0)) * 5

CASES = [(mandelbrot_complex, (30, 20, 60)),
         (newton_fractal, (12, 30, 1e-6)),
         (arithmetic, (XS, YS)),
         (numpy_complex, (ZS, XS)),
         (specials, (9,)),
         (carried, (complex(1.0, -2.0), 40)),
         (carried, (np.complex128(1.0 - 2.0j), 40)),
         (divide_by_zero, (10,)),
         (power_overflow, (10,)),
         (whole_use, (20,)),
         (np_power_stays_objects, (ZS,)),
         (inline_helper, (np.linspace(0.0, 1.0, 50),)),
         (escape_counts, (ZS * 0.3,)),
         (prange_abs, (np.linspace(-1.0, 1.0, 3000),)),
         (across_checkpoints, (40000,)),
         (python_then_numpy, (ZS, 7)),
         (python_then_numpy, (ZS, 0)),
         (kinds_by_turns, (ZS[:5],)),
         (float32_mix, (np.arange(10, dtype=np.float32),))]

NATIVE = [mandelbrot_complex, newton_fractal, arithmetic, numpy_complex, specials]


def _bits(v):
    """Every number's kind and bits (NaN by its kind only: NumPy's NaNs differ in sign)."""
    if isinstance(v, (list, tuple)):
        return [type(v).__name__] + [_bits(x) for x in v]
    if isinstance(v, np.ndarray):
        return ["ndarray", str(v.dtype), v.shape, [_bits(x) for x in v.ravel().tolist()]]
    if isinstance(v, (complex, np.complexfloating)):
        return [type(v).__name__, _bits(float(v.real)), _bits(float(v.imag))]
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return [type(v).__name__, "nan" if math.isnan(f) else f.hex()]
    return [type(v).__name__, v]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("f, args", CASES,
                         ids=[f.__name__ + str(i) for i, (f, _) in enumerate(CASES)])
def test_bit_for_bit_with_python(f, args, threads):
    try:
        expected = f(*args)
    except Exception as e:  # noqa: BLE001 - the same exception is expected
        with pytest.raises(type(e)):
            tessera.jit(f, threads=threads)(*args)
        return
    got = tessera.jit(f, threads=threads)(*args)
    assert _bits(got) == _bits(expected), (got, expected)


def test_the_general_path_computes_pythons_and_numpys_complex_arithmetic():
    # Python's complex by CPython's formulas (a Python float from abs()),
    # np.complex128 by NumPy's scalar math: the bits, with no loop around.
    def f(a, b, c, d):
        z, w = complex(a, b), complex(c, d)
        nz, nw = np.complex128(z), np.complex128(w)
        return (z * w, z / w, z ** 3, z ** -2, abs(z), 2 / z, z + True, nz / nw, nz * 2.5,
                nz ** 3, abs(nz), nz - z)

    rng = np.random.default_rng(5)
    g = tessera.jit(f)
    for _ in range(200):
        args = [float(x) for x in rng.normal(size=4) * 10.0 ** rng.uniform(-3, 3, 4)]
        assert _bits(g(*args)) == _bits(f(*args)), args
    # Infinite and NaN parts, and the signs of zeros.
    for args in [(math.inf, 1.0, 2.0, -0.0), (-0.0, math.inf, math.nan, 1.0),
                 (1e308, 1e308, 0.5, 2.0), (-0.0, -0.0, 3.0, 0.0), (2.0, -3.0, -0.0, 5.0)]:
        with np.errstate(all="ignore"):
            try:
                expected = f(*args)
            except (ZeroDivisionError, OverflowError) as e:
                with pytest.raises(type(e)):
                    g(*args)
                continue
        assert _bits(g(*args)) == _bits(expected), args


@pytest.mark.filterwarnings("ignore")
def test_complex_arrays_divide_as_numpy():
    # NumPy's division loop, bit for bit (std::complex's division differed in
    # the last bits), a zero divisor's inf and nan included.
    rng = np.random.default_rng(8)
    a = (rng.normal(size=2000) + 1j * rng.normal(size=2000)) * 10.0 ** rng.uniform(-3, 3, 2000)
    b = (rng.normal(size=2000) + 1j * rng.normal(size=2000)) * 10.0 ** rng.uniform(-3, 3, 2000)
    b[:3] = [0j, complex(0.0, -0.0), complex(math.inf, 1.0)]

    def f(x, y):
        return x / y

    got = tessera.jit(f)(a, b)
    with np.errstate(all="ignore"):
        expected = a / b
    assert _bits(got) == _bits(expected)


def test_native_interpreter_and_general_print_the_same():
    native, log = every_path_prints_the_same(__name__)
    assert "ZeroDivisionError" in native and "OverflowError" in native
    assert_loops_end_natively(log, [mandelbrot_complex, arithmetic, numpy_complex, newton_fractal,
                                    inline_helper, escape_counts, across_checkpoints],
                              some=[specials])
