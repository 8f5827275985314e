"""NumPy functions added for issue 15 (coverage): each compared with NumPy
through ``check`` (type, shape, dtype, values), and each validation branch
raising NumPy's kind of error."""

import copy

import numpy as np
import pytest

import tessera
from jit_check import check as _check
from jit_check import numpy_body, numpy_fn


def check(f, *args, **kwargs):
    """jit_check.check, refusing a test whose own function is wrong (a NameError
    in NumPy would otherwise pass as 'both raised')."""
    try:
        f(*copy.deepcopy(args))
    except NameError as e:
        raise AssertionError(f"the test's function is wrong: {e}") from None
    except Exception:  # noqa: BLE001 - NumPy's own errors are what check compares
        pass
    return _check(f, *args, **kwargs)

RNG = np.random.default_rng(7)
F = RNG.standard_normal((4, 5))
F32 = F.astype(np.float32)
I = RNG.integers(-50, 50, (4, 5))
B = RNG.random((4, 5)) > 0.5
NANS = F.copy()
NANS[0, 1] = NANS[2, 3] = NANS[3, 0] = np.nan
ALLNAN_ROW = F.copy()
ALLNAN_ROW[1, :] = np.nan


# --------------------------------------------------------------------------- eye, dtype=


@pytest.mark.parametrize(
    "expr",
    [
        "np.eye(3)",
        "np.eye(3, 4)",
        "np.eye(3, M=5, k=1)",
        "np.eye(4, k=-2)",
        "np.eye(N=2, M=3, k=0, dtype=np.int64)",
        "np.eye(3, 2, 1, bool)",
    ],
)
def test_eye(expr):
    check(numpy_fn(expr, ""))


@pytest.mark.parametrize(
    "expr",
    [
        "np.var(x, dtype=np.float32)",
        "np.std(x, axis=0, dtype=np.float32)",
        "np.var(x, 1, np.float64, None, 1)",
        "x.std(dtype=np.float64, ddof=1)",
    ],
)
def test_var_std_dtype(expr):
    check(numpy_fn(expr), F, rtol=1e-5)
    check(numpy_fn(expr), I, rtol=1e-5)


def test_var_int_dtype_is_type_error():
    with pytest.raises(TypeError, match=r"\[var\]"):
        tessera.jit(numpy_fn("np.var(x, dtype=np.int64)"))(F)


@pytest.mark.parametrize(
    "expr",
    [
        "np.vstack((x, y), dtype=np.float64)",
        "np.hstack((x, y), dtype=np.float32)",
        "np.vstack([x, y], dtype=np.int64)",  # float -> int is not same_kind: TypeError
        "np.vstack([x, y], dtype=np.int64, casting='unsafe')",
        "np.hstack((x, y), dtype=None)",
    ],
)
def test_stack_dtype(expr):
    check(numpy_fn(expr, "x, y"), F, F)
    check(numpy_fn(expr, "x, y"), I, I)


def test_astype_casting():
    check(numpy_fn("x.astype(np.float32, casting='same_kind')"), F)
    check(numpy_fn("x.astype(np.float32, casting='safe')"), F)  # TypeError in both
    check(numpy_fn("x.astype(np.float64, casting='safe')"), I)
    check(numpy_fn("x.astype(np.int64, casting='no')"), I)
    with pytest.raises(ValueError, match="casting"):
        tessera.jit(numpy_fn("x.astype(np.int64, casting='sometimes')"))(I)


# --------------------------------------------------------------------------- einsum


@pytest.mark.parametrize(
    "expr, shapes",
    [
        ("np.einsum('ij,jk->ik', a, b)", [(3, 4), (4, 2)]),
        ("np.einsum('ij,jk', a, b)", [(3, 4), (4, 2)]),
        ("np.einsum('ij,kj->ik', a, b)", [(3, 4), (2, 4)]),
        ("np.einsum('ij->ji', a, b)", [(3, 4), (1,)]),
        ("np.einsum('ij->', a, b)", [(3, 4), (1,)]),
        ("np.einsum('ij->j', a, b)", [(3, 4), (1,)]),
        ("np.einsum('ii', a, b)", [(3, 3), (1,)]),
        ("np.einsum('ii->i', a, b)", [(3, 3), (1,)]),
        ("np.einsum('i,i', a, b)", [(5,), (5,)]),
        ("np.einsum('i,j->ij', a, b)", [(3,), (4,)]),
        ("np.einsum('bij,bjk->bik', a, b)", [(2, 3, 4), (2, 4, 5)]),
        ("np.einsum('...ij,...jk->...ik', a, b)", [(2, 3, 4), (4, 5)]),
        ("np.einsum('...ij,...jk', a, b)", [(2, 3, 4), (2, 4, 5)]),
        ("np.einsum('i...->...', a, b)", [(3, 4), (1,)]),
        ("np.einsum('ijk,kj->i', a, b)", [(2, 3, 4), (4, 3)]),
        ("np.einsum('ij,jk,kl->il', a, b, a.T)", [(3, 4), (4, 4)]),
        ("np.einsum('ij,ij->i', a, b)", [(3, 4), (3, 4)]),
        ("np.einsum('iij->j', a, b)", [(3, 3, 2), (1,)]),
        ("np.einsum('ij,jk->ik', a, b, optimize=True)", [(3, 4), (4, 2)]),
    ],
)
def test_einsum(expr, shapes):
    f = numpy_fn(expr, "a, b")
    args = [RNG.standard_normal(s) for s in shapes]
    check(f, *args, rtol=1e-10)
    check(f, *[np.round(a * 10).astype(np.int64) for a in args])
    check(f, *[a.astype(np.float32) for a in args], rtol=1e-5, atol=1e-5)
    check(f, *[a > 0 for a in args])  # bools: and / or, a bool result
    check(f, args[0].astype(np.float32), np.round(args[1] * 10).astype(np.int64), rtol=1e-5)


