"""tessera.grad / value_and_grad on @tessera.jit functions, against central
finite differences computed with NumPy."""

import numpy as np
import pytest

import tessera


def numeric_grad(f, args, i, h=1e-6):
    x = np.array(args[i], dtype=np.float64)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[k] += h
        minus[k] -= h
        a_plus = list(args)
        a_minus = list(args)
        a_plus[i], a_minus[i] = plus, minus
        g[k] = (f(*a_plus) - f(*a_minus)) / (2 * h)
    return g


def mlp_loss(w1, b1, w2, x, y):
    h = np.tanh(x @ w1 + b1)
    out = h @ w2
    return np.mean((out - y) ** 2)


def branchy(x, scale):
    if np.sum(x) > 0:
        y = np.exp(x) * scale
    else:
        y = np.sin(x)
    return np.sum(y * y)


@tessera.jit
def helper(v):
    return v * np.log1p(v * v)


def with_call(x):
    return np.sum(helper(x) + helper(2.0 * x))


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    return {
        "w1": rng.normal(size=(3, 4)),
        "b1": rng.normal(size=4),
        "w2": rng.normal(size=(4, 2)),
        "x": rng.normal(size=(5, 3)),
        "y": rng.normal(size=(5, 2)),
    }


def test_mlp_gradients_match_finite_differences(data):
    args = [data[k] for k in ("w1", "b1", "w2", "x", "y")]
    grads = tessera.grad(mlp_loss, argnums=(0, 1, 2))(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric_grad(mlp_loss, args, i), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("x", [np.array([0.5, 0.25]), np.array([-0.5, -0.25])])
def test_if_branches(x):
    g = tessera.grad(branchy)(x, 1.5)
    np.testing.assert_allclose(g, numeric_grad(branchy, [x, 1.5], 0), rtol=1e-5)


def test_calls_of_other_functions_are_differentiated():
    x = np.array([0.3, -0.2, 0.9])
    value, g = tessera.value_and_grad(with_call)(x)
    def reference(v):
        return np.sum(helper.__wrapped__(v) + helper.__wrapped__(2.0 * v))

    assert value == pytest.approx(reference(x))
    np.testing.assert_allclose(g, numeric_grad(reference, [x], 0), rtol=1e-5)


def test_loops_are_rejected_with_their_line():
    def looped(x):
        s = 0.0
        for i in range(3):
            s = s + np.sum(x * i)
        return s

    with pytest.raises(tessera.CompileError, match=r"cannot differentiate through while.*test_grad\.py:\d+"):
        tessera.grad(looped)(np.ones(2))


def test_float32_gradient_keeps_dtype():
    def f(x):
        return np.sum(x * x)

    g = tessera.grad(f)(np.ones(3, dtype=np.float32))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2.0)


def test_bad_argnums():
    with pytest.raises(ValueError, match="argnums 5 is out of range"):
        tessera.grad(mlp_loss, argnums=5)(*[np.ones(1)] * 5)
    with pytest.raises(TypeError, match="argnums"):
        tessera.grad(mlp_loss, argnums="w")


def dot_model(w, x, y):
    # np.dot, np.cumsum, np.prod and np.linalg.norm in one differentiated loss.
    h = np.dot(x, w)
    r = np.cumsum(h, axis=1) - y
    return np.sum(r ** 2) + 0.1 * np.linalg.norm(w) + 0.01 * np.prod(w[0] + 2.0)


def test_dot_cumsum_prod_norm_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    args = [rng.normal(size=(3, 4)), rng.normal(size=(5, 3)), rng.normal(size=(5, 4))]
    grads = tessera.grad(dot_model, argnums=(0, 1))(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric_grad(dot_model, args, i), rtol=1e-5, atol=1e-7)


def inf_norm(w):
    return np.linalg.norm(w, np.inf)


def test_a_norm_without_a_gradient_rule_says_which():
    with pytest.raises(ValueError, match=r"\[norm_grad\].*ord=inf"):
        tessera.grad(inf_norm)(np.array([1.0, -3.0, 2.0]))


def shaped_model(w):
    return np.sum(np.sort(w, axis=1) * np.arange(4.0)) + np.sum(np.tile(w, (2, 1)) ** 2) \
        + np.sum(np.repeat(w, 3, axis=0) * 0.5 * w[0])


