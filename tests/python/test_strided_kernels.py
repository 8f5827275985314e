"""Elementwise kernels on views read in place, the bitwise kernels, slice
writes and uniform draws (issue 31: the vectorised kernels slower than 1.5x
NumPy), against NumPy: values bit for bit, shapes and dtypes, at 1 and 2
threads, on sizes below and above the ones split over the workers."""

import numpy as np
import pytest

import tessera
from tessera import _core
from jit_check import numpy_body, numpy_fn

THREADS = [1, 2]
# (rows, cols): small, and large enough to be cut into tiles at 2 threads.
SIZES = [(6, 7), (400, 300)]


def _operand(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "int64":
        return rng.integers(-50, 50, size=shape, dtype=np.int64)
    return (rng.normal(size=shape) + 0.25).astype(dtype)


def _same(got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


# Views made inside the function: slices with steps, negative steps, a
# transpose, and views that broadcast against each other.
VIEW_EXPRESSIONS = [
    "x[:-2, :-2] + x[2:, 2:] + x[1:-1, :-2]",
    "x[1:-1, 1:-1] == y[1:-1, 1:-1]",
    "x[::2, 1:] - y[1::2, :-1]",
    "x[::-1, ::2] * y[:, ::2]",
    "x.T[1:] < y.T[:-1]",
    "x[:, :1] >= y[0, :]",
    "np.maximum(x[1:, ::3], y[:-1, ::3])",
]


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("dtype", ["int64", "bool", "float64", "float32"])
@pytest.mark.parametrize("expr", VIEW_EXPRESSIONS)
def test_binary_operations_on_views(expr, dtype, size, threads):
    f = numpy_fn(expr, "x, y")
    x, y = _operand(dtype, size, 1), _operand(dtype, size, 2)
    if dtype == "bool" and " - " in expr:  # NumPy refuses - on bools: so must tessera
        with pytest.raises(TypeError):
            f(x, y)
        with pytest.raises(TypeError):
            tessera.jit(f, threads=threads)(x, y)
        return
    _same(tessera.jit(f, threads=threads)(x, y), f(x, y))


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("expr", ["x[::2] // y[1::2]", "x[1:] % y[:-1]", "x[::3] * y[::3]",
                                  "x[::-2] ** 2"])
def test_integer_arithmetic_on_views_wraps_and_divides_as_numpy(expr, threads):
    rng = np.random.default_rng(3)
    x = rng.integers(-(2**62), 2**62, size=20000, dtype=np.int64)
    y = rng.integers(1, 1000, size=20000, dtype=np.int64)
    f = numpy_fn(expr, "x, y")
    with np.errstate(over="ignore"):
        want = f(x, y)
    _same(tessera.jit(f, threads=threads)(x, y), want)


@pytest.mark.parametrize("threads", THREADS)
def test_float_operations_that_are_not_fused_read_views(threads):
    f = numpy_fn("np.copysign(x[:, ::2], y[:, 1::2]) + (x[::2, ::2] % 0.75)[0] + y[::-1, 1::2] // 0.5",
                 "x, y")
    x, y = _operand("float64", (300, 400), 4), _operand("float64", (300, 400), 5)
    _same(tessera.jit(f, threads=threads)(x, y), f(x, y))


@pytest.mark.parametrize("threads", THREADS)
def test_views_of_arguments_are_not_written(threads):
    f = numpy_fn("x[::2, ::2] + y[1::2, 1::2]", "x, y")
    x, y = _operand("int64", (300, 300), 6), _operand("int64", (300, 300), 7)
    x0, y0 = x.copy(), y.copy()
    _same(tessera.jit(f, threads=threads)(x, y), f(x0, y0))
    _same(x, x0)
    _same(y, y0)


BIT_EXPRESSIONS = ["x & y", "x | y", "x ^ y", "x & True", "False | y", "x[::2] ^ y[1::2]",
                   "x & y[:1]", "(x == 1) | (y == 0)"]


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("n", [1, 10, 300000])
@pytest.mark.parametrize("dtype", ["bool", "int64"])
@pytest.mark.parametrize("expr", BIT_EXPRESSIONS)
def test_bitwise_operations(expr, dtype, n, threads):
    f = numpy_fn(expr, "x, y")
    x, y = _operand(dtype, (n,), 8), _operand(dtype, (n,), 9)
    _same(tessera.jit(f, threads=threads)(x, y), f(x, y))


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("expr", ["x << y", "x >> y", "x << 3", "5 >> y", "x[::-1] >> y[::2][:1]"])
def test_shifts(expr, threads):
    rng = np.random.default_rng(10)
    x = rng.integers(-(2**40), 2**40, size=70000, dtype=np.int64)
    y = rng.integers(0, 64, size=70000, dtype=np.int64)
    f = numpy_fn(expr, "x, y")
    _same(tessera.jit(f, threads=threads)(x, y), f(x, y))


def test_shift_counts_outside_the_word_shift_every_bit_out():
    f = numpy_fn("x << y, x >> y", "x, y")
    x = np.array([5, -5, 7, -7, 1], dtype=np.int64)
    y = np.array([64, 64, 70, 100, 63], dtype=np.int64)
    left, right = tessera.jit(f)(x, y)
    _same(left, np.array([0, 0, 0, 0, np.int64(-(2**63))], dtype=np.int64))
    _same(right, np.array([0, -1, 0, -1, 0], dtype=np.int64))


# Slice writes (Array::assign): a contiguous inner axis, a broadcast row or
# value, a cast, an overlapping source, large enough to be split by rows.
ASSIGN_BODIES = [
    "g[1:-1, 1:-1] = v[1:-1, 1:-1]",
    "g[:, 1:] = v[0, 1:]",
    "g[::2, :] = 7",
    "g[1:-1, 1:-1] = g[:-2, :-2]",
    "g[1:-1, 1:-1] = (v[1:-1, 1:-1] > 0).astype(g.dtype)",
    "g[:, ::-1] = v",
    "g.T[1:, :] = v.T[:-1, :]",
]


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("size", [(6, 5), (400, 300)], ids=str)
@pytest.mark.parametrize("dtype", ["int64", "float64", "bool"])
@pytest.mark.parametrize("body", ASSIGN_BODIES)
def test_slice_writes(body, dtype, size, threads):
    f = numpy_body(body + "\nreturn g", "g, v")
    g, v = _operand(dtype, size, 11), _operand("int64" if dtype == "bool" else dtype, size, 12)
    want = f(g.copy(), v.copy())
    _same(tessera.jit(f, threads=threads)(g.copy(), v.copy()), want)


def test_a_float_written_into_an_int_slice_truncates_as_numpy():
    f = numpy_body("g[2:, :] = v[:-2, :]\nreturn g", "g, v")
    g = np.zeros((300, 300), dtype=np.int64)
    v = np.random.default_rng(13).normal(size=(300, 300)) * 100
    want = f(g.copy(), v)
    _same(tessera.jit(f, threads=2)(g.copy(), v), want)


def life(grid, steps):
    for _ in range(steps):
        neighbours = (
            grid[:-2, :-2] + grid[:-2, 1:-1] + grid[:-2, 2:]
            + grid[1:-1, :-2] + grid[1:-1, 2:]
            + grid[2:, :-2] + grid[2:, 1:-1] + grid[2:, 2:]
        )
        inner = grid[1:-1, 1:-1]
        born = (neighbours == 3) & (inner == 0)
        survive = ((neighbours == 2) | (neighbours == 3)) & (inner == 1)
        grid = np.zeros_like(grid)
        grid[1:-1, 1:-1] = (born | survive).astype(grid.dtype)
    return grid


def histogram(x, nbins, lo, hi):
    idx = ((x - lo) / (hi - lo) * nbins).astype(np.int64)
    keep = (idx >= 0) & (idx < nbins)
    return np.bincount(idx[keep], minlength=nbins)


@pytest.mark.parametrize("threads", THREADS)
def test_the_benchmarks_life_and_histogram(threads):
    grid = (np.random.default_rng(14).random((300, 300)) < 0.3).astype(np.int64)
    _same(tessera.jit(life, threads=threads)(grid, 4), life(grid, 4))
    x = np.random.default_rng(15).normal(size=200001)
    _same(tessera.jit(histogram, threads=threads)(x, 50, -3.0, 3.0), histogram(x, 50, -3.0, 3.0))


def test_uniform_draws_do_not_depend_on_the_thread_count():
    f = numpy_body("np.random.seed(5)\nreturn np.random.random(300001)", "")
    one = np.asarray(tessera.jit(f, threads=1)())
    two = np.asarray(tessera.jit(f, threads=2)())
    _same(one, two)
    assert one.min() >= 0.0 and one.max() < 1.0
    # 300,001 draws: the mean within 5 standard errors of 1/2.
    assert abs(one.mean() - 0.5) < 5 * np.sqrt(1 / 12 / one.size)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("src, dst", [("float64", "int64"), ("float32", "int64"),
                                      ("int64", "float64"), ("float64", "float32"),
                                      ("int64", "bool"), ("bool", "float64")])
def test_casts(src, dst, threads):
    x = np.random.default_rng(16).normal(size=100003) * 1e3
    x[:6] = [np.nan, np.inf, -np.inf, 1e300, -1e300, -0.5]
    with np.errstate(invalid="ignore", over="ignore"):
        if src in ("int64", "bool"):
            x = np.nan_to_num(x, posinf=0.0, neginf=0.0).astype(np.int64) % 3 - 1
        x = x.astype(src)
    f = numpy_fn(f"x.astype(np.{dst})", "x")
    with np.errstate(invalid="ignore", over="ignore"):
        want = f(x)
    _same(tessera.jit(f, threads=threads)(x), want)


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("n, bins", [(0, 3), (7, 2), (100003, 50), (100003, 2000), (5, 1)])
def test_bincount_and_masked_reads(n, bins, threads):
    rng = np.random.default_rng(17)
    x = rng.integers(0, bins, size=n)
    m = rng.random(n) < 0.4
    f = numpy_fn(f"np.bincount(x, minlength={bins}), x[m], x[x > {bins // 2}], "
                 "np.bincount(x[::-1][m[::-1]])", "x, m")
    for g, w in zip(tessera.jit(f, threads=threads)(x, m), f(x, m)):
        _same(g, w)


def test_bincount_of_a_negative_value_names_its_index():
    f = numpy_fn("np.bincount(x)", "x")
    x = np.zeros(1000, dtype=np.int64)
    x[637] = -4
    with pytest.raises(ValueError, match=r"-4 at index 637"):
        tessera.jit(f)(x)


# Basic indexing by ints and slices alone is a view made straight from the
# array's strides (indexing.cpp, basic_view); every other index, and every
# error, goes through the general selection.
BASIC_INDEXES = ["x[1]", "x[-1, :, 2]", "x[:, -2]", "x[1:3, ::-2, 4]", "x[::-1]", "x[5:, 1]",
                 "x[:, 3:1]", "x[-4, -5, ::3]", "x[0, 0]", "x[1:, 2:-1, -3:]", "x[::2, 1, ::-1]",
                 "x[:, :, 5]", "x.T[2, 1:]", "x[1][::-1][2]"]


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("expr", BASIC_INDEXES)
def test_basic_indexing_views(expr, threads):
    x = np.arange(120, dtype=np.float64).reshape(4, 5, 6)
    _same(tessera.jit(numpy_fn(expr), threads=threads)(x), numpy_fn(expr)(x))
    # A view: a write through it reaches the array, as in NumPy.
    body = f"x = x.copy()\nv = {expr}\nv += 1000.0\nreturn x"
    _same(tessera.jit(numpy_body(body), threads=threads)(x), numpy_body(body)(x))


@pytest.mark.parametrize("expr, error, message", [
    ("x[4]", IndexError, "index 4 is out of bounds for axis 0 with size 4"),
    ("x[:, -6]", IndexError, "index -6 is out of bounds for axis 1 with size 5"),
    ("x[1, 2, 3, 4]", IndexError, "too many indices for array"),
    ("x[::0]", ValueError, "slice step cannot be zero"),
])
def test_basic_indexing_errors(expr, error, message):
    x = np.arange(120, dtype=np.float64).reshape(4, 5, 6)
    with pytest.raises(error):
        numpy_fn(expr)(x)
    with pytest.raises(error, match=message) as info:
        tessera.jit(numpy_fn(expr))(x)
    assert ".py:" in str(info.value)


# One-dimensional operations on a strided operand small enough to run in one
# piece (kernels/fused.cpp, strided_binary_1d) and large enough to be split:
# values bit for bit, NaNs included, results and in-place writes.
STRIDED_1D = ["0.5 * x[:, 3]", "x[:, 3] - y[::2, 1]", "x[::-1, 2] / 3.0", "np.maximum(x[:, 1], y[1::2, 0])",
              "np.copysign(x[:, 0], y[::2, 2])", "x[:, 2] % 0.75", "x[:, 1] ** 2", "x[:, 4] + x[:, 4]"]


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("rows", [7, 1000, 300000])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("expr", STRIDED_1D)
def test_strided_one_dimensional_operations(expr, dtype, rows, threads):
    x, y = _operand(dtype, (rows, 5), 8), _operand(dtype, (2 * rows, 3), 9)
    x[rows // 2, :] = np.nan
    y[1, :] = -np.nan
    _same(tessera.jit(numpy_fn(expr, "x, y"), threads=threads)(x, y), numpy_fn(expr, "x, y")(x, y))


@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("rows", [7, 1000, 300000])
@pytest.mark.parametrize("body", ["v = x[:, 3].copy()\nv -= 0.25 * x[:, 1]\nreturn v",
                                  "x = x.copy()\nv = x[:, 2]\nv *= 3.0\nv += y[::2, 0]\nreturn x",
                                  "x = x.copy()\nx[::3, 0] -= y[: len(x[::3, 0]), 1]\nreturn x"])
def test_strided_one_dimensional_writes(body, rows, threads):
    x, y = _operand("float64", (rows, 5), 10), _operand("float64", (2 * rows, 3), 11)
    _same(tessera.jit(numpy_body(body, "x, y"), threads=threads)(x, y), numpy_body(body, "x, y")(x, y))


# The nn primitives that may hand their operand back (dropout at inference)
# take views unpacked; each packs a strided one before its kernel reads it.
NN_ON_VIEWS = [("dropout", (0.5, 3, True)), ("dropout", (0.5, 3, False)), ("relu", ()),
               ("sigmoid", ()), ("softmax", ()), ("log_softmax", ()), ("gelu", ()),
               ("bias_add", "bias")]


@pytest.mark.parametrize("name, rest", NN_ON_VIEWS)
def test_nn_primitives_read_strided_operands(name, rest):
    x = (np.arange(48, dtype=np.float32).reshape(6, 8) - 20.5) / 7
    view = x.T[::2]  # strided: every other row of the transpose
    rest = [np.linspace(-1, 1, 6).astype(np.float32)] if rest == "bias" else list(rest)
    got = np.asarray(_core.call_primitive(name, [view] + rest))
    want = np.asarray(_core.call_primitive(name, [np.ascontiguousarray(view)] + rest))
    _same(got, want)
    assert np.array_equal(x, (np.arange(48, dtype=np.float32).reshape(6, 8) - 20.5) / 7)


def test_keras_random_dropout_in_a_layer_after_pooling():
    """keras-io's intro to Keras: a custom layer calling keras.random.dropout
    on a pooled (strided) value, inside a subclassed model's fit."""
    import tessera.nn as nn

    class MyDropout(nn.layers.Layer):
        def __init__(self, rate):
            super().__init__()
            self.rate, self.seed_generator = rate, nn.random.SeedGenerator(1337)

        def call(self, inputs):
            return nn.random.dropout(inputs, self.rate, seed=self.seed_generator)

    inp = nn.Input((6, 6, 2))
    h = nn.layers.GlobalAveragePooling2D()(nn.layers.Conv2D(4, 3)(inp))
    d = MyDropout(0.5)(h)
    m = nn.Model(inp, nn.layers.Dense(3)(d))
    m.compile("sgd", "mse")
    rng = np.random.default_rng(1)
    x, y = rng.random((8, 6, 6, 2), np.float32), rng.random((8, 3), np.float32)
    loss = m.fit(x, y, epochs=1, batch_size=4, verbose=0).history["loss"][0]
    assert np.isfinite(loss)
    # keras.random.dropout drops whatever the phase (it is not a layer): each
    # element is 0 or the pooled value / (1 - rate)
    pooled = nn.Model(inp, h).predict(x, verbose=0)
    dropped = nn.Model(inp, d).predict(x, verbose=0)
    kept = dropped != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(dropped[kept], 2 * pooled[kept], rtol=1e-6)
