"""NumPy's ufunc methods inside @tessera.jit (issue 31 item 6): outer,
reduce, accumulate, reduceat and at give what NumPy gives (values bit for
bit where the order of operations is NumPy's, dtypes, in-place writes into
the caller's arrays, errors and their kinds), at 1 and 2 threads; what is
not translated is an UnsupportedError naming the method and the line."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from jit_check import assert_same, check, numpy_body, numpy_fn

import tessera

DTYPES = ["bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64"]
FLOATS = ["float16", "float32", "float64"]


def sample(dtype, shape=(3, 4, 5), seed=0):
    """Values of `dtype` with repeats, negatives and (floats) a NaN and -0.0."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind == "f":
        x = (rng.integers(-4, 5, shape) + rng.random(shape) * (rng.random(shape) > 0.5))
        x = x.astype(dtype)
        x.flat[3 % x.size] = np.nan
        x.flat[7 % x.size] = -0.0
        return x
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape).astype(dtype)


def exact(f, *args):
    """check() with no tolerance: NumPy's order of operations is tessera's."""
    return check(f, *args, rtol=0, atol=0)


# ---------------------------------------------------------------- outer

OUTER = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "equal", "less",
         "greater_equal", "power", "arctan2", "hypot", "logical_and", "logical_xor", "fmax"]


@pytest.mark.parametrize("name", OUTER)
def test_outer_of_binary_ufuncs(name, threads):
    v = np.array([1.5, -2.0, 0.5, 3.0])
    w = np.array([[0.5, 2.0, -1.0], [4.0, 0.25, 1.0]])
    # tessera's arctan2/hypot/power are within an ulp of NumPy's libm
    tol = 1e-15 if name in ("arctan2", "hypot", "power") else 0
    check(numpy_fn(f"np.{name}.outer(v, w)", "v, w"), v, w, rtol=tol, atol=0)
    check(numpy_fn(f"np.{name}.outer(w, v)", "v, w"), v, w, rtol=tol, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_outer_dtypes_and_scalars(dtype):
    a, b = sample(dtype, (4,)), sample(dtype, (2, 3), seed=1)
    exact(numpy_fn("np.add.outer(a, b)", "a, b"), a, b)
    exact(numpy_fn("np.multiply.outer(a, 3)", "a, b"), a, b)
    exact(numpy_fn("np.add.outer(2, b)", "a, b"), a, b)
    exact(numpy_fn("np.equal.outer(a, b)", "a, b"), a, b)


def test_outer_of_bitwise_ints_and_lists():
    a = np.array([1, 6, 12], dtype=np.int32)
    exact(numpy_fn("np.bitwise_and.outer(a, a)", "a"), a)
    exact(numpy_fn("np.subtract.outer([1, 2, 3], [0.5, 1.0])", "a"), a)
    exact(numpy_fn("np.add.outer(a, a, dtype=np.float32)", "a"), a)


def floyd_warshall(path):
    for k in range(path.shape[0]):
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))


def test_npbench_floyd_warshall_in_place(threads):
    rng = np.random.default_rng(3)
    path = rng.integers(1, 20, (12, 12)).astype(np.int32)
    exact(floyd_warshall, path)


# ---------------------------------------------------------------- reduce

REDUCE = ["add", "multiply", "maximum", "minimum", "fmax", "fmin", "logical_and", "logical_or",
          "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"]
AXES = ["", "axis=1", "axis=-1", "axis=None", "axis=(0, 2)", "axis=(2, 0), keepdims=True",
        "axis=None, keepdims=True", "axis=0, keepdims=True"]


@pytest.mark.parametrize("name", REDUCE)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_every_op_dtype_and_axis(name, dtype):
    x = sample(dtype)
    for axes in AXES:
        sep = ", " if axes else ""
        f = numpy_fn(f"np.{name}.reduce(x{sep}{axes})")
        if name in ("add", "multiply") and dtype == "float16":
            # tessera sums float16 in float32 and rounds once; NumPy rounds
            # some partial sums to float16 on the way
            check(f, x, rtol=4e-3)
        elif name in ("add", "multiply") and dtype in FLOATS and "(" in axes:
            check(f, x, rtol=1e-6)  # several axes: NumPy's order is not sum's
        else:
            exact(f, x)


