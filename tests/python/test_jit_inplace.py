"""NumPy's observable semantics for writes: a jit function leaves every array
it wrote into (directly, through a slice or another view, by x += v,
np.copyto, fill, sort, shuffle) as NumPy would, and basic indexing,
transposes and reshapes are views (docs/runtime.md, "Views and writes").
``check`` compares the result *and every argument afterwards* with NumPy."""

import numpy as np
import pytest

import tessera
from jit_check import check, numpy_body


def arr(*shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.normal(size=shape).astype(dtype)
    return rng.integers(-20, 20, size=shape).astype(dtype)


# ------------------------------------------------------------ writes into arguments

WRITES = [
    # stencils and diffusion, as published NumPy kernels write them
    "u[1:-1] = 0.5 * (u[:-2] + u[2:])",
    "u[1:-1] = u[1:-1] + 0.1 * (u[:-2] - 2 * u[1:-1] + u[2:])",
    "u[0] = u[-1]",
    "u[::2] = 0",
    "u[::-1] = u.copy()",
    "u[u > 0] = 0",
    "u[[0, 2, 2]] = 5",
    "u[[0, 2, 2]] += 5",
    "u[1:3] += 1",
    "u += 1",
    "u *= 2",
    "u -= u[::-1].copy()",
    "u /= 4",
    "u **= 2",
    "u[...] = 3",
    "u[:] = np.arange(u.shape[0])",
    "u.fill(7)",
    "u.sort()",
    "np.copyto(u, np.ones(u.shape))",
    "np.copyto(u, 0.0, where=u > 0)",
]


@pytest.mark.parametrize("stmt", WRITES)
def test_writes_into_a_1d_argument(stmt):
    check(numpy_body(f"{stmt}\nreturn 0", "u"), arr(9))


WRITES_2D = [
    "x[1:-1, 1:-1] = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])",
    "x[0] = 1",
    "x[:, 0] = x[:, -1]",
    "x[1][2] = 9",
    "x[1, :][2] = 9",
    "x.T[0] = 5",
    "x[::2, ::2] += 1",
    "x += x.T.copy()",
    "x[0] += x[1]",
    "x[x < 0] *= -1",
    "x -= x.mean(axis=0)",
    "x /= np.linalg.norm(x, axis=1, keepdims=True)",
]


@pytest.mark.parametrize("stmt", WRITES_2D)
def test_writes_into_a_2d_argument(stmt):
    check(numpy_body(f"{stmt}\nreturn x.sum()", "x"), arr(4, 4, seed=1))


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.bool_])
def test_writes_keep_the_dtype(dtype):
    x = arr(6, dtype=np.float64, seed=2).astype(dtype)
    check(numpy_body("x[1] = 1\nx[2:4] = x[0]\nreturn x", "x"), x)


def test_element_loops_write_in_place():
    body = "n = x.shape[0]\nfor i in range(1, n):\n    x[i] = x[i - 1] + x[i]\nreturn x[-1]"
    check(numpy_body(body, "x"), arr(1000))


def test_a_long_element_loop_is_not_quadratic():
    # 200,000 element writes: copying the array each time would take minutes.
    f = tessera.jit(numpy_body("for i in range(x.shape[0]):\n    x[i] = i * 2\nreturn 0", "x"))
    x = np.zeros(200_000)
    f(x)
    np.testing.assert_array_equal(x, np.arange(200_000) * 2.0)


# ------------------------------------------------------------ views and aliasing

VIEWS = [
    "v = x[1:]\nv[0] = 5\nreturn x",
    "v = x[::2]\nv += 1\nreturn x",
    "y = x\ny[0] = -1\nreturn x",
    "r = x.reshape(2, 3)\nr[1, 1] = 42\nreturn x",
    "r = x.ravel()\nr[0] = 3\nreturn x",
    "f = x.flatten()\nf[0] = 3\nreturn x",
    "c = x.copy()\nc[0] = 3\nreturn x",
    "a = x.astype(np.float64)\na[0] = 3\nreturn x",
    "e = np.expand_dims(x, 0)\ne[0, 1] = 8\nreturn x",
    "v = x[1:4]\nx[2] = 100\nreturn v",
    "a = x[:4]\nb = x[2:]\na[:] = b[:4]\nreturn x",
    "a = x[:4]\nb = x[2:]\nb[:] = a[::-1] + b[:4]\nreturn x",
    "v = x[2:]\nv = v * 2\nreturn x",
]


