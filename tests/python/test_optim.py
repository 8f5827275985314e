"""tessera.optim: the update code of each optimizer, run through tessera.Program,
against steps computed with NumPy (PyTorch's rules); schedules; errors."""

import math

import numpy as np
import pytest

from tessera import Program
from tessera import optim


def run_steps(opt, params, grads_per_step, prefix="opt_"):
    """Runs the optimizer's update code for several steps in one compiled step
    function, carrying parameters and state between calls as arguments."""
    names = list(params)
    grad_names = [f"g_{n}" for n in names]
    upd = opt.update_code(names, grad_names, state_prefix=prefix)
    state_names = [s.name for s in upd.state]
    args = names + state_names + grad_names + ["lr", "iteration"]
    text = (f"lambda({', '.join(args)}, block(\n{upd.code},\n"
            f"list(list({', '.join(names)}), list({', '.join(state_names)}))))")
    step = Program(text, "<test>")
    values = dict(params)
    state = opt.init_state(params, upd.state)
    for it, grads in enumerate(grads_per_step):
        new_params, new_state = step.run(
            [values[n] for n in names] + [state[s] for s in state_names] +
            [grads[n] for n in names] + [opt.learning_rate(it), it])
        values = dict(zip(names, new_params))
        state = dict(zip(state_names, new_state))
    return values, state, upd


def numpy_sgd(w, grads, lr, momentum=0.0, nesterov=False, weight_decay=0.0, clipnorm=None):
    v = None
    for g in grads:
        g = clip(g, clipnorm)
        d = g + weight_decay * w
        if momentum:
            v = d if v is None else momentum * v + d
            d = d + momentum * v if nesterov else v
        w = w - lr * d
    return w


def numpy_adam(w, grads, lr, b1=0.9, b2=0.999, eps=1e-7, wd=0.0, decoupled=False):
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        lr_t = lr(t - 1) if callable(lr) else lr
        if decoupled:
            w = w * (1 - lr_t * wd)
        else:
            g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr_t * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return w, m, v


def clip(g, clipnorm):
    if clipnorm is None:
        return g
    norm = np.sqrt(np.sum(g * g))
    return g * (clipnorm / max(norm, clipnorm))


W0 = np.array([[1.0, -2.0], [0.5, 3.0]])
GRADS = [np.array([[0.1, -0.3], [2.0, 0.0]]), np.array([[0.2, 0.1], [-1.0, 0.5]]),
         np.array([[-0.4, 0.05], [0.3, -2.0]])]


@pytest.mark.parametrize("kwargs", [
    dict(learning_rate=0.1),
    dict(learning_rate=0.1, weight_decay=0.01),
    dict(learning_rate=0.1, momentum=0.9),
    dict(learning_rate=0.1, momentum=0.9, nesterov=True),
    dict(learning_rate=0.05, momentum=0.5, nesterov=True, weight_decay=0.1),
    dict(learning_rate=0.1, momentum=0.9, clipnorm=0.5),
])
def test_sgd_against_numpy(kwargs):
    opt = optim.SGD(**kwargs)
    got, state, upd = run_steps(opt, {"w": W0}, [{"w": g} for g in GRADS])
    expected = numpy_sgd(W0, GRADS, kwargs["learning_rate"], kwargs.get("momentum", 0.0),
                         kwargs.get("nesterov", False), kwargs.get("weight_decay", 0.0),
                         kwargs.get("clipnorm"))
    np.testing.assert_allclose(got["w"], expected, rtol=1e-12, atol=1e-14)
    assert [s.name for s in upd.state] == (["opt_w_velocity"] if kwargs.get("momentum") else [])