@pytest.mark.parametrize("name", REDUCE)
def test_reduce_initial_where_and_dtype(name):
    x = sample("int32", (4, 6)) if "bitwise" in name else sample("float64", (4, 6))
    mask = sample("bool", (4, 6), seed=5)
    check(numpy_fn(f"np.{name}.reduce(x, axis=1, initial=1)"), x, rtol=1e-15, atol=0)
    check(numpy_fn(f"np.{name}.reduce(x, 0, None, None, False, 1)"), x, rtol=1e-15, atol=0)
    check(numpy_fn(f"np.{name}.reduce(x, axis=(0, 1), initial=1)"), x, rtol=1e-15, atol=0)
    # NumPy adds initial (or masked elements) in another order than its
    # pairwise sum: equal to rounding
    check(numpy_fn(f"np.{name}.reduce(x, axis=1, where=m, initial=2)", "x, m"), x, mask,
          rtol=1e-15, atol=0)
    # maximum & co have no identity: where= without initial is NumPy's ValueError
    exact(numpy_fn(f"np.{name}.reduce(x, axis=0, where=m)", "x, m"), x, mask)
    if "bitwise" not in name and "logical" not in name:
        exact(numpy_fn(f"np.{name}.reduce(x, axis=1, dtype=np.float32)"), x)


@pytest.mark.parametrize("name", REDUCE)
@pytest.mark.parametrize("shape, axis", [((0, 3), 0), ((3, 0), 1), ((3, 0), 0), ((0,), None)])
def test_reduce_empty_identity_or_numpys_value_error(name, shape, axis):
    x = np.zeros(shape, dtype=np.int64)
    exact(numpy_fn(f"np.{name}.reduce(x, axis={axis})"), x)
    exact(numpy_fn(f"np.{name}.reduce(x, axis={axis}, initial=7)"), x)


def test_reduce_empty_message_names_the_operation_and_line():
    f = numpy_fn("np.fmax.reduce(x, axis=1)")
    with pytest.raises(ValueError, match=r"zero-size array to reduction operation fmax.*\.py:5"):
        tessera.jit(f)(np.zeros((2, 0)))
    g = numpy_fn("np.maximum.reduce(x, where=x > 0)")
    with pytest.raises(ValueError, match=r"'maximum' does not have an identity.*\.py:5"):
        tessera.jit(g)(np.ones(3))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "float32"])
def test_reduce_of_a_0d_array_is_its_element(dtype):
    y = np.asarray(3, dtype=dtype)
    for e in ["np.add.reduce(x)", "np.multiply.reduce(x, keepdims=True)", "np.maximum.reduce(x)",
              "np.fmin.reduce(x)", "np.logical_or.reduce(x, initial=False)",
              "np.add.reduce(x, axis=0)", "np.add.reduce(x, initial=None)",
              "np.maximum.reduce(x, axis=-1)", "np.add.reduce(x, axis=1)"]:
        exact(numpy_fn(e), y)


def test_reduce_nan_rules():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, -1.0]])
    for name in ("maximum", "minimum", "fmax", "fmin", "logical_xor", "logical_and"):
        exact(numpy_fn(f"np.{name}.reduce(x, axis=1)"), x)
        exact(numpy_fn(f"np.{name}.reduce(x, axis=0)"), x)


@pytest.mark.parametrize("name", ["maximum", "fmin", "logical_xor", "bitwise_or", "add"])
def test_large_arrays_split_over_threads(name, threads):
    # big enough for the runtime to cut the lanes into tiles at 2 threads
    rng = np.random.default_rng(8)
    x = rng.integers(-1000, 1000, (64, 300, 24))
    if name in ("maximum", "fmin"):
        x = x.astype(np.float64)
        x[::7, ::5, ::3] = np.nan
    for axis in (0, 1, 2):
        exact(numpy_fn(f"np.{name}.accumulate(x, axis={axis})"), x)
        exact(numpy_fn(f"np.{name}.reduce(x, axis={axis})"), x)


