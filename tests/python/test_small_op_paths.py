"""The short paths of one elementwise operation (issue 31 item 5) against NumPy,
bit for bit (rtol=0), at 1 and 2 threads:

- work of one tile runs in the caller without a std::function
  (runtime/parallel.hpp); larger work is cut into tiles as before, so sizes on
  both sides of the single-tile bound are compared;
- binary_op's layout of operands of one shape or with a 0-d operand, made
  without make_broadcast (primitives/elementwise_ops.cpp), and the kernel's
  single run (kernels/elementwise_binary.cpp), beside views, broadcasting
  shapes, aliases, in-place updates and dtype mixes that take other paths;
- an array's Storage header from a per-thread list (core/array.cpp): many
  arrays alive at once, results made on workers and freed elsewhere.

Each case runs both in a loop (the scalar-loop fast path, whose results are
written into dying operands) and as one call."""

import numpy as np
import pytest

import tessera
from jit_check import numpy_body, numpy_fn


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    before = tessera.num_threads()
    tessera.set_num_threads(request.param)
    yield request.param
    tessera.set_num_threads(before)


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                  want.shape, want.dtype)
    np.testing.assert_array_equal(got, want)


# Both sides of the single-tile bound (n * cost per element < 40 us): the
# cheap operations are one tile up to tens of thousands of elements, sin to a
# few thousand.
SIZES = [0, 1, 7, 1000, 4096, 100_000, 300_000]