@pytest.mark.parametrize("cls,kwargs,decoupled", [
    (optim.Adam, dict(), False),
    (optim.Adam, dict(weight_decay=0.1), False),
    (optim.AdamW, dict(), True),
    (optim.AdamW, dict(weight_decay=0.3, beta_1=0.5, beta_2=0.9, epsilon=1e-3), True),
])
def test_adam_against_numpy(cls, kwargs, decoupled):
    opt = cls(learning_rate=0.01, **kwargs)
    got, state, upd = run_steps(opt, {"w": W0}, [{"w": g} for g in GRADS])
    wd = kwargs.get("weight_decay", 0.01 if cls is optim.AdamW else 0.0)
    w, m, v = numpy_adam(W0, GRADS, 0.01, kwargs.get("beta_1", 0.9), kwargs.get("beta_2", 0.999),
                         kwargs.get("epsilon", 1e-7), wd, decoupled)
    np.testing.assert_allclose(got["w"], w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(state["opt_w_m"], m, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(state["opt_w_v"], v, rtol=1e-12, atol=1e-14)
    assert [(s.name, s.param, s.init) for s in upd.state] == [("opt_w_m", "w", 0.0),
                                                              ("opt_w_v", "w", 0.0)]



@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adam_update_without_weight_decay_does_not_read_the_weight_into_its_moments(dtype):
    # torch.optim.Adam and Keras add weight_decay * w only when it is set: an
    # infinite weight keeps finite moments (0 * inf would make them NaN).
    import tessera
    w = np.array([np.inf, -np.inf, 1.5, np.nan], dtype)
    g = np.array([0.5, -2.0, 0.25, 1.0], dtype)
    m = np.array([0.1, 0.0, -0.2, 0.3], dtype)
    v = np.array([0.01, 0.02, 0.0, 0.04], dtype)
    w1, m1, v1 = tessera.call_primitive("adam_update", [w, g, m, v, 2, 0.01])
    np.testing.assert_allclose(m1, 0.9 * m + 0.1 * g, rtol=1e-6)
    np.testing.assert_allclose(v1, 0.999 * v + 0.001 * g * g, rtol=1e-6)
    assert np.all(np.isfinite(m1)) and np.all(np.isfinite(v1))
    want = w - 0.01 / (1 - 0.9 ** 2) * m1 / (np.sqrt(v1 / (1 - 0.999 ** 2)) + 1e-7)
    np.testing.assert_allclose(w1, want, rtol=1e-6)
    assert w1.dtype == np.dtype(dtype)

@pytest.mark.parametrize("n", [1037, 100003])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adam_update_in_place_gives_the_bits_of_the_rule(dtype, n):
    # w, m and v made inside the program are held by no one else, so the update
    # overwrites them (the vectorised in-place loop); passed from NumPy they are
    # copied (float32 from 65536 values on AVX-512: streaming stores). Both
    # give, bit for bit, the rule evaluated in the kernel's order. n is not a
    # multiple of any vector width: the loops' tails run too.
    rng = np.random.default_rng(3)
    w, g, m = (rng.standard_normal(n).astype(dtype) for _ in range(3))
    v = rng.random(n).astype(dtype)
    t, lr, b1, b2, eps = 3, 0.01, 0.9, 0.999, 1e-7
    c = np.dtype(dtype).type
    mi = c(b1) * m + c(1 - b1) * g
    vi = c(b2) * v + c(1 - b2) * g * g
    want = w - c(lr / (1 - b1 ** t)) * mi / (np.sqrt(vi) * c(1 / math.sqrt(1 - b2 ** t)) + c(eps))
    copied = Program(f"lambda(w, g, m, v, adam_update(w, g, m, v, {t}, {lr}))").run([w, g, m, v])
    owned = Program(f"lambda(w, g, m, v, adam_update(w * 1, g, m * 1, v * 1, {t}, {lr}))").run(
        [w, g, m, v])
    for got in (copied, owned):
        np.testing.assert_array_equal(got[0], want)
        np.testing.assert_array_equal(got[1], mi)
        np.testing.assert_array_equal(got[2], vi)


def test_several_parameters_float32_schedule_and_global_clipping():
    params = {"kernel": np.ones((3, 2), np.float32), "bias": np.zeros(2, np.float32)}
    rng = np.random.default_rng(0)
    grads = [{"kernel": rng.normal(size=(3, 2)).astype(np.float32),
              "bias": rng.normal(size=2).astype(np.float32)} for _ in range(3)]
    schedule = optim.StepDecay(0.1, step_size=2, gamma=0.5)
    opt = optim.Adam(learning_rate=schedule, clipnorm=1.0)
    got, _, upd = run_steps(opt, params, grads, prefix="adam_")
    assert got["kernel"].dtype == np.float32 and got["bias"].dtype == np.float32
    assert "clip_by_global_norm(list(g_kernel, g_bias), 1.0)" in upd.code
    # NumPy: clip both gradients together, then Adam with the scheduled rate.
    flat = [np.concatenate([g["kernel"].ravel(), g["bias"]]).astype(np.float64) for g in grads]
    clipped = [clip(f, 1.0) for f in flat]
    w0 = np.concatenate([params["kernel"].ravel(), params["bias"]]).astype(np.float64)
    w, _, _ = numpy_adam(w0, clipped, schedule)
    np.testing.assert_allclose(got["kernel"].ravel(), w[:6], rtol=1e-5)
    np.testing.assert_allclose(got["bias"], w[6:], rtol=1e-5, atol=1e-6)


def test_update_code_shape_and_names():
    upd = optim.SGD(0.1, momentum=0.9).update_code(["w1", "b1"], ["dw1", "db1"], "s_",
                                                   lr_expr="rate", iteration_expr="k")
    assert upd.code == ",\n".join(upd.statements)
    assert "sgd_update(w1, dw1, (rate), momentum=0.9, velocity=s_w1_velocity" in upd.code
    assert upd.statements[-1] == "define(s_b1_velocity, s_u1[1])"
    assert upd.state[0].init_expr == "zeros_like(w1)"
    adam = optim.Adam().update_code(["w"], ["g"], iteration_expr="k")
    assert "(k) + 1" in adam.code
    assert optim.SGD().update_code([], []).statements == []


def test_schedules():
    s = optim.StepDecay(1.0, step_size=10, gamma=0.1)
    assert [s(0), s(9), s(10), s(25)] == [1.0, 1.0, pytest.approx(0.1), pytest.approx(0.01)]
    c = optim.CosineDecay(2.0, decay_steps=100, alpha=0.1)
    assert c(0) == pytest.approx(2.0)
    assert c(50) == pytest.approx(2.0 * (0.9 * 0.5 + 0.1))
    assert c(100) == pytest.approx(0.2) and c(1000) == pytest.approx(0.2)
    assert c(25) == pytest.approx(2.0 * (0.9 * 0.5 * (1 + math.cos(math.pi / 4)) + 0.1))
    w = optim.LinearWarmup(c, warmup_steps=4)
    assert [w(0), w(1), w(3)] == pytest.approx([0.5, 1.0, 2.0])
    assert w(4) == pytest.approx(c(0)) and w(54) == pytest.approx(c(50))
    assert optim.LinearWarmup(0.3, 0)(0) == 0.3
    opt = optim.SGD(learning_rate=w)
    assert opt.learning_rate(1) == pytest.approx(1.0)
    assert optim.Adam().learning_rate(123) == 0.001
    assert optim.SGD(learning_rate=lambda i: 1.0 / (i + 1)).learning_rate(3) == 0.25
    assert opt.get_config()["learning_rate"]["class"] == "LinearWarmup"
    assert s(np.int64(10)) == pytest.approx(0.1)


def test_errors():
    with pytest.raises(ValueError, match=r"\[SGD\] nesterov=True requires a momentum > 0"):
        optim.SGD(nesterov=True)
    with pytest.raises(ValueError, match=r"\[SGD\] learning_rate must be a finite number >= 0"):
        optim.SGD(-1.0)
    with pytest.raises(TypeError, match=r"\[SGD\] momentum must be a number"):
        optim.SGD(momentum="a lot")
    with pytest.raises(ValueError, match=r"\[Adam\] beta_1 must be in \[0, 1\), got 1.0"):
        optim.Adam(beta_1=1.0)
    with pytest.raises(ValueError, match=r"\[AdamW\] clipnorm must be a finite number > 0"):
        optim.AdamW(clipnorm=0)
    with pytest.raises(ValueError, match=r"2 parameters but 1 gradients"):
        optim.SGD().update_code(["a", "b"], ["g"])
    with pytest.raises(ValueError, match=r"'a b' is not a variable name"):
        optim.SGD().update_code(["a b"], ["g"])
    with pytest.raises(ValueError, match=r"parameter names repeat"):
        optim.SGD().update_code(["a", "a"], ["g", "h"])
    with pytest.raises(ValueError, match=r"\[learning_rate\] iteration must be >= 0, got -1"):
        optim.SGD().learning_rate(-1)
    with pytest.raises(TypeError, match=r"iteration must be an int"):
        optim.StepDecay(1.0, 2)(1.5)
    with pytest.raises(ValueError, match=r"\[StepDecay\] step_size must be >= 1, got 0"):
        optim.StepDecay(1.0, 0)
    with pytest.raises(ValueError, match=r"\[CosineDecay\] alpha must be in \[0, 1\]"):
        optim.CosineDecay(1.0, 10, alpha=2.0)
    with pytest.raises(TypeError, match=r"\[LinearWarmup\] warmup_steps must be an int"):
        optim.LinearWarmup(1.0, 2.5)
    # Errors of the primitives reach Python with their messages.
    upd = optim.SGD(0.1).update_code(["w"], ["g"])
    step = Program(f"lambda(w, g, lr, iteration, block({upd.code}, w))")
    with pytest.raises(ValueError, match=r"\[sgd_update\] argument 'g' must have the shape of w"):
        step.run([np.ones(3), np.ones(2), 0.1, 0])


def test_parameters_passed_from_numpy_are_not_modified():
    w = np.array([1.0, 2.0])
    step = Program("lambda(w, g, sgd_update(w, g, 0.5)[0])")
    out = step.run([w, np.array([1.0, 1.0])])
    np.testing.assert_array_equal(out, [0.5, 1.5])
    np.testing.assert_array_equal(w, [1.0, 2.0])


def numpy_rmsprop(w, grads, lr, rho=0.9, eps=1e-7, momentum=0.0, centered=False):
    """Keras's RMSprop (epsilon inside the root)."""
    v, a, s = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    for g in grads:
        v = rho * v + (1 - rho) * g * g
        a = rho * a + (1 - rho) * g
        inc = lr * g / np.sqrt((v - a * a if centered else v) + eps)
        s = momentum * s + inc
        w = w - (s if momentum else inc)
    return w, v


def numpy_adagrad(w, grads, lr, init=0.1, eps=1e-7):
    a = np.full_like(w, init)
    for g in grads:
        a = a + g * g
        w = w - lr * g / np.sqrt(a + eps)  # Keras's (epsilon inside the root)
    return w, a


@pytest.mark.parametrize("kwargs", [dict(), dict(rho=0.5, epsilon=1e-3),
                                    dict(momentum=0.8), dict(centered=True, epsilon=1e-3),
                                    dict(momentum=0.5, centered=True)])
def test_rmsprop_against_numpy(kwargs):
    opt = optim.RMSprop(learning_rate=0.01, **kwargs)
    got, state, upd = run_steps(opt, {"w": W0}, [{"w": g} for g in GRADS])
    w, v = numpy_rmsprop(W0, GRADS, 0.01, kwargs.get("rho", 0.9), kwargs.get("epsilon", 1e-7),
                         kwargs.get("momentum", 0.0), kwargs.get("centered", False))
    np.testing.assert_allclose(got["w"], w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(state["opt_w_rms"], v, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kwargs", [dict(), dict(initial_accumulator_value=0.0, epsilon=1e-3)])
def test_adagrad_against_numpy(kwargs):
    opt = optim.Adagrad(learning_rate=0.05, **kwargs)
    got, state, upd = run_steps(opt, {"w": W0}, [{"w": g} for g in GRADS])
    w, a = numpy_adagrad(W0, GRADS, 0.05, kwargs.get("initial_accumulator_value", 0.1),
                         kwargs.get("epsilon", 1e-7))
    np.testing.assert_allclose(got["w"], w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(state["opt_w_accumulator"], a, rtol=1e-12, atol=1e-14)
    assert upd.state[0].init == kwargs.get("initial_accumulator_value", 0.1)


def test_rmsprop_and_adagrad_reject_bad_settings():
    with pytest.raises(ValueError, match=r"\[RMSprop\] rho must be in \[0, 1\), got 1.5"):
        optim.RMSprop(rho=1.5)
    with pytest.raises(ValueError, match=r"\[Adagrad\] initial_accumulator_value"):
        optim.Adagrad(initial_accumulator_value=-1.0)


# --------------------------------------------------------------------------- Nadam, Lamb


def numpy_nadam(w, grads, lr, b1=0.9, b2=0.999, eps=1e-7, wd=0.0):
    """Keras 3's Nadam (keras/src/optimizers/nadam.py), one variable."""
    m, v, u_product = np.zeros_like(w), np.zeros_like(w), 1.0
    for it, g in enumerate(grads):
        u_t = b1 * (1.0 - 0.5 * 0.96 ** (it + 1))
        u_t_1 = b1 * (1.0 - 0.5 * 0.96 ** (it + 2))
        u_product = u_product * u_t
        u_product_t_1 = u_product * u_t_1
        w = w - w * wd * lr
        m = m + (g - m) * (1 - b1)
        v = v + (np.square(g) - v) * (1 - b2)
        m_hat = u_t_1 * m / (1 - u_product_t_1) + (1 - u_t) * g / (1 - u_product)
        v_hat = v / (1 - b2 ** (it + 1))
        w = w - (m_hat * lr) / (np.sqrt(v_hat) + eps)
    return w, m, v, u_product


def numpy_lamb(w, grads, lr, b1=0.9, b2=0.999, eps=1e-7, wd=0.0):
    """Keras 3's Lamb (keras/src/optimizers/lamb.py), one variable."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for it, g in enumerate(grads):
        w = w - w * wd * lr
        m = m + (g - m) * (1 - b1)
        v = v + (np.square(g) - v) * (1 - b2)
        m_hat = m / (1.0 - b1 ** (it + 1))
        v_sqrt = np.sqrt(v / (1.0 - b2 ** (it + 1))) + eps
        update = m_hat / v_sqrt
        w_norm, g_norm = np.sqrt(np.sum(w ** 2)), np.sqrt(np.sum(update ** 2))
        ratio = w_norm / g_norm if w_norm > 0 and g_norm > 0 else 1.0
        w = w - ratio * lr * update
    return w, m, v


@pytest.mark.parametrize("kwargs", [dict(), dict(beta_1=0.5, beta_2=0.9, epsilon=1e-3),
                                    dict(weight_decay=0.1)])
def test_nadam_against_keras_definition(kwargs):
    opt = optim.Nadam(learning_rate=0.01, **kwargs)
    got, state, upd = run_steps(opt, {"w": W0}, [{"w": g} for g in GRADS])
    w, m, v, u = numpy_nadam(W0, GRADS, 0.01, kwargs.get("beta_1", 0.9),
                             kwargs.get("beta_2", 0.999), kwargs.get("epsilon", 1e-7),
                             kwargs.get("weight_decay", 0.0))
    np.testing.assert_allclose(got["w"], w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(state["opt_w_m"], m, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(state["opt_w_v"], v, rtol=1e-12, atol=1e-14)
    assert state["opt_u_product"] == pytest.approx(u, rel=1e-14)
    assert [(s.name, s.param, s.init, s.scalar) for s in upd.state] == [
        ("opt_u_product", None, 1.0, True), ("opt_w_m", "w", 0.0, False),
        ("opt_w_v", "w", 0.0, False)]
    assert upd.state[0].init_expr == "1.0"


@pytest.mark.parametrize("kwargs", [dict(), dict(beta_1=0.5, beta_2=0.9, epsilon=1e-3),
                                    dict(weight_decay=0.1)])
def test_lamb_against_keras_definition(kwargs):
    opt = optim.Lamb(learning_rate=0.01, **kwargs)
    params = {"w": W0, "b": np.array([0.0, 0.0])}  # b: ||w|| = 0, trust ratio 1
    grads = [{"w": g, "b": g[0]} for g in GRADS]
    got, state, upd = run_steps(opt, params, grads)
    args = (0.01, kwargs.get("beta_1", 0.9), kwargs.get("beta_2", 0.999),
            kwargs.get("epsilon", 1e-7), kwargs.get("weight_decay", 0.0))
    w, m, v = numpy_lamb(W0, GRADS, *args)
    b, _, _ = numpy_lamb(np.zeros(2), [g[0] for g in GRADS], *args)
    np.testing.assert_allclose(got["w"], w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got["b"], b, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(state["opt_w_m"], m, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(state["opt_w_v"], v, rtol=1e-12, atol=1e-14)


def test_lamb_zero_update_and_float32_nadam():
    # A zero gradient: the update's norm is 0, the trust ratio 1, nothing moves.
    got, _, _ = run_steps(optim.Lamb(0.1), {"w": W0}, [{"w": np.zeros_like(W0)}])
    np.testing.assert_array_equal(got["w"], W0)
    # float32 parameters stay float32 (the scalar state is a weak Python float).
    w32 = W0.astype(np.float32)
    for opt in (optim.Nadam(0.01), optim.Lamb(0.01)):
        got, state, _ = run_steps(opt, {"w": w32}, [{"w": g.astype(np.float32)} for g in GRADS])
        assert got["w"].dtype == np.float32
        ref = (numpy_nadam if isinstance(opt, optim.Nadam) else numpy_lamb)(W0, GRADS, 0.01)[0]
        np.testing.assert_allclose(got["w"], ref, rtol=1e-5)
    assert isinstance(state.get("opt_u_product", 1.0), float)
    init = optim.Nadam().init_state({"w": w32}, optim.Nadam().update_code(["w"], ["g"]).state)
    assert init["opt_u_product"] == 1.0 and init["opt_w_m"].dtype == np.float32


def test_set_learning_rate():
    opt = optim.Adam(0.01)
    opt.set_learning_rate(0.005)
    assert opt.learning_rate(7) == 0.005 and opt.get_config()["learning_rate"] == 0.005
    with pytest.raises(ValueError, match=r"\[Adam.set_learning_rate\] value must be a finite"):
        opt.set_learning_rate(-1.0)
    sched = optim.Adam(optim.ExponentialDecay(0.1, 10, 0.5))
    with pytest.raises(TypeError, match=r"\[Adam.set_learning_rate\] .*schedule"):
        sched.set_learning_rate(0.1)


# --------------------------------------------------------------------------- Keras schedules


def test_keras_schedules_formulas():
    e = optim.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    assert e(0) == 0.1 and e(5) == pytest.approx(0.1 * 0.5 ** 0.5)
    assert e(20) == pytest.approx(0.025)
    es = optim.ExponentialDecay(0.1, 10, 0.5, staircase=True)
    assert es(9) == 0.1 and es(10) == pytest.approx(0.05)
    it = optim.InverseTimeDecay(1.0, decay_steps=2, decay_rate=0.5)
    assert it(3) == pytest.approx(1.0 / (1 + 0.5 * 1.5))
    assert optim.InverseTimeDecay(1.0, 2, 0.5, staircase=True)(3) == pytest.approx(1 / 1.5)
    pc = optim.PiecewiseConstantDecay([10, 20], [1.0, 0.5, 0.1])
    assert [pc(0), pc(10), pc(11), pc(20), pc(21), pc(1000)] == [1.0, 1.0, 0.5, 0.5, 0.1, 0.1]
    pd = optim.PolynomialDecay(1.0, decay_steps=10, end_learning_rate=0.1, power=2.0)
    assert pd(0) == 1.0 and pd(5) == pytest.approx(0.9 * 0.25 + 0.1)
    assert pd(10) == pytest.approx(0.1) and pd(50) == pytest.approx(0.1)
    pcyc = optim.PolynomialDecay(1.0, 10, 0.0, cycle=True)
    # Keras: decay_steps * ceil(i / decay_steps) (1 at 0): i=15 decays over 20 steps.
    assert pcyc(0) == 1.0 and pcyc(15) == pytest.approx(1 - 15 / 20)
    assert pcyc(10) == pytest.approx(0.0) and pcyc(11) == pytest.approx(1 - 11 / 20)
    assert optim.PolynomialDecay(1.0, 10)(10) == pytest.approx(0.0001)


def keras_cosine(i, lr0, steps, alpha=0.0, target=None, warm=0):
    def decayed(s, start):
        return start * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * s / steps)) + alpha)
    if target is None:
        return decayed(min(i, steps), lr0)
    i = min(i, steps + warm)
    if i < warm:
        return (target - lr0) * i / warm + lr0
    return decayed(i - warm, target)


def keras_restarts(i, lr0, first, t_mul=2.0, m_mul=1.0, alpha=0.0):
    frac = i / first
    if t_mul == 1.0:
        r = math.floor(frac)
        frac -= r
    else:
        r = math.floor(math.log(1 - frac * (1 - t_mul)) / math.log(t_mul))
        frac = (frac - (1 - t_mul ** r) / (1 - t_mul)) / t_mul ** r
    return lr0 * ((1 - alpha) * 0.5 * m_mul ** r * (1 + math.cos(math.pi * frac)) + alpha)


def test_cosine_decay_warmup_and_restarts():
    c = optim.CosineDecay(0.0, 100, alpha=0.1, warmup_target=1.0, warmup_steps=10)
    for i in (0, 1, 5, 9, 10, 11, 60, 110, 500):
        assert c(i) == pytest.approx(keras_cosine(i, 0.0, 100, 0.1, 1.0, 10)), i
    assert c(5) == pytest.approx(0.5) and c(10) == pytest.approx(1.0)
    assert c(110) == pytest.approx(0.1)
    plain = optim.CosineDecay(2.0, 100, 0.1)  # the positional use of before
    assert plain(50) == pytest.approx(keras_cosine(50, 2.0, 100, 0.1))
    for kw in (dict(), dict(t_mul=1.0), dict(t_mul=1.5, m_mul=0.5, alpha=0.1)):
        r = optim.CosineDecayRestarts(1.0, 10, **kw)
        for i in (0, 3, 9, 10, 11, 29, 30, 31, 75, 200):
            assert r(i) == pytest.approx(keras_restarts(i, 1.0, 10, **kw)), (kw, i)
    r = optim.CosineDecayRestarts(1.0, 10)
    assert r(10) == pytest.approx(1.0) and r(30) == pytest.approx(1.0)  # restarts at 10, 30
    assert r(20) == pytest.approx(0.5)


def test_schedule_errors():
    with pytest.raises(ValueError, match=r"\[PiecewiseConstantDecay\] values must have one more"):
        optim.PiecewiseConstantDecay([1, 2], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"\[PiecewiseConstantDecay\] boundaries must increase"):
        optim.PiecewiseConstantDecay([2, 1], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"\[ExponentialDecay\] decay_steps must be a finite "
                                         r"number > 0, got 0.0"):
        optim.ExponentialDecay(0.1, 0, 0.5)
    with pytest.raises(TypeError, match=r"\[CosineDecay\] warmup_steps must be an int"):
        optim.CosineDecay(0.1, 10, warmup_steps=1.5)
    with pytest.raises(ValueError, match=r"\[CosineDecayRestarts\] t_mul must be a finite"):
        optim.CosineDecayRestarts(0.1, 10, t_mul=0.0)


# --------------------------------------------------------------------------- configs, get()

ALL_SCHEDULES = [
    optim.StepDecay(0.5, 3, 0.2),
    optim.ExponentialDecay(0.1, 1000, 0.96, staircase=True),
    optim.InverseTimeDecay(0.1, 7.5, 0.5),
    optim.PiecewiseConstantDecay([100, 200], [0.1, 0.01, 0.001]),
    optim.PolynomialDecay(0.1, 100, 0.001, power=0.5, cycle=True),
    optim.CosineDecay(0.001, 100),
    optim.CosineDecay(0.0, 100, 0.05, warmup_target=0.01, warmup_steps=5),
    optim.CosineDecayRestarts(0.1, 20, t_mul=1.5, m_mul=0.9, alpha=0.01),
    optim.LinearWarmup(optim.CosineDecay(1e-3, 50), 5),
    optim.LinearWarmup(0.1, 3),
]

ALL_OPTIMIZERS = [
    optim.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=1e-4, clipnorm=1.0),
    optim.Adam(optim.ExponentialDecay(0.1, 10, 0.5), beta_1=0.8),
    optim.AdamW(0.002, weight_decay=0.05, epsilon=1e-6),
    optim.RMSprop(0.01, rho=0.8),
    optim.Adagrad(0.1, initial_accumulator_value=0.0),
    optim.Nadam(optim.LinearWarmup(optim.CosineDecay(0.01, 100), 10), beta_2=0.99),
    optim.Lamb(0.01, weight_decay=0.01, clipnorm=2.0),
]


@pytest.mark.parametrize("obj", ALL_SCHEDULES + ALL_OPTIMIZERS,
                         ids=lambda o: type(o).__name__)
def test_config_round_trip_through_json(obj):
    import json

    config = obj.get_config()
    text = json.dumps(config)
    assert config["class"] == type(obj).__name__
    back = optim.from_config(json.loads(text))
    assert type(back) is type(obj) and back.get_config() == config
    assert type(obj).from_config(json.loads(text)).get_config() == config
    if isinstance(obj, optim.LearningRateSchedule):
        assert [back(i) for i in range(0, 300, 7)] == [obj(i) for i in range(0, 300, 7)]
    else:
        assert back.update_code(["w"], ["g"]) == obj.update_code(["w"], ["g"])
        rates = [obj.learning_rate(i) for i in range(20)]
        assert [back.learning_rate(i) for i in range(20)] == rates
        assert repr(back) == repr(obj)


def test_get_and_config_errors():
    for name, cls in [("sgd", optim.SGD), ("Adam", optim.Adam), ("ADAMW", optim.AdamW),
                      ("rmsprop", optim.RMSprop), ("adagrad", optim.Adagrad),
                      ("nadam", optim.Nadam), ("Lamb", optim.Lamb)]:
        assert type(optim.get(name)) is cls
    opt = optim.Nadam()
    assert optim.get(opt) is opt
    assert optim.get(opt.get_config()).get_config() == opt.get_config()
    keras_style = {"class_name": "Adam", "config": {"learning_rate": 0.01}}
    assert optim.get(keras_style).learning_rate() == 0.01
    with pytest.raises(ValueError, match=r"unknown optimizer 'nadan'; did you mean 'nadam'\?"):
        optim.get("nadan")
    with pytest.raises(TypeError, match=r"\[optim.get\] expected an optimizer name"):
        optim.get(3)
    with pytest.raises(ValueError, match=r"describes a learning-rate schedule"):
        optim.get(optim.CosineDecay(0.1, 10).get_config())
    with pytest.raises(ValueError, match=r"unknown class 'CosineDecai'; did you mean "
                                         r"'CosineDecay'\?"):
        optim.from_config({"class": "CosineDecai"})
    with pytest.raises(ValueError, match=r"\[CosineDecay.from_config\] the config describes a "
                                         r"StepDecay"):
        optim.CosineDecay.from_config(optim.StepDecay(1.0, 2).get_config())
    with pytest.raises(TypeError, match=r"\[SGD.get_config\] a learning rate given as a Python "
                                        r"function"):
        optim.SGD(lambda i: 0.1).get_config()
    assert "SGD(learning_rate=<function" in repr(optim.SGD(lambda i: 0.1))


@pytest.mark.parametrize("opt", [optim.Nadam(0.01), optim.Lamb(0.01)], ids=repr)
def test_nadam_and_lamb_train_a_model(opt):
    from tessera import nn

    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 4)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] > 0).astype(np.int64)
    model = nn.Sequential([nn.Dense(8, activation="relu", input_shape=(4,)), nn.Dense(2)])
    model.compile(opt, nn.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, batch_size=32, epochs=4, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
