"""NumPy functions @tessera.jit translates from their NumPy-level definitions
(python/tessera/_numpy_lib.py), against NumPy: values, dtypes, edge cases, the
errors NumPy raises (same class) named at the user's line; and `raise` of
Python's builtin exceptions in a jit function."""

import linecache

import numpy as np
import pytest

import tessera

RNG = np.random.default_rng(3)
F = RNG.random(7)
G = RNG.random(3)
I7 = RNG.integers(-5, 9, 7)
I3 = np.array([1, -2, 3])
M = RNG.random((4, 5))
S = M[:, :4] @ M[:, :4].T + 4 * np.eye(4)

# (expression over a, b, c, d; the arguments)
CASES = [
    ("np.convolve(a, b)", (F, G)),
    ("np.convolve(b, a)", (F, G)),
    ("np.convolve(a, b, mode='same')", (F, G)),
    ("np.convolve(a, b, 'valid')", (F, G)),
    ("np.convolve(a, b, mode='same')", (F[:6], G[:2])),
    ("np.convolve(a, b)", (I7, I3)),
    ("np.convolve(a, b)", (I7, G)),
    ("np.convolve(a, b)", (F[:1], G[:1])),
    ("np.correlate(a, b)", (F, G)),
    ("np.correlate(a, b, 'full')", (F, G)),
    ("np.correlate(b, a, 'full')", (F, G)),
    ("np.correlate(a, b, mode='same')", (F, G)),
    ("np.correlate(b, a, mode='same')", (F[:6], G)),
    ("np.correlate(a, b, 'full')", (I7, I3)),
    ("np.polyval(b, a)", (F, G)),
    ("np.polyval(b, a)", (I7, I3)),
    ("np.polyval(b, 2.5)", (F, G)),
    ("np.vander(a)", (G, None)),
    ("np.vander(a, 2, increasing=True)", (I3, None)),
    ("np.digitize(b, np.sort(a))", (F, G)),
    ("np.digitize(b, np.sort(a), right=True)", (F, np.sort(F)[[0, 3, 6]])),
    ("np.digitize(b, np.sort(a)[::-1])", (F, G)),
    ("np.digitize(b, np.sort(a)[::-1], True)", (F, np.sort(F)[[0, 3, 6]])),
    ("np.interp(b, np.sort(a), np.arange(7.0))", (F, np.array([-1.0, 0.3, 0.5, 2.0]))),
    ("np.interp(b, np.sort(a), np.arange(7.0), left=-9, right=9)", (F, np.array([-1.0, 2.0]))),
    ("np.interp(np.sort(a), np.sort(a), b)", (F, F * 3)),
    ("np.interp(2.5, np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 0.0]))", (F, G)),
    ("np.setdiff1d(a, b)", (I7, I3)),
    ("np.union1d(a, b)", (I7, I3)),
    ("np.intersect1d(a, b)", (I7, np.array([3, 8, 1, -5, 40]))),
    ("np.setxor1d(a, b)", (I7, I3)),
    ("np.append(a, b)", (F, G)),
    ("np.append(a, b)", (M, G)),
    ("np.append(a, b, axis=0)", (M, M[:2])),
    ("np.insert(a, 2, 9.0)", (F, None)),
    ("np.insert(a, -1, b)", (F, G)),
    ("np.insert(a, 7, 4)", (I7, None)),
    ("np.insert(a, [1, 5, 1], b)", (F, G)),
    ("np.insert(a, [0, -2], 3)", (I7, None)),
    ("np.insert(a, 1, 5.0, axis=1)", (M, None)),
    ("np.insert(a, 2, b[:4], axis=1)", (M, F)),
    ("np.insert(a, 0, b[:5], axis=0)", (M, F)),
    ("np.insert(a, 3, 1.5)", (M, None)),
    ("np.column_stack((a, a * 2))", (F, None)),
    ("np.column_stack((a, b))", (M, F[:4])),
    ("np.logspace(0, 2, 5)", (None, None)),
    ("np.logspace(0, 3, 4, base=2.0, endpoint=False)", (None, None)),
    ("np.geomspace(1, 1000, 4)", (None, None)),
    ("np.geomspace(-2, -32, 5)", (None, None)),
    ("np.geomspace(1, 256, 9, endpoint=False)", (None, None)),
    ("np.tril_indices(4)[1]", (None, None)),
    ("np.triu_indices(4, 1)[0]", (None, None)),
    ("np.triu_indices(3, -1, 5)[1]", (None, None)),
    ("a[np.triu_indices(4, 1)]", (S, None)),
    ("a[np.tril_indices_from(a, -1)]", (S, None)),
    ("a[np.triu_indices_from(a)]", (M, None)),
    ("np.fliplr(a)", (M, None)),
    ("np.flipud(a)", (M, None)),
    ("np.rot90(a)", (M, None)),
    ("np.rot90(a, 2)", (M, None)),
    ("np.rot90(a, -1)", (M, None)),
    ("np.rot90(a, 3, axes=(1, 0))", (M, None)),
    ("np.resize(a, 10)", (F, None)),
    ("np.resize(a, (3, 4))", (I3, None)),
    ("np.delete(a, 2)", (F, None)),
    ("np.delete(a, [0, 3])", (M, None)),
    ("np.delete(a, 1, axis=1)", (M, None)),
    ("np.trim_zeros(a)", (np.array([0, 0, 3, 0, 4, 0]), None)),
    ("np.trim_zeros(a, 'f')", (np.array([0, 0, 3, 0, 4, 0]), None)),
    ("np.trim_zeros(a, 'b')", (np.array([0.0, 2.0, 0.0]), None)),
    ("np.select([a < 0.3, a > 0.7], [a, -a], 0.5)", (F, None)),
    ("np.select([a < 0, a > 4], [a, a * 2])", (I7, None)),
    ("np.logaddexp(a, b)", (F, F[::-1] * 30)),
    ("np.logaddexp(a, b)", (np.array([-np.inf, np.inf, np.nan, 1.0, -np.inf]),
                            np.array([-np.inf, np.inf, 0.0, 1.0, 3.0]))),
    ("np.logaddexp2(a, b)", (F, F[::-1] * 30)),
    ("np.heaviside(a, 0.5)", (np.array([-1.5, 0.0, 2.0, np.nan]), None)),
    ("np.fmod(a, b)", (I7, np.array([3, -3, 2, 5, -4, 7, 1]))),
    ("np.fmod(a, b)", (F * 10 - 5, np.array([1.5, -0.7, 2.0, 3.0, -1.0, 0.3, 4.0]))),
    ("np.divmod(a, 3)[0]", (I7, None)),
    ("np.divmod(a, 0.3)[1]", (F * 10 - 5, None)),
    ("np.ldexp(a, 3)", (F, None)),
    ("np.ldexp(a, b)", (F, np.arange(7) - 3)),
    ("np.unwrap(a * 10)", (F, None)),
    ("np.unwrap(a * 20, axis=0)", (M, None)),
    ("np.unwrap(a * 9, period=4.0)", (F, None)),
    ("np.cov(a)", (M, None)),
    ("np.cov(a, rowvar=False)", (M, None)),
    ("np.cov(a, bias=True)", (M, None)),
    ("np.cov(a, b)", (F, F * 2 + G[0])),
    ("np.cov(a)", (F, None)),
    ("np.corrcoef(a)", (M, None)),
    ("np.corrcoef(a, b)", (F, F ** 2)),
    ("np.histogram(a)", (RNG.normal(size=200), None)),
    ("np.histogram(a, bins=5)[0]", (I7, None)),
    ("np.histogram(a, 4, range=(0.2, 0.8))", (F, None)),
    ("np.histogram(a, 3, weights=b)", (F, F * 2)),
    ("np.histogram(a, 3, density=True)", (F, None)),
    ("np.histogram(a, bins=b)", (F, np.array([0.0, 0.25, 0.5, 1.0]))),
    ("np.histogram(a, bins=b, weights=a)", (F, np.array([0.0, 0.25, 0.5, 1.0]))),
    ("np.histogram(a, 2)", (np.full(4, 3.0), None)),
    ("np.histogram(a, 10, (0, 1))", (np.linspace(0, 1, 11), None)),
    ("np.lexsort((a, b))", (np.array([3, 1, 2, 1, 3]), np.array([0, 0, 1, 1, 0]))),
    ("np.lexsort(a)", (np.array([[3, 1, 2, 1], [1, 1, 0, 0]]), None)),
    ("np.partition(a, 2)[2]", (F, None)),
    ("np.partition(a, 3)[:3].sum()", (I7, None)),
    ("a[np.argpartition(a, 4)[4]]", (F, None)),
    ("np.polyfit(a, b, 2)", (F, 3 * F ** 2 - F + 0.5)),
    ("np.polyfit(a, b, 1)", (F, np.column_stack((F, 2 * F)))),
    ("np.gradient(a)", (F, None)),
    ("np.gradient(a, 0.5)", (I7, None)),
    ("np.gradient(a, edge_order=2)", (F ** 2, None)),
    ("np.gradient(a)", (M, None)),
    ("np.gradient(a, 2.0, axis=1)", (M, None)),
    ("np.gradient(a, axis=-2, edge_order=2)", (M, None)),
    ("np.trapezoid(a)", (F, None)),
    ("np.trapezoid(a, b)", (F, np.cumsum(F))),
    ("np.trapezoid(a, dx=0.1, axis=0)", (M, None)),
    ("np.trapezoid(a, axis=1)", (M, None)),
    ("np.array_split(a, 3)", (F, None)),
    ("np.array_split(a, 3, axis=1)", (M, None)),
    ("np.array_split(a, [2, 5])", (F, None)),
    ("np.array_split(a, 9)", (F, None)),
    ("np.hsplit(a, [1, 3])", (M, None)),
    ("np.hsplit(a, 7)", (F, None)),
    ("np.vsplit(a, 2)", (M, None)),
    ("np.dsplit(a, 2)", (RNG.random((2, 2, 4)), None)),
    ("np.ravel_multi_index((a % 4, a % 5), (4, 5))", (np.abs(I7), None)),
    ("np.ravel_multi_index((a, b), (3, 7))", (np.array([0, 2, 1]), np.array([6, 0, 3]))),
    ("np.unravel_index(a, (2, 3, 4))", (np.array([0, 5, 23, 11]), None)),
    ("np.unravel_index(17, (4, 5))", (None, None)),
    ("np.cbrt(a)", (np.array([27.0, -8.0, 0.0, -0.0, 2.0, 1e-300, np.inf, -np.inf, np.nan]),
                    None)),
    ("np.cbrt(a)", (I7, None)),
    ("np.cbrt(a)", (F.astype(np.float32), None)),
    ("np.frexp(a)", (np.array([8.0, -3.5, 0.0, 1e-310, 1e300, 0.75, np.inf, np.nan]), None)),
    ("np.frexp(a)", (F * 1000 - 500, None)),
    ("np.sum(a, where=a > 0.5)", (M, None)),
    ("np.sum(a, axis=0, where=b)", (M, M > 0.3)),
    ("np.sum(a, initial=10)", (I7, None)),
    ("a.sum() if False else np.prod(a, axis=1, where=a > 0.2, keepdims=True)", (M, None)),
    ("np.max(a, initial=0.9)", (M, None)),
    ("np.max(a, axis=1, initial=3, where=a > 0)", (np.reshape(np.tile(I7, 2), (2, 7)), None)),
    ("np.min(a, axis=0, where=a > 0.3, initial=5.0)", (M, None)),
    ("np.amax(a, initial=100)", (I7, None)),
    ("np.mean(a, where=a > 0.4)", (M, None)),
    ("np.mean(a, axis=1, where=a > 0.4)", (M.astype(np.float32), None)),
    ("np.mean(a, where=a > 0)", (I7, None)),
    ("np.any(a > 0.9, where=b)", (M, M < 0.5)),
    ("np.all(a > 0.1, axis=0, where=b)", (M, M > 0.2)),
    ("np.pad(a, 2, mode='wrap')", (M, None)),
    ("np.pad(a, ((1, 3), (0, 9)), 'wrap')", (M, None)),
    ("np.pad(a, (2, 3), mode='symmetric')", (F, None)),
    ("np.pad(a, 6, mode='symmetric')", (I3, None)),
    ("np.pad(a, ((1, 0), (2, 1)), mode='maximum')", (M, None)),
    ("np.pad(a, 1, mode='minimum')", (I7, None)),
    ("np.pad(a, (2, 1), mode='mean')", (I7, None)),
    ("np.pad(a, 1, mode='mean')", (M, None)),
    ("np.pad(a, 1)", (M, None)),
    ("a.item(3)", (M, None)),
    ("a.item(1, 2)", (M, None)),
    ("a.item(-1)", (I7, None)),
    ("np.array(a, copy=True)", (M, None)),
    ("np.array(a, copy=False)", (M, None)),
    ("np.array(a, dtype=np.float32, copy=True)", (I7, None)),
    ("np.r_[a, b]", (F, G)),
    ("np.r_[0, a, 0.5]", (F, None)),
    ("np.r_[1:4, a]", (I7, None)),
    ("np.r_[-1:1:5j]", (None, None)),
    ("np.r_[3:0:-1, a]", (I3, None)),
    ("np.r_[a, a]", (M, None)),
    ("np.c_[a, a * 2]", (F, None)),
    ("np.c_[a, b]", (M, M[:, :2])),
]


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, type(want)) and len(got) == len(want), (type(got), got)
        for g, w in zip(got, want):
            _same(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    # float32: within an ulp (NumPy's float32 cbrt is glibc's cbrtf, not correctly rounded)
    tol = 1e-6 if want.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=1e-14, equal_nan=True)