# ---------------------------------------------------------------- accumulate

ACCUMULATE = REDUCE


@pytest.mark.parametrize("name", ACCUMULATE)
@pytest.mark.parametrize("dtype", DTYPES)
def test_accumulate_every_op_dtype_and_axis(name, dtype):
    x = sample(dtype)
    for axes in ("", "axis=1", "axis=-1", "2", "axis=0, dtype=None"):
        sep = ", " if axes else ""
        f = numpy_fn(f"np.{name}.accumulate(x{sep}{axes})")
        if name in ("add", "multiply") and dtype == "float16":
            check(f, x, rtol=4e-3)  # float16 sums in float32, as cumsum's (see reduce)
        else:
            exact(f, x)


def test_accumulate_dtype_and_running_max_drawdown():
    prices = np.array([10.0, 12.0, 9.0, 13.0, 11.0, 8.0, np.nan, 14.0])
    exact(numpy_fn("prices / np.maximum.accumulate(prices) - 1.0", "prices"), prices)
    exact(numpy_fn("np.fmax.accumulate(prices)", "prices"), prices)
    exact(numpy_fn("np.minimum.accumulate(prices)", "prices"), prices)
    x = sample("int8", (4, 5))
    exact(numpy_fn("np.add.accumulate(x, dtype=np.int8)"), x)
    exact(numpy_fn("np.maximum.accumulate(x, 1, np.float32)"), x)


def test_accumulate_errors_as_numpy():
    x = np.ones((2, 3))
    exact(numpy_fn("np.add.accumulate(x, axis=None)"), x)
    exact(numpy_fn("np.maximum.accumulate(x, axis=(0, 1))"), x)
    exact(numpy_fn("np.add.accumulate(x[0, 0])"), x)
    exact(numpy_fn("np.maximum.accumulate(x[0, 0])"), x)
    exact(numpy_fn("np.maximum.accumulate(x, axis=2)"), x)
    exact(numpy_fn("np.bitwise_or.accumulate(x)"), x)
    exact(numpy_fn("np.maximum.accumulate(x[:0])"), x)


def test_accumulate_of_complex_names_what_is_missing():
    z = np.array([1 + 2j, 3 - 1j])
    exact(numpy_fn("np.add.accumulate(z)", "z"), z)
    exact(numpy_fn("np.logical_or.accumulate(z)", "z"), z)
    f = numpy_fn("np.maximum.accumulate(z)", "z")
    with pytest.raises(TypeError, match=r"maximum of complex arrays is not supported.*\.py:5"):
        tessera.jit(f)(z)


def cummax_loss(x):
    return np.sum(np.maximum.accumulate(x, axis=1) * np.arange(1.0, 6.0))


def cummin_loss(x):
    return np.sum(np.fmin.accumulate(x, axis=0) ** 2)


@pytest.mark.parametrize("loss", [cummax_loss, cummin_loss])
def test_running_max_gradient_matches_finite_differences(loss):
    x = np.random.default_rng(4).normal(size=(3, 5))
    g = tessera.grad(loss)(x)
    eps = 1e-6
    num = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        num[i] = (loss(hi) - loss(lo)) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-6)


def test_add_and_multiply_accumulate_gradients():
    def f(x):
        return np.sum(np.add.accumulate(x, axis=1) * np.multiply.accumulate(x, axis=1))

    x = np.random.default_rng(5).normal(size=(2, 4))
    g = tessera.grad(f)(x)
    eps = 1e-6
    num = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        num[i] = (f(hi) - f(lo)) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- reduceat