LOOPS = {
    "add": "for _ in range(n):\n    x = x + y\nreturn x",
    "axpy": "for _ in range(n):\n    x = x * y + z\nreturn x",
    "sin": "for _ in range(n):\n    x = np.sin(x)\nreturn x",
    "scalar": "for _ in range(n):\n    x = 0.5 * x + 1.0\nreturn x",
    "inplace": "for _ in range(n):\n    x += y\nreturn x",
    "alias": "for _ in range(n):\n    x = x + x * 1e-3\nreturn x",
    "sum": "s = 0.0\nfor _ in range(n):\n    s = s + (x * y).sum()\nreturn s",
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", sorted(LOOPS))
def test_loops_of_one_operation(threads, name, size):
    f = numpy_body(LOOPS[name], "x, y, z, n")
    rng = np.random.default_rng(size)
    x, y, z = rng.random(size) + 0.5, rng.random(size) * 1e-3, rng.random(size)
    if name == "sum" and size > 4096:
        # tessera sums in a fixed order that differs from NumPy's pairwise
        # one on long arrays: compared there within rounding, and 1 thread
        # against 2 bit for bit below.
        np.testing.assert_allclose(tessera.jit(f)(x, y, z, 3), f(x, y, z, 3), rtol=1e-12)
        return
    _same(tessera.jit(f)(x.copy(), y, z, 3), f(x.copy(), y, z, 3))


def test_sums_do_not_depend_on_threads():
    f = numpy_fn("(x * y).sum()", "x, y")
    rng = np.random.default_rng(5)
    for size in SIZES:
        x, y = rng.random(size), rng.random(size)
        one = np.asarray(tessera.jit(f, threads=1)(x, y))
        two = np.asarray(tessera.jit(f, threads=2)(x, y))
        assert one.tobytes() == two.tobytes(), size


ONE_CALL = ["x + y", "x * y + z", "np.sin(x)", "x - 2.0", "3 * x", "x / y", "np.maximum(x, y)",
            "x < y", "(x * y).sum()"]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("expr", ONE_CALL)
def test_one_call(threads, expr, size):
    f = numpy_fn(expr, "x, y, z")
    rng = np.random.default_rng(size + 1)
    x, y, z = rng.random(size) - 0.5, rng.random(size) + 0.5, rng.random(size)
    if "sum" in expr and size > 4096:
        np.testing.assert_allclose(tessera.jit(f)(x, y, z), f(x, y, z), rtol=1e-12)
        return
    _same(tessera.jit(f)(x, y, z), f(x, y, z))


# Operand shapes the short layout takes (one shape, a 0-d operand, extents of
# 1, empty arrays) and neighbours that take make_broadcast.
PAIRS = [((), ()), ((), (5,)), ((5,), ()), ((1,), ()), ((), (1, 1)), ((1, 1), (1, 1)),
         ((0,), ()), ((2, 0), (2, 0)), ((4, 3), (4, 3)), ((1000,), (1000,)), ((4, 3), (3,)),
         ((1, 3), (4, 1)), ((1,), (6,)), ((1000, 1), (1, 2))]


@pytest.mark.parametrize("a, b", PAIRS, ids=str)
@pytest.mark.parametrize("expr", ["x + y", "x * y - y", "np.minimum(x, y) ** 2"])
def test_operand_shapes(threads, expr, a, b):
    f = numpy_fn(expr, "x, y")
    rng = np.random.default_rng(len(a) * 10 + len(b))
    x, y = np.asarray(rng.normal(size=a)), np.asarray(rng.normal(size=b))
    _same(tessera.jit(f)(x, y), f(x, y))


DTYPES = [np.float64, np.float32, np.int64, np.int32, np.bool_, np.uint8]


@pytest.mark.parametrize("dx", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dy", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtype_mixes(threads, dx, dy):
    f = numpy_fn("(x + y, x * y, x < y)", "x, y")
    rng = np.random.default_rng(3)
    x = (rng.random(1000) * 50).astype(dx)
    y = (rng.random(1000) * 50).astype(dy)
    for got, want in zip(tessera.jit(f)(x, y), f(x, y)):
        _same(got, want)
    # A 0-d operand of each dtype beside the 1,000 elements.
    for got, want in zip(tessera.jit(f)(x, y[:1].reshape(())), f(x, y[:1].reshape(()))):
        _same(got, want)


def test_views_and_aliases(threads):
    rng = np.random.default_rng(7)
    m = rng.random((40, 50))
    v = rng.random(2000)
    cases = [
        ("x[::2] + y[1::2]", (v, v)),          # strided views of one buffer
        ("x.T * y.T + 1.0", (m, m)),           # transposes
        ("x[:, 3] - y[5, :40]", (m, m)),        # a column and part of a row
        ("x[::-1] + x", (v, v)),               # the reversed operand and itself
        ("np.sin(x[::3])", (v, v)),            # a unary view
    ]
    for expr, args in cases:
        f = numpy_fn(expr, "x, y")
        _same(tessera.jit(f)(*args), f(*args))


def test_writes_into_views_and_arguments(threads):
    f = numpy_body("for i in range(3):\n    x[i::3] += y[i::3] * 0.5\n    z += x\nreturn x, z",
                   "x, y, z")
    rng = np.random.default_rng(9)
    x, y, z = rng.random(999), rng.random(999), rng.random(999)
    gx, gz, wx, wz = x.copy(), z.copy(), x.copy(), z.copy()
    got = tessera.jit(f)(gx, y, gz)
    want = f(wx, y, wz)
    _same(got[0], want[0])
    _same(got[1], want[1])
    _same(gx, wx)  # the caller's arrays, written in place
    _same(gz, wz)


def test_results_written_in_place(threads):
    # NumPy's out= is refused by the translator (named, below); the in-place
    # forms write the caller's array, through the same kernels.
    f = numpy_body("z[:] = x + y\nz *= y\nz[::2] -= x[::2]\nreturn z", "x, y, z")
    rng = np.random.default_rng(11)
    x, y = rng.random(1000), rng.random(1000)
    gz, wz = np.zeros(1000), np.zeros(1000)
    _same(tessera.jit(f)(x, y, gz), f(x, y, wz))
    _same(gz, wz)
    g = numpy_body("np.add(x, y, out=z)\nreturn z", "x, y, z")
    with pytest.raises(tessera.UnsupportedError, match="out= of np.add"):
        tessera.jit(g)(x, y, gz)


def test_many_arrays_alive_and_freed_elsewhere(threads):
    # More arrays alive at once than a thread keeps Storage headers for (64),
    # made inside the program (on workers at 2 threads) and freed by the
    # caller; then the same again, which reuses the freed headers.
    f = numpy_body("out = []\nfor i in range(200):\n    out.append(x * i + y)\nreturn out", "x, y")
    x, y = np.arange(1000.0), np.full(1000, 0.25)
    before = tessera.memory_stats()["live_bytes"]
    for _ in range(2):
        got = tessera.jit(f)(x, y)
        want = f(x, y)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        del got
    assert tessera.memory_stats()["live_bytes"] <= before + 64 * 1024


@pytest.fixture(params=["sse2", "avx2", "avx512"])
def simd(request):
    order = ["sse2", "avx2", "avx512"]
    if order.index(request.param) > order.index(tessera.simd_best()):
        pytest.skip(f"this CPU has no {request.param}")
    before = tessera.simd_level()
    tessera.set_simd_level(request.param)
    yield request.param
    tessera.set_simd_level(before)


def _payload_operands(dtype, size, seed):
    """Arrays mixing numbers, infinities and NaNs of many payloads (quiet and
    signalling, both signs)."""
    rng = np.random.default_rng(seed)
    wide = dtype == np.float64
    ubits, mant = (np.uint64, 52) if wide else (np.uint32, 23)
    exp = ubits(0x7FF << 52) if wide else ubits(0xFF << 23)
    sign = ubits(1) << ubits(63 if wide else 31)
    out = []
    for _ in range(2):
        nan_bits = (exp | rng.integers(1, 1 << mant, size).astype(ubits)
                    | np.where(rng.integers(0, 2, size) == 1, sign, ubits(0)))
        v = (rng.integers(-1000, 1000, size) / 8).astype(dtype)
        kind = rng.integers(0, 6, size)
        v = np.where(kind < 3, nan_bits.view(dtype), v)
        inf = np.where(rng.integers(0, 2, size) == 1, np.inf, -np.inf).astype(dtype)
        v = np.where(kind == 3, inf, v)
        out.append(v)
    return out


# (expression, its left and right operands as NumPy computes them, the ufunc)
NAN_FORMS = [
    ("x + y", lambda x, y: (x, y), np.add),
    ("y + x", lambda x, y: (y, x), np.add),
    ("x * y", lambda x, y: (x, y), np.multiply),
    ("x + y[0]", lambda x, y: (x, y[0]), np.add),
    ("x[0] * y", lambda x, y: (x[0], y), np.multiply),
    ("x[::2] + y[::2]", lambda x, y: (x[::2], y[::2]), np.add),
]


@pytest.mark.parametrize("size", [1, 7, 33, 1000, 1001])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("form", NAN_FORMS, ids=[f[0] for f in NAN_FORMS])
def test_add_and_multiply_keep_the_left_nan(threads, simd, form, dtype, size):
    # Where both operands are NaN, which one x86 returns depends on the
    # instruction's operand order, which NumPy leaves to its compiler;
    # tessera returns the left operand's, quieted (u + u in NumPy), in every
    # kernel and at every SIMD level. Everywhere else the bits are NumPy's.
    expr, operands, ufunc = form
    x, y = _payload_operands(dtype, size, size)
    got = np.asarray(tessera.jit(numpy_fn(expr, "x, y"))(x, y))
    u, v = operands(x, y)
    u, v = np.broadcast_arrays(np.asarray(u), np.asarray(v))
    with np.errstate(invalid="ignore"):
        want = np.where(np.isnan(u), u + u, ufunc(u, v))
    assert got.dtype == want.dtype and got.shape == want.shape
    ubits = np.uint64 if dtype == np.float64 else np.uint32
    np.testing.assert_array_equal(got.view(ubits), want.view(ubits))