@pytest.mark.parametrize("expr, args", CASES, ids=[c[0] for c in CASES])
def test_library_function_as_numpy(expr, args):
    src = f"def kernel(a, b):\n    return {expr}\n"
    name = f"<library {expr}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns = {"np": np}
    exec(compile(src, name, "exec"), ns)
    f = ns["kernel"]
    with np.errstate(all="ignore"):
        want = f(*args)
    _same(tessera.jit(f)(*args), want)


def bad_convolve(a, b):
    return np.convolve(a, b[:0])


def bad_interp(a, b):
    return np.interp(a, b, a)


def bad_select(a, b):
    return np.select([a > 0], [a, b])


def bad_rot90(a, b):
    return np.rot90(a, axes=(1, 1))


def bad_max_where(a, b):
    return np.max(a, where=a > 1)


@pytest.mark.parametrize("f", [bad_convolve, bad_interp, bad_select, bad_rot90, bad_max_where])
def test_library_errors_are_numpys_class_at_the_callers_line(f):
    a, b = np.arange(4.0), np.arange(3.0)
    with pytest.raises(Exception) as want:
        f(a, b)
    with pytest.raises(want.type) as got:
        tessera.jit(f)(a, b)
    line = f.__code__.co_firstlineno + 1
    assert f"test_jit_numpy_library.py:{line}" in str(got.value)