@pytest.mark.parametrize("body", VIEWS)
def test_views_alias_their_base(body):
    check(numpy_body(body, "x"), arr(6, seed=3))


def test_views_2d():
    check(numpy_body("t = x.T\nt[0, 1] = 7\ncol = x[:, 2]\ncol[:] = -1\nreturn t", "x"), arr(3, 4))
    check(numpy_body("s = x[1:, ::2]\ns *= 10\nreturn s.sum()", "x"), arr(4, 5))
    check(numpy_body("x2 = x[None, :, :]\nx2[0, 0, 0] = 1\nreturn x2.shape", "x"), arr(2, 3))


def test_a_returned_slice_is_a_view_of_the_argument():
    f = tessera.jit(numpy_body("return x[1:3]", "x"))
    x = np.arange(5.0)
    v = f(x)
    v[0] = 99
    assert x[1] == 99


def test_a_helper_writing_into_its_argument():
    import textwrap, importlib.util, tempfile, os
    src = textwrap.dedent("""
        import numpy as np
        import tessera

        @tessera.jit
        def bump(a, i):
            a[i] += 1
            return a

        @tessera.jit
        def f(x):
            for i in range(x.shape[0]):
                bump(x, i)
            bump(x[1:], 0)
            return x.sum()
    """)
    path = os.path.join(tempfile.mkdtemp(), "helper_write.py")
    with open(path, "w") as fh:
        fh.write(src)
    spec = importlib.util.spec_from_file_location("helper_write", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = np.zeros(4)
    assert mod.f(x) == 5.0
    np.testing.assert_array_equal(x, [1.0, 2.0, 1.0, 1.0])


GLOBAL = np.zeros(3)


def write_global(i):
    GLOBAL[i] = i + 1
    return GLOBAL.sum()


def test_writes_into_a_module_level_array():
    GLOBAL[:] = 0
    assert tessera.jit(write_global)(2) == 3.0
    np.testing.assert_array_equal(GLOBAL, [0.0, 0.0, 3.0])


# ------------------------------------------------------------ errors NumPy raises

ERRORS = [
    ("x += 1.5", TypeError, "same_kind"),
    ("x[0:2] = [1, 2, 3]", ValueError, "could not broadcast input array from shape"),
    ("x[10] = 1", IndexError, "out of bounds"),
    ("b = np.broadcast_to(x, (2, 3))\nb[0, 0] = 1", ValueError, "read-only"),
    ("x += np.ones((2, 3), dtype=np.int64)", ValueError, "non-broadcastable output"),
]


@pytest.mark.parametrize("body, kind, message", ERRORS)
def test_writes_numpy_rejects_raise(body, kind, message):
    x = np.arange(3)
    with pytest.raises(kind):
        numpy_body(body + "\nreturn x", "x")(x.copy())
    with pytest.raises(kind, match=message):
        tessera.jit(numpy_body(body + "\nreturn x", "x"))(x.copy())


def test_a_read_only_argument_cannot_be_written():
    x = np.arange(3.0)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        tessera.jit(numpy_body("x[0] = 1\nreturn x", "x"))(x)
    assert x[0] == 0.0


# ------------------------------------------------------------ dataflow stays in order

def test_reads_before_a_write_see_the_old_values():
    body = ("s = x.sum()\nm = x.max()\nx[:] = 0\nt = x.sum()\ny = x + 1\n"
            "x += 2\nreturn s, m, t, y.sum(), x.sum()")
    for threads in (1, 2):
        check(tessera.jit(numpy_body(body, "x"), threads=threads).__wrapped__, arr(200_000, seed=5))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int16, np.float16])
def test_writes_into_converted_arguments_reach_the_caller(dtype):
    # tessera holds these dtypes in a wider type (a copy); what the function
    # wrote is copied back into the caller's array.
    x = np.arange(6).astype(dtype)
    expected = x.copy()
    expected[1:3] = 5
    tessera.jit(numpy_body("x[1:3] = 5\nreturn 0", "x"))(x)
    np.testing.assert_array_equal(x, expected)
    assert x.dtype == dtype


# ------------------------------------------------------------ elements are NumPy scalars

