"""NumPy's dtypes under ``tessera.jit``: int8 ... uint64, float16, complex64
and complex128 next to bool/int64/float32/float64 (tessera/core/dtype.hpp).

Every function runs as plain NumPy and through ``tessera.jit`` (jit_check.check)
and must give the same values, the same dtypes (NumPy 2's promotion: int8 +
uint8 -> int16, int64 + uint64 -> float64, weak Python scalars, strong NumPy
scalars), the same wrap-around, leave its argument arrays as NumPy does and
raise the same kind of error (OverflowError for out-of-range Python ints,
TypeError for same_kind casting). Tables run many cases in one test and
report every case that differs."""

import os
import warnings

import numpy as np
import pytest

import tessera
from jit_check import assert_same, check, numpy_body, numpy_fn

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
COMPLEX = ["complex64", "complex128"]
DTYPES = INTS + FLOATS + COMPLEX + ["bool"]
PAIRS = [(a, b) for a in DTYPES for b in DTYPES]


def np_name(dt: str) -> str:
    """The dtype as written in a NumPy function's source."""
    return "np.bool_" if dt == "bool" else f"np.{dt}"


def sample(dt, shape=(5,), seed=0, nonzero=False, positive=False):
    """Small values of `dt`: negative ones for signed and inexact types,
    none equal to zero with `nonzero` (divisors), all > 0 with `positive`."""
    rng = np.random.default_rng(seed)
    kind = np.dtype(dt).kind
    if kind == "b":
        v = rng.integers(0, 2, size=shape).astype(bool)
        return np.ones(shape, bool) if nonzero or positive else v
    if kind in "iu":
        lo = 1 if positive or (kind == "u" and nonzero) else (0 if kind == "u" else -9)
        v = rng.integers(lo, 10, size=shape)
        if nonzero:
            v[v == 0] = 3
        return v.astype(dt)
    re = rng.uniform(0.25, 4, size=shape) if positive else rng.uniform(-4, 4, size=shape)
    if kind == "c":
        im = rng.uniform(-4, 4, size=shape)
        return (re + 1j * im).astype(dt)
    return re.astype(dt)


# Known differences, each a regular expression over "test_id: case label"
# with the reason: a case matching one may differ from NumPy (the rules are
# broad, a case may agree for some dtypes; test_known_differences_remain
# keeps one reproducer of each C++ rule failing). TRANSLATOR marks the
# front end (python/tessera), being extended by another engineer: complex
# literals, complex(), .real/.imag/.conj(), dtype objects.
TRANSLATOR = "translator (python/tessera): not supported yet"
KNOWN = [
    (r"out=x|np\.cbrt", TRANSLATOR + ": np.add(out=), np.cbrt"),
    (r"repr\(x\)|str\(x|print|f'\{", "printing: NumPy's float16/float32/complex/uint64 "
     "layout and scalar text (str(np.int8(5)) gives '5.0')"),
    (r"2\*\*6[34]|2\*\*70", "Python ints >= 2**63 in jit source ([power] integer overflow)"),
    (r"UINT64 ", "uint64 values >= 2**63 refused by non-modular operations"),
    (r"np\.(int64|float64)\(|argument (int64|float64)",
     "np.int64/np.float64 scalars are weak (Python int/float), NumPy 2's are strong"),
    (r"^test_\w+\[(complex64|complex128)\]: (np\.(sign|maximum|minimum|clip|logical_\w+|"
     r"amin|argmax|argmin|median|ptp|nansum|cumprod|sort|unique|argsort|searchsorted|diff|"
     r"nonzero|count_nonzero|sum\(x, axis=0, dtype)|x\.sum\(dtype|x\.(max|min|std|var|prod|any|all|argmin)|"
     r"np\.prod|x [<>]|np\.max|np\.argmax|np\.where\(x [<>=]|x\[x != )",
     "complex: ordering (max/min/sort/<), prod, any/all/nonzero, std/var refused"),
    (r"^test_\w+\[(x [<>]|np\.greater|np\.maximum|np\.where\(x > 0)[^\]]*\]: .*complex",
     "complex: ordering refused"),
    (r"^test_creation\w*\[complex\d+\]: np\.(zeros|ones|full|arange|eye|identity|empty|linspace)",
     "creation kernels have no complex128 loop"),
    (r"^test_creation_with_dtype\[bool\]: np\.arange", "np.arange(dtype=bool) is no error"),
    (r"\[bool\]: (x // y|x % y|x \*\* 2|\+x|np\.floor_divide|np\.remainder|"
     r"np\.round|np\.conj)|bool bool$", "bool arithmetic: division by False is a ValueError "
     "(NumPy: 0 with a warning), b ** 2 is int64 (NumPy's square gives int8), +b is b "
     "(NumPy: an error)"),
    (r"= -2\.5", "x[1:] = -2.5 on uint8: OverflowError expected? (NumPy raises)"),
    (r"^test_math_functions\[\w+\]: np\.(floor|ceil|trunc|reciprocal|hypot)|arctan2",
     "np.floor/ceil/trunc of ints keep the int dtype (NumPy 2.4), np.reciprocal of ints is an "
     "int, hypot/arctan2 of int8/int16 float16/float32"),
    (r"^test_math_functions\[complex\d+\]", "complex: exp2/log1p/arctan/round/... refused"),
    (r"^test_math_functions\[bool\]|\]: np\.angle",
     "float ufuncs of bool (and np.angle of int8/int16) give float64, NumPy float16/float32"),
    (r"repr\(x\[1\]\)", "repr of an integer scalar: 'np.int8(0.0)'; of complex drops the imaginary part"),
    (r"np\.zeros\(2, dtype=np\.complex64\)", "creation kernels have no complex128 loop"),
    (r"float16\]: (np\.cumsum|np\.einsum)|float16 -> '?int(8|16)", "float16: cumsum/einsum round per "
     "step in NumPy; float16 -> int8 of out-of-range values"),
    (r"uint64\]: x\.tolist", "uint64 x.tolist() gives floats"),
]


