"""NumPy code through tessera.jit against NumPy itself, family by family, across
dtypes and with 0-d, empty, broadcast and non-contiguous inputs."""

import numpy as np
import pytest
from jit_check import check, numpy_body, numpy_fn

import tessera

DTYPES = [np.bool_, np.int64, np.float32, np.float64]
NUMERIC = [np.int64, np.float32, np.float64]
FLOATS = [np.float32, np.float64]


def sample(dtype, shape=(3, 4), seed=0, positive=False):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        lo = 1 if positive else -5
        return rng.integers(lo, 6, size=shape).astype(dtype)
    v = rng.normal(size=shape)
    if positive:
        v = np.abs(v) + 0.5
    return v.astype(dtype)


def layouts(dtype, positive=False):
    """The same kind of data in every layout: contiguous, 0-d, empty,
    non-contiguous (strided and transposed), Fortran order."""
    base = sample(dtype, (4, 6), positive=positive)
    return {
        "contiguous": base[:3, :4].copy(),
        "0d": np.array(base[0, 0]),
        "empty": base[:0, :4].copy(),
        "strided": base[::2, ::2][:, :3] if base[::2, ::2].shape[1] >= 3 else base[::2, ::2],
        "transposed": base[:4, :3].T,
        "fortran": np.asfortranarray(base[:3, :4]),
    }


LAYOUTS = ["contiguous", "0d", "empty", "strided", "transposed", "fortran"]

# ----------------------------------------------------------------- arithmetic

BINARY = ["x + y", "x - y", "x * y", "x / y", "x // y", "x % y", "x ** 2", "np.maximum(x, y)",
          "np.minimum(x, y)", "np.add(x, y)", "np.subtract(x, y)", "np.multiply(x, y)",
          "np.divide(x, y)", "np.power(x, 2)", "np.mod(x, y)", "np.fmax(x, y)", "-x + y * 2"]


@pytest.mark.parametrize("expr", BINARY)
@pytest.mark.parametrize("dtype", NUMERIC)
def test_binary_arithmetic(expr, dtype):
    x = sample(dtype, (3, 4), seed=1)
    y = sample(dtype, (3, 4), seed=2, positive=True)
    check(numpy_fn(expr, "x, y"), x, y)


@pytest.mark.parametrize("expr", ["x + y", "x * y", "x - y", "x / y", "np.maximum(x, y)"])
@pytest.mark.parametrize(
    "shapes", [((3, 1), (4,)), ((2, 1, 3), (4, 1)), ((), (3,)), ((0, 3), (3,))]
)
def test_broadcasting(expr, shapes):
    x = sample(np.float64, shapes[0], seed=3)
    y = sample(np.float64, shapes[1], seed=4, positive=True)
    check(numpy_fn(expr, "x, y"), x, y)


@pytest.mark.parametrize("expr", ["x + 1", "x * 2.5", "x / 2", "2 ** x", "x + True", "1 - x"])
@pytest.mark.parametrize("dtype", NUMERIC)
def test_python_scalars_are_weak(expr, dtype):
    check(numpy_fn(expr), sample(dtype, (5,), seed=5, positive=True))


@pytest.mark.parametrize("dtype_pair", [(np.int64, np.float32), (np.float32, np.float64),
                                        (np.bool_, np.int64), (np.int64, np.float64)])
def test_type_promotion(dtype_pair):
    x = sample(dtype_pair[0], (4,), seed=6)
    y = sample(dtype_pair[1], (4,), seed=7)
    check(numpy_fn("x + y", "x, y"), x, y)
    check(numpy_fn("x * y", "x, y"), x, y)