@pytest.mark.parametrize(
    "expr, shapes",
    [
        ("np.einsum('ij,jk->ik', a, b)", [(3, 4), (5, 2)]),  # extents differ
        ("np.einsum('ij,jk->ik', a)", [(3, 4)]),  # an operand missing
        ("np.einsum('ijk->i', a)", [(3, 4)]),  # subscripts for 3 axes
        ("np.einsum('ij->iz', a)", [(3, 4)]),  # output label not in inputs
        ("np.einsum('ij->ii', a)", [(3, 3)]),  # output label twice
        ("np.einsum('i1->i', a)", [(3, 4)]),  # not a letter
        ("np.einsum('ii->i', a)", [(3, 4)]),  # a diagonal of unequal extents
    ],
)
def test_einsum_errors(expr, shapes):
    f = numpy_fn(expr, "a, b=None")
    check(f, *[RNG.standard_normal(s) for s in shapes])
    with pytest.raises(ValueError, match=r"\[einsum\]"):
        tessera.jit(f)(*[RNG.standard_normal(s) for s in shapes])


# --------------------------------------------------------------------------- diff, cross


@pytest.mark.parametrize(
    "expr",
    [
        "np.diff(x)",
        "np.diff(x, 2)",
        "np.diff(x, n=3, axis=0)",
        "np.diff(x, axis=-2)",
        "np.diff(x, 0)",
        "np.diff(x, prepend=0)",
        "np.diff(x, append=x[:, :1])",
        "np.diff(x, axis=0, prepend=x[:1], append=7)",
        "np.diff(x, 10)",
    ],
)
def test_diff(expr):
    for x in (F, I, B, F32):
        check(numpy_fn(expr), x)


def test_diff_errors():
    check(numpy_fn("np.diff(x, -1)"), F)
    check(numpy_fn("np.diff(x)"), np.float64(3.0))
    check(numpy_fn("np.diff(x, axis=2)"), F)
    with pytest.raises(ValueError, match=r"\[diff\] order must be non-negative"):
        tessera.jit(numpy_fn("np.diff(x, -1)"))(F)


@pytest.mark.parametrize(
    "expr, sa, sb",
    [
        ("np.cross(a, b)", (3,), (3,)),
        ("np.cross(a, b)", (4, 3), (4, 3)),
        ("np.cross(a, b)", (4, 3), (3,)),
        ("np.cross(a, b)", (4, 2), (4, 3)),
        ("np.cross(a, b)", (4, 3), (4, 2)),
        ("np.cross(a, b, axisa=0, axisb=0)", (3, 5), (3, 5)),
        ("np.cross(a, b, axis=0)", (3, 5), (3, 5)),
        ("np.cross(a, b, axisc=0)", (5, 3), (5, 3)),
        ("np.cross(a, b)", (4, 5), (4, 3)),  # ValueError
    ],
)
@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")
def test_cross(expr, sa, sb):
    f = numpy_fn(expr, "a, b")
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    check(f, a, b, rtol=1e-10)
    check(f, np.round(a * 10).astype(np.int64), np.round(b * 10).astype(np.int64))


def test_cross_2d_vectors():
    # NumPy 2 deprecates 2-vectors (a warning) but still gives the z component.
    a, b = RNG.standard_normal((4, 2)), RNG.standard_normal((4, 2))
    with np.errstate(all="ignore"), pytest.warns(DeprecationWarning):
        expected = np.cross(a, b)
    got = tessera.jit(numpy_fn("np.cross(a, b)", "a, b"))(a, b)
    np.testing.assert_allclose(got, expected)
    with pytest.raises(ValueError, match=r"\[cross\] incompatible dimensions"):
        tessera.jit(numpy_fn("np.cross(a, b)", "a, b"))(F, F)


# --------------------------------------------------------------------------- bitwise


@pytest.mark.parametrize(
    "expr",
    [
        "a & b",
        "a | b",
        "a ^ b",
        "~a",
        "np.bitwise_and(a, b)",
        "np.bitwise_or(a, 3)",
        "np.bitwise_xor(5, b)",
        "np.bitwise_not(a)",
        "np.invert(b)",
        "np.bitwise_invert(a)",
        "a & 6",
        "(a > 0) & (b > 0)",
        "(a > 0) | (b < 0)",
        "~(a > 0)",
        "(a > 0) ^ True",
    ],
)
def test_bitwise(expr):
    f = numpy_fn(expr, "a, b")
    check(f, I, I[::-1].copy())
    check(f, B, ~B)
    check(f, I, B)
    check(f, B, I)


