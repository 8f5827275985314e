"""Second-order gradients: tessera.grad / value_and_grad called inside a function that is
itself differentiated (Hessian-vector products, grad of grad, a gradient penalty), against
JAX (jax.grad of jax.grad) and against central finite differences of the first-order
gradient, which tessera computes on its own."""

import numpy as np
import pytest

import tessera

jax = pytest.importorskip("jax")
jnp = jax.numpy


@pytest.fixture(autouse=True)
def _jax_float64():
    """JAX in float64 for these comparisons only: the setting is process-wide, and the
    Keras-on-JAX oracles of the other tests (same worker) expect JAX's default 32 bits."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def fd_of_grad(grad_fn, x, v, h=1e-5):
    """(grad(x + h v) - grad(x - h v)) / 2h: a Hessian-vector product from first-order
    gradients only."""
    return (np.asarray(grad_fn(x + h * v)) - np.asarray(grad_fn(x - h * v))) / (2 * h)


@pytest.fixture
def rng():
    return np.random.default_rng(30)


# ---------------------------------------------------------------- elementwise


@tessera.jit
def smooth(x):
    return np.sum(np.tanh(x) ** 3 + x * np.tanh(2.0 * x))


def smooth_jax(x):
    return jnp.sum(jnp.tanh(x) ** 3 + x * jnp.tanh(2.0 * x))


@tessera.jit
def smooth_hvp(x, v):
    return np.sum(tessera.grad(smooth)(x) * v)


def test_hvp_of_tanh_products_matches_jax_and_finite_differences(rng):
    x, v = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    hv = tessera.grad(smooth_hvp)(x, v)
    want = jax.grad(lambda x: jnp.sum(jax.grad(smooth_jax)(x) * v))(x)
    np.testing.assert_allclose(hv, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hv, fd_of_grad(tessera.grad(smooth), x, v), rtol=1e-5, atol=1e-7)


@tessera.jit
def logistic(x):
    return np.sum(tessera.sigmoid(x) * x * x)


@tessera.jit
def logistic_hvp(x, v):
    return np.sum(tessera.grad(logistic)(x) * v)


def test_hvp_through_sigmoid_grad_rule(rng):
    x, v = rng.normal(size=5), rng.normal(size=5)
    hv = tessera.grad(logistic_hvp)(x, v)
    f = lambda x: jnp.sum(jax.nn.sigmoid(x) * x * x)  # noqa: E731
    want = jax.grad(lambda x: jnp.sum(jax.grad(f)(x) * v))(x)
    np.testing.assert_allclose(hv, want, rtol=1e-10, atol=1e-12)


def test_grad_of_grad_eager_nesting(rng):
    @tessera.jit
    def f(x):
        return np.tanh(x) * np.sin(x) + x ** 3

    x = 0.7
    d2 = tessera.grad(tessera.grad(f))(x)
    fj = lambda x: jnp.tanh(x) * jnp.sin(x) + x ** 3  # noqa: E731
    np.testing.assert_allclose(d2, jax.grad(jax.grad(fj))(x), rtol=1e-10)
    # the value and the first derivative, from value_and_grad of grad
    value, d2b = tessera.value_and_grad(tessera.grad(f))(x)
    np.testing.assert_allclose(value, jax.grad(fj)(x), rtol=1e-12)
    np.testing.assert_allclose(d2b, d2, rtol=1e-12)


def test_grad_of_grad_inside_jit(rng):
    @tessera.jit
    def f(x):
        return tessera.sigmoid(x) * x

    @tessera.jit
    def second(x):
        return tessera.grad(tessera.grad(f))(x)

    fj = lambda x: jax.nn.sigmoid(x) * x  # noqa: E731
    for x in (-1.3, 0.2, 2.5):
        np.testing.assert_allclose(second(x), jax.grad(jax.grad(fj))(x), rtol=1e-10)


# ---------------------------------------------------------------- matmul chains


@tessera.jit
def mlp(w1, w2, x):
    h = np.tanh(x @ w1)
    return np.sum((h @ w2) ** 2)


@tessera.jit
def input_penalty(w1, w2, x):
    # the gradient with respect to the input, penalised, differentiated for the weights
    gx = tessera.grad(mlp, argnums=2)(w1, w2, x)
    return np.mean((np.sqrt(np.sum(gx * gx, axis=1)) - 1.0) ** 2)


def test_gradient_penalty_of_matmul_chain_matches_jax(rng):
    w1, w2, x = rng.normal(size=(4, 5)), rng.normal(size=(5, 2)), rng.normal(size=(3, 4))

    def mlp_j(w1, w2, x):
        return jnp.sum((jnp.tanh(x @ w1) @ w2) ** 2)

    def pen_j(w1, w2, x):
        gx = jax.grad(mlp_j, argnums=2)(w1, w2, x)
        return jnp.mean((jnp.sqrt(jnp.sum(gx * gx, axis=1)) - 1.0) ** 2)

    value, (g1, g2) = tessera.value_and_grad(input_penalty, argnums=(0, 1))(w1, w2, x)
    want_v, (want1, want2) = jax.value_and_grad(pen_j, argnums=(0, 1))(w1, w2, x)
    np.testing.assert_allclose(value, want_v, rtol=1e-12)
    np.testing.assert_allclose(g1, want1, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g2, want2, rtol=1e-9, atol=1e-12)
    # and against finite differences of tessera's own first-order gradient of w1
    d = rng.normal(size=w1.shape)
    first = tessera.grad(input_penalty)
    fd = (input_penalty(w1 + 1e-6 * d, w2, x) - input_penalty(w1 - 1e-6 * d, w2, x)) / 2e-6
    np.testing.assert_allclose(np.sum(first(w1, w2, x) * d), fd, rtol=1e-6)


@tessera.jit
def bias_chain(w, b, x):
    return np.sum(tessera.leaky_relu(x @ w + b, 0.2) ** 2 + tessera.relu(x @ w) * 0.5)


@tessera.jit
def bias_hvp(w, b, x, v):
    return np.sum(tessera.grad(bias_chain)(w, b, x) * v)


def test_hvp_through_broadcast_leaky_relu_and_relu(rng):
    w, b, x, v = (rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(5, 3)),
                  rng.normal(size=(3, 4)))

    def f(w, b, x):
        z = x @ w + b
        return jnp.sum(jnp.where(z > 0, z, 0.2 * z) ** 2 + jax.nn.relu(x @ w) * 0.5)

    hv = tessera.grad(bias_hvp)(w, b, x, v)
    want = jax.grad(lambda w: jnp.sum(jax.grad(f)(w, b, x) * v))(w)
    np.testing.assert_allclose(hv, want, rtol=1e-10, atol=1e-12)
    gb = tessera.grad(bias_hvp, argnums=1)(w, b, x, v)
    want_b = jax.grad(lambda b: jnp.sum(jax.grad(f)(w, b, x) * v))(b)
    np.testing.assert_allclose(gb, want_b, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- conv2d


def conv_j(x, w, stride, padding):
    return jax.lax.conv_general_dilated(x, w, (stride, stride), padding,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


@pytest.mark.parametrize("stride,padding", [(2, "same"), (2, "valid"), (1, "same")])
def test_conv2d_gradient_penalty_matches_jax(rng, stride, padding):
    x = rng.normal(size=(2, 7, 6, 3))
    w1 = rng.normal(size=(3, 3, 3, 4)) * 0.3
    w2 = rng.normal(size=(2, 2, 4, 2)) * 0.3

    @tessera.jit
    def critic(w1, w2, x):
        h = tessera.leaky_relu(tessera.conv2d(x, w1, strides=stride, padding=padding), 0.2)
        return np.sum(np.tanh(tessera.conv2d(h, w2, strides=1, padding="valid")))

    @tessera.jit
    def penalty(w1, w2, x):
        gx = tessera.grad(critic, argnums=2)(w1, w2, x)
        return np.mean((np.sqrt(np.sum(gx * gx, axis=(1, 2, 3))) - 1.0) ** 2)

    def critic_j(w1, w2, x):
        z = conv_j(x, w1, stride, padding.upper())
        h = jnp.where(z > 0, z, 0.2 * z)
        return jnp.sum(jnp.tanh(conv_j(h, w2, 1, "VALID")))

    def penalty_j(w1, w2, x):
        gx = jax.grad(critic_j, argnums=2)(w1, w2, x)
        return jnp.mean((jnp.sqrt(jnp.sum(gx * gx, axis=(1, 2, 3))) - 1.0) ** 2)

    value, (g1, g2) = tessera.value_and_grad(penalty, argnums=(0, 1))(w1, w2, x)
    want_v, (want1, want2) = jax.value_and_grad(penalty_j, argnums=(0, 1))(w1, w2, x)
    np.testing.assert_allclose(value, want_v, rtol=1e-10)
    np.testing.assert_allclose(g1, want1, rtol=1e-8, atol=1e-11)
    np.testing.assert_allclose(g2, want2, rtol=1e-8, atol=1e-11)


# ---------------------------------------------------------------- refusals


def test_backward_primitive_without_rule_is_refused_by_name(rng):
    @tessera.jit
    def f(x):
        return np.linalg.norm(x) * np.sum(x)

    @tessera.jit
    def g(x, v):
        return np.sum(tessera.grad(f)(x) * v)

    x, v = rng.normal(size=4), rng.normal(size=4)
    with pytest.raises(tessera.CompileError, match=r"second-order gradient of 'norm_grad' is not "
                                          r"supported yet"):
        tessera.grad(g)(x, v)
    # the first-order gradient of g itself (not differentiated) still runs
    np.testing.assert_allclose(g(x, v), np.sum(jax.grad(
        lambda x: jnp.linalg.norm(x) * jnp.sum(x))(x) * v), rtol=1e-12)


def test_language_second_order_refusal_names_the_primitive():
    text = ("define(f, x, sum(max_pool2d(x, 2) * max_pool2d(x, 2)))\n"
            "define(h, x, sum(grad(f)(x)))\n"
            "grad(h)\n")
    with pytest.raises(tessera.CompileError, match="second-order gradient of 'max_pool2d_grad'"):
        tessera.Program(text, "<second order>")


def test_language_define_of_grad_inside_differentiated_function():
    text = ("define(f, x, sum(tanh(x) * x))\n"
            "define(h, x, block(define(df, grad(f)), sum(df(x) * df(x))))\n"
            "grad(h)\n")
    prog = tessera.Program(text, "<second order>")
    x = np.linspace(-1.0, 1.5, 6)
    f = lambda x: jnp.sum(jnp.tanh(x) * x)  # noqa: E731
    want = jax.grad(lambda x: jnp.sum(jax.grad(f)(x) ** 2))(x)
    np.testing.assert_allclose(prog.run([x]), want, rtol=1e-10)


# ---------------------------------------------------------------- more rules, more forms


def test_hvp_through_softmax_log_softmax_and_avg_pool(rng):
    x = rng.normal(size=(2, 4, 4, 3))
    v = rng.normal(size=x.shape)
    c = rng.normal(size=(2, 2, 2, 3))

    @tessera.jit
    def f(x):
        p = tessera.avg_pool2d(np.tanh(x), 2)
        return np.sum(tessera.softmax(p, axis=-1) * c) + np.sum(tessera.log_softmax(p * c) * p)

    @tessera.jit
    def hv(x, v):
        return np.sum(tessera.grad(f)(x) * v)

    def fj(x):
        t = jnp.tanh(x)
        p = t.reshape(2, 2, 2, 2, 2, 3).mean(axis=(2, 4))
        return jnp.sum(jax.nn.softmax(p, axis=-1) * c) + jnp.sum(jax.nn.log_softmax(p * c) * p)

    want = jax.grad(lambda x: jnp.sum(jax.grad(fj)(x) * v))(x)
    np.testing.assert_allclose(tessera.grad(hv)(x, v), want, rtol=1e-9, atol=1e-12)


@tessera.jit
def cubic(x, y):
    return np.sum(x * x * y + np.sin(x * y))


d_cubic = tessera.grad(cubic, argnums=(0, 1))  # made outside, called inside a jit function


def test_gradient_made_outside_called_inside_and_differentiated(rng):
    @tessera.jit
    def both(x, y):
        gx, gy = d_cubic(x, y)
        return np.sum(gx * gy)

    @tessera.jit
    def with_value(x, y):
        value, gx = tessera.value_and_grad(cubic)(x, y)
        return value * np.sum(gx)

    x, y = rng.normal(size=3), rng.normal(size=3)
    cj = lambda x, y: jnp.sum(x * x * y + jnp.sin(x * y))  # noqa: E731

    def both_j(x, y):
        gx, gy = jax.grad(cj, argnums=(0, 1))(x, y)
        return jnp.sum(gx * gy)

    def with_value_j(x, y):
        value, gx = jax.value_and_grad(cj)(x, y)
        return value * jnp.sum(gx)

    np.testing.assert_allclose(both(x, y), both_j(x, y), rtol=1e-12)
    for f, fj in ((both, both_j), (with_value, with_value_j)):
        got = tessera.grad(f, argnums=(0, 1))(x, y)
        want = jax.grad(fj, argnums=(0, 1))(x, y)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_argnums_must_be_written_in_the_call(rng):
    @tessera.jit
    def f(x, k):
        return tessera.grad(cubic, argnums=k)(x, x)

    with pytest.raises(tessera.UnsupportedError, match=r"tessera.grad\(\) with argnums other "
                                                       r"than an int or a tuple of ints"):
        f(rng.normal(size=3), 0)


def test_local_function_and_lambda_closing_over_a_differentiated_argument(rng):
    """The inner gradient's function reads w from the enclosing function: the outer
    gradient in w goes through the inner function's use of it (WGAN-GP's critic weights)."""

    @tessera.jit
    def f(x, w):
        def inner(z):
            return np.sum(np.tanh(z * w))

        g = tessera.grad(inner)(x)
        g2 = tessera.grad(lambda z: np.sum(z * z * w))(x)
        return np.sum(g * g) + np.sum(g2)

    def fj(x, w):
        g = jax.grad(lambda z: jnp.sum(jnp.tanh(z * w)))(x)
        g2 = jax.grad(lambda z: jnp.sum(z * z * w))(x)
        return jnp.sum(g * g) + jnp.sum(g2)

    x, w = rng.normal(size=4), rng.normal(size=4)
    np.testing.assert_allclose(f(x, w), fj(x, w), rtol=1e-12)
    for a, b in zip(tessera.grad(f, argnums=(0, 1))(x, w), jax.grad(fj, argnums=(0, 1))(x, w)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("approximate", [False, True])
def test_hvp_through_gelu_grad(rng, approximate):
    x, v = rng.normal(size=(3, 5)) * 1.5, rng.normal(size=(3, 5))

    @tessera.jit
    def f(x):
        return np.sum(tessera.gelu(x, approximate) * np.cos(x))

    @tessera.jit
    def hv(x, v):
        return np.sum(tessera.grad(f)(x) * v)

    fj = lambda x: jnp.sum(jax.nn.gelu(x, approximate=approximate) * jnp.cos(x))  # noqa: E731
    want = jax.grad(lambda x: jnp.sum(jax.grad(fj)(x) * v))(x)
    np.testing.assert_allclose(tessera.grad(hv)(x, v), want, rtol=1e-9, atol=1e-12)