def test_sort_tile_repeat_gradients_match_finite_differences():
    w = np.random.default_rng(9).normal(size=(3, 4))
    g = tessera.grad(shaped_model)(w)
    np.testing.assert_allclose(g, numeric_grad(shaped_model, [w], 0), rtol=1e-5, atol=1e-7)


def per_element_repeat(w):
    return np.sum(np.repeat(w, [1, 2, 3]))


def test_repeat_with_per_element_counts_says_it_has_no_rule():
    with pytest.raises(ValueError, match=r"\[repeat_grad\].*integer number of repeats"):
        tessera.grad(per_element_repeat)(np.array([1.0, 2.0, 3.0]))


def joined(w):
    a = np.concatenate([w, w * 2], axis=1)
    b = np.stack((w, np.sin(w), np.ones_like(w)), axis=1)
    return np.sum(a ** 2 * np.arange(8.0)) + np.sum(b * np.arange(3.0)[None, :, None]) \
        + np.sum(np.concatenate([w, w], axis=None) ** 3)


def test_concatenate_and_stack_gradients_match_finite_differences():
    # The list of arrays is differentiated item by item (w appears in several).
    w = np.random.default_rng(4).normal(size=(2, 4))
    g = tessera.grad(joined)(w)
    np.testing.assert_allclose(g, numeric_grad(joined, [w], 0), rtol=1e-5, atol=1e-7)


def repeated_rows(x):
    idx = np.array([0, 2, 0, 0])
    return np.sum(x[idx] ** 2 * np.arange(1.0, 5.0)[:, None]) + np.sum(x[1:, ::2] * 3.0)


def test_repeated_indices_add_their_cotangents():
    # x[[0, 2, 0, 0]]: row 0 is read three times, so its gradient is the sum
    # of three contributions (a "last write wins" scatter would keep one).
    x = np.random.default_rng(2).normal(size=(3, 4))
    g = tessera.grad(repeated_rows)(x)
    np.testing.assert_allclose(g, numeric_grad(repeated_rows, [x], 0), rtol=1e-5, atol=1e-7)


def test_index_add_is_numpy_add_at():
    x = np.arange(12.0).reshape(3, 4)
    v = np.arange(8.0).reshape(4, 2)
    expected = x.copy()
    np.add.at(expected, (np.array([0, 2, 0, 0]), slice(1, 3)), v)
    got = tessera._core.call_primitive("index_add", [x, v, np.array([0, 2, 0, 0]),
                                                      slice(1, 3)])
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(x, np.arange(12.0).reshape(3, 4))  # x unchanged


def moved(w):
    t = np.take(w, [3, 0, 3], axis=1)
    p = np.pad(w, ((1, 0), (2, 1)))
    r = np.roll(w, 1, axis=0)
    return np.sum(t ** 2) + np.sum(p * np.arange(7.0)) + np.sum(r * w) + np.vdot(w, w[::-1])


def test_take_pad_roll_vdot_gradients_match_finite_differences():
    w = np.random.default_rng(6).normal(size=(3, 4))
    g = tessera.grad(moved)(w)
    np.testing.assert_allclose(g, numeric_grad(moved, [w], 0), rtol=1e-5, atol=1e-7)


def test_take_and_take_grad_of_rows_match_numpy_bit_for_bit():
    # Rows of an embedding (the gather copies each row as one block, the
    # gradient adds it as one block), repeated ids accumulating in order as
    # numpy.add.at; along axis 1 the selected elements are not consecutive.
    rng = np.random.default_rng(4)
    w = rng.normal(size=(50, 19)).astype(np.float32)
    ids = rng.integers(0, 50, size=(6, 7))
    ids[0, :3] = 5  # repeats
    g = rng.normal(size=(6, 7, 19)).astype(np.float32)
    np.testing.assert_array_equal(tessera.call_primitive("take", [w, ids, 0]), w[ids])
    want = np.zeros_like(w)
    np.add.at(want, ids, g)
    np.testing.assert_array_equal(tessera.call_primitive("take_grad", [g, w, ids, 0]), want)
    cols = np.array([3, 3, 0, 18])
    np.testing.assert_array_equal(tessera.call_primitive("take", [w, cols, 1]), w[:, cols])
    gc = rng.normal(size=(50, 4)).astype(np.float32)
    want = np.zeros_like(w)
    np.add.at(want, (slice(None), cols), gc)
    np.testing.assert_array_equal(tessera.call_primitive("take_grad", [gc, w, cols, 1]), want)


