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


def numpy_rmsprop(w, grads, lr, rho=0.9, eps=1e-7):
    v = np.zeros_like(w)
    for g in grads:
        v = rho * v + (1 - rho) * g * g
        w = w - lr * g / (np.sqrt(v) + eps)
    return w, v


def numpy_adagrad(w, grads, lr, init=0.1, eps=1e-7):
    a = np.full_like(w, init)
    for g in grads:
        a = a + g * g
        w = w - lr * g / (np.sqrt(a) + eps)
    return w, a


@pytest.mark.parametrize("kwargs", [dict(), dict(rho=0.5, epsilon=1e-3)])
def test_rmsprop_against_numpy(kwargs):
    opt = optim.RMSprop(learning_rate=0.01, **kwargs)
    got, state, upd = run_steps(opt, {"w": W0}, [{"w": g} for g in GRADS])
    w, v = numpy_rmsprop(W0, GRADS, 0.01, kwargs.get("rho", 0.9), kwargs.get("epsilon", 1e-7))
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
