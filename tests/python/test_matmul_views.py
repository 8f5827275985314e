"""matmul reads float operands through their strides (transposed, sliced and
batched views go to BLAS without a copy, a batch against one matrix is one
tall product): every layout against NumPy, values and gradients."""

import numpy as np
import pytest

import tessera

FLOATS = [np.float32, np.float64]


def sample(shape, dtype, seed):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def tol(dtype):
    return {"rtol": 2e-5, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


def layouts(dtype):
    """(name, a, b) pairs, NumPy views of every kind matmul meets."""
    a, b = sample((6, 5), dtype, 0), sample((5, 7), dtype, 1)
    at, bt = sample((5, 6), dtype, 2), sample((7, 5), dtype, 3)
    big = sample((9, 12), dtype, 4)
    x3, w = sample((4, 6, 5), dtype, 5), sample((5, 7), dtype, 6)
    q = sample((2, 6, 3, 4), dtype, 7)  # (batch, t, heads, size) as attention reads it
    k = sample((2, 6, 3, 4), dtype, 8)
    return [
        ("contiguous", a, b),
        ("a transposed", at.T, b),
        ("b transposed", a, bt.T),
        ("both transposed", at.T, bt.T),
        ("sliced (leading dimension > columns)", big[1:7, 2:7], big[2:7, 3:10]),
        ("every other column (packed)", big[:6, ::2][:, :5], b),
        ("reversed rows (packed)", a[::-1], b[::-1]),
        ("batch x one matrix", x3, w),
        ("batch x transposed matrix", x3, bt.T),
        ("transposed batch x one matrix", sample((4, 5, 6), dtype, 9).transpose(0, 2, 1), w),
        ("attention scores", q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1)),
        ("broadcast batch", sample((1, 6, 5), dtype, 10), sample((3, 1, 5, 7), dtype, 11)),
        ("row vector", sample((5,), dtype, 12), bt.T),
        ("column vector", at.T, sample((10,), dtype, 13)[::2]),
        ("one row", big[2:3, :5], bt.T),
        ("one column", a, big[:5, 3:4]),
        ("empty k", sample((3, 0), dtype, 14), sample((0, 4), dtype, 15)),
    ]


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_of_views_matches_numpy(dtype):
    for name, a, b in layouts(dtype):
        got = np.asarray(tessera.call_primitive("matmul", [a, b]))
        want = np.matmul(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype, name
        np.testing.assert_allclose(got, want, err_msg=name, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_views_made_inside_a_program_match_numpy(dtype, threads):
    """Views made by tessera's own transpose/reshape (what attention does) and
    the gradients, whose rules multiply by swapped views."""
    q, k = sample((2, 6, 12), dtype, 20), sample((2, 6, 12), dtype, 21)
    w = sample((12, 12), dtype, 22)

    def f(q, k, w):
        qh = np.transpose(np.reshape(q @ w, (2, 6, 3, 4)), (0, 2, 1, 3))
        kh = np.transpose(np.reshape(k, (2, 6, 3, 4)), (0, 2, 1, 3))
        s = qh @ np.transpose(kh, (0, 1, 3, 2))
        return np.sum(s * s)

    got = tessera.jit(f)(q, k, w)
    np.testing.assert_allclose(got, f(q, k, w), rtol=1e-4 if dtype == np.float32 else 1e-10)
    grads = tessera.grad(tessera.jit(f), argnums=(0, 1, 2))(q, k, w)
    eps = 1e-3 if dtype == np.float32 else 1e-6
    for i, (x, g) in enumerate(zip((q, k, w), grads)):
        x64 = [v.astype(np.float64) for v in (q, k, w)]
        fd = np.zeros(x.shape)
        for idx in [(0, 0, 0), (1, 5, 11), (0, 3, 7)] if x.ndim == 3 else [(0, 0), (11, 3)]:
            plus = [v.copy() for v in x64]
            minus = [v.copy() for v in x64]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            fd[idx] = (f(*plus) - f(*minus)) / (2 * eps)
            np.testing.assert_allclose(np.asarray(g)[idx], fd[idx], rtol=2e-3, atol=2e-3,
                                       err_msg=f"argument {i} at {idx}")


def test_integer_views_are_packed():
    a = np.arange(30, dtype=np.int64).reshape(5, 6)
    got = np.asarray(tessera.call_primitive("matmul", [a.T, a]))
    np.testing.assert_array_equal(got, a.T @ a)


def test_stacked_batch_equals_per_matrix_products_bitwise():
    """A batch against one matrix is one tall product: the same bits as each
    matrix's own product (BLAS sums each element in the same order)."""
    x, w = sample((8, 64, 48), np.float32, 30), sample((48, 40), np.float32, 31)
    whole = np.asarray(tessera.call_primitive("matmul", [x, w]))
    for i in range(8):
        one = np.asarray(tessera.call_primitive("matmul", [x[i], w]))
        assert one.tobytes() == whole[i].tobytes()
