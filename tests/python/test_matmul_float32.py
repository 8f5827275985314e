"""float32 products run per row tile through oneDNN's sgemm (matrix-vector
products through BLIS's gemv): values against NumPy for odd shapes, transposed
and strided operands, empty and one-row/one-column cases, attention's 4-d
products and both gradients, with tiles cut over 1 and 2 threads; and the same
bits for any thread count in deterministic mode."""

import numpy as np
import pytest

import tessera


def sample(shape, seed):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def reference(a, b):
    """The product in float64, the oracle for float32 results."""
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def check(got, a, b, name):
    got = np.asarray(got)
    want = np.matmul(a, b)
    assert got.shape == want.shape and got.dtype == np.float32, name
    k = a.shape[-1]
    np.testing.assert_allclose(got, reference(a, b), rtol=1e-5, atol=2e-6 * (1 + k) ** 0.5,
                               err_msg=name)


def cases():
    """(name, a, b): sizes that cut into several row tiles at 2 threads."""
    big = sample((650, 260), 3)
    x4 = sample((3, 301, 2, 33), 4)  # (batch, steps, heads, size) as attention reads it
    y4 = sample((3, 301, 2, 33), 5)
    return [
        ("odd shapes", sample((301, 67), 0), sample((67, 45), 1)),
        ("a transposed", sample((67, 301), 2).T, sample((67, 45), 1)),
        ("b transposed", sample((301, 67), 0), sample((45, 67), 6).T),
        ("both transposed", sample((67, 301), 2).T, sample((45, 67), 6).T),
        ("strided rows and slices", big[::2, 3:70], big[100:167, 5:250:1]),
        ("leading dimension > columns", big[1:300, 10:43], big[300:333, :200]),
        ("tall batch against one matrix", sample((7, 129, 40), 7), sample((40, 31), 8)),
        ("attention scores", x4.transpose(0, 2, 1, 3), y4.transpose(0, 2, 3, 1)),
        ("attention @ values", sample((3, 2, 301, 301), 9), y4.transpose(0, 2, 1, 3)),
        ("one row", big[5:6, :67], sample((67, 300), 10)),
        ("one column", sample((301, 67), 0), big[:67, 7:8]),
        ("row vector", big[7, :67], sample((67, 300), 10)),
        ("column vector", sample((301, 67), 0), big[:67, 9]),
        ("two rows", sample((2, 500), 11), sample((500, 301), 12)),
        ("two columns", sample((301, 500), 13), sample((500, 2), 14)),
        ("k = 1", sample((301, 1), 15), sample((1, 77), 16)),
        ("long k", sample((40, 3000), 17), sample((3000, 24), 18)),
        # oneDNN blocks this one by the tile's rows: 1 and 2 tiles differ in the last bits
        ("long k, wide", sample((160, 2133), 19), sample((2133, 1024), 20)),
    ]


def test_products_match_numpy(threads):
    for name, a, b in cases():
        check(tessera.call_primitive("matmul", [a, b]), a, b, f"{name}, {threads} threads")


@pytest.mark.parametrize("shape_a,shape_b", [((0, 5), (5, 7)), ((6, 0), (0, 7)),
                                             ((6, 5), (5, 0)), ((2, 0, 5), (5, 3)),
                                             ((300, 0), (0, 200))])
def test_empty_products_match_numpy(shape_a, shape_b, threads):
    a, b = sample(shape_a, 20), sample(shape_b, 21)
    got = np.asarray(tessera.call_primitive("matmul", [a, b]))
    want = np.matmul(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_dot_and_transposed_product_match_numpy(threads):
    a, b = sample((301, 67), 30), sample((67, 45), 31)
    check(tessera.call_primitive("dot", [a, b]), a, b, "dot")
    tall, g = sample((4100, 37), 32), sample((4100, 29), 33)  # cut along the sum as well
    check(tessera.call_primitive("matmul_tn", [tall, g]), tall.T, g, "matmul_tn")


def test_gradients_match_the_closed_forms(threads):
    """d sum(r * (x @ w)) is r @ w.T for x and x.T @ r for w: matmul_grad_x and
    matmul_grad_y, exactly the transposed products, against NumPy."""
    x, w, r = sample((2, 301, 48), 40), sample((48, 37), 41), sample((2, 301, 37), 42)

    def f(x, w, r):
        return np.sum(r * (x @ w))

    gx, gw = tessera.grad(tessera.jit(f), argnums=(0, 1))(x, w, r)
    np.testing.assert_allclose(gx, reference(r, w.T), rtol=1e-5, atol=2e-5)
    want_w = reference(x.reshape(-1, 48).T, r.reshape(-1, 37))
    np.testing.assert_allclose(gw, want_w, rtol=1e-5, atol=1e-4)


def test_deterministic_mode_gives_the_same_bits_with_1_and_2_threads():
    before_threads, before_mode = tessera.num_threads(), tessera.deterministic()
    x, w, r = sample((2, 301, 48), 50), sample((48, 37), 51), sample((2, 301, 37), 52)

    def f(x, w, r):
        return np.sum(r * (x @ w))

    grad = tessera.grad(tessera.jit(f), argnums=(0, 1))
    runs = []
    try:
        tessera.set_deterministic(True)
        for n in (1, 2):
            tessera.set_num_threads(n)
            products = [np.asarray(tessera.call_primitive("matmul", [a, b])) for _, a, b in cases()]
            runs.append(products + [np.asarray(g) for g in grad(x, w, r)])
    finally:
        tessera.set_deterministic(before_mode)
        tessera.set_num_threads(before_threads)
    for one, two in zip(*runs):
        assert one.tobytes() == two.tobytes()
