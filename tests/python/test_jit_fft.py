"""np.fft in @tessera.jit (tessera/primitives/fft.cpp) against NumPy: every
function, dtypes, shapes, n/axis/norm/s/axes variants, odd and prime
lengths, errors with the user's line, 1 and 2 threads, calls in a loop."""

import inspect
import os

import numpy as np
import pytest

import tessera
from jit_check import check, numpy_fn

FILE = os.path.basename(__file__)
RNG = np.random.default_rng(31)
# NumPy 2 deprecates s without axes; tessera follows its current meaning.
pytestmark = pytest.mark.filterwarnings("ignore:`axes` should not be `None`:DeprecationWarning")


def line_of(func, marker="# HERE"):
    lines, start = inspect.getsourcelines(func)
    for i, text in enumerate(lines):
        if marker in text:
            return start + i
    raise AssertionError(f"no {marker} in {func.__name__}")


def at(func):
    return f"(at {FILE}:{line_of(func)})"


def real(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def cplx(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def rel_err(got, expected):
    scale = max(np.abs(expected).max(), 1e-300) if expected.size else 1.0
    return np.abs(got - expected).max() / scale if expected.size else 0.0


@tessera.jit
def jit_fft(x):
    return np.fft.fft(x)


@tessera.jit
def jit_ifft(x):
    return np.fft.ifft(x)


@tessera.jit
def jit_real(x):
    y = np.fft.rfft(x)
    return y, np.fft.irfft(y, n=x.shape[0])


def test_accuracy_every_length_to_4096():
    # Every length 1..4096 (powers of 2, 3, 5, mixed, primes through
    # Bluestein; real transforms of even length through half-length complex
    # ones): within ~1e-14 of NumPy's pocketfft relative to the largest
    # value, forward and inverse, complex and real.
    worst = (0.0, 0)
    for n in range(1, 4097):
        x = cplx(n)
        err = max(rel_err(jit_fft(x), np.fft.fft(x)), rel_err(jit_ifft(x), np.fft.ifft(x)))
        y, back = jit_real(x.real)
        expected = np.fft.rfft(x.real)
        err = max(err, rel_err(y, expected), rel_err(back, np.fft.irfft(expected, n=n)))
        worst = max(worst, (err, n))
    assert worst[0] < 1e-14, f"largest relative error {worst[0]:.3g} at n={worst[1]}"


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 11, 16, 37, 60, 97, 210, 257])
def test_one_axis_lengths(name, n):
    x = real(n) if name == "rfft" else cplx(n)
    check(numpy_fn(f"np.fft.{name}(x)"), x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft"])
@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_norms(name, norm):
    x = real(4, 9) if name == "rfft" else cplx(4, 9)
    check(numpy_fn(f"np.fft.{name}(x, norm={norm!r})"), x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft"])
@pytest.mark.parametrize("args", ["n=5", "n=12", "n=1", "axis=0", "8, 0", "n=3, axis=-2",
                                  "7, 1, 'ortho'", "axis=1, norm='forward', n=11"])
def test_n_and_axis(name, args):
    x = real(6, 8, 3) if name == "rfft" else cplx(6, 8, 3)
    check(numpy_fn(f"np.fft.{name}(x, {args})"), x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int64, np.int8,
                                   np.bool_, np.complex64, np.complex128])
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "fftn", "rfftn", "irfftn"])
def test_dtypes(dtype, name):
    # NumPy 2: float32 (and float16) give complex64, others complex128;
    # irfft keeps float16 and float32. Complex input to rfft is a TypeError.
    x = RNG.integers(-3, 4, size=(5, 6)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.integers(-3, 4, size=(5, 6)).astype(dtype)
    rtol = 1e-2 if dtype == np.float16 else 1e-5 if dtype in (np.float32, np.complex64) else 1e-12
    check(numpy_fn(f"np.fft.{name}(x)"), x, rtol=rtol, atol=1e-5 if rtol > 1e-12 else 1e-12)


@pytest.mark.parametrize("expr", [
    "np.fft.fftn(x)", "np.fft.ifftn(x)", "np.fft.fft2(x)", "np.fft.ifft2(x)",
    "np.fft.fftn(x, axes=(0, 2))", "np.fft.fftn(x, s=(3, 7))", "np.fft.fftn(x, (2, 4, 5))",
    "np.fft.fftn(x, s=(2, -1), axes=(0, 2))", "np.fft.fftn(x, axes=(0, 0))",
    "np.fft.fftn(x, axes=[-1, 0], norm='ortho')", "np.fft.ifftn(x, s=[5, 2], axes=(2, 1))",
    "np.fft.fft2(x, s=(3, 9))", "np.fft.ifft2(x, axes=(0, 1), norm='forward')",
    "np.fft.rfftn(x.real)", "np.fft.rfft2(x.real)", "np.fft.rfftn(x.real, s=(4, 6), axes=(1, 2))",
    "np.fft.rfftn(x.real, axes=(2, 0))", "np.fft.irfftn(x)", "np.fft.irfft2(x)",
    "np.fft.irfftn(x, s=(4, 7))", "np.fft.irfftn(x, axes=(0, 1))",
    "np.fft.irfftn(x, s=(5, 9), axes=(2, 1), norm='ortho')", "np.fft.irfft2(x, s=(6, 6))",
    "np.fft.irfftn(np.fft.rfftn(x.real), s=x.shape)",
])
def test_many_axes(expr):
    check(numpy_fn(expr), cplx(4, 6, 5), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("expr", [
    "np.fft.fftfreq(8)", "np.fft.fftfreq(9, d=0.1)", "np.fft.fftfreq(1, 2.5)",
    "np.fft.fftfreq(0 + 7, 1 / 3)", "np.fft.rfftfreq(8)", "np.fft.rfftfreq(9, d=0.1)",
    "np.fft.rfftfreq(1)", "np.fft.fftfreq(x.shape[0], 0.5)",
    "np.fft.fftshift(x)", "np.fft.ifftshift(x)", "np.fft.fftshift(x, axes=1)",
    "np.fft.ifftshift(x, axes=(0,))", "np.fft.fftshift(x, axes=[-1, 0])",
    "np.fft.ifftshift(np.fft.fftshift(x))", "np.fft.fftshift(np.fft.fftfreq(10))",
    "np.fft.fft([1.0, 2.0, 3.0])", "np.fft.rfft([1, 2, 3, 4])", "np.fft.fft(x, out=None)",
    "np.fft.fftshift([[1, 2, 3], [4, 5, 6]])",
])
def test_frequencies_and_shifts(expr):
    check(numpy_fn(expr), real(5, 4))


def test_frequencies_match_bitwise():
    f = numpy_fn("(np.fft.fftfreq(n, d), np.fft.rfftfreq(n, d))", "n, d")
    for n, d in [(1, 1.0), (10, 0.3), (33, 1e-3), (64, 7.0)]:
        got, expected = tessera.jit(f)(n, d), f(n, d)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype and np.array_equal(g, e)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft"])
def test_round_trip_and_empty_lines(name):
    # Empty other axes give empty results of the right shape.
    x = real(0, 6) if name == "rfft" else cplx(0, 6)
    check(numpy_fn(f"np.fft.{name}(x)"), x)
    check(numpy_fn(f"np.fft.{name}(x, axis=0, n=4)"), x, atol=1e-12)


def test_round_trips():
    x = real(7, 10)
    f = numpy_fn("(np.fft.ifft(np.fft.fft(x)).real, np.fft.irfft(np.fft.rfft(x), n=10), "
                 "np.fft.irfftn(np.fft.rfftn(x), s=x.shape))")
    for got in tessera.jit(f)(x):
        np.testing.assert_allclose(got, x, rtol=1e-12, atol=1e-13)


def test_threads_give_the_same_bits(threads):
    # Lines are transformed independently: any thread count, the same bits.
    x = cplx(64, 96)
    f = numpy_fn("(np.fft.fft2(x), np.fft.irfftn(x, axes=(1, 0)), np.fft.fft(x, n=97, axis=0), "
                 "np.fft.rfft(x.real, n=95), np.fft.irfft(x, n=93, axis=0))")
    got = tessera.jit(f)(x)
    for g, e in zip(got, f(x)):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    from tessera import _core

    before = _core.num_threads()
    try:
        _core.set_num_threads(3 - threads)
        again = tessera.jit(f)(x)
    finally:
        _core.set_num_threads(before)
    for g, h in zip(got, again):
        assert np.array_equal(g, h)


def spectral_convolution(x, k, steps):
    # A loop of FFT-based circular convolutions (heat-equation-like smoothing).
    kf = np.fft.rfft(k)
    total = np.zeros(steps)
    for i in range(steps):
        x = np.fft.irfft(np.fft.rfft(x) * kf, n=x.shape[0])
        total[i] = np.abs(np.fft.fft(x)).sum()
    return x, total


def poisson_2d(f):
    # -laplace(u) = f on a periodic grid, solved in Fourier space.
    n = f.shape[0]
    k = 2 * np.pi * np.fft.fftfreq(n)
    k2 = k[:, None] ** 2 + k[None, :] ** 2
    k2[0, 0] = 1.0
    uh = np.fft.fft2(f) / k2
    uh[0, 0] = 0.0
    return np.fft.ifft2(uh).real


def test_inside_a_loop():
    check(spectral_convolution, real(33), np.array([0.25, 0.5, 0.25] + [0.0] * 30), 5,
          rtol=1e-12, atol=1e-12)


def test_poisson_solver():
    check(poisson_2d, real(24, 24), rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------- errors


def f_zero_points(x):
    return np.fft.fft(x, n=0)  # HERE


def f_negative_points(x):
    return np.fft.ifft(x, -3)  # HERE


def f_empty_axis(x):
    y = x * 2
    return np.fft.rfft(y)  # HERE


def f_bad_norm(x):
    return np.fft.fft(x, norm="unitary")  # HERE


def f_bad_axis(x):
    return np.fft.fft(x, axis=2)  # HERE


def f_bad_axes(x):
    return np.fft.fftn(x, axes=(0, 3))  # HERE


def f_float_n(x):
    return np.fft.fft(x, n=2.5)  # HERE


def f_s_axes_lengths(x):
    return np.fft.fft2(x, s=(2,))  # HERE


def f_irfft_one_point(x):
    return np.fft.irfft(x[:, :1])  # HERE


def f_rfft_complex(x):
    return np.fft.rfft(x * 1j)  # HERE


def f_fftfreq_float(x):
    return np.fft.fftfreq(4.0)  # HERE


def f_shift_axes(x):
    return np.fft.fftshift(x, axes=5)  # HERE


def f_zero_s(x):
    return np.fft.irfftn(x, s=(3, 0))  # HERE


@pytest.mark.parametrize("func, kind, message", [
    (f_zero_points, ValueError, r"\[fft\] Invalid number of FFT data points \(0\) specified"),
    (f_negative_points, ValueError, r"\[ifft\] Invalid number of FFT data points \(-3\)"),
    (f_empty_axis, ValueError, r"\[rfft\] Invalid number of FFT data points \(0\)"),
    (f_bad_norm, ValueError, r"\[fft\] Invalid norm value unitary; should be \"backward\""),
    (f_bad_axis, IndexError, r"\[fft\] axis 2 is out of bounds for array of dimension 2"),
    (f_bad_axes, IndexError, r"\[fftn\] axis 3 is out of bounds"),
    (f_float_n, TypeError, r"\[fft\] argument 'n' must be an integer"),
    (f_s_axes_lengths, ValueError, r"\[fft2\] Shape and axes have different lengths"),
    (f_irfft_one_point, ValueError, r"\[irfft\] Invalid number of FFT data points \(0\)"),
    (f_rfft_complex, TypeError, r"\[rfft\] argument 'a' must be real, got a complex128"),
    (f_fftfreq_float, ValueError, r"\[fftfreq\] n should be an integer"),
    (f_shift_axes, IndexError, r"\[fftshift\] axis 5 is out of bounds"),
    (f_zero_s, ValueError, r"\[irfftn\] Invalid number of FFT data points \(0\)"),
])
def test_errors_name_the_line(func, kind, message):
    x = np.zeros((3, 0)) if func is f_empty_axis else real(4, 6)
    with pytest.raises(kind):  # NumPy raises the same kind
        func(x)
    with pytest.raises(kind, match=message) as info:
        tessera.jit(func)(x)
    assert str(info.value).endswith(at(func)), str(info.value)


def f_hfft(x):
    return np.fft.hfft(x)  # HERE


def f_out(x):
    y = np.zeros(4, dtype=complex)
    return np.fft.fft(x, out=y)  # HERE


def test_out_is_refused_by_name():
    with pytest.raises(tessera.UnsupportedError, match=r"out= of fft") as info:
        tessera.jit(f_out)(real(4))
    assert str(line_of(f_out)) in str(info.value)


def test_unsupported_function_is_named():
    with pytest.raises(tessera.UnsupportedError, match=r"np\.fft\.hfft is not supported") as info:
        tessera.jit(f_hfft)(real(4))
    assert str(line_of(f_hfft)) in str(info.value)


def f_grad(x):
    return np.fft.fft(x).real.sum()  # HERE


def test_transforms_are_not_differentiable_and_say_so():
    # Never a silent zero gradient: an error naming the primitive and the line.
    with pytest.raises(tessera.CompileError, match=r"'fft' has no gradient rule") as info:
        tessera.grad(tessera.jit(f_grad))(real(8))
    assert at(f_grad) in str(info.value)


def f_shifts(x, w):
    return (np.fft.fftshift(x, axes=0) * w).sum() + (np.fft.ifftshift(x) ** 3).sum()


def test_shift_gradients_match_finite_differences():
    x, w = real(5, 4), real(5, 4)
    got = tessera.grad(tessera.jit(f_shifts))(x, w)
    eps, fd = 1e-6, np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        fd[i] = (f_shifts(x + d, w) - f_shifts(x - d, w)) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)
