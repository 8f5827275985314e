"""Bad input: unsupported Python, run-time errors pointing at the user's line,
and no crash from odd data."""

import inspect
import os
import random

import numpy as np
import pytest

import tessera

FILE = os.path.basename(__file__)


def line_of(func, marker="# HERE"):
    """The file line of the first source line of ``func`` containing ``marker``."""
    lines, start = inspect.getsourcelines(func)
    for i, text in enumerate(lines):
        if marker in text:
            return start + i
    raise AssertionError(f"no {marker} in {func.__name__}")


def at(func, marker="# HERE"):
    return f"(at {FILE}:{line_of(func, marker)})"


class _Thing:
    pass


# ----------------------------------------------------------------- unsupported Python


def f_class(x):
    class Inner:  # HERE
        pass

    return x


def f_try(x):
    try:  # HERE
        y = x
    except ValueError:
        y = 0
    return y


def f_with(x):
    with open("x") as fh:  # HERE
        return fh


def f_generator(x):
    yield x  # HERE


def f_global(x):
    global _G
    _G = x  # HERE
    return x


def f_global_loop(x):
    global _G
    for _G in range(3):  # HERE
        pass
    return x


def f_with_raise(x):
    with np.errstate(divide="raise"):  # HERE
        return x / 0


def f_with_as(x):
    with np.errstate(all="ignore") as state:  # HERE
        return x


def f_python_random_other(x):
    return random.sample([1, 2, 3], 2)  # HERE


def f_python_random_seedless(x):
    random.seed()  # HERE
    return x


def f_shuffle_in_expression(x):
    return random.shuffle(x)  # HERE


def f_np_shuffle_in_expression(x):
    return np.random.shuffle(x)  # HERE


_MODULE_LIST = [1, 2, 3]


def f_shuffle_module_list(x):
    np.random.shuffle(_MODULE_LIST)  # HERE
    return x


def f_shuffle_list_in_list(x):
    xs = [[1, 2], [3, 4]]
    random.shuffle(xs[0])  # HERE
    return xs


def f_shuffle_temporary(x):
    np.random.shuffle(x + 1)  # HERE
    return x


def f_nonlocal(x):
    def inner():
        nonlocal x  # HERE
        x = 1

    return x


def f_unknown_module(x):
    return os.path.join("a", "b")  # HERE


def f_python_object(x):
    return _Thing()  # HERE


def f_star_args(x):
    return np.maximum(*x)  # HERE


def f_star_params(x, **kw):  # HERE
    return kw


def f_raise(x):
    raise  # HERE


def f_set(x):
    return [v for v in {len(x), 1}]  # HERE


def f_import(x):
    import math  # HERE

    return math.sqrt(x)


def f_unknown_numpy(x):
    return np.fft.hfft(x)  # HERE


def _append_one(xs):
    xs.append(1)


def f_changes_an_element(x):
    rows = [[1], [2]]
    for row in rows:
        _append_one(row)  # HERE
    return rows


def f_ascii_conversion(x):
    print(f"{x!a}")  # HERE
    return x


@pytest.mark.parametrize(
    "func, construct",
    [
        (f_class, "class definition"),
        (f_try, "try statement"),
        (f_with, "the with statement on 'open('x')'"),
        (f_with_raise, "np.errstate(divide='raise')"),
        (f_with_as, "'with np.errstate(...) as name'"),
        (f_global_loop, "rebinding the module-level variable '_G' declared global"),
        (f_python_random_other, "the function random.sample of Python's random module"),
        (f_python_random_seedless, "random.seed() without a seed"),
        (f_shuffle_in_expression, "random.shuffle() inside an expression"),
        (f_shuffle_temporary, "np.random.shuffle of a temporary value"),
        (f_np_shuffle_in_expression, "np.random.shuffle() inside an expression"),
        (f_shuffle_module_list, "np.random.shuffle of the module-level variable '_MODULE_LIST'"),
        (f_shuffle_list_in_list, "random.shuffle of a list inside another value"),
        (f_generator, "generator"),
        (f_global, "rebinding the module-level variable '_G' declared global"),
        (f_nonlocal, "nonlocal statement"),
        (f_unknown_module, "calling the Python function 'os.path.join'"),
        (f_python_object, "calling the Python class '_Thing'"),
        (f_star_args, "star-args"),
        (f_star_params, "**kwargs in a function definition"),
        (f_raise, "a bare raise"),
        (f_set, "Python iterates a set in its own hash order"),
        (f_import, "import statement"),
        (f_changes_an_element, "passing 'row' to '_append_one', which changes it in place"),
        (f_ascii_conversion, "the !a conversion"),
    ],
)
def test_unsupported_python_names_the_construct_and_line(func, construct):
    jf = tessera.jit(func)
    with pytest.raises(tessera.UnsupportedError) as info:
        jf(np.ones(2))
    msg = str(info.value)
    assert construct in msg
    assert msg.endswith(at(func)), msg
    assert isinstance(info.value, NotImplementedError)