SCALARS = [
    # an element or a reduction is an immutable scalar: += rebinds it
    "a = x[0]\nb = a\na += 1\nreturn a, b",
    "s = x.sum()\nt = s\ns *= 2\nreturn s, t",
    # elements keep NumPy's strong dtypes in scalar arithmetic
    "return x[0] * 0.5, x[1] + 2, x[0] < x[1], x[2] / 2, x[0] + y, x[1] * y[0]",
    "acc = 0.0\nfor i in range(x.shape[0]):\n    acc += x[i] * x[i]\nreturn acc",
    "k = 0\nfor i in range(x.shape[0]):\n    if x[i] > 0:\n        k += 1\nreturn k",
]


@pytest.mark.parametrize("body", SCALARS)
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_elements_behave_as_numpy_scalars(body, dtype):
    check(numpy_body(body, "x, y"), arr(5, dtype=dtype, seed=6), arr(5, dtype=np.float32, seed=7))


def test_int64_elements_wrap_on_overflow_like_numpy():
    x = np.array([2**62, 3, -(2**63)], dtype=np.int64)
    with np.errstate(over="ignore"):
        check(numpy_body("return x[0] * x[1], x[2] - x[1], x[0] + x[0]", "x"), x)


def test_rows_of_a_for_loop_are_views():
    check(numpy_body("for row in x:\n    row[0] = row.sum()\nreturn x.sum()", "x"), arr(4, 3, seed=8))
    check(numpy_body("for i, row in enumerate(x):\n    row += i\nreturn 0", "x"), arr(3, 2, seed=9))


def test_zero_d_views_and_nan_into_int():
    check(numpy_body("v = x[1, ...]\nv += 5\nreturn x", "x"), arr(3, seed=10))
    check(numpy_body("v = x[...]\nv[...] = 2\nreturn x", "x"), np.array(7.0))
    with pytest.raises(ValueError, match="cannot convert float NaN to integer"):
        tessera.jit(numpy_body("x[0] = np.nan\nreturn x", "x"))(np.arange(3))


def test_asarray_is_the_array_and_array_copies():
    check(numpy_body("a = np.asarray(x)\na[0] = 9\nb = np.array(x)\nb[1] = 7\nreturn a, b", "x"), arr(4))
    check(numpy_body("c = np.ascontiguousarray(x.T)\nc[0, 0] = 5\nd = np.asarray(x, dtype=np.float64)\n"
                     "d[1, 1] = 6\nreturn c", "x"), arr(2, 3))


def test_item_assignment_into_lists_and_dicts():
    check(numpy_body("xs = [1, 2, 3]\nxs[1] = 9\nxs[-1] += 1\nxs[0:2] = [5]\nd = {'a': 1}\n"
                     "d['b'] = 2\nd['a'] = 3\nreturn xs, d", "x"), 0)


def test_list_augmented_assignment_extends_with_any_iterable():
    check(numpy_body("xs = [1]\nxs += (2, 3)\nxs += [4]\nd = {}\nd[1, 2] = 'a'\nreturn xs, d", "x"), 0)


def test_tolist_nests_as_deep_as_the_array():
    check(numpy_body("return x.tolist(), x[0].tolist(), x[0, 0].tolist()", "x"), arr(2, 3))


# ------------------------------------------------------------ np.fill_diagonal


@pytest.mark.parametrize(
    "shape, dtype, val, wrap",
    [
        ((3, 3), np.float64, 7.0, False),
        ((3, 3), np.int8, 5, False),
        ((7, 3), np.float64, [1.0, 2.0], True),
        ((7, 3), np.float64, [1.0, 2.0], False),
        ((2, 5), np.float32, np.arange(4.0), False),
        ((3, 3, 3), np.int64, 9, False),
    ],
)
def test_fill_diagonal_writes_as_numpy(shape, dtype, val, wrap):
    def f(a, v):
        np.fill_diagonal(a, v, wrap=wrap)
        return a.sum()

    check(f, arr(*shape, dtype=dtype), val)


def test_fill_diagonal_through_a_view_writes_the_base():
    def f(a):
        np.fill_diagonal(a.T[1:], -1.0)
        return a

    check(f, arr(4, 3))


def test_fill_diagonal_errors_as_numpy():
    def one_d(a):
        np.fill_diagonal(a, 1)
        return a

    def unequal(a):
        np.fill_diagonal(a, 1)
        return a

    check(one_d, arr(3))  # ValueError in both
    check(unequal, arr(2, 3, 2))