@pytest.mark.parametrize("threads", [1, 2])
def test_take_grad_of_a_large_table_split_across_threads_is_numpys_add_at(threads):
    # Large enough that the zero fill and the sums are split into tiles of rows:
    # each tile must keep the repeated ids' order (bit for bit) and leave no row
    # unwritten; along axis 1 the blocks of several outer rows are split too.
    rng = np.random.default_rng(41)
    old = tessera.num_threads()
    tessera.set_num_threads(threads)
    try:
        for dtype in (np.float32, np.float64):
            w = np.empty((30000, 24), dtype=dtype)
            ids = rng.integers(-30000, 30000, size=(40, 90))
            ids[:, :5] = 17  # many repeats of one row, across the batch
            g = rng.normal(size=(40, 90, 24)).astype(dtype)
            want = np.zeros_like(w)
            np.add.at(want, ids, g)
            np.testing.assert_array_equal(tessera.call_primitive("take_grad", [g, w, ids, 0]),
                                          want)
            w3 = np.empty((3, 20000, 5), dtype=dtype)
            cols = rng.integers(0, 20000, size=700)
            g3 = rng.normal(size=(3, 700, 5)).astype(dtype)
            want3 = np.zeros_like(w3)
            np.add.at(want3, (slice(None), cols), g3)
            np.testing.assert_array_equal(
                tessera.call_primitive("take_grad", [g3, w3, cols, 1]), want3)
    finally:
        tessera.set_num_threads(old)


def test_index_add_adds_in_place_only_into_an_array_nobody_else_holds():
    # A temporary (x * 1) is added into; y, still read afterwards, and the
    # caller's x stay unchanged (numpy.add.at on a copy).
    from tessera import Program
    x = np.arange(6.0).reshape(3, 2)
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    want = x.copy()
    np.add.at(want, [0, 0], v)
    kept = Program("lambda(x, v, block(define(y, x * 1), list(index_add(y, v, [0, 0]), y)))")
    added, y = kept.run([x, v])
    np.testing.assert_array_equal(added, want)
    np.testing.assert_array_equal(y, np.arange(6.0).reshape(3, 2))
    temporary = Program("lambda(x, v, index_add(x * 1, v, [0, 0]))")
    np.testing.assert_array_equal(temporary.run([x, v]), want)
    np.testing.assert_array_equal(tessera.call_primitive("index_add", [x, v, [0, 0]]), want)
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(3, 2))


def reflected(w):
    return np.sum(np.pad(w, 1, mode="reflect"))


def test_pad_modes_without_a_rule_say_which():
    with pytest.raises(ValueError, match=r"\[pad_grad\].*mode 'constant'.*reflect"):
        tessera.grad(reflected)(np.ones((3, 3)))


def running_product(w):
    return np.sum(np.cumprod(w, axis=1) * np.arange(1.0, 5.0)) + np.sum(np.cumprod(w[0]))


def test_cumprod_gradient_matches_finite_differences_with_a_zero():
    w = np.random.default_rng(8).normal(size=(3, 4))
    w[1, 1] = 0.0  # the product is linear in each element: differences are exact
    g = tessera.grad(running_product)(w)
    np.testing.assert_allclose(g, numeric_grad(running_product, [w], 0), rtol=1e-5, atol=1e-7)


def attention_scores(q, k):
    s = np.einsum("id,jd->ij", q, k) / np.sqrt(q.shape[1])
    return np.sum(np.exp(s) * np.einsum("ij->i", q)[:, None])


def test_einsum_gradients_match_finite_differences():
    rng = np.random.default_rng(12)
    args = [rng.normal(size=(3, 4)), rng.normal(size=(5, 4))]
    grads = tessera.grad(attention_scores, argnums=(0, 1))(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric_grad(attention_scores, args, i), rtol=1e-5, atol=1e-7)


def trace_of(a):
    return np.einsum("ii", a)


def test_einsum_with_a_diagonal_says_it_has_no_rule():
    with pytest.raises(ValueError, match=r"\[einsum_grad\].*repeated label.*'ii'"):
        tessera.grad(trace_of)(np.ones((3, 3)))


def stacked(w, v):
    h = np.hstack([w, w * 2])
    s = np.vstack((w, v, v * v))
    return np.sum(h ** 2 * np.arange(8.0)) + np.sum(s * 1.5) + np.sum(np.dstack([w, w]) ** 3)