UNARY_FLOAT = ["np.sin(x)", "np.cos(x)", "np.tan(x)", "np.exp(x)", "np.tanh(x)", "np.arctan(x)",
               "np.sqrt(np.abs(x))", "np.log(np.abs(x) + 1)", "np.log2(np.abs(x) + 1)",
               "np.log10(np.abs(x) + 1)", "np.log1p(np.abs(x))", "np.expm1(x)", "np.floor(x)",
               "np.ceil(x)", "np.trunc(x)", "np.rint(x)", "np.round(x, 2)", "np.abs(x)",
               "np.sign(x)", "np.square(x)", "-x", "np.negative(x)", "np.reciprocal(x + 10)",
               "np.clip(x, -0.5, 0.5)", "x.clip(-1, 1)", "np.sinh(x)", "np.cosh(x)",
               "np.arcsinh(x)", "np.deg2rad(x)", "np.isnan(x)", "np.isfinite(x)",
               "np.where(x > 0, x, 0.0)", "np.hypot(x, 2.0)", "np.arctan2(x, 1.5)",
               "x.round()", "np.nan_to_num(x)"]


@pytest.mark.parametrize("expr", UNARY_FLOAT)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_elementwise_math(expr, dtype, layout):
    check(numpy_fn(expr), layouts(dtype)[layout], rtol=2e-6 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("expr", ["np.abs(x)", "-x", "np.sign(x)", "np.square(x)", "x * 3 - 1",
                                  "np.exp(x)", "np.sqrt(np.abs(x))", "np.clip(x, -2, 2)"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_integer_math(expr, layout):
    check(numpy_fn(expr), layouts(np.int64)[layout])


# ----------------------------------------------------------------- comparison and logic

COMPARE = ["x < y", "x <= y", "x > y", "x >= y", "x == y", "x != y", "np.equal(x, y)",
           "np.isclose(x, y)", "np.allclose(x, x)", "np.array_equal(x, y)",
           "(x > 0) & (y > 0)", "(x > 0) | (y < 0)", "~(x > y)", "np.logical_xor(x > 0, y > 0)"]


@pytest.mark.parametrize("expr", COMPARE)
@pytest.mark.parametrize("dtype", DTYPES)
def test_comparison_and_logic(expr, dtype):
    x = sample(dtype, (3, 4), seed=8)
    y = sample(dtype, (3, 4), seed=9)
    check(numpy_fn(expr, "x, y"), x, y)


@pytest.mark.parametrize("expr", ["np.logical_and(x, y)", "np.logical_or(x, y)",
                                  "np.logical_not(x)", "x & y", "x | y", "x ^ y", "~x"])
def test_boolean_logic(expr):
    check(numpy_fn(expr, "x, y"), sample(np.bool_, (5,), seed=1), sample(np.bool_, (5,), seed=2))


# ----------------------------------------------------------------- reductions / statistics

REDUCTIONS = ["x.sum()", "x.sum(axis=0)", "x.sum(axis=-1, keepdims=True)", "np.sum(x, axis=1)",
              "x.mean()", "x.mean(axis=0)", "np.mean(x, 1)", "x.max()", "x.max(axis=1)",
              "x.min(axis=0)", "np.amax(x, axis=0)", "x.prod(axis=0)", "x.argmax()",
              "x.argmin(axis=1)", "np.argmax(x, axis=0)", "x.std()", "x.var(axis=0)",
              "np.std(x, axis=1, ddof=1)", "x.cumsum(axis=1)", "np.cumsum(x)",
              "np.cumprod(x, axis=0)", "np.median(x)", "np.ptp(x, axis=0)", "x.any()",
              "x.all(axis=0)", "np.count_nonzero(x)", "np.average(x, axis=0)",
              "np.sum(x, axis=(0, 1))", "np.max(x, axis=0, keepdims=True)", "np.nansum(x)",
              "np.nanmean(x)"]


@pytest.mark.parametrize("expr", REDUCTIONS)
@pytest.mark.parametrize("dtype", NUMERIC)
def test_reductions(expr, dtype):
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    check(numpy_fn(expr), sample(dtype, (3, 4), seed=10), rtol=rtol)


@pytest.mark.parametrize("expr", ["x.sum()", "x.sum(axis=0)", "x.max(axis=1)", "x.mean(axis=0)",
                                  "x.any()", "x.all()", "np.cumsum(x, axis=0)"])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed", "fortran"])
def test_reductions_any_layout(expr, layout):
    check(numpy_fn(expr), layouts(np.float64)[layout])


@pytest.mark.parametrize("expr", ["x.sum()", "x.sum(axis=0)", "x.any()", "x.all()",
                                  "np.count_nonzero(x)", "x.sum(axis=1)", "x.prod()"])
def test_reductions_of_empty_arrays(expr):
    check(numpy_fn(expr), np.zeros((0, 3)))


@pytest.mark.parametrize("expr", ["x.sum()", "x.any()", "np.sum(x)", "x.astype(np.int64).sum()",
                                  "np.count_nonzero(x)", "x.mean()"])
def test_bool_reductions(expr):
    check(numpy_fn(expr), sample(np.bool_, (3, 4), seed=11))


# ----------------------------------------------------------------- shape


SHAPE = ["x.reshape(4, 3)", "x.reshape((2, -1))", "np.reshape(x, (12,))", "x.T",
         "x.transpose()", "np.transpose(x, (1, 0))", "x.flatten()", "x.ravel()",
         "np.expand_dims(x, 0)", "x[None]", "x[:, None, :]", "np.squeeze(x[None])",
         "np.concatenate((x, x))", "np.concatenate([x, x], axis=1)", "np.stack((x, x), axis=1)",
         "np.vstack((x, x))", "np.hstack((x, x))", "np.flip(x, axis=0)", "np.roll(x, 1, axis=1)",
         "np.tile(x, (2, 1))", "np.repeat(x, 2, axis=0)", "x.repeat(2)", "np.swapaxes(x, 0, 1)",
         "np.moveaxis(x[None], 0, 2)", "np.broadcast_to(x[0], (5, 4))",
         "np.pad(x, 1)", "np.atleast_2d(x[0])", "x.shape", "x.ndim", "x.size", "len(x)",
         "np.shape(x)", "x.shape[0] * x.shape[1]", "np.split(x, 3)", "x.astype(np.float32)",
         "x.astype(float)", "x.astype('int64')", "x.astype(bool)", "x.copy()", "np.copy(x)"]


@pytest.mark.parametrize("expr", SHAPE)
@pytest.mark.parametrize("dtype", DTYPES)
def test_shape_operations(expr, dtype):
    check(numpy_fn(expr), sample(dtype, (3, 4), seed=12))


@pytest.mark.parametrize("expr", ["x.reshape(-1)", "x.T", "x.flatten()", "x.shape", "x.size",
                                  "np.concatenate((x, x))", "x.astype(np.float32)"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_shape_operations_any_layout(expr, layout):
    check(numpy_fn(expr), layouts(np.float64)[layout])


def test_dtype_attribute():
    f = numpy_fn("(x.dtype == np.float32, x.dtype != np.int64, np.zeros(2, dtype=x.dtype))")
    for dtype in DTYPES:
        check(f, sample(dtype, (3,)))
    check(f, np.zeros((0,), np.float32))


def test_shape_comparisons():
    f = numpy_fn("(x.shape == y.shape, x.shape == (3, 4), x.shape != (4, 3))", "x, y")
    check(f, np.zeros((3, 4)), np.zeros((3, 4)))
    check(f, np.zeros((3, 4)), np.zeros((4, 3)))


# ----------------------------------------------------------------- indexing


INDEX = ["x[1]", "x[-1]", "x[1, 2]", "x[1][2]", "x[1:3]", "x[::2]", "x[::-1]", "x[:, 0]",
         "x[:, 1:3]", "x[..., None]", "x[..., 0]", "x[None, :, None]", "x[[0, 2]]",
         "x[np.array([2, 0, 1])]", "x[x > 0]", "x[:, [0, 3]]", "x[[0, 1], [1, 2]]",
         "x[1:, ::-2]", "x[np.newaxis]", "x[0, -1]", "x[x[:, 0] > 0]"]


@pytest.mark.parametrize("expr", INDEX)
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_indexing(expr, dtype):
    check(numpy_fn(expr), sample(dtype, (3, 4), seed=13))


@pytest.mark.parametrize("layout", ["strided", "transposed", "fortran"])
@pytest.mark.parametrize("expr", ["x[1]", "x[:, 0]", "x[::-1, 1:]", "x[x > 0]", "x[[0, 1]]"])
def test_indexing_non_contiguous(expr, layout):
    check(numpy_fn(expr), layouts(np.float64)[layout])


SETITEM = [
    "x[0] = 5",
    "x[1, 2] = -1",
    "x[1:3] = 0",
    "x[:, 0] = 9",
    "x[::2, 1:3] = 7",
    "x[x > 0] = 0",
    "x[[0, 2]] = 1",
    "x[0] += 10",
    "x[:, 1] *= 2",
    "x[..., -1] = x[..., 0]",
    "x[1] = np.arange(4)",
]


@pytest.mark.parametrize("stmt", SETITEM)
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_assignment_to_elements_and_slices(stmt, dtype):
    check(numpy_body(f"x = x.copy()\n{stmt}\nreturn x"), sample(dtype, (3, 4), seed=14))


def test_setitem_keeps_the_dtype_like_numpy():
    check(numpy_body("x = x.copy()\nx[0] = 2.7\nreturn x"), np.arange(4))


def test_setitem_on_a_strided_input_writes_into_the_callers_array():
    base = np.arange(12.0).reshape(3, 4)
    expected = base.copy()
    expected[:, ::2][0] = -1.0
    f = tessera.jit(numpy_body("x[0] = -1.0\nreturn x"))
    out = f(base[:, ::2])
    np.testing.assert_array_equal(base, expected)
    assert out[0, 0] == -1.0 and out.shape == (3, 2) and np.shares_memory(out, base)


# ----------------------------------------------------------------- creation


CREATION = ["np.zeros(n)", "np.zeros((n, 2))", "np.ones((2, n), dtype=np.int64)",
            "np.full((n,), 7.5)", "np.full((2, 2), 3, dtype=np.float32)", "np.arange(n)",
            "np.arange(1, n, 2)", "np.arange(0.0, 1.0, 0.25)", "np.linspace(0, 1, n)",
            "np.eye(n)", "np.eye(n, k=1)", "np.identity(n, dtype=bool)", "np.empty((n, 0))",
            "np.zeros_like(np.ones(n))", "np.ones_like(np.arange(n))",
            "np.full_like(np.arange(n), 2)", "np.tri(n)", "np.tril(np.ones((n, n)))",
            "np.triu(np.ones((n, n)), 1)", "np.diag(np.arange(n))", "np.array([1, 2, n])",
            "np.array([[1.0, 2.0], [3.0, n]])", "np.array([True, False])",
            "np.array(n, dtype=np.float32)", "np.zeros(0)", "np.arange(n, dtype=np.float32)",
            "np.zeros((n,), dtype='float32')", "np.meshgrid(np.arange(n), np.arange(2))"]


@pytest.mark.parametrize("expr", CREATION)
def test_creation(expr):
    check(numpy_fn(expr, "n"), 4)


# ----------------------------------------------------------------- linear algebra


LINALG = ["a @ b", "np.dot(a, b)", "a.dot(b)", "np.matmul(a, b)", "a @ b[:, 0]", "a[0] @ b",
          "np.outer(a[0], b[0])", "np.inner(a[0], b[:, 0])", "np.linalg.inv(s)",
          "np.linalg.det(s)", "np.linalg.solve(s, b[:, 0])", "np.linalg.norm(a)",
          "np.linalg.norm(a, axis=1)", "np.trace(s)", "np.kron(s, s)",
          "np.linalg.matrix_power(s, 3)", "np.vdot(a, a)", "a.T @ a", "np.tensordot(a, b, 1)"]


@pytest.mark.parametrize("expr", LINALG)
@pytest.mark.parametrize("dtype", FLOATS)
def test_linear_algebra(expr, dtype):
    a = sample(dtype, (3, 3), seed=15)
    b = sample(dtype, (3, 2), seed=16)
    s = (sample(np.float64, (3, 3), seed=17) + 3 * np.eye(3)).astype(dtype)
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    check(numpy_fn(expr, "a, b, s"), a, b, s, rtol=rtol, atol=1e-6)


def test_matmul_non_contiguous_and_integers():
    a = np.arange(12.0).reshape(3, 4)
    check(numpy_fn("a.T @ a", "a"), a[:, ::2])
    check(numpy_fn("a @ a.T", "a"), np.arange(6).reshape(2, 3))


# Views BLAS reads in place (transposed or with rows further apart than their
# length, batch dims of any stride) and views that are packed first (no unit
# stride, reversed, broadcast): each against NumPy.
MATMUL_VIEWS = ["a.T @ b", "a @ b.T", "np.swapaxes(c, -1, -2) @ c", "c @ np.swapaxes(c, -1, -2)",
                "a[:, :3] @ b[:3]", "a[1:, 1:4].T @ b[1:, :]", "c[:, ::2] @ a[:5, :2]",
                "np.transpose(c, (1, 0, 2)) @ a[:5, :3]", "a[::-1] @ b[::-1].T",
                "a[::2, ::2] @ b[:3, :]", "np.broadcast_to(a[:2, :5], (3, 2, 5)) @ b[:5]",
                "np.transpose(c.reshape(2, 2, 3, 5), (0, 2, 1, 3)) @ np.swapaxes(a[:3, :5], 0, 1)",
                "a.T[0] @ b", "a @ b.T[:, 1]", "a[:, 0] @ a[:, 1]", "a[:1].T @ b[:1]"]


@pytest.mark.parametrize("expr", MATMUL_VIEWS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_matmul_of_views(expr, dtype):
    a = sample(dtype, (6, 5), seed=21)
    b = sample(dtype, (6, 5), seed=22)
    c = sample(dtype, (4, 3, 5), seed=23)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    check(numpy_fn(expr, "a, b, c"), a, b, c, rtol=rtol, atol=1e-6)


# ----------------------------------------------------------------- sorting and searching


SORTING = ["np.sort(x)", "np.sort(x, axis=0)", "np.argsort(x, kind='stable')",
           "np.argsort(x, axis=0, kind='stable')", "x.argsort(kind='stable')",
           "np.unique(x)", "np.searchsorted(np.sort(x.ravel()), 0)", "np.argwhere(x > 0)",
           "np.flatnonzero(x > 0)", "np.nonzero(x > 0)[0]", "np.where(x > 0)[1]"]


@pytest.mark.parametrize("expr", SORTING)
@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_sorting_and_searching(expr, dtype):
    check(numpy_fn(expr), sample(dtype, (3, 4), seed=18))


def test_bincount_and_in_place_sort():
    check(numpy_fn("np.bincount(x)"), np.array([0, 1, 1, 3, 5]))
    check(numpy_body("x = x.copy()\nx.sort()\nreturn x"), np.array([3, 1, 2]))


# ----------------------------------------------------------------- random (values differ)


def test_random_shapes_dtypes_and_ranges():
    @tessera.jit
    def draws(n):
        np.random.seed(3)
        u = np.random.rand(n, 2)
        g = np.random.randn(n)
        v = np.random.uniform(-1.0, 1.0, size=(n,))
        w = np.random.normal(5.0, 0.1, size=n)
        k = np.random.randint(0, 4, size=(n,))
        p = np.random.permutation(n)
        return u, g, v, w, k, p

    u, g, v, w, k, p = draws(1000)
    assert u.shape == (1000, 2) and u.dtype == np.float64 and 0 <= u.min() and u.max() < 1
    assert g.shape == (1000,) and abs(g.mean()) < 0.2
    assert v.min() >= -1 and v.max() < 1
    assert abs(w.mean() - 5.0) < 0.05
    assert k.dtype == np.int64 and set(np.unique(k)) <= {0, 1, 2, 3}
    assert sorted(p.tolist()) == list(range(1000))
    again = draws(1000)
    np.testing.assert_array_equal(again[0], u)  # seeded: reproducible


@pytest.mark.parametrize("expo", ["2", "3", "0.5", "1", "-1", "2.0", "1.5"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_by_a_scalar_matches_numpy_on_special_values(expo, dtype):
    # x ** 2, ** 0.5, ** -1 ... take fast paths (x * x, sqrt, reciprocal), as
    # NumPy's do: signed zeros, infinities and NaNs must come out the same.
    x = np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, -4.0, 2.5, 1e30], dtype=dtype)
    with np.errstate(all="ignore"):
        check(numpy_fn(f"x ** {expo}"), x)


def test_integer_square_wraps_like_numpy():
    check(numpy_fn("x ** 2"), np.array([3, -7, 2**32 + 1, 2**62], dtype=np.int64))


@pytest.mark.parametrize("expr", ["np.cumsum(x, axis=0)", "np.cumprod(x * 0.01 + 1, axis=0)",
                                  "np.cumsum(y, axis=1)", "np.cumsum(x.astype(np.int64), axis=0)",
                                  "np.linalg.norm(x, axis=1)", "np.linalg.norm(x, axis=0)",
                                  "np.linalg.norm(x, ord=1, axis=1)"])
def test_scans_and_norms_split_across_threads_match_numpy(expr):
    # Large enough to be cut into tiles: cumsum along axis 0 of a wide matrix
    # splits its columns, which keeps every column's order of additions.
    rng = np.random.default_rng(11)
    x = rng.standard_normal((6, 5000)) * 100
    y = rng.standard_normal((3, 4, 2000))
    # Scans add in NumPy's order (bit for bit); norms sum in tessera's own.
    exact = "cum" in expr
    got = check(numpy_fn(expr, "x, y"), x, y, rtol=0 if exact else 1e-13, atol=0)
    assert got is not None


@pytest.mark.parametrize("dtype", [np.float64, np.int8, np.complex128])
def test_large_masked_reads_and_writes_split_across_threads_match_numpy(dtype):
    # Large enough for tiles: each tile places its elements after the true
    # elements of the tiles before it.
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(400_000) * 50).astype(dtype)
    c = (rng.standard_normal(400_000) * 50).astype(dtype)
    body = ("m = np.abs(x) > 20\n"
            "y = x[m]\n"
            "x[m] = c[m] * 2\n"
            "c[np.abs(c) < 10] = 7\n"
            "return y, x, c")
    check(numpy_body(body, "x, c"), x, c, rtol=0, atol=0)


# ----------------------------------------------------------------- np.diagonal, np.random.shuffle


@pytest.mark.parametrize("dtype", [np.int64, np.float64, np.bool_])
@pytest.mark.parametrize("expr", [
    "np.diagonal(x)", "x.diagonal()", "np.diagonal(x, 1)", "x.diagonal(-1)",
    "np.diagonal(x, offset=2)", "x.diagonal(5)", "x.diagonal(-7)", "np.diagonal(x, 0, 1, 0)",
    "x.diagonal(offset=1, axis1=1, axis2=0)", "np.diagonal(x.T, -2)", "np.diagonal(x[::2])",
    "np.diagonal(x).sum()", "np.diagonal(x * 2, 1) + 1",
])
def test_diagonal_of_a_matrix_matches_numpy(expr, dtype):
    check(numpy_fn(expr), sample(dtype, (4, 5)))


@pytest.mark.parametrize("expr", [
    "np.diagonal(x)", "np.diagonal(x, 1, 1, 2)", "x.diagonal(-1, axis1=2, axis2=0)",
    "x.diagonal(0, -1, -3)", "np.diagonal(x, axis1=-2, axis2=-1)",
    "np.diagonal(x, 2, 2, 1)",
])
def test_diagonal_of_a_3d_array_matches_numpy(expr):
    check(numpy_fn(expr), sample(np.float64, (3, 4, 5)))
    check(numpy_fn(expr), sample(np.int64, (2, 0, 3)))


@pytest.mark.parametrize("expr", ["np.diagonal(x, 0, 1, 1)", "x.diagonal(axis1=0, axis2=3)"])
def test_diagonal_errors_as_numpy(expr):
    check(numpy_fn(expr), sample(np.float64, (3, 3)))  # the same exception kind as NumPy
    check(numpy_fn(expr.replace("1, 1", "0, 1")), sample(np.float64, (3,)))  # a 1-d array
    check(numpy_fn("np.diagonal(x)"), np.float64(2.0))


def test_diagonal_is_read_only_as_numpy():
    f = numpy_body("np.diagonal(x)[...] = 1.0\nreturn x")
    with pytest.raises(ValueError, match="read-only"):
        f(np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"read-only.*\(at gen_\w+\.py:5\)"):
        tessera.jit(f)(np.ones((2, 2)))


def _is_row_permutation(got, original):
    assert got.shape == original.shape and got.dtype == original.dtype
    flat = (len(original), int(np.prod(original.shape[1:])))
    rows = sorted(map(tuple, np.asarray(original).reshape(flat).tolist()))
    assert sorted(map(tuple, got.reshape(flat).tolist())) == rows


@pytest.mark.parametrize("shape", [(10,), (6, 3), (5, 2, 2), (1,), (0, 3)])
@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_random_shuffle_writes_the_argument_in_place(shape, dtype):
    f = numpy_body("np.random.shuffle(x)\nreturn None")
    x = np.arange(np.prod(shape)).astype(dtype).reshape(shape)
    y = x.copy()
    assert tessera.jit(f)(y) is None
    _is_row_permutation(y, x)  # NumPy's contract: the rows, in another order


def test_random_shuffle_through_views_lists_and_module_arrays():
    @tessera.jit
    def f(x, k):
        np.random.seed(k)
        np.random.shuffle(x[1])  # a view: writes the row of x
        v = x[0]
        np.random.shuffle(v)  # the variable of a view: the same
        xs = [1, 2, 3, 4, 5]
        np.random.shuffle(xs)
        return xs

    x = np.arange(40.0).reshape(2, 20)
    xs = f(x, 0)
    assert sorted(xs) == [1, 2, 3, 4, 5] and isinstance(xs, list)
    _is_row_permutation(x[0], np.arange(20.0))
    _is_row_permutation(x[1], np.arange(20.0, 40.0))
    assert not np.array_equal(x[0], np.arange(20.0))  # 1 / 20! of being unmoved
    x2 = np.arange(40.0).reshape(2, 20)
    assert f(x2, 0) == xs
    np.testing.assert_array_equal(x2, x)  # seeded: reproducible


_SHUFFLED = np.arange(30.0)


def test_random_shuffle_of_a_module_level_array_writes_it():
    @tessera.jit
    def f():
        np.random.shuffle(_SHUFFLED)
        np.random.shuffle(_SHUFFLED.reshape(5, 6).T)  # a view of it: its columns
        return _SHUFFLED.sum()

    assert f() == 435.0
    _is_row_permutation(_SHUFFLED, np.arange(30.0))
    assert not np.array_equal(_SHUFFLED, np.arange(30.0))


def test_random_shuffle_draws_every_order_uniformly():
    @tessera.jit
    def counts(n):
        np.random.seed(11)
        seen = np.zeros(6, dtype=np.int64)
        for _ in range(n):
            a = np.arange(3)
            np.random.shuffle(a)
            seen[a[0] * 2 + (a[1] > a[2])] += 1
        return seen

    seen = counts(3000)
    assert seen.sum() == 3000
    assert seen.min() > 400 and seen.max() < 600, seen  # 500 each, sd about 20