def f_randint_args(x):
    return random.randint(1)  # HERE


def f_randint_empty(x):
    return random.randint(5, len(x))  # HERE


def f_random_choice_empty(x):
    return random.choice([])  # HERE


def f_diagonal_1d(x):
    return np.diagonal(x)  # HERE


def f_diagonal_0d_method(x):
    return x.sum().diagonal()  # HERE


def f_user_assert_looking_like_an_expansion(x):
    assert x.sum() < 0, "[tessera:ValueError] mine"  # HERE
    return x


@pytest.mark.parametrize("func, kind, message", [
    (f_randint_args, TypeError, r"\[random.randint\] missing a required argument: 'b'"),
    (f_randint_empty, ValueError, r"\[random.randint\] empty range: a=5 is greater than b=3"),
    (f_random_choice_empty, IndexError, r"\[random.choice\] Cannot choose from an empty sequence"),
    (f_diagonal_1d, ValueError,
     r"\[np.diagonal\] diag requires an array of at least two dimensions, got a 1-d array"),
    (f_diagonal_0d_method, ValueError, r"\[.diagonal\(\)\] .* got a 0-d array"),
])
def test_errors_of_the_newly_translated_calls_name_the_line(func, kind, message):
    with pytest.raises(kind, match=message) as info:
        tessera.jit(func)(np.ones(3))
    assert str(info.value).endswith(at(func)), str(info.value)


def test_a_users_assert_stays_an_assertion_error():
    with pytest.raises(AssertionError, match="mine") as info:
        tessera.jit(f_user_assert_looking_like_an_expansion)(np.ones(3))
    assert str(info.value).endswith(at(f_user_assert_looking_like_an_expansion))


def test_unknown_numpy_attribute():
    with pytest.raises((tessera.UnsupportedError, AttributeError)) as info:
        tessera.jit(f_unknown_numpy)(np.ones(2))
    assert f"{FILE}:{line_of(f_unknown_numpy)}" in str(info.value)


def test_undefined_name_is_a_name_error_with_the_line():
    def f(x):
        return x + undefined_thing  # noqa: F821  # HERE

    with pytest.raises(NameError, match="undefined_thing") as info:
        tessera.jit(f)(1)
    assert str(info.value).endswith(at(f))


def test_methods_of_classes_are_unsupported():
    class Model:
        @tessera.jit
        def forward(self, x):
            return x

    with pytest.raises(tessera.UnsupportedError, match="classes"):
        Model().forward(1)


def test_unsupported_error_also_on_code_attribute():
    with pytest.raises(tessera.UnsupportedError):
        tessera.jit(f_try).code


# ----------------------------------------------------------------- run-time errors


def test_shape_mismatch_is_a_value_error_at_the_user_line():
    def f(x, y):
        z = x * 2
        w = z + y  # HERE
        return w

    with pytest.raises(ValueError, match=r"\[add\] operands could not be broadcast") as info:
        tessera.jit(f)(np.ones(3), np.ones(4))
    assert str(info.value).endswith(at(f))