def test_library_functions_inside_a_loop_and_nested():
    def kernel(x, k):
        total = 0.0
        for i in range(k):
            total += np.corrcoef(x[i], x[i + 1])[0, 1] + np.polyval(x[i], 0.5)
        return total + np.convolve(x[0], x[1]).sum()

    x = RNG.random((5, 6))
    np.testing.assert_allclose(tessera.jit(kernel)(x, 4), kernel(x, 4), rtol=1e-12)


# ------------------------------------------------------------------ raise


def checked(x, n):
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    for i in range(x.shape[0]):
        if x[i] > 5:
            raise IndexError("too big at " + str(i))
    if n == 7:
        raise NotImplementedError
    if n == 8:
        raise ZeroDivisionError(n)
    return x.sum() + n


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("args, kind, message, line", [
    ((np.arange(3.0), -1), ValueError, "n must be >= 0, got -1", 2),
    ((np.arange(9.0), 1), IndexError, "too big at 6", 5),
    ((np.arange(3.0), 7), NotImplementedError, "", 7),
    ((np.arange(3.0), 8), ZeroDivisionError, "8", 9),
])
def test_raise_of_a_builtin_exception(args, kind, message, line, threads):
    with pytest.raises(kind) as want:
        checked(*args)
    assert str(want.value) == message
    with pytest.raises(kind) as got:
        tessera.jit(checked, threads=threads)(*args)
    at = f"test_jit_numpy_library.py:{checked.__code__.co_firstlineno + line}"
    assert str(got.value).startswith(message) and at in str(got.value)
    assert tessera.jit(checked, threads=threads)(np.arange(3.0), 2) == checked(np.arange(3.0), 2)