def _known(label):
    import re

    for pattern, reason in KNOWN:
        if re.search(pattern, label):
            return reason
    return None


def check_table(cases):
    """Runs check(f, *args) for every (label, f, args) and fails listing
    every label that differs, with the first line of its error; cases
    matching KNOWN may differ."""
    test_id = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[-1].rsplit(" ", 1)[0]
    failed = []
    for label, f, args in cases:
        reason = _known(f"{test_id}: {label}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # NumPy's overflow/cast warnings
                check(f, *args)
        except BaseException as e:  # noqa: BLE001 - collected and reported below
            if isinstance(e, KeyboardInterrupt):
                raise
            if reason is None:
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                failed.append(f"{label}: {type(e).__name__}: {first[:300]}")
            continue
    assert not failed, f"{len(failed)} of {len(cases)} cases differ:\n" + "\n".join(failed)


def quiet(f, *args):
    """``check`` without NumPy's RuntimeWarnings (overflow, invalid casts)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return check(f, *args)


# ------------------------------------------------------------------ creation

CREATION = [
    "np.zeros((2, 3), dtype={d})",
    "np.ones(4, dtype={d})",
    "np.full((2, 2), 7, dtype={d})",
    "np.full(3, 1, {d})",
    "np.arange(5, dtype={d})",
    "np.arange(1, 9, 2, dtype={d})",
    "np.array([1, 2, 3], dtype={d})",
    "np.array([[0, 1], [1, 0]], dtype={d})",
    "np.array([1.5, 2.75, 0.0], dtype={d})",
    "np.array(x, dtype={d})",
    "np.asarray([3, 4], dtype={d})",
    "np.zeros(3, dtype='{n}')",
    "np.ones(2, '{n}')",
    "np.eye(3, dtype={d})",
    "np.identity(2, dtype={d})",
    "np.zeros_like(x, dtype={d})",
    "np.ones_like(x, dtype={d})",
    "np.full_like(x, 2, dtype={d})",
    "np.empty((2, 2), dtype={d}).shape",
    "np.empty(3, dtype={d}).dtype == {d}",
    "np.zeros(3, dtype={d}) + 1",
    "np.ones(3, dtype={d}) * 2.5",
    "np.linspace(0, 8, 5, dtype={d})",
    "x.astype({d})",
    "x.astype('{n}')",
    "np.zeros(2, dtype={d}).itemsize",
    "np.zeros(2, dtype={d}).nbytes",
    "str(np.zeros(2, dtype={d}).dtype)",
]


@pytest.mark.parametrize("dt", DTYPES)
def test_creation_with_dtype(dt):
    x = np.array([0.0, 1.0, 2.0])
    check_table([(e, numpy_fn(e.format(d=np_name(dt), n=dt)), (x,)) for e in CREATION])


LIKE = [
    "np.zeros_like(x)",
    "np.ones_like(x)",
    "np.full_like(x, 3)",
    "np.empty_like(x).shape",
    "np.empty_like(x).dtype == x.dtype",
    "np.zeros(2, dtype=x.dtype)",
    "np.ones((2, 2), x.dtype)",
    "x.copy()",
    "np.copy(x)",
    "np.array(x)",
    "np.asarray(x)",
    "x.astype(x.dtype)",
    "x.dtype == np.float64",
    "x.itemsize",
    "x.nbytes",
    "x.tolist()",
    "x[0, 0].item()",
]


@pytest.mark.parametrize("dt", DTYPES)
def test_creation_like_an_argument(dt):
    x = sample(dt, (2, 3))
    check_table([(e, numpy_fn(e), (x,)) for e in LIKE])


def test_python_ints_out_of_range_in_creation():
    cases = []
    for dt in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "uint64"]:
        d = np_name(dt)
        for e in [f"np.array([300, 1], dtype={d})", f"np.array([-1], dtype={d})",
                  f"np.full(3, 70000, dtype={d})", f"np.full(2, -5, {d})",
                  f"np.array([2**32], dtype={d})"]:
            cases.append((e, numpy_fn(e, ""), ()))
    check_table(cases)


# ---------------------------------------------------------------- arithmetic

SAME = [
    "x + y", "x - y", "x * y", "x / y", "x // y", "x % y", "x ** 2", "-x", "+x", "abs(x)",
    "np.abs(x)", "np.negative(x)", "np.square(x)", "np.sign(x)", "x & y", "x | y", "x ^ y", "~x",
    "x << 1", "x >> 1", "np.maximum(x, y)", "np.minimum(x, y)", "np.power(x, 3)",
    "np.floor_divide(x, y)", "np.remainder(x, y)", "np.clip(x, 1, 3)", "x == y", "x != y",
    "x < y", "x >= y", "np.logical_and(x, y)", "np.logical_not(x)", "np.add(x, y)",
    "np.multiply(x, y)", "x * y + x", "(x - y) * 2",
]


@pytest.mark.parametrize("dt", DTYPES)
def test_arithmetic_same_dtype(dt):
    x, y = sample(dt, (6,), 1), sample(dt, (6,), 2, nonzero=True)
    check_table([(e, numpy_fn(e, "x, y"), (x, y)) for e in SAME])


PAIR_OPS = [
    "x + y", "x - y", "x * y", "x / y", "x // y", "x ** y", "x & y", "x < y", "x == y",
    "np.maximum(x, y)", "np.where(x > 0, x, y)", "np.concatenate([x, y])", "np.stack([x, y])",
    "np.dot(x, y)", "x @ y", "np.hstack((x, y))",
]


@pytest.mark.parametrize("op", PAIR_OPS)
def test_promotion_of_every_pair(op):
    f = numpy_fn(op, "x, y")
    cases = []
    for a, b in PAIRS:
        x = sample(a, (4,), 3, positive=True)
        y = sample(b, (4,), 4, nonzero=True, positive="**" in op)
        cases.append((f"{a} {b}", f, (x, y)))
    check_table(cases)


PYTHON_SCALARS = [
    "x + 1", "1 + x", "x * 2", "x - 3", "3 - x", "x + 1.5", "x * 0.5", "x / 2", "2 / x", "x // 2",
    "x % 3", "x ** 2", "x + True", "x * False", "x > 1", "x == 2.0", "x < 300", "x > -1",
    "x == -1", "x != 70000", "np.maximum(x, 1)", "np.where(x > 2, x, 0)", "np.where(x > 2, 1.5, x)",
    "np.add(x, 2)", "x + 127", "x - 128", "x + 255", "x * 1e300", "np.clip(x, 0, 5)",
]


@pytest.mark.parametrize("dt", DTYPES)
def test_weak_python_scalars(dt):
    x = sample(dt, (5,), 5, nonzero=True)
    check_table([(e, numpy_fn(e), (x,)) for e in PYTHON_SCALARS])


@pytest.mark.parametrize("dt", DTYPES)
def test_weak_python_complex_scalars(dt):
    x = sample(dt, (5,), 6)
    check_table([(e, numpy_fn(e), (x,)) for e in ["x + 1j", "x * (1 + 2j)", "x - 2j"]])


NUMPY_SCALARS = ["np.int8(3)", "np.uint8(3)", "np.int16(3)", "np.int64(3)", "np.uint64(3)",
                 "np.float16(1.5)", "np.float32(1.5)", "np.float64(1.5)", "np.bool_(True)",
                 "np.complex64(2)"]


@pytest.mark.parametrize("dt", DTYPES)
def test_strong_numpy_scalars(dt):
    x = sample(dt, (4,), 7)
    cases = [(f"x + {s}", numpy_fn(f"x + {s}"), (x,)) for s in NUMPY_SCALARS]
    cases += [(f"{s} * x", numpy_fn(f"{s} * x"), (x,)) for s in NUMPY_SCALARS]
    f = numpy_fn("x - s", "x, s")
    for s in ["int8", "uint16", "int64", "float16", "float32", "float64", "complex64"]:
        cases.append((f"x - argument {s}", f, (x, np.dtype(s).type(2))))
    check_table(cases)


@pytest.mark.parametrize("dt", DTYPES)
def test_numpy_scalar_results(dt):
    """Elements and 0-d results are NumPy scalars of the array's dtype."""
    x = sample(dt, (4,), 8, nonzero=True)
    exprs = ["x[0]", "x[0] + x[1]", "x[1] * 2", "x[2] - x[3]", "x[0] * 1.5", "x[0] == x[1]",
             "-x[0]", "x.sum()", "x.max()", "x[0] + np.int8(1)", "float(x[0].real)", "int(x[1].real)"]
    check_table([(e, numpy_fn(e), (x,)) for e in exprs])


# ------------------------------------------------------------- wrap-around

WRAPS = [
    ("uint8", [250, 255, 3], "x + 10"),
    ("uint8", [250, 255, 3], "x + np.uint8(10)"),
    ("uint8", [5, 0, 3], "x - 10"),
    ("uint8", [200, 100, 3], "x * 2"),
    ("uint8", [1, 2, 0], "-x"),
    ("uint8", [1, 2, 0], "~x"),
    ("uint8", [129, 2, 255], "x << 1"),
    ("int8", [-128, 127, 0], "x - 1"),
    ("int8", [-128, 127, 0], "x + 1"),
    ("int8", [-128, 127, 5], "-x"),
    ("int8", [-128, 127, 5], "abs(x)"),
    ("int8", [-128, 100, 5], "x * x"),
    ("int8", [-128, 100, 5], "x // -1"),
    ("int16", [32767, -32768, 7], "x * 2"),
    ("int16", [32767, -32768, 7], "x + x"),
    ("uint16", [65535, 1, 0], "x + 1"),
    ("int32", [2**31 - 1, -2**31, 70000], "x + 1"),
    ("int32", [2**31 - 1, -2**31, 70000], "x * x"),
    ("int32", [2**31 - 1, -2**31, 70000], "x - 2"),
    ("uint32", [0, 1, 2**32 - 1], "x - 1"),
    ("uint32", [0, 1, 2**32 - 1], "x * 3"),
    ("int64", [2**63 - 1, -2**63, 3], "x + 1"),
    ("int64", [2**63 - 1, -2**63, 3], "x * 2"),
    ("uint64", [2**64 - 1, 2**63, 5], "x + 1"),
    ("uint64", [2**64 - 1, 2**63, 5], "x + x"),
    ("uint64", [2**64 - 1, 2**63, 5], "x - 6"),
    ("uint64", [2**64 - 1, 2**63, 5], "x * 3"),
    ("uint64", [2**64 - 1, 2**63, 5], "x & np.uint64(2**63 + 1)"),
    ("uint64", [2**64 - 1, 2**63, 5], "x | 1"),
    ("uint64", [2**64 - 1, 2**63, 5], "x ^ x[::-1]"),
    ("uint64", [2**64 - 1, 2**63, 5], "~x"),
    ("uint64", [2**64 - 1, 2**63, 5], "x << 1"),
    ("uint64", [2**64 - 1, 2**63, 5], "x == x[::-1]"),
    ("uint64", [2**64 - 1, 2**63, 5], "x.sum()"),
    ("uint64", [2**64 - 1, 2**63, 5], "np.cumsum(x)"),
    ("uint64", [2**64 - 1, 2**63, 5], "x.astype(np.float64)"),
    ("uint64", [2**64 - 1, 2**63, 5], "x + np.int64(1)"),
    ("uint64", [2**64 - 1, 2**63, 5], "x[0]"),
    ("uint64", [2**64 - 1, 2**63, 5], "x[::-1].copy()"),
    ("uint64", [2**64 - 1, 2**63, 5], "np.concatenate([x, x])"),
    ("uint8", [250, 251, 252], "x.sum()"),
    ("int8", [100, 100, 100], "x.sum()"),
    ("int8", [100, 100, 100], "np.cumsum(x)"),
    ("int8", [100, 100, 100], "x.prod()"),
    ("int8", [100, 100, 100], "np.dot(x, x)"),
    ("uint8", [200, 200, 200], "x @ x"),
]


def test_integer_wrap_around():
    cases = []
    for dt, values, e in WRAPS:
        cases.append((f"{dt} {values} {e}", numpy_fn(e), (np.array(values, dtype=dt),)))
    check_table(cases)


UINT64_ORDER = [
    "x // 2", "x % 7", "x >> 1", "x < x[::-1]", "x > 5", "x.max()", "x.min()", "np.sort(x)",
    "np.argmax(x)", "np.maximum(x, x[::-1])", "x / 2", "x + 2**63", "x == 2**64 - 1",
]


def test_uint64_values_from_two_to_the_63():
    x = np.array([2**64 - 1, 2**63, 5, 2**63 + 7], dtype=np.uint64)
    check_table([(f"UINT64 {e}", numpy_fn(e), (x,)) for e in UINT64_ORDER])


OVERFLOWS = [
    ("int8", "x + 300"),
    ("int8", "x - 129"),
    ("int8", "300 + x"),
    ("int8", "np.add(x, 300)"),
    ("uint8", "x + 256"),
    ("uint8", "x + (-1)"),
    ("uint8", "x * -1"),
    ("int16", "x + 40000"),
    ("uint16", "x - 70000"),
    ("int32", "x + 2**31"),
    ("uint32", "x + 2**32"),
    ("uint64", "x - 1 + (-1)"),
    ("int8", "np.maximum(x, 1000)"),
]


def test_overflow_error_for_python_ints():
    cases = [(f"{dt} {e}", numpy_fn(e), (np.array([1, 2, 3], dtype=dt),)) for dt, e in OVERFLOWS]
    check_table(cases)


SET_OVERFLOWS = [
    ("int8", "x[0] = 300"),
    ("int8", "x[1:] = -129"),
    ("uint8", "x[0] = -1"),
    ("uint8", "x[x > 1] = 256"),
    ("int8", "x += 300"),
    ("uint16", "x[[0, 1]] = 70000"),
    ("int8", "x.fill(128)"),
]


def test_overflow_error_for_python_ints_stored():
    cases = [(f"{dt} {e}", numpy_body(f"{e}\nreturn x"), (np.array([1, 2, 3], dtype=dt),))
             for dt, e in SET_OVERFLOWS]
    check_table(cases)


# ---------------------------------------------------------------- reductions

REDUCTIONS = [
    "x.sum()", "np.sum(x, axis=0)", "x.sum(axis=1)", "x.prod()", "np.prod(x, axis=1)",
    "np.cumsum(x)", "x.cumsum(axis=0)", "np.cumprod(x, axis=1)", "x.mean()", "x.mean(axis=0)",
    "np.mean(x, axis=1)", "x.max()", "np.max(x, axis=0)", "x.min(axis=1)", "np.amin(x)",
    "np.argmax(x)", "x.argmin(axis=0)", "np.argmax(x, axis=1)", "x.std()", "x.var(axis=0)",
    "np.median(x)", "np.average(x)", "np.ptp(x)", "x.any()", "x.all(axis=0)",
    "np.count_nonzero(x)", "np.trace(x)", "np.nansum(x)", "np.sum(x, keepdims=True)",
    "np.sum(x, axis=0, dtype=np.int8)", "x.sum(dtype=np.float32)",
]


@pytest.mark.parametrize("dt", DTYPES)
def test_reductions(dt):
    x = sample(dt, (3, 4), 9)
    check_table([(e, numpy_fn(e), (x,)) for e in REDUCTIONS])


# ------------------------------------------------------------------ indexing

GETS = [
    "x[1]", "x[-1, 2]", "x[1:3]", "x[:, ::2]", "x[[0, 2]]", "x[m]", "x[[0, 1], [2, 3]]",
    "x[0, 0] + x[1, 1]", "x.T", "x.reshape(-1)", "x.ravel()", "x.flatten()", "x[..., 0]",
    "x[None, 1]", "np.take(x, [0, 2])", "x.take([1, 0], axis=1)", "x[x != x[0, 0]]",
    "x[1][::-1]", "x[:, 1:3].copy()",
]


@pytest.mark.parametrize("dt", DTYPES)
def test_indexing(dt):
    x = sample(dt, (3, 4), 10)
    m = sample("bool", (3, 4), 11)
    check_table([(e, numpy_fn(e, "x, m"), (x, m)) for e in GETS])


SETS = [
    "x[0] = 1", "x[0, 1] = 2.7", "x[:, 0] = 5", "x[m] = 3", "x[[0, 2]] = 4", "x[0] = -1",
    "x[0, 0] = 300", "x[0] = 1j", "x[0] = np.float64(2.5)", "x[0, :] = np.arange(4)",
    "x[...] = 1.5", "x[1] = x[0] * 2", "x[m] = x[m] + 1", "x[1, 2] = True", "x[:, 1] = y",
    "x[0] = y[::-1] + 1", "x[0, 0] = y[0]", "x[2, 1:] = -2.5",
]


@pytest.mark.parametrize("dt", DTYPES)
def test_setitem(dt):
    x = sample(dt, (3, 4), 12)
    m = sample("bool", (3, 4), 13)
    cases = []
    for y_dt in ["int16", "float32", "uint8", "complex128"]:
        y = sample(y_dt, (3,), 14) if y_dt != "float32" else sample(y_dt, (4,), 14)[:3]
        for e in SETS:
            cases.append((f"{e} (y {y_dt})", numpy_body(f"{e}\nreturn x", "x, m, y"), (x, m, y)))
    check_table(cases)


INPLACE = [
    "x += 1", "x -= 1", "x *= 3", "x //= 2", "x %= 3", "x /= 2", "x += 1.5", "x **= 2",
    "x &= 3", "x |= 1", "x <<= 1", "x += x[0]", "np.add(x, 1, out=x)", "x[1:3] *= 2",
    "x -= 2**7", "x *= True", "x += 1j",
]


@pytest.mark.parametrize("dt", DTYPES)
def test_inplace(dt):
    x = sample(dt, (5,), 15)
    check_table([(e, numpy_body(f"{e}\nreturn x"), (x,)) for e in INPLACE])


def test_inplace_wraps_uint8():
    check(numpy_body("x += 1\nreturn x"), np.array([254, 255, 0], np.uint8))
    check(numpy_body("x -= 1\nreturn x"), np.array([1, 0, 7], np.uint8))
    check(numpy_body("x *= 100\nreturn x"), np.array([-128, 127, 3], np.int8))


@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/=", "//="])
def test_inplace_every_pair(op):
    """x op= y casts the result to x's dtype with casting='same_kind'."""
    f = numpy_body(f"x {op} y\nreturn x", "x, y")
    cases = [(f"{a} {op} {b}", f, (sample(a, (4,), 16), sample(b, (4,), 17, nonzero=True)))
             for a, b in PAIRS]
    check_table(cases)


# ------------------------------------------------------------------- astype

ASTYPE_VALUES = [-200.7, -3.7, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 100.9, 200.2, 250.5, 70000.3]


@pytest.mark.parametrize("src", DTYPES)
def test_astype_every_pair(src):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = np.array(ASTYPE_VALUES).astype(src)
        if src in COMPLEX:
            x = x + 1j * np.array(ASTYPE_VALUES[::-1]).astype(src)
    cases = [(f"{src} -> {d}", numpy_fn(f"x.astype({np_name(d)})"), (x,)) for d in DTYPES]
    cases += [(f"{src} -> '{d}'", numpy_fn(f"x.astype('{d}')"), (x,)) for d in DTYPES]
    check_table(cases)


def test_astype_from_wide_integers():
    x = np.array([300, -1, 70000, -2**31, 2**40 + 3, 2**63 - 1], dtype=np.int64)
    u = np.array([2**64 - 1, 2**63, 2**32 + 1, 255], dtype=np.uint64)
    cases = [(f"int64 -> {d}", numpy_fn(f"x.astype({np_name(d)})"), (x,)) for d in DTYPES]
    cases += [(f"uint64 -> {d}", numpy_fn(f"x.astype({np_name(d)})"), (u,)) for d in DTYPES]
    check_table(cases)


def test_astype_special_floats():
    x = np.array([np.inf, -np.inf, 65504.0, 65520.0, 1e-8, -0.0, 3.14159])
    cases = [(f"float64 -> {d}", numpy_fn(f"x.astype({np_name(d)})"), (x,))
             for d in FLOATS + COMPLEX + ["bool"]]
    check_table(cases)


# ---------------------------------------------------------- array functions

FUNCTIONS = [
    "np.concatenate([x, x[::-1]])", "np.stack([x, x])", "np.vstack([x, x])",
    "np.where(x == x[0], x, x[1])", "np.sort(x)", "np.unique(x)", "np.take(x, [3, 0])",
    "np.flip(x)", "np.roll(x, 2)", "np.tile(x, 2)", "np.repeat(x, 2)", "np.diff(x)",
    "np.argsort(x)", "np.nonzero(x)", "np.split(x, 2)", "np.pad(x, 1)", "np.diag(x)",
    "np.outer(x, x)", "np.cumsum(x[::-1])", "np.clip(x, x[1], x[2])", "np.sort(x)[::-1]",
    "np.unique(x, return_counts=True)", "np.searchsorted(np.sort(x), x[0])",
]


@pytest.mark.parametrize("dt", DTYPES)
def test_array_functions(dt):
    x = sample(dt, (6,), 18)
    check_table([(e, numpy_fn(e), (x,)) for e in FUNCTIONS])


def test_sort_unique_of_narrow_types_with_extremes():
    cases = []
    for dt, values in [("int8", [127, -128, 0, -1, 5]), ("uint8", [255, 0, 128, 127, 1]),
                       ("uint16", [65535, 0, 32768]), ("float16", [65504, -65504, 0.5, -0.0, 1e-4]),
                       ("uint32", [2**32 - 1, 0, 2**31])]:
        x = np.array(values, dtype=dt)
        for e in ["np.sort(x)", "np.unique(x)", "np.argsort(x)", "x.max()", "np.argmin(x)"]:
            cases.append((f"{dt} {e}", numpy_fn(e), (x,)))
    check_table(cases)


# ----------------------------------------------------------------- products

PRODUCTS = ["x @ y", "np.dot(x, y)", "np.matmul(x, y)", "x.dot(y)", "np.inner(x, y.T)",
            "np.outer(x[0], y[:, 0])", "np.vdot(x[0], y[:, 1])", "np.tensordot(x, y, axes=1)",
            "np.einsum('ij,jk->ik', x, y)", "x[0] @ y", "x @ y[:, 0]", "np.trace(x @ y)"]


@pytest.mark.parametrize("dt", DTYPES)
def test_matmul_and_dot(dt):
    x, y = sample(dt, (3, 4), 19), sample(dt, (4, 2), 20)
    check_table([(e, numpy_fn(e, "x, y"), (x, y)) for e in PRODUCTS])


def test_int8_matmul_wraps():
    x = np.full((2, 8), 100, dtype=np.int8)
    check(numpy_fn("x @ x.T", "x"), x)
    check(numpy_fn("np.dot(x[0], x[1])", "x"), x)


# ------------------------------------------------------------- elementwise math

MATH = ["np.sqrt(x)", "np.sin(x)", "np.cos(x)", "np.exp(x)", "np.log(x)", "np.tanh(x)",
        "np.floor(x)", "np.ceil(x)", "np.round(x)", "np.exp2(x)", "np.log1p(x)", "np.arctan(x)",
        "np.isnan(x)", "np.isfinite(x)", "np.reciprocal(x)", "x / x", "np.true_divide(x, 3)",
        "np.arctan2(x, x)", "np.hypot(x, x)", "np.cbrt(x)", "np.trunc(x)", "np.log10(x)"]


@pytest.mark.parametrize("dt", DTYPES)
def test_math_functions(dt):
    """sqrt/sin of int8 and uint8 give float16, of int16 float32 (NumPy's loops)."""
    x = sample(dt, (5,), 21, positive=True)
    check_table([(e, numpy_fn(e), (x,)) for e in MATH])


# --------------------------------------------------------------- comparisons

COMPARISONS = ["x < y", "x <= y", "x == y", "x != y", "x > y", "x >= y", "np.equal(x, y)",
               "np.greater(x, y)", "np.array_equal(x, y)", "np.allclose(x, y)",
               "np.isclose(x, y)"]


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparisons_of_every_pair(op):
    f = numpy_fn(op, "x, y")
    cases = [(f"{a} {b}", f, (sample(a, (6,), 22), sample(b, (6,), 23))) for a, b in PAIRS]
    check_table(cases)


def test_comparisons_mixing_signedness():
    u = np.array([0, 2**63 + 1, 5, 2**64 - 1], dtype=np.uint64)
    i = np.array([-1, 5, 5, -2**63], dtype=np.int64)
    u8 = np.array([0, 200, 255, 1], dtype=np.uint8)
    i8 = np.array([-1, -56, 127, 1], dtype=np.int8)
    cases = []
    for e in ["x < y", "x == y", "x >= y", "np.maximum(x, y)"]:
        cases.append((f"uint64 int64 {e}", numpy_fn(e, "x, y"), (u, i)))
        cases.append((f"uint8 int8 {e}", numpy_fn(e, "x, y"), (u8, i8)))
    for e in ["x < 300", "x == -1", "x > -1", "x != 256", "x <= 2**70"]:
        cases.append((f"uint8 {e}", numpy_fn(e, "x, y"), (u8, i8)))
        cases.append((f"int8 {e}", numpy_fn(e.replace("x", "y"), "x, y"), (u8, i8)))
    check_table(cases)


# ------------------------------------------------------------------- complex

COMPLEX_EXPRS = [
    "z.real", "z.imag", "z.conj()", "np.conj(z)", "np.conjugate(z)", "np.real(z)", "np.imag(z)",
    "np.angle(z)", "np.abs(z)", "abs(z)", "z * 1j", "1j * z", "z + (2 - 3j)", "z / w", "z ** 2",
    "np.sqrt(z)", "np.exp(z)", "np.log(z)", "z == z.conj()", "z.sum()", "z.mean()", "np.vdot(z, w)",
    "z @ w", "np.outer(z, w)", "z.real + z.imag", "z * w.conj()", "np.abs(z) ** 2",
    "z.real.dtype == z.imag.dtype", "z[0]", "z[0].real", "z[1].imag", "np.sign(z)",
    "np.isfinite(z)", "z.conj().imag", "np.cumsum(z)", "np.prod(z)", "z.astype(np.complex128)",
]


@pytest.mark.parametrize("dt", COMPLEX)
def test_complex(dt):
    z, w = sample(dt, (4,), 24), sample(dt, (4,), 25)
    check_table([(e, numpy_fn(e, "z, w"), (z, w)) for e in COMPLEX_EXPRS])


REAL_AS_COMPLEX = ["x.real", "x.imag", "x.conj()", "np.real(x)", "np.imag(x)", "np.conj(x)",
                   "np.angle(x)", "x + 0j", "x * 1j", "np.iscomplexobj(x)"]


@pytest.mark.parametrize("dt", INTS + FLOATS + ["bool"])
def test_complex_views_of_real_arrays(dt):
    x = sample(dt, (4,), 26)
    check_table([(e, numpy_fn(e), (x,)) for e in REAL_AS_COMPLEX])


def test_complex_constructors():
    cases = [
        ("complex(a, b)", numpy_fn("complex(a, b)", "a, b"), (1.5, -2.0)),
        ("complex(a)", numpy_fn("complex(a)", "a, b"), (1.5, -2.0)),
        ("a + b * 1j", numpy_fn("a + b * 1j", "a, b"), (1.5, -2.0)),
        ("3j", numpy_fn("3j", "a, b"), (1.5, -2.0)),
        ("np.array([1j, 2])", numpy_fn("np.array([1j, 2])", "a, b"), (1.5, -2.0)),
        ("np.array([1, 2], dtype=complex)",
         numpy_fn("np.array([1, 2], dtype=complex)", "a, b"), (1.5, -2.0)),
        ("np.zeros(2, dtype=np.complex64) + a",
         numpy_fn("np.zeros(2, dtype=np.complex64) + a", "a, b"), (1.5, -2.0)),
        ("x + y * 1j", numpy_fn("x + y * 1j", "x, y"), (sample("float32", (3,)), sample("float32", (3,), 1))),
        ("complex argument", numpy_fn("z * 2", "z"), (1 + 2j,)),
    ]
    check_table(cases)


def test_complex_setitem():
    z = sample("complex64", (4,), 27)
    cases = [(e, numpy_body(f"{e}\nreturn z", "z"), (z,)) for e in
             ["z[0] = 1j", "z[1] = 2", "z[1:3] = z[:2] * 1j", "z += 1j", "z *= 2", "z.real = 1.5",
              "z.imag = -z.real", "z.imag[0] = 7"]]
    check_table(cases)


# ------------------------------------------------------------------ printing

PRINT_VALUES = {
    "float16": [0.1, 1.5, -2.25, 1000.0, 3.140625],
    "int8": [-128, 0, 127, 5, -3],
    "uint8": [0, 255, 17, 3, 100],
    "uint64": [2**64 - 1, 0, 5, 2**63, 1],
    "int32": [2**31 - 1, -2**31, 0, 7, -7],
    "float32": [0.1, 1.5, -2.25, 1e10, 3.14159],
    "complex64": [1 + 2j, -0.5j, 3, 1.25 - 1j, 0],
    "complex128": [1 + 2j, -0.5j, 3, 1e-3 - 1j, 0],
    "bool": [True, False, True, True, False],
}


@pytest.mark.parametrize("dt", list(PRINT_VALUES))
def test_str_and_repr(dt):
    x = np.array(PRINT_VALUES[dt], dtype=dt)
    exprs = ["str(x)", "str(x[0])", "str(x.reshape(1, 5))", "repr(x)", "repr(x[1])",
             "str(x[1:3])", "f'{x[0]}'", "str(x.dtype)"]
    check_table([(e, numpy_fn(e), (x,)) for e in exprs])


@pytest.mark.parametrize("dt", list(PRINT_VALUES))
def test_print(dt, capfd):
    x = np.array(PRINT_VALUES[dt], dtype=dt)
    f = numpy_body("print(x)\nprint(x[0], x[1:3])\nprint(x.reshape(5, 1))\nreturn 0")
    f(x.copy())
    expected = capfd.readouterr().out
    tessera.jit(f)(x.copy())
    assert capfd.readouterr().out == expected


def _print_cases():
    """Arrays whose text exercises every branch of NumPy's layout: positional
    and scientific floats in each float type, NaN/inf/-0, wide and summarized
    rows, nested axes, integers of every width, complex parts of both signs."""
    rng = np.random.default_rng(7)
    magnitudes = {
        "unit": lambda n: rng.standard_normal(n),
        "decades": lambda n: rng.standard_normal(n) * 10.0 ** rng.integers(-6, 10, n),
        "tiny": lambda n: rng.standard_normal(n) * 1e-7,
        "huge": lambda n: rng.standard_normal(n) * 1e12,
        "integral": lambda n: rng.integers(-300, 300, n).astype(float),
        "thirds": lambda n: rng.integers(-9, 9, n) / 3.0,
        "thousands": lambda n: rng.standard_normal(n) * 4e4,  # float16/32 cutoffs
        "millions": lambda n: rng.uniform(1e6, 4e6, n),
        "special": lambda n: np.resize([np.nan, -np.inf, -0.0, 0.5, np.inf, 2.0], n),
    }
    shapes = [(7,), (3, 4), (2, 2, 3), (30,), (1001,), (12, 100), (2, 3, 200), (0,), (2, 0),
              (1, 1)]
    cases = []
    for dt in ("float64", "float32", "float16"):
        for mag, make in magnitudes.items():
            for shape in shapes:
                cases.append(pytest.param(dt, make(int(np.prod(shape))).reshape(shape),
                                          id=f"{dt}-{mag}-{'x'.join(map(str, shape))}"))
    for dt in ("complex128", "complex64"):
        for mag in ("unit", "decades", "special"):
            for shape in [(5,), (3, 4), (40,)]:
                n = int(np.prod(shape))
                z = magnitudes[mag](n) + 1j * magnitudes["thirds"](n)[::-1]
                cases.append(pytest.param(dt, z.reshape(shape), id=f"{dt}-{mag}-{n}"))
    for dt in ("int8", "int64", "uint16", "uint64", "bool"):
        for shape in [(6,), (4, 5), (50,), (1200,)]:
            n = int(np.prod(shape))
            info = np.iinfo(dt) if dt != "bool" else None
            v = (rng.integers(0, 2, n) if info is None
                 else rng.integers(info.min, info.max, n, dtype=dt, endpoint=True))
            cases.append(pytest.param(dt, v.reshape(shape), id=f"{dt}-{n}"))
    return cases


@pytest.mark.parametrize("dt, values", _print_cases())
def test_print_layout_as_numpy(dt, values, capfd):
    with np.errstate(over="ignore"):  # float16 of the huge values: inf, printed as such
        x = np.asarray(values).astype(dt)
    f = numpy_body("print(x)\nprint(x.T)\nprint(x[..., ::-1])\nreturn 0")
    f(x.copy())
    expected = capfd.readouterr().out
    tessera.jit(f)(x.copy())
    assert capfd.readouterr().out == expected


# ----------------------------------------------------------------- .npy files

@pytest.mark.parametrize("dt", DTYPES)
def test_npy_round_trip(dt, tmp_path):
    x = sample(dt, (2, 3), 28)
    save_load = numpy_body("np.save(path, x)\nreturn np.load(path)", "x, path")
    np_path, jit_path = str(tmp_path / "numpy.npy"), str(tmp_path / "jit.npy")
    expected = save_load(x, np_path)
    got = tessera.jit(save_load)(x, jit_path)
    assert_same(got, expected)
    # tessera's file is read by NumPy, NumPy's by tessera.
    assert_same(np.load(jit_path), x)
    assert_same(tessera.jit(numpy_fn("np.load(path)", "path"))(np_path), x)


# ------------------------------------------------------------------ bfloat16

def bfloat16_round(x):
    """float32 values rounded to bfloat16 (to nearest, ties to even), as
    float32: what tessera gives back for a bfloat16 array."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def test_bfloat16_comes_back_as_float32():
    x = np.array([1.0, 0.1, 3.14159, -2.5e-3, 300.7], dtype=np.float32)
    got = tessera.jit(numpy_fn("x.astype('bfloat16')"))(x)
    assert_same(got, bfloat16_round(x), rtol=0)
    i8 = np.array([1, -7, 100], np.int8)
    got = tessera.jit(numpy_fn("x.astype('bfloat16') + y", "x, y"))(x[:3], i8)
    assert_same(got, bfloat16_round(bfloat16_round(x[:3]) + i8.astype(np.float32)), rtol=0)
    h = np.array([1.5, 0.1, 2.0], np.float16)
    got = tessera.jit(numpy_fn("x.astype('bfloat16') + y", "x, y"))(x[:3], h)
    assert_same(got, bfloat16_round(x[:3]) + h.astype(np.float32), rtol=1e-7)
    got = tessera.jit(numpy_fn("np.ones(3, dtype='bfloat16').sum()", "x"))(x)
    assert got == 3.0


def test_real_and_imag_are_views():
    # NumPy: z.real and z.imag are views of a complex array (writes reach z);
    # x.real of a real array is x itself, x.imag read-only zeros.
    def f(z, x):
        z.imag[0] = 7
        z.real = z.real * 2
        x.real[1] = 4.0
        return z.real + z.imag, x.imag

    for dt in ("complex64", "complex128"):
        check(f, sample(dt, (3,), 40), sample("float64", (3,), 41))

    def write_imag_of_real(x):
        x.imag[0] = 1.0
        return x

    check(write_imag_of_real, sample("float64", (3,), 42))  # ValueError (read-only) in both


def test_isclose_of_complex_compares_both_parts():
    # (It cast to float64 and compared the real parts only.)
    z = np.array([1 + 2j, 0j, 3 - 1j, complex(np.inf, 1), complex(np.nan, 0)])
    w = np.array([1 + 2.5j, 0j, 3 - 1j, complex(np.inf, 1), complex(np.nan, 0)])
    check(lambda z, w: (np.isclose(z, w), np.allclose(z, w), np.isclose(z, w, equal_nan=True),
                        np.isclose(z, 1 + 2j)), z, w)


@pytest.mark.parametrize("n, k, s", [(np.int32(3), np.int8(2), np.float32(1.5)),
                                     (np.uint16(3), np.uint64(2), np.float16(2.0))])
def test_numpy_scalars_as_shapes_indices_and_fill_values(n, k, s):
    # A shape or an index stays an integer (it is not promoted with the fill
    # value); np.full's dtype is its fill value's.
    def f(n, k, s):
        a = np.zeros(n)
        b = [i for i in range(n)]
        c = np.arange(10.0)[k]
        d = np.ones((n, 2)).reshape(n * 2)
        return a, b, c, d, a * s, np.full(n, s)

    check(f, n, k, s)