@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int64", "float32", "float64"])
def test_reduceat_numpys_rule_for_non_increasing_indices(name, dtype, threads):
    x = sample(dtype, (10, 3))
    idx = np.array([0, 4, 2, 7, 7, 9])
    exact(numpy_fn(f"np.{name}.reduceat(x, i)", "x, i"), x, idx)
    exact(numpy_fn(f"np.{name}.reduceat(x.T, i, axis=1)", "x, i"), x, idx)
    exact(numpy_fn(f"np.{name}.reduceat(x, [3])", "x, i"), x, idx)
    exact(numpy_fn(f"np.{name}.reduceat(x, [5, 1])", "x, i"), x, idx)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reduceat_long_segments_in_numpys_order(dtype):
    # segments longer than NumPy's pairwise block (8), along a strided axis too
    x = np.random.default_rng(9).normal(size=(300, 3)).astype(dtype)
    idx = np.array([0, 30, 5, 150, 299, 12])
    for name in ("add", "multiply"):
        exact(numpy_fn(f"np.{name}.reduceat(x, i)", "x, i"), x, idx)
        exact(numpy_fn(f"np.{name}.reduceat(x.T, i, axis=1)", "x, i"), x, idx)
        exact(numpy_fn(f"np.{name}.reduceat(x.T.copy(), i, axis=-1)", "x, i"), x, idx)


def test_reduceat_dtype_and_errors():
    x = np.arange(10, dtype=np.int8)
    exact(numpy_fn("np.add.reduceat(x, [0, 4, 8], dtype=np.float64)"), x)
    exact(numpy_fn("np.add.reduceat(x, [0, 10])"), x)
    exact(numpy_fn("np.add.reduceat(x, [-1])"), x)
    exact(numpy_fn("np.add.reduceat(x, [[0, 1]])"), x)
    exact(numpy_fn("np.minimum.reduceat(x[0], [0])"), x)
    f = numpy_fn("np.maximum.reduceat(x, [0, 12])")
    with pytest.raises(IndexError, match=r"index 12 out-of-bounds in maximum\.reduceat"
                                         r" \[0, 10\).*\.py:5"):
        tessera.jit(f)(x)


# ---------------------------------------------------------------- at

AT = ["add", "subtract", "multiply", "maximum", "minimum", "fmax", "bitwise_or", "bitwise_xor"]


@pytest.mark.parametrize("name, dtype", [
    (n, d) for n in AT for d in ["bool", "int8", "uint8", "int64", "float16", "float32", "float64"]
    if not ("bitwise" in n and d.startswith("float"))])  # floats: test_at_errors
def test_at_repeated_indices_accumulate_in_place(name, dtype, threads):
    a = sample(dtype, (6,))
    b = sample(dtype, (5,), seed=2)
    idx = np.array([0, 3, 0, 5, 0])
    exact(numpy_body(f"np.{name}.at(a, i, b)", "a, i, b"), a, idx, b)
    exact(numpy_body(f"np.{name}.at(a, [1, 1, 2], 3)\nreturn a", "a, i, b"), a, idx, b)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "bitwise_xor",
                                  "logical_xor"])
def test_at_computes_in_the_promoted_dtype_and_stores_back_each_step(name):
    # NumPy's loop for (x's dtype, the values') runs once per index and casts
    # back: bool ^ 3 twice is True twice, int8 -3 + 1.5 twice is 0
    a = np.array([True, False, False])
    ints = np.array([-3, 5, 100], dtype=np.int8)
    exact(numpy_body(f"np.{name}.at(a, [1, 1, 2], 3)", "a"), a)
    exact(numpy_body(f"np.{name}.at(a, [0, 0], np.array([2, 2], dtype=np.int8))", "a"), ints)
    if "bitwise" not in name:
        exact(numpy_body(f"np.{name}.at(a, [0, 0, 2], 1.5)", "a"), ints)
        exact(numpy_body(f"np.{name}.at(a, [0, 0], np.float32(2.5))", "a"), ints)
    exact(numpy_body(f"np.{name}.at(a, [2, 2], 300)", "a"), ints)