@pytest.mark.parametrize(
    "expr",
    [
        "a << b",
        "a >> b",
        "np.left_shift(a, 3)",
        "np.right_shift(a, 2)",
        "np.left_shift(a, b)",
        "a << 62",
        "a >> 70",
        "np.bitwise_left_shift(a, 1)",
        "np.bitwise_right_shift(a, 1)",
    ],
)
def test_shifts(expr):
    f = numpy_fn(expr, "a, b")
    check(f, I, np.abs(I) % 8)
    check(f, np.array([-7, 0, 7, 2**62]), np.array([1, 2, 63, 1]))


@pytest.mark.parametrize(
    "expr, args",
    [
        ("a & b", (5, 3)),
        ("a | b", (5, 3)),
        ("a ^ b", (5, 3)),
        ("~a", (5, 3)),
        ("a << b", (5, 3)),
        ("a >> b", (-50, 3)),
        ("a & b", (True, False)),
        ("a | b", (True, 2)),
        ("a << b", (3, -1)),  # ValueError: negative shift count
    ],
)
def test_bitwise_python_scalars(expr, args):
    check(numpy_fn(expr, "a, b"), *args)


@pytest.mark.parametrize(
    "expr", ["a & b", "a | 1", "~a", "np.left_shift(a, 1)", "np.bitwise_xor(1.5, 2)"]
)
def test_bitwise_floats_are_type_errors(expr):
    check(numpy_fn(expr, "a, b"), F, F)
    with pytest.raises(TypeError, match="only integer and bool"):
        tessera.jit(numpy_fn(expr, "a, b"))(F, F)


def test_bool_shift_is_type_error():
    with pytest.raises(TypeError, match="int8"):
        tessera.jit(numpy_fn("a << b", "a, b"))(B, B)


def test_shift_overflow_of_python_ints():
    # Python's 1 << 63 is a big int, past tessera's int64: Python's OverflowError
    with pytest.raises(OverflowError, match=r"\[left_shift\] integer overflow: 1 << 63 does "
                       r"not fit in int64 \(Python would give a big integer; tessera's ints "
                       r"are int64\)"):
        tessera.jit(numpy_fn("a << b", "a, b"))(1, 63)


# --------------------------------------------------------------------------- ndindex


def test_ndindex_loops():
    body = "\n".join(
        [
            "out = np.zeros(x.shape)",
            "for i, j in np.ndindex(x.shape):",
            "    out[i, j] = x[i, j] * (i + 1) + j",
            "return out",
        ]
    )
    check(numpy_body(body), F)
    body = "\n".join(
        [
            "total = 0.0",
            "for idx in np.ndindex(x.shape):",
            "    total += x[idx] * idx[0]",
            "return total",
        ]
    )
    check(numpy_body(body), F)
    check(numpy_body(body), np.arange(24.0).reshape(2, 3, 4))
    body = "\n".join(
        [
            "s = []",
            "for idx in np.ndindex(3, 2):",
            "    s.append(idx[0] * 10 + idx[1])",
            "return s",
        ]
    )
    check(numpy_body(body, ""))
    check(numpy_fn("len(list(np.ndindex(2, 3, 4)))", ""))
    check(numpy_fn("[i + j for i, j in np.ndindex((2, 5))]", ""))
    check(numpy_fn("[x[idx] * 2 for idx in np.ndindex(x.shape)]"), F)
    check(numpy_fn("sum(x[i] for i in np.ndindex(*x.shape))"), F)
    nested = "\n".join(
        [
            "def total(y):",
            "    t = 0.0",
            "    for k in np.ndindex(y.shape):",
            "        t += y[k]",
            "    return t",
            "return total(x) + total(x * 2)",
        ]
    )
    check(numpy_body(nested), F)


def test_ndindex_name_reused_for_other_values_is_unsupported():
    body = "\n".join(
        [
            "t = 0.0",
            "for idx in np.ndindex(x.shape):",
            "    t += x[idx]",
            "idx = [0, 1]",
            "return t + np.sum(x[idx])",
        ]
    )
    with pytest.raises(tessera.UnsupportedError, match="also bound to other values"):
        tessera.jit(numpy_body(body))(F)


def test_ndindex_tuple_assignment_is_unsupported():
    body = "\n".join(["for idx in np.ndindex(x.shape):", "    x[idx] = 0", "return x"])
    with pytest.raises(tessera.UnsupportedError, match="ndindex"):
        tessera.jit(numpy_body(body))(F.copy())


# --------------------------------------------------------------------------- iinfo, finfo


@pytest.mark.parametrize(
    "expr",
    [
        "np.iinfo(np.int64).max",
        "np.iinfo(np.int64).min",
        "np.iinfo('int32').max",
        "np.iinfo(int).bits",
        "np.finfo(np.float32).eps",
        "np.finfo(np.float64).max",
        "np.finfo(float).tiny",
        "np.finfo(np.float32).min",
        "np.finfo('float64').bits",
        "np.finfo(np.float32).resolution",
        "x + np.finfo(np.float64).eps",
    ],
)
def test_iinfo_finfo(expr):
    got = check(numpy_fn(expr), 1.0)
    assert got is not None