def test_hstack_vstack_dstack_gradients_match_finite_differences():
    rng = np.random.default_rng(13)
    args = [rng.normal(size=(2, 4)), rng.normal(size=4)]
    grads = tessera.grad(stacked, argnums=(0, 1))(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numeric_grad(stacked, args, i), rtol=1e-5, atol=1e-7)


def top(x):
    return np.max(x) + np.sum(np.min(x, axis=1) * np.array([1.0, 10.0]))


def test_ties_share_the_cotangent_of_max_and_min():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 5.0]])
    g = tessera.grad(top)(x)
    # The max 5.0 is alone: all of its cotangent; the second row's min 2.0
    # ties twice: 10 / 2 each.
    np.testing.assert_allclose(g, [[1.0, 0.0, 0.0], [5.0, 5.0, 1.0]])
    y = np.array([4.0, 4.0, 4.0, 1.0])
    np.testing.assert_allclose(tessera.grad(lambda_free_max)(y), [1 / 3, 1 / 3, 1 / 3, 0.0])


def lambda_free_max(y):
    return np.amax(y)


def list_element(w):
    lst = [w, w * 2]
    return np.sum(lst[0] * lst[1])


def unpacked_elements(w):
    a, b = [w, w * 2]
    return np.sum(a * b * b)


def test_elements_of_a_differentiated_list_have_gradients():
    # sum(w * 2w) = 2 sum(w^2): 4w; sum(w * (2w)^2) = 4 sum(w^3): 12 w^2.
    w = np.array([1.0, 2.0])
    np.testing.assert_allclose(tessera.grad(list_element)(w), 4 * w)
    np.testing.assert_allclose(tessera.grad(unpacked_elements)(w), 12 * w**2)


def split_pieces(x):
    a, b, c = np.split(x, 3, axis=1)  # b unused: its cotangent stays nil
    return np.sum(a * c) + np.sum(np.split(x, [1, 4])[2] ** 2)


def test_split_pieces_have_gradients():
    x = np.random.default_rng(0).normal(size=(5, 3))
    want = np.zeros_like(x)
    want[:, 0], want[:, 2] = x[:, 2], x[:, 0]
    want[4:] += 2 * x[4:]
    np.testing.assert_allclose(tessera.grad(split_pieces)(x), want, rtol=1e-12)


def _sum_of_sum(x, y):
    return np.sum(x + y)