def test_at_tuples_slices_views_and_module_arrays(threads):
    a = np.zeros((4, 5))
    rows, cols = np.array([0, 1, 0, 0]), np.array([2, 2, 2, 4])
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    exact(numpy_body("np.add.at(a, (r, c), v)", "a, r, c, v"), a, rows, cols, vals)
    exact(numpy_body("np.maximum.at(a, (r, c), v)\nreturn a.sum()", "a, r, c, v"), a, rows,
          cols, vals)
    exact(numpy_body("np.add.at(a, (slice(None), [1, 1]), 1.0)", "a, r, c, v"), a, rows, cols,
          vals)
    exact(numpy_body("np.subtract.at(a[1], c, v)", "a, r, c, v"), a, rows, cols, vals)
    exact(numpy_body("np.multiply.at(a.T, 2, 3.0)", "a, r, c, v"), a + 1, rows, cols, vals)
    exact(numpy_body("np.add.at(a, r, v[:, None])", "a, r, c, v"), a, rows, cols, vals)


COUNTS = np.zeros(3, dtype=np.int64)


def count_into_module_array(idx):
    np.add.at(COUNTS, idx, 2)
    np.maximum.at(COUNTS, idx[:1], 5)


def test_at_writes_a_module_level_array():
    COUNTS[:] = 0
    tessera.jit(count_into_module_array)(np.array([0, 2, 2]))
    want = np.zeros(3, dtype=np.int64)
    np.add.at(want, [0, 2, 2], 2)
    np.maximum.at(want, [0], 5)
    np.testing.assert_array_equal(COUNTS, want)


@pytest.mark.parametrize("name", ["logical_and", "logical_xor", "divide", "power", "fmin"])
def test_at_other_binary_ufuncs(name):
    a = np.array([1.5, 0.0, 2.0, 3.0])
    exact(numpy_body(f"np.{name}.at(a, [0, 2, 0], [2.0, 0.5, 3.0])", "a"), a)


def histogram(data, nbins):
    counts = np.zeros(nbins, dtype=np.int64)
    np.add.at(counts, (data * nbins).astype(np.int64), 1)
    return counts


def test_at_histogram_and_scatter_add(threads):
    data = np.random.default_rng(6).random(200)
    exact(histogram, data, 8)


def test_at_is_none_as_an_expression():
    a = np.arange(4.0)
    exact(numpy_body("r = np.add.at(a, 0, 1)\ns = np.maximum.at(a, [1], 9.0)\n"
                     "t = np.power.at(a, [2], 2.0)\nreturn r, s, t, a", "a"), a)


def test_at_errors():
    a = np.ones(4, dtype=np.int64)
    exact(numpy_body("np.add.at(a, [0, 4], 1)", "a"), a)
    exact(numpy_body("np.maximum.at(a, np.array([0, -1, -4, -1]), 3)", "a"), a)
    exact(numpy_body("np.add.at(a, np.array([0, 4]), 1)", "a"), a)
    exact(numpy_body("np.add.at(a, np.array([-5]), 1)", "a"), a)
    h = numpy_body("np.multiply.at(a, np.array([1, 7]), 2)", "a")
    with pytest.raises(IndexError, match=r"index 7 is out of bounds for axis 0 with size 4"
                                         r".*\.py:5"):
        tessera.jit(h)(a)
    exact(numpy_body("b = a.astype(np.float64)\nnp.bitwise_and.at(b, [0], 1.0)\nreturn b", "a"), a)
    exact(numpy_body("b = a > 0\nnp.subtract.at(b, [0], True)\nreturn b", "a"), a)
    f = numpy_body("np.add.at(a, [0])", "a")
    with pytest.raises(TypeError, match=r"np\.add\.at.*second operand.*\.py:5"):
        tessera.jit(f)(a)
    g = numpy_body("np.add.at(a + 1, [0], 1)", "a")
    with pytest.raises(tessera.UnsupportedError, match=r"np\.add\.at on a temporary.*\.py:5"):
        tessera.jit(g)(a)


# ---------------------------------------------------------------- the rest


def test_cheap_attributes():
    x = np.ones(3)
    exact(numpy_fn("(np.add.identity, np.multiply.identity, np.maximum.identity, np.add.nin, "
                   "np.add.nout, np.add.nargs, np.add.__name__, np.add.signature, np.add.types, "
                   "np.maximum.ntypes)"), x)
    exact(numpy_fn("x + np.logical_and.identity"), x)