def test_info_errors():
    with pytest.raises(tessera.UnsupportedError, match="run time"):
        tessera.jit(numpy_fn("np.finfo(x.dtype).eps"))(F)
    with pytest.raises(ValueError, match=r"\[iinfo\]"):
        tessera.jit(numpy_fn("np.iinfo(np.float64).max"))(F)
    with pytest.raises(tessera.UnsupportedError, match="kind"):
        tessera.jit(numpy_fn("np.finfo(np.float64).kind"))(F)


# --------------------------------------------------------------------------- quantiles


@pytest.mark.parametrize(
    "expr",
    [
        "np.percentile(x, 50)",
        "np.percentile(x, 37.5, axis=0)",
        "np.percentile(x, [10, 50, 90], axis=1)",
        "np.percentile(x, np.array([[0.0, 100.0], [25.0, 75.0]]), axis=1, keepdims=True)",
        "np.quantile(x, 0.3)",
        "np.quantile(x, [0.1, 0.99], axis=(0, 1))",
        "np.quantile(x, 0.5, axis=-1, keepdims=True)",
        "np.quantile(x, 0.25, method='linear')",
        "np.percentile(x, 20, overwrite_input=False)",
        "np.nanpercentile(x, 40, axis=0)",
        "np.nanquantile(x, [0.2, 0.8], axis=1)",
    ],
)
def test_quantiles(expr):
    for x in (F, I, F32, NANS):
        check(numpy_fn(expr), x, rtol=1e-5)


def test_quantile_errors():
    check(numpy_fn("np.percentile(x, 101)"), F)
    check(numpy_fn("np.quantile(x, -0.1)"), F)
    check(numpy_fn("np.quantile(x, 0.5, axis=2)"), F)
    with pytest.raises(ValueError, match=r"\[percentile\] percentiles must be in the range"):
        tessera.jit(numpy_fn("np.percentile(x, 101)"))(F)
    with pytest.raises(tessera.UnsupportedError, match="method"):
        tessera.jit(numpy_fn("np.quantile(x, 0.5, method='nearest')"))(F)


# --------------------------------------------------------------------------- isin


@pytest.mark.parametrize(
    "expr",
    [
        "np.isin(x, t)",
        "np.isin(x, t, invert=True)",
        "np.isin(x, [1, 2, 3])",
        "np.isin(x, t, assume_unique=True)",
        "np.isin(x, 3)",
    ],
)
def test_isin(expr):
    f = numpy_fn(expr, "x, t")
    check(f, I % 7, np.array([0, 3, 5]))
    check(f, np.array([1.0, np.nan, 2.5, 3.0]), np.array([[np.nan, 3.0], [2.5, 9.0]]))
    check(f, np.array([True, False]), np.array([True]))


# --------------------------------------------------------------------------- nan-reductions


@pytest.mark.parametrize(
    "expr",
    [
        "np.nansum(x)",
        "np.nansum(x, axis=0)",
        "np.nanprod(x)",
        "np.nanprod(x, axis=1, keepdims=True)",
        "np.nanmean(x, axis=1)",
        "np.nanvar(x)",
        "np.nanvar(x, axis=0, ddof=1)",
        "np.nanstd(x, axis=1, keepdims=True)",
        "np.nanstd(x, dtype=np.float64)",
        "np.nanmin(x)",
        "np.nanmin(x, axis=0)",
        "np.nanmax(x, axis=1, keepdims=True)",
        "np.nanargmin(x)",
        "np.nanargmax(x, axis=0)",
        "np.nanargmin(x, axis=1, keepdims=True)",
        "np.nanmedian(x)",
        "np.nanmedian(x, axis=0)",
        "np.nanmedian(x, axis=1, keepdims=True)",
        "np.nancumsum(x)",
        "np.nancumsum(x, axis=1)",
    ],
)
def test_nan_reductions(expr):
    for x in (F, NANS, I, F32):
        check(numpy_fn(expr), x, rtol=1e-5)


@pytest.mark.parametrize(
    "expr",
    ["np.nanmin(x, axis=1)", "np.nanmax(x, axis=1)", "np.nanmedian(x, axis=1)",
     "np.nanvar(x, axis=1)", "np.nansum(x, axis=1)", "np.nanprod(x, axis=1)"],
)
def test_nan_reductions_all_nan_lane(expr):
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning) if "sum" not in expr and (
        "prod" not in expr
    ) else _nothing():
        expected = numpy_fn(expr)(ALLNAN_ROW)
    got = tessera.jit(numpy_fn(expr))(ALLNAN_ROW)
    np.testing.assert_allclose(got, expected, equal_nan=True)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_nanarg_all_nan_is_value_error():
    check(numpy_fn("np.nanargmax(x, axis=1)"), ALLNAN_ROW)
    with pytest.raises(ValueError, match="All-NaN slice"):
        tessera.jit(numpy_fn("np.nanargmin(x, axis=1)"))(ALLNAN_ROW)
    check(numpy_fn("np.nanmin(x)"), np.zeros((0,)))


# --------------------------------------------------------------------------- Generator


def _gen(body):
    return numpy_body("rng = np.random.default_rng(seed)\n" + body, "seed")