def test_matmul_shape_error_in_a_loop_names_the_line():
    def f(x, w, n):
        for i in range(n):
            if i == 2:
                w = np.ones(5)
            x = x @ w  # HERE
        return x

    with pytest.raises(ValueError, match=r"\[matmul\]") as info:
        tessera.jit(f)(np.ones((3, 3)), np.eye(3), 4)
    assert str(info.value).endswith(at(f))


def test_index_error_at_the_user_line():
    def f(x):
        total = 0.0
        total = total + x[10]  # HERE
        return total

    with pytest.raises(IndexError, match=r"\[getitem\].*10") as info:
        tessera.jit(f)(np.arange(3.0))
    assert str(info.value).endswith(at(f))


def test_type_error_at_the_user_line():
    def f(x):
        n = len(x)  # HERE
        return n

    with pytest.raises(TypeError, match=r"\[len\]") as info:
        tessera.jit(f)(5)
    assert str(info.value).endswith(at(f))


def test_error_in_a_called_jit_function_points_into_it():
    @tessera.jit
    def inner(a):
        return a.reshape(7)  # HERE

    def outer(x):
        return inner(x) + 1

    with pytest.raises(ValueError, match=r"\[reshape\]") as info:
        tessera.jit(outer)(np.ones(6))
    assert str(info.value).endswith(f"(at {FILE}:{line_of(inner.__wrapped__)})")


def test_error_in_a_multi_line_expression_names_the_inner_line():
    def f(x, y):
        return np.concatenate(
            (
                x,
                y.reshape(5),  # HERE
            )
        )

    with pytest.raises(ValueError, match=r"\[reshape\]") as info:
        tessera.jit(f)(np.ones(2), np.ones(3))
    assert str(info.value).endswith(at(f))


def test_bad_keyword_is_a_value_error_at_compile_time_with_the_line():
    def f(x):
        return np.sum(x, axes=0)  # HERE

    # The core checks named arguments when it compiles (a ValueError; its
    # CompileError is a ValueError too).
    with pytest.raises(ValueError, match="unexpected named argument 'axes'") as info:
        tessera.jit(f)(np.ones(3))
    assert f"{FILE}:{line_of(f)}" in str(info.value)


def test_assert_becomes_assertion_error_with_the_line():
    def f(x):
        assert x.sum() > 10, "too small"  # HERE
        return x

    with pytest.raises(AssertionError, match="too small") as info:
        tessera.jit(f)(np.ones(3))
    assert f"{FILE}:{line_of(f)}" in str(info.value)


def test_integer_division_by_zero_is_an_error():
    def f(x):
        return x // 0  # HERE

    with pytest.raises(ZeroDivisionError) as info:
        tessera.jit(f)(np.arange(3))
    assert str(info.value).endswith(at(f))


# ----------------------------------------------------------------- no crash on odd data


def test_huge_shapes_are_memory_errors():
    def f(n):
        return np.zeros((n, n))  # HERE

    with pytest.raises(MemoryError) as info:
        tessera.jit(f)(10**7)
    assert f"{FILE}:{line_of(f)}" in str(info.value)


@pytest.mark.parametrize(
    "value, exc",
    [
        (np.array(["a"]), TypeError),
        (np.array([1.0], dtype=np.longdouble), TypeError),
        (object(), TypeError),
        (2**70, OverflowError),
    ],
)
def test_unsupported_inputs_raise_not_crash(value, exc):
    @tessera.jit
    def f(x):
        return x

    with pytest.raises(exc):
        f(value)


@pytest.mark.parametrize(
    "expr",
    [
        "x.sum(axis=3)",
        "x.reshape(-1, -1)",
        "x[np.array([5])]",
        "np.linalg.inv(x)",
        "x.max()",
        "np.concatenate((x, x[None]))",
        "x @ x",
        "x.astype('int8') + 1",
        "np.ones(-1)",
        "x[::0]",
    ],
)
@pytest.mark.parametrize("shape", [(0,), (0, 3), (), (2, 0, 1)])
def test_odd_inputs_raise_python_errors_not_crashes(expr, shape):
    from jit_check import numpy_fn

    f = tessera.jit(numpy_fn(expr))
    try:
        f(np.zeros(shape))
    except (ValueError, TypeError, IndexError, MemoryError, RuntimeError):
        pass
