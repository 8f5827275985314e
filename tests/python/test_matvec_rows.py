"""Matrix-vector products of float64 (A @ v, A of shape (m, k)): tessera's own
dot-product kernel where the CPU has AVX2 and FMA (kernels/linalg.cpp,
dot_rows), BLAS otherwise. Compared with NumPy, and bit for bit between
thread counts: each row is summed in the same order whatever tile it is in."""

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