@pytest.mark.parametrize(
    "body, shape, dtype, low, high",
    [
        ("return rng.random((3, 4))", (3, 4), np.float64, 0, 1),
        ("return rng.random(5, dtype=np.float32)", (5,), np.float32, 0, 1),
        ("return rng.uniform(2.0, 5.0, size=(100,))", (100,), np.float64, 2, 5),
        ("return rng.uniform(-1, 1, 50)", (50,), np.float64, -1, 1),
        ("return rng.normal(3.0, 0.1, size=(1000,))", (1000,), np.float64, 2, 4),
        ("return rng.normal(size=(2, 2))", (2, 2), np.float64, -10, 10),
        ("return rng.standard_normal((3, 2))", (3, 2), np.float64, -10, 10),
        ("return rng.standard_normal(4, dtype=np.float32)", (4,), np.float32, -10, 10),
        ("return rng.integers(0, 10, size=(20,))", (20,), np.int64, 0, 9),
        ("return rng.integers(5, size=30)", (30,), np.int64, 0, 4),
        ("return rng.integers(1, 3, size=30, endpoint=True)", (30,), np.int64, 1, 3),
        ("return rng.choice(10, size=5)", (5,), np.int64, 0, 9),
        ("return rng.choice(10, size=(2, 5), replace=False)", (2, 5), np.int64, 0, 9),
        ("return rng.choice(np.arange(3.0), size=8, p=[0.2, 0.3, 0.5])", (8,), np.float64, 0, 2),
        ("return rng.choice(5, size=3, replace=False, p=[0.1, 0.0, 0.4, 0.2, 0.3])", (3,),
         np.int64, 0, 4),
        ("return rng.permutation(10)", (10,), np.int64, 0, 9),
        ("return rng.permutation(np.arange(6.0))", (6,), np.float64, 0, 5),
    ],
)
def test_generator_shapes_dtypes_ranges(body, shape, dtype, low, high):
    f = _gen(body)
    expected = f(0)
    got = tessera.jit(f)(0)
    assert got.shape == expected.shape == shape
    assert got.dtype == expected.dtype == dtype
    assert got.min() >= low and got.max() <= high
    # Reproducible for a seed, different for another.
    np.testing.assert_array_equal(tessera.jit(f)(0), got)
    if got.size > 4:
        assert not np.array_equal(tessera.jit(f)(1), got)


def test_generator_scalars_and_streams():
    f = _gen("a = rng.random()\nb = rng.random()\nreturn a, b, rng.integers(3), rng.normal()")
    a, b, i, n = tessera.jit(f)(42)
    ea, eb, ei, en = f(42)
    assert type(a) is type(ea) or isinstance(a, float)
    assert isinstance(i, (int, np.integer)) and 0 <= i < 3
    assert a != b  # each draw advances the generator
    assert isinstance(n, float)


def test_choice_without_replacement_with_p():
    f = _gen("return rng.choice(5, size=4, replace=False, p=[0.1, 0.0, 0.4, 0.2, 0.3])")
    for seed in range(20):
        got = tessera.jit(f)(seed)
        assert len(set(got.tolist())) == 4 and 1 not in got  # distinct, never p == 0
    counts = np.zeros(3)
    g = _gen("return rng.choice(3, size=1, replace=False, p=[0.7, 0.2, 0.1])")
    jg = tessera.jit(g)
    for seed in range(300):
        counts[jg(seed)[0]] += 1
    assert counts[0] > counts[1] > counts[2] > 0  # follows p
    with pytest.raises(ValueError, match="Fewer non-zero entries in p"):
        tessera.jit(_gen("return rng.choice(3, size=3, replace=False, p=[0.5, 0.5, 0.0])"))(0)


def test_generator_permutation_is_a_permutation():
    got = tessera.jit(_gen("return rng.permutation(50)"))(3)
    np.testing.assert_array_equal(np.sort(got), np.arange(50))
    got = tessera.jit(_gen("return rng.choice(50, size=50, replace=False)"))(3)
    np.testing.assert_array_equal(np.sort(got), np.arange(50))


@pytest.mark.parametrize(
    "body",
    [
        "return rng.integers(5, 5, size=3)",
        "return rng.normal(0.0, -1.0, size=3)",
        "return rng.choice(3, size=5, replace=False)",
        "return rng.choice(3, size=5, p=[0.5, 0.6, 0.1])",
        "return rng.choice(3, size=5, p=[0.5, 0.5])",
        "return rng.choice(0, size=5)",
    ],
)
def test_generator_errors(body):
    f = _gen(body)
    with pytest.raises(ValueError):
        f(0)
    with pytest.raises(ValueError):
        tessera.jit(f)(0)


def test_generator_seed_must_be_non_negative():
    with pytest.raises(ValueError, match="non-negative"):
        tessera.jit(_gen("return rng.random(2)"))(-1)


# --------------------------------------------------------------------------- np.linalg (LAPACK)

SQ = RNG.standard_normal((4, 4))
SPD = SQ @ SQ.T + 4 * np.eye(4)
TALL = RNG.standard_normal((6, 3))
WIDE = RNG.standard_normal((3, 5))
STACK = RNG.standard_normal((2, 3, 4, 3))


