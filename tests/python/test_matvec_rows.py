"""Matrix-vector products of float64 (A @ v, x @ A, A.T @ v, x @ A.T):
tessera's own kernels where the CPU has AVX2 and FMA (kernels/linalg.cpp,
dot_rows and vec_mat, AVX-512 variants in the same order), BLAS otherwise.
Compared with NumPy, and bit for bit between thread counts and SIMD levels:
each output element is summed in the same order whatever tile it is in."""

import numpy as np
import pytest

import tessera
from jit_check import check


def matvec(a, v):
    return a @ v


def power_step(a, v):
    w = a @ v
    return w / np.linalg.norm(w)


SHAPES = [(1, 1), (1, 9), (3, 1), (4, 8), (5, 8), (7, 13), (9, 17), (64, 64), (333, 1001),
          (1000, 1000), (2000, 3), (0, 5), (6, 0)]


@pytest.mark.parametrize("m, k", SHAPES)
def test_matvec_matches_numpy(m, k):
    rng = np.random.default_rng(m * 7919 + k)
    a, v = rng.standard_normal((m, k)), rng.standard_normal(k)
    check(matvec, a, v, rtol=1e-12, atol=1e-12)


def test_views_and_special_values():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 60))
    check(matvec, a[::2, 1:51], rng.standard_normal(50), rtol=1e-12, atol=1e-12)
    check(matvec, a.T[:, :40], rng.standard_normal(40), rtol=1e-12, atol=1e-12)
    b = a[:9, :17].copy()
    b[2, 5], b[4, 16], b[7, 0] = np.nan, np.inf, -np.inf
    with np.errstate(invalid="ignore"):
        check(matvec, b, np.ones(17), rtol=1e-12, atol=1e-12)
    check(power_step, a[:30, :30], np.ones(30), rtol=1e-12, atol=1e-12)


def test_the_same_bits_at_one_and_two_threads():
    rng = np.random.default_rng(5)
    a, v = rng.standard_normal((3001, 517)), rng.standard_normal(517)
    one = tessera.jit(matvec, threads=1)(a, v)
    two = tessera.jit(matvec, threads=2)(a, v)
    assert one.tobytes() == two.tobytes()


# x @ A, A.T @ v and x @ A.T: tessera's column kernel (vec_mat: each output
# element one chain of FMAs in the order of the rows) or, for a transposed
# matrix, the rows' kernel; their columns are cut into tiles over the threads.
def vecmat(v, a):
    return v @ a


def t_matvec(a, v):
    return a.T @ v


def vecmat_t(v, a):
    return v @ a.T


def rayleigh(a, v):
    return v @ a @ v


@pytest.mark.parametrize("m, k", SHAPES)
def test_vector_matrix_and_transposed_match_numpy(m, k):
    rng = np.random.default_rng(m * 31 + k)
    a = rng.standard_normal((m, k))
    check(vecmat, rng.standard_normal(m), a, rtol=1e-12, atol=1e-12)
    check(t_matvec, a, rng.standard_normal(m), rtol=1e-12, atol=1e-12)
    check(vecmat_t, rng.standard_normal(k), a, rtol=1e-12, atol=1e-12)


def test_vector_matrix_views_and_special_values():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((60, 90))
    check(vecmat, rng.standard_normal(30), a[::2, 3:80], rtol=1e-12, atol=1e-12)
    check(vecmat, rng.standard_normal(90)[::3], a[:30, :41], rtol=1e-12, atol=1e-12)
    check(t_matvec, a[5:50, 7:88], rng.standard_normal(45), rtol=1e-12, atol=1e-12)
    check(vecmat_t, rng.standard_normal(77), a[1:40, 3:80], rtol=1e-12, atol=1e-12)
    b = a[:19, :23].copy()
    b[2, 5], b[4, 16], b[17, 22] = np.nan, np.inf, -np.inf
    with np.errstate(invalid="ignore"):
        check(vecmat, np.ones(19), b, rtol=1e-12, atol=1e-12)
        check(t_matvec, b, np.ones(19), rtol=1e-12, atol=1e-12)
    check(rayleigh, a[:50, :50], rng.standard_normal(50), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("f, shape", [(vecmat, (517, 3001)), (t_matvec, (517, 3001)),
                                      (vecmat_t, (3001, 517)), (matvec, (2999, 1003))])
def test_vector_products_have_the_same_bits_at_one_and_two_threads(f, shape):
    rng = np.random.default_rng(17)
    a = rng.standard_normal(shape)
    v = rng.standard_normal(shape[1] if f in (matvec, vecmat_t) else shape[0])
    args = (a, v) if f in (matvec, t_matvec) else (v, a)
    one = tessera.jit(f, threads=1)(*args)
    two = tessera.jit(f, threads=2)(*args)
    assert one.tobytes() == two.tobytes()
    np.testing.assert_allclose(two, f(*args), rtol=1e-11, atol=1e-11)


@pytest.mark.skipif(tessera.simd_best() != "avx512", reason="the CPU lacks AVX-512")
def test_avx2_and_avx512_kernels_give_the_same_bits():
    rng = np.random.default_rng(23)
    a = rng.standard_normal((203, 1001))
    v, w = rng.standard_normal(1001), rng.standard_normal(203)
    before = tessera.simd_level()
    results = {}
    try:
        for level in ("avx2", "avx512"):
            tessera.set_simd_level(level)
            results[level] = [tessera.jit(matvec, threads=2)(a, v).tobytes(),
                              tessera.jit(vecmat, threads=2)(w, a).tobytes(),
                              tessera.jit(t_matvec, threads=2)(a, w).tobytes()]
    finally:
        tessera.set_simd_level(before)
    assert results["avx2"] == results["avx512"]


def quadratic_sum(a, w):
    return np.sum(np.tanh(a @ w))


def test_gradient_through_a_matrix_vector_product():
    # d/dw sum(tanh(a @ w)) = a.T @ (1 - tanh(a @ w)**2): the transposed
    # product of the gradient (matmul_tn with a vector), cut into column tiles.
    rng = np.random.default_rng(29)
    a, w = rng.standard_normal((700, 1303)) / 30, rng.standard_normal(1303)
    expected = a.T @ (1.0 - np.tanh(a @ w) ** 2)
    grads = [tessera.grad(tessera.jit(quadratic_sum, threads=t), argnums=1)(a, w)
             for t in (1, 2)]
    assert grads[0].tobytes() == grads[1].tobytes()
    np.testing.assert_allclose(grads[1], expected, rtol=1e-11, atol=1e-12)


def test_blas_level_still_matches_numpy():
    # At the sse2 level the products go to BLAS's gemv.
    rng = np.random.default_rng(31)
    a, v, w = rng.standard_normal((90, 70)), rng.standard_normal(70), rng.standard_normal(90)
    before = tessera.simd_level()
    try:
        tessera.set_simd_level("sse2")
        check(matvec, a, v, rtol=1e-12, atol=1e-12)
        check(vecmat, w, a, rtol=1e-12, atol=1e-12)
        check(t_matvec, a, w, rtol=1e-12, atol=1e-12)
        check(vecmat_t, v, a, rtol=1e-12, atol=1e-12)
    finally:
        tessera.set_simd_level(before)