def test_gradients_of_several_arguments_are_distinct_arrays():
    # The cotangents of x and y in x + y are one array inside the backward
    # pass (unbroadcast and grad_accumulate pass them through uncopied);
    # grad's outputs must still be distinct arrays, as NumPy's results are
    # (each leaves through an `if`, which copies a returned argument).
    x, y = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    dx, dy = tessera.grad(tessera.jit(_sum_of_sum), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(dx, np.ones((2, 3)))
    np.testing.assert_array_equal(dy, np.ones((2, 3)))
    assert not np.shares_memory(dx, dy)
    dx[0, 0] = 5.0
    assert dy[0, 0] == 1.0
    value, (gx, gy) = tessera.value_and_grad(tessera.jit(_sum_of_sum), argnums=(0, 1))(x, y)
    assert value == np.sum(x + y) and not np.shares_memory(gx, gy)


def layers(w1, w2, x):
    return np.tanh(np.tanh(x @ w1) @ w2)


def layers_loss(w1, w2, x):
    h = layers(w1, w2, x)
    return np.sum(h * h) / 3.0


def test_vjp_pullback_gives_value_and_grads_gradients_bitwise():
    rng = np.random.default_rng(5)
    w1, w2, x = rng.normal(size=(4, 5)), rng.normal(size=(5, 3)), rng.normal(size=(6, 4))
    value, grads = tessera.value_and_grad(layers_loss, argnums=(0, 1))(w1, w2, x)
    v, pullback = tessera.vjp(layers_loss, argnums=(0, 1))(w1, w2, x)
    assert v == value
    got = pullback(1.0)
    assert isinstance(got, tuple) and len(got) == 2
    for a, b in zip(got, grads):
        assert a.tobytes() == b.tobytes()
    # Called again: the same; a single argnums gives one array.
    assert all(a.tobytes() == b.tobytes() for a, b in zip(pullback(1.0), got))
    _, pb1 = tessera.vjp(layers_loss, argnums=1)(w1, w2, x)
    assert pb1(1.0).tobytes() == grads[1].tobytes()


def test_vjp_of_an_array_value_matches_finite_differences():
    rng = np.random.default_rng(6)
    w1, w2, x = rng.normal(size=(4, 5)), rng.normal(size=(5, 3)), rng.normal(size=(6, 4))
    ct = rng.normal(size=(6, 3))
    value, pullback = tessera.vjp(layers, argnums=(0, 2))(w1, w2, x)
    np.testing.assert_allclose(value, np.tanh(np.tanh(x @ w1) @ w2), rtol=1e-12)
    gw1, gx = pullback(ct)

    def weighted(w1, w2, x):
        return float(np.sum(np.tanh(np.tanh(x @ w1) @ w2) * ct))

    np.testing.assert_allclose(gw1, numeric_grad(weighted, (w1, w2, x), 0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gx, numeric_grad(weighted, (w1, w2, x), 2), rtol=1e-5, atol=1e-7)


def test_vjp_refuses_a_cotangent_of_another_shape():
    w1, w2, x = np.ones((4, 5)) * 0.1, np.ones((5, 3)) * 0.1, np.ones((6, 4))
    _, pullback = tessera.vjp(layers)(w1, w2, x)
    with pytest.raises(ValueError, match=r"\[vjp\] the cotangent must have the value's shape "
                                         r"and dtype: expected float64 \(6, 3\), got float64 "
                                         r"\(3, 6\)"):
        pullback(np.ones((3, 6)))


def five_layers(h, w):
    h = np.tanh(np.tanh(np.tanh(h @ w) @ w) @ w)
    return np.tanh(np.tanh(h @ w) @ w)


def deep_chain(x, w):
    return np.sum(five_layers(five_layers(x, w), w) ** 2)


def checkpointed_chain(x, w):
    h = tessera.checkpoint(five_layers)(x, w)
    return np.sum(tessera.checkpoint(five_layers)(h, w) ** 2)


def test_checkpoint_in_a_jit_function_gives_the_same_gradients_bitwise():
    x = np.sin(np.arange(64 * 16) * 0.37).reshape(64, 16)
    w = np.sin(np.arange(16 * 16) * 0.11).reshape(16, 16) * 0.3
    plain = tessera.value_and_grad(deep_chain, argnums=(0, 1))(x, w)
    light = tessera.value_and_grad(checkpointed_chain, argnums=(0, 1))(x, w)
    assert "checkpoint(five_layers)" in tessera.grad(checkpointed_chain).code
    assert plain[0] == light[0]
    for a, b in zip(plain[1], light[1]):
        assert a.tobytes() == b.tobytes()
    # Eagerly (and in the language outside a gradient) it is the function itself.
    assert tessera.checkpoint(five_layers) is five_layers


def scaled(v):
    return v * 1.5


def plain_weights(w, x):
    z = scaled(w)
    a = z[0:256].reshape(16, 16)
    return np.sum(np.tanh(np.tanh(x @ a) @ z[256:512].reshape(16, 16).T))


def remat_weights(w, x):
    z = tessera.remat(scaled)(w)
    a = z[0:256].reshape(16, 16)
    return np.sum(np.tanh(np.tanh(x @ a) @ z[256:512].reshape(16, 16).T))


def test_remat_in_a_jit_function_gives_the_same_gradients_bitwise():
    x = np.sin(np.arange(64 * 16) * 0.37).reshape(64, 16)
    w = np.sin(np.arange(512) * 0.11) * 0.3
    plain = tessera.value_and_grad(plain_weights, argnums=(0, 1))(w, x)
    light = tessera.value_and_grad(remat_weights, argnums=(0, 1))(w, x)
    assert "remat(scaled)" in tessera.grad(remat_weights).code
    assert plain[0] == light[0]
    for a, b in zip(plain[1], light[1]):
        assert a.tobytes() == b.tobytes()
    # Eagerly (and in the language outside a gradient) it is the function itself.
    assert tessera.remat(scaled) is scaled


def loss_and_mean(w, x):
    p = x * w
    return np.sum(p * p), np.mean(p)


def test_vjp_with_aux_returns_it_third():
    v, pullback, aux = tessera.vjp(loss_and_mean, has_aux=True)(np.array([1.0, 2.0]),
                                                               np.array([3.0, 4.0]))
    # value 9 + 64, d/dw = 2 p x, aux mean(p)
    assert v == 73.0 and aux == 5.5
    np.testing.assert_array_equal(pullback(1.0), [18.0, 64.0])