class MyError(Exception):
    pass


def raises_own(x):
    raise MyError("x")


def reraises(x):
    raise


def test_raise_of_other_exceptions_is_refused_by_name():
    with pytest.raises(tessera.UnsupportedError, match="raising MyError"):
        tessera.jit(raises_own)(1.0)
    with pytest.raises(tessera.UnsupportedError, match="bare raise"):
        tessera.jit(reraises)(1.0)


COMPRESS = [("np.compress(a > 0.5, a)", (F, None)),
            ("np.compress([True, False, True], a, axis=0)", (M, None)),
            ("np.compress(np.array([1, 0, 1, 1]), a, axis=1)", (M, None))]


@pytest.mark.parametrize("expr, args", COMPRESS, ids=[c[0] for c in COMPRESS])
def test_compress_as_numpy(expr, args):
    test_library_function_as_numpy(expr, args)


def _helper(a, b=1, *, c=2):
    return a + b + c


def _calls_helper(x, wrong):
    if wrong == 1:
        return _helper(x, 1, 2)  # a positional argument for the keyword-only c
    if wrong == 2:
        return _helper(x, d=3)
    return _helper(x, c=5) + _helper(x, b=2) + _helper(b=3, a=x)


def _gradient_two_spacings(x):
    return np.gradient(x, 1.0, 2.0)


def test_calls_that_do_not_fit_the_signature_are_pythons_type_error_when_run():
    f = tessera.jit(_calls_helper)
    assert f(1.0, 0) == _calls_helper(1.0, 0)
    for wrong in (1, 2):
        with pytest.raises(TypeError):
            _calls_helper(1.0, wrong)
        with pytest.raises(TypeError, match="_helper()") as got:
            f(1.0, wrong)
        assert f"test_jit_numpy_library.py:{_calls_helper.__code__.co_firstlineno + 2 * wrong}" \
            in str(got.value)
    with pytest.raises(TypeError, match=r"np\.gradient\(\): too many positional"):
        tessera.jit(_gradient_two_spacings)(np.ones((3, 3)))