def _jit(expr, params="a"):
    return tessera.jit(numpy_fn(expr, params))


@pytest.mark.parametrize(
    "a", [SQ, TALL, WIDE, STACK, SQ.astype(np.float32), np.arange(12).reshape(4, 3)]
)
@pytest.mark.parametrize("full", [True, False])
def test_svd_reconstructs(a, full):
    u, s, vh = _jit(f"np.linalg.svd(a, full_matrices={full})")(a)
    eu, es, evh = np.linalg.svd(a, full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (eu.shape, es.shape, evh.shape)
    assert u.dtype == eu.dtype and s.dtype == es.dtype
    tol = 1e-4 if a.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(s, es, rtol=tol, atol=tol)
    k = s.shape[-1]
    rebuilt = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    np.testing.assert_allclose(rebuilt, a, rtol=tol, atol=tol)
    eye = np.eye(u.shape[-1])
    identity = np.broadcast_to(eye, u.shape[:-2] + eye.shape)
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, identity, atol=tol)
    check(numpy_fn("np.linalg.svd(a, compute_uv=False)", "a"), a, rtol=tol, atol=tol)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_and_eigvalsh(uplo):
    skewed = SPD + np.triu(np.ones((4, 4)), 1) * 5  # only one triangle is symmetric data
    a = skewed if uplo == "L" else skewed.T
    w, v = _jit(f"np.linalg.eigh(a, UPLO='{uplo}')")(a)
    ew, ev = np.linalg.eigh(a, UPLO=uplo)
    np.testing.assert_allclose(w, ew, rtol=1e-10)
    sym = np.tril(a) + np.tril(a, -1).T if uplo == "L" else np.triu(a) + np.triu(a, 1).T
    np.testing.assert_allclose(sym @ v, v * w, atol=1e-9)
    np.testing.assert_allclose(np.abs(v.T @ ev), np.eye(4), atol=1e-9)  # same vectors up to sign
    check(numpy_fn(f"np.linalg.eigvalsh(a, UPLO='{uplo}')", "a"), a, rtol=1e-10)
    check(numpy_fn("np.linalg.eigvalsh(a)", "a"), np.stack([SPD, 2 * SPD]), rtol=1e-10)