@pytest.mark.parametrize("expr, what", [
    ("np.subtract.reduce(x)", "np.subtract.reduce"),
    ("np.divide.accumulate(x)", "np.divide.accumulate"),
    ("np.ldexp.outer(x, x)", "np.ldexp.outer"),
    ("np.add.resolve_dtypes((None, None, None))", "np.add.resolve_dtypes"),
    ("np.power.reduceat(x, [0])", "np.power.reduceat"),
    ("np.add.reduce(x, out=x)", "the argument out= of np.add.reduce"),
])
def test_unsupported_names_the_method_and_line(expr, what):
    f = numpy_fn(expr)
    with pytest.raises(tessera.UnsupportedError, match=rf"{what.replace('.', r'.')}.*\.py:5"):
        tessera.jit(f)(np.arange(1.0, 4.0))


def test_unary_ufunc_methods_are_numpys_value_error():
    x = np.arange(3.0)
    exact(numpy_fn("np.sin.outer(x, x)"), x)
    exact(numpy_fn("np.negative.reduce(x)"), x)


from numpy import maximum as np_maximum  # noqa: E402 - a ufunc imported under another name


def running_max_imported(x):
    return np_maximum.accumulate(x), np_maximum.reduce(x, axis=None)


def test_ufunc_imported_under_another_name():
    exact(running_max_imported, np.array([[2.0, 1.0], [0.5, 3.0]]))


def test_eager_numpy_unchanged():
    assert np.add.outer.__self__ is np.add
    x = np.arange(4.0)
    tessera.jit(numpy_fn("np.add.outer(x, x)"))(x)
    np.testing.assert_array_equal(np.add.outer(x, x), x[:, None] + x[None, :])


def loop_kernel(x, idx, out):
    total = 0.0
    for i in range(x.shape[0]):
        row = np.maximum.accumulate(x[i])
        total += np.add.reduce(row) + np.fmax.reduce(row)
    for i in range(x.shape[0]):
        np.add.at(out, idx, x[i, :3])
        np.maximum.at(out, idx[:1], x[i, 1])
    for i in range(x.shape[0]):
        total += np.logical_xor.reduce(x[i] > 0.5) + np.add.reduceat(x[i], idx)[1]
    return total


LOOP_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tessera
    sys.path.insert(0, {here!r})
    from test_jit_ufunc_methods import loop_kernel

    x = np.random.default_rng(1).random((5, 6))
    idx = np.array([0, 2, 0])
    kernel = tessera.jit(loop_kernel)
    for threads in (1, 2):
        tessera.set_num_threads(threads)
        out = np.zeros(4)
        got = kernel(x, idx, out)
        out2 = np.zeros(4)
        want = loop_kernel(x, idx, out2)
        assert got == want, (threads, got, want)
        assert np.array_equal(out, out2), (threads, out, out2)
    print("ok", repr(got))
""")


@pytest.mark.parametrize("mode", ["1", "0", "debug"])
def test_inside_loops_of_the_fast_path(mode):
    # the fast path's switch is read at start: one fresh Python per setting,
    # each at 1 and 2 threads; "debug" says that every loop ran on the fast
    # path (the register interpreter: accumulate & co have no native code),
    # none on the general evaluation
    code = LOOP_SCRIPT.format(here=os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, TESSERA_FAST_LOOPS=mode))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok")
    if mode == "debug":
        assert "outside the subset" not in r.stderr, r.stderr
        # each of the three loops says so (once per attempt at native code)
        loops = {line.split(": ")[0] for line in r.stderr.splitlines()
                 if "the interpreter runs the loop" in line}
        assert len(loops) == 3, r.stderr


def test_assert_same_compares_dtypes():
    # the helper this file relies on fails on a dtype difference
    with pytest.raises(AssertionError):
        assert_same(np.zeros(2, np.int8), np.zeros(2, np.int64))