def test_eig_real_and_complex():
    a = SPD + np.diag([1.0, 2.0, 3.0, 4.0])
    w, v = _jit("np.linalg.eig(a)")(a)
    ew, _ = np.linalg.eig(a)
    assert w.dtype == ew.dtype == np.float64
    np.testing.assert_allclose(np.sort(w), np.sort(ew), rtol=1e-10)
    np.testing.assert_allclose(a @ v, v * w, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(v, axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.sort(_jit("np.linalg.eigvals(a)")(a)), np.sort(ew), rtol=1e-10)
    rotation = np.array([[0.0, -1.0], [1.0, 0.0]])
    assert np.iscomplexobj(np.linalg.eigvals(rotation))
    for expr in ("np.linalg.eig(a)", "np.linalg.eigvals(a)"):
        with pytest.raises(TypeError, match="complex results are not supported yet"):
            _jit(expr)(rotation)


@pytest.mark.parametrize("a", [TALL, WIDE, SQ, STACK])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr(a, mode):
    q, r = _jit(f"np.linalg.qr(a, mode='{mode}')")(a)
    eq, er = np.linalg.qr(a, mode=mode)
    assert q.shape == eq.shape and r.shape == er.shape
    np.testing.assert_allclose(q @ r, a, atol=1e-10)
    np.testing.assert_allclose(np.abs(r), np.abs(er), atol=1e-10)  # equal up to row signs
    np.testing.assert_allclose(np.tril(r, -1), 0.0)
    r_only = _jit("np.linalg.qr(a, mode='r')")(a)
    np.testing.assert_allclose(np.abs(r_only), np.abs(np.linalg.qr(a, mode="r")), atol=1e-10)


def test_qr_raw_is_unsupported():
    with pytest.raises(ValueError, match="raw"):
        _jit("np.linalg.qr(a, mode='raw')")(SQ)


def test_cholesky():
    check(numpy_fn("np.linalg.cholesky(a)", "a"), SPD, rtol=1e-10)
    check(numpy_fn("np.linalg.cholesky(a, upper=True)", "a"), SPD, rtol=1e-10)
    check(numpy_fn("np.linalg.cholesky(a)", "a"), np.stack([SPD, 3 * SPD]), rtol=1e-10)
    check(numpy_fn("np.linalg.cholesky(a)", "a"), SPD.astype(np.float32), rtol=1e-5)
    check(numpy_fn("np.linalg.cholesky(a)", "a"), -SPD)  # not positive definite: ValueError
    with pytest.raises(ValueError, match=r"\[cholesky\] Matrix is not positive definite"):
        _jit("np.linalg.cholesky(a)")(-SPD)


@pytest.mark.parametrize(
    "a, b",
    [
        (TALL, RNG.standard_normal(6)),
        (TALL, RNG.standard_normal((6, 2))),
        (WIDE, RNG.standard_normal(3)),
        (SQ, RNG.standard_normal(4)),
        (np.ones((5, 3)), RNG.standard_normal(5)),  # rank deficient: no residuals
    ],
)
def test_lstsq(a, b):
    f = numpy_fn("np.linalg.lstsq(a, b, rcond=None)", "a, b")
    check(f, a, b, rtol=1e-8, atol=1e-10)


def test_lstsq_errors():
    check(numpy_fn("np.linalg.lstsq(a, b)", "a, b"), TALL, np.ones(5))
    with pytest.raises(ValueError, match="Incompatible dimensions"):
        _jit("np.linalg.lstsq(a, b)", "a, b")(TALL, np.ones(5))


@pytest.mark.parametrize("expr", ["np.linalg.pinv(a)", "np.linalg.pinv(a, rcond=1e-3)",
                                  "np.linalg.pinv(a, rtol=None)", "np.linalg.pinv(a, rtol=0.5)"])
def test_pinv(expr):
    for a in (TALL, WIDE, SQ, STACK, np.ones((3, 3))):
        check(numpy_fn(expr, "a"), a, rtol=1e-8, atol=1e-10)


def test_slogdet():
    pair = numpy_body("sign, logdet = np.linalg.slogdet(a)\nreturn sign, logdet", "a")
    check(pair, SQ, rtol=1e-10)
    check(pair, SQ.astype(np.float32), rtol=1e-5)
    sign, logdet = _jit("np.linalg.slogdet(a)")(STACK[:, :, :3, :])
    es, el = np.linalg.slogdet(STACK[:, :, :3, :])
    np.testing.assert_allclose(sign, es)
    np.testing.assert_allclose(logdet, el, rtol=1e-10)
    check(pair, np.ones((3, 3)))  # singular: (0, -inf)
    check(pair, TALL)  # not square: ValueError


@pytest.mark.parametrize(
    "expr", ["np.linalg.matrix_rank(a)", "np.linalg.matrix_rank(a, tol=0.5)",
             "np.linalg.matrix_rank(a, rtol=0.1)"]
)
def test_matrix_rank(expr):
    for a in (TALL, WIDE, np.ones((4, 4)), np.zeros((3, 3)), STACK, np.ones(3), np.zeros(2)):
        check(numpy_fn(expr, "a"), a)


def test_linalg_dimension_errors():
    for expr in ("np.linalg.svd(a)", "np.linalg.qr(a)", "np.linalg.pinv(a)"):
        check(numpy_fn(expr, "a"), np.ones(3))
    for expr in ("np.linalg.eigh(a)", "np.linalg.eig(a)", "np.linalg.cholesky(a)"):
        check(numpy_fn(expr, "a"), TALL)
        with pytest.raises(ValueError, match="must be square"):
            _jit(expr)(TALL)


# --------------------------------------------------------------------------- gradients


def _numeric_grad(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[k] += h
        minus[k] -= h
        g[k] = (f(plus) - f(minus)) / (2 * h)
    return g


@pytest.mark.parametrize(
    "expr",
    [
        "np.sum(np.diff(x) ** 2)",
        "np.sum(np.diff(x, 2, axis=0) * np.arange(2.0)[:, None])",
        "np.sum(np.sin(np.diff(x, axis=1, prepend=1.0, append=x[:, :1])))",
        "np.sum(np.diff(x, 3, axis=-1, prepend=x[:, -2:]) ** 3)",
    ],
)
def test_diff_gradient_matches_finite_differences(expr):
    f = numpy_fn(expr)
    x = RNG.standard_normal((4, 5))
    got = tessera.grad(tessera.jit(f))(x)
    np.testing.assert_allclose(got, _numeric_grad(f, x), rtol=1e-5, atol=1e-6)


def test_einsum_gradient_broadcasts_over_summed_labels():
    # d/dx sum_i sum_j x[i, j] is 1 everywhere (j is summed inside einsum).
    g = tessera.grad(tessera.jit(numpy_fn("np.sum(np.einsum('ij->i', x))")))(F)
    np.testing.assert_array_equal(g, np.ones_like(F))


@pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors:DeprecationWarning")
@pytest.mark.parametrize(
    "expr, sa, sb",
    [
        ("np.sum(np.cross(a, b) ** 2)", (4, 3), (4, 3)),
        ("np.sum(np.sin(np.cross(a, b)))", (4, 3), (3,)),
        ("np.sum(np.cross(a, b, axisa=0, axisb=0) * np.arange(5.0)[:, None])", (3, 5), (3, 5)),
        ("np.sum(np.cross(a, b, axis=0) ** 2)", (3, 5), (3, 5)),
        ("np.sum(np.cross(a, b, axisc=0) * np.arange(3.0)[:, None])", (5, 3), (5, 3)),
        ("np.sum(np.cross(a, b) ** 2)", (4, 2), (4, 3)),
        ("np.sum(np.cross(a, b) ** 2)", (4, 3), (4, 2)),
        ("np.sum(np.cross(a, b) ** 2)", (4, 2), (4, 2)),
    ],
)
def test_cross_gradient_matches_finite_differences(expr, sa, sb):
    f = numpy_fn(expr, "a, b")
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    da, db = tessera.grad(tessera.jit(f), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(da, _numeric_grad(lambda v: f(v, b), a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(db, _numeric_grad(lambda v: f(a, v), b), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- remaining validation


@pytest.mark.parametrize(
    "expr, args, error, match",
    [
        ("np.linalg.eigh(a, UPLO='X')", (SPD,), ValueError, "'L' or 'U'"),
        ("np.linalg.qr(a, mode='full')", (SQ,), ValueError, "'reduced', 'complete' or 'r'"),
        ("np.linalg.lstsq(a, b)", (STACK, np.ones(3)), ValueError, "2-dimensional"),
        ("np.linalg.lstsq(a, b)", (TALL, np.ones((6, 1, 1))), ValueError, "1- or 2-dim"),
        ("np.linalg.pinv(a, rcond=0.1, rtol=0.1)", (SQ,), ValueError, "can't be both set"),
        ("np.einsum('i...,j...->', a, b)", (SQ, SQ), ValueError, "no '...' in the output"),
        ("np.einsum('i...,j...->...', a, b)", (SQ, SQ), None, None),
        ("np.einsum('ij...->j', a)", (SQ,), None, None),
        ("np.einsum('i....->i', a)", (SQ,), ValueError, "ellipsis"),
        ("np.einsum('ij->i->j', a)", (SQ,), ValueError, "more than one '->'"),
        ("np.cross(a, b)", (np.float64(1.0), np.ones(3)), ValueError, "at least one dimension"),
        ("np.percentile(a, 50)", (B,), TypeError, "bool"),
        ("np.nanvar(a)", (B,), TypeError, "bool"),
        ("list(np.ndindex(a, 2))", (-1,), ValueError, "negative"),
    ],
)
def test_validation_branches(expr, args, error, match):
    params = "a, b=None"
    f = numpy_fn(expr, params)
    if error is None:  # valid in NumPy: compare
        check(f, *args)
        return
    with pytest.raises(error, match=match):
        tessera.jit(f)(*args)


@pytest.mark.parametrize(
    "body, error, match",
    [
        ("return rng.random(3, dtype=np.int64)", ValueError, "float32"),
        ("return rng.standard_normal(3, dtype=np.int64)", ValueError, "float32"),
        ("return rng.integers(0, 5, size=3, dtype=np.float64)", ValueError, "int64"),
        ("return rng.choice(np.ones((3, 2)), size=2, axis=1)", ValueError, "axis"),
        ("return rng.choice(np.ones(3), size=2, p=[0.5, 0.5, 0.0, 0.0])", ValueError, "length"),
        ("return rng.choice(3, size=2, p=[-0.5, 1.0, 0.5])", ValueError, "non-negative"),
    ],
)
def test_generator_validation(body, error, match):
    with pytest.raises(error, match=match):
        tessera.jit(_gen(body))(0)


# --------------------------------------------------------------------------- views as operands


@pytest.mark.parametrize(
    "expr",
    [
        "np.einsum('ij,jk->ik', x.T, x[:, ::2])",
        "np.einsum('ii', x[:4, :4].T)",
        "np.einsum('ij->ji', x[::2])",
        "np.percentile(x[:, ::2], 40, axis=0)",
        "np.nanmax(x.T, axis=1)",
        "np.diff(x.T, axis=0)",
        "np.cross(x[:3, :3].T, x[1:4, :3])",
        "np.isin(x.T, x[0, ::2])",
        "np.linalg.svd(x[:4, :4].T, compute_uv=False)",
        "np.linalg.cholesky(x[:4, :4].T @ x[:4, :4] + np.eye(4))",
        "np.bitwise_and((x > 0).T, (x < 1).T)",
    ],
)
def test_views_as_operands(expr):
    check(numpy_fn(expr), F, rtol=1e-9, atol=1e-12)


def test_generator_in_a_program_that_writes():
    body = "\n".join(
        [
            "rng = np.random.default_rng(seed)",
            "out = np.zeros(4)",
            "for i in range(4):",
            "    out[i] = rng.random()",
            "out += rng.normal(size=4) * 0.0",
            "return out",
        ]
    )
    got = tessera.jit(numpy_body(body, "seed"))(5)
    assert got.shape == (4,) and len(set(got.tolist())) == 4
    assert np.all((got >= 0) & (got < 1))
    np.testing.assert_array_equal(tessera.jit(numpy_body(body, "seed"))(5), got)


@pytest.mark.parametrize("n", [5, 47, 48, 120])
def test_lu_based_linalg_small_and_large_orders(n):
    # Orders from 48 on go to LAPACK's blocked LU; below, tessera's own loops.
    rng = np.random.default_rng(n)
    a = rng.normal(size=(n, n)) + n * np.eye(n)
    b = rng.normal(size=(n, 3))
    check(lambda a, b: (np.linalg.solve(a, b), np.linalg.inv(a), np.linalg.det(a)), a, b,
          rtol=1e-9, atol=1e-9)
    singular = a.copy()
    singular[:, 1] = 0.0  # an exact zero pivot: LinAlgError in NumPy, ValueError here
    with pytest.raises((np.linalg.LinAlgError, ValueError)):
        np.linalg.solve(singular, b)
    with pytest.raises(ValueError, match="singular"):
        tessera.jit(lambda a, b: np.linalg.solve(a, b))(singular, b)
