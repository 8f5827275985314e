"""Tests of the extension tessera._core: conversions, zero-copy, lifetimes,
exception mapping, primitives(), threads and thread safety."""

import gc
import threading
import time
import weakref

import numpy as np
import pytest

import tessera
from tessera import _core

IDENTITY = "define(f, x, x) f"
TWICE = "define(f, x, x * 2) f"


def run(text, *args):
    """Compiles `text` and runs it with `args`."""
    return _core.Program(text).run(list(args))


def settle():
    """Lets worker threads drop what they hold and releases it."""
    for _ in range(50):
        gc.collect()
        _core._drain()
        if _core._wrapped_buffer_count() == 0:
            return
        time.sleep(0.01)


def assert_same(actual, expected):
    """Same type, shape, dtype and values as the NumPy result."""
    assert isinstance(actual, type(expected)), (type(actual), type(expected))
    if isinstance(expected, np.ndarray):
        assert actual.shape == expected.shape
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)
    else:
        assert actual == expected


# ---------------------------------------------------------------- conversions in


NATIVE_DTYPES = [np.bool_, np.int64, np.float32, np.float64]


@pytest.mark.parametrize("dtype", NATIVE_DTYPES)
def test_native_dtypes_cross_without_copy(dtype):
    x = (np.arange(12) % 5).astype(dtype).reshape(3, 4)
    r = run(IDENTITY, x)
    assert_same(r, x)
    assert np.shares_memory(r, x)
    # The input itself comes back, as NumPy returns it: a writable view.
    assert r.flags.writeable and x.flags.writeable
    r[0, 0] = r[0, 1]
    assert x[0, 0] == x[0, 1]


@pytest.mark.parametrize("dtype", NATIVE_DTYPES)
def test_strided_inputs_cross_without_copy(dtype):
    base = (np.arange(40) % 7).astype(dtype).reshape(5, 8)
    for x in (base[::2, 1::3], base.T, base[::-1, ::-2], base[2]):
        r = run(IDENTITY, x)
        assert_same(r, x)
        assert np.shares_memory(r, x)
        assert r.strides == x.strides


def test_read_only_input_stays_read_only():
    x = np.arange(6.0)
    x.flags.writeable = False
    r = run(IDENTITY, x)
    assert not r.flags.writeable


@pytest.mark.parametrize("dtype", NATIVE_DTYPES)
def test_native_dtypes_compute(dtype):
    x = (np.arange(12) % 5).astype(dtype).reshape(3, 4)
    r = _core.call_primitive("reshape", [x, [4, 3]], {})
    assert_same(r, x.reshape(4, 3))
    s = _core.call_primitive("sum", [x], {"axis": 0})
    assert_same(s, x.sum(axis=0))


ALL_DTYPES = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float16, np.complex64, np.complex128]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_numpy_dtype_crosses_the_boundary_without_a_copy(dtype):
    x = np.array([[0, 1, 2], [3, 4, 100]], dtype=dtype)
    r = run(IDENTITY, x)
    assert_same(r, x)
    assert r.dtype == x.dtype
    # The caller's buffer comes back as a view of it, as NumPy returns it.
    assert np.shares_memory(r, x)


def test_integer_extremes_are_exact():
    for dt in (np.uint32, np.uint64, np.int8, np.int16, np.int32, np.uint8, np.uint16):
        info = np.iinfo(dt)
        x = np.array([info.min, info.max], dtype=dt)
        assert_same(run(TWICE, x), x * dt(2))


@pytest.mark.parametrize(
    "array, name",
    [
        (np.array([object()], dtype=object), "object"),
        (np.array(["ab", "c"]), "<U2"),
        (np.array([b"ab"]), "|S2"),
        (np.array(["2024-01-01"], dtype="datetime64[D]"), "datetime64[D]"),
        (np.array([1.0], dtype=np.longdouble), "float128"),
    ],
)
def test_unsupported_dtypes_raise_type_error_naming_the_dtype(array, name):
    with pytest.raises(TypeError, match=r"NumPy arrays of dtype .*" + name.replace("[", r"\[")):
        run(IDENTITY, array)


def _layouts():
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    buffer = bytearray(8 * 7)
    unaligned = np.frombuffer(buffer, dtype=np.float64, count=6, offset=1)
    unaligned[:] = np.arange(6.0)
    assert not unaligned.flags.aligned
    return {
        "strided": base[:, ::2],
        "fortran": np.asfortranarray(base),
        "transposed": base.T,
        "negative": base[::-1, ::-2],
        "big_endian_f8": base.astype(">f8"),
        "big_endian_i8": base.astype(">i8")[1:],
        "big_endian_f4_strided": base.astype(">f4")[:, 1::2],
        "unaligned": unaligned,
        "zero_d": np.array(2.5),
        "zero_d_int": np.array(7),
        "empty": np.zeros((0, 3)),
        "empty_strided": np.zeros((4, 0))[::2],
        "broadcast_view": np.broadcast_to(np.arange(3.0), (4, 3)),
    }


@pytest.mark.parametrize("name", list(_layouts()))
def test_any_layout_gives_numpy_values(name):
    x = _layouts()[name]
    expected_dtype = np.dtype(x.dtype.name)  # native byte order
    r = run(TWICE, x)
    expected = (x * 2).astype(expected_dtype)
    if x.ndim == 0:
        assert_same(r, expected[()])
    else:
        assert_same(r, expected)
        assert r.flags.c_contiguous
    assert_same(_core.call_primitive("sum", [x], {}), x.sum().astype(expected_dtype)[()])


def test_zero_d_input_stays_an_array_and_returns_a_numpy_scalar():
    r = run(IDENTITY, np.array(3, dtype=np.int64))
    assert type(r) is np.int64 and r == 3
    r = run(IDENTITY, np.array(1.5, dtype=np.float32))
    assert type(r) is np.float32 and r == 1.5
    r = run("define(f, x, x + 1.5) f", np.array(1, dtype=np.float32))
    assert type(r) is np.float32


def test_python_scalars_and_containers():
    assert run(IDENTITY, None) is None
    assert run(IDENTITY, True) is True
    r = run(IDENTITY, 7)
    assert type(r) is int and r == 7
    r = run(IDENTITY, 2.5)
    assert type(r) is float and r == 2.5
    assert run(IDENTITY, "text") == "text"
    assert run(IDENTITY, [1, 2.5, "a", None, [True]]) == [1, 2.5, "a", None, [True]]
    # Tuples stay tuples (nested too), lists stay lists.
    r = run(IDENTITY, (1, (2, 3), [4]))
    assert r == (1, (2, 3), [4]) and type(r[1]) is tuple and type(r[2]) is list
    assert run(IDENTITY, {"a": 1, 2: [3], (4, 5): 6}) == {"a": 1, 2: [3], (4, 5): 6}
    assert run(IDENTITY, slice(1, None, -2)) == slice(1, None, -2)
    assert run(IDENTITY, -(2**63)) == -(2**63)
    assert run(IDENTITY, 2**63 - 1) == 2**63 - 1


def test_python_scalars_promote_weakly():
    x = np.ones(3, dtype=np.float32)
    assert run("define(f, x, y, x * y) f", x, 2.5).dtype == np.float32
    assert run("define(f, x, y, x * y) f", np.ones(3, dtype=np.int64), 2).dtype == np.int64


def test_numpy_scalars_keep_their_dtype_or_become_python_like_scalars():
    # NumPy 2: int8 ... uint64, float16/32 and complex scalars are strongly
    # typed (np.uint8(255) + 1 wraps); they come back as the same NumPy scalar.
    # np.int64 too (np.int64(2**40) * np.int64(2**40) wraps as in NumPy).
    for value in (np.int32(-4), np.uint64(2**64 - 1), np.float32(0.5), np.int8(-128),
                  np.float16(0.1), np.complex64(1 - 2j), np.complex128(3j), np.int64(-4)):
        r = run(IDENTITY, value)
        assert type(r) is type(value) and r == value
    assert run(TWICE, np.uint8(200)) == np.uint8(144)
    assert type(run(TWICE, np.uint8(200))) is np.uint8
    big = np.int64(2**62)
    assert run(TWICE, big) == big + big and type(run(TWICE, big)) is np.int64
    r = run(IDENTITY, np.float64(0.25))
    assert type(r) is float and r == 0.25
    r = run(IDENTITY, np.bool_(True))
    assert r is True
    # Weak like a Python scalar: a float32 array stays float32.
    assert (
        run("define(f, x, y, x * y) f", np.ones(2, np.float32), np.float64(2)).dtype == np.float32
    )


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, [1, [2**70]]])
def test_int_overflow_raises_overflow_error(value):
    with pytest.raises(OverflowError, match="does not fit in tessera's 64-bit integers"):
        run(IDENTITY, value)


@pytest.mark.parametrize("value", [object(), {1, 2}, b"bytes"])
def test_unsupported_objects_raise_type_error(value):
    with pytest.raises(TypeError, match="cannot pass a Python object of type|NumPy scalars"):
        run(IDENTITY, value)


def test_python_complex_numbers_stay_python_complex_numbers():
    # Held as a weak complex128 value; arithmetic with numbers keeps it one.
    r = run(TWICE, 1 + 2j)
    assert type(r) is complex and r == 2 + 4j
    r = run(TWICE, np.complex128(1 + 2j))
    assert type(r) is np.complex128 and r == 2 + 4j
    r = run("define(f, x, y, x * y) f", np.ones(2, np.float32), 1j)
    assert r.dtype == np.complex64


def test_self_referential_list_is_refused():
    a = [1]
    a.append(a)
    with pytest.raises(ValueError, match="nested deeper than"):
        run(IDENTITY, a)


# --------------------------------------------------------------- conversions out


def test_results_are_numpy_arrays_of_the_right_dtype():
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert_same(run("define(f, x, x * 2) f", x), x * 2)
    assert_same(run("define(f, x, x / 2) f", x), x / 2)
    assert_same(run("define(f, x, x > 2) f", x), x > 2)
    assert_same(run('define(f, x, astype(x, "float32")) f', x), x.astype(np.float32))


def test_zero_d_results_are_numpy_scalars():
    x = np.arange(6, dtype=np.float64)
    r = run("define(f, x, sum(x)) f", x)
    assert type(r) is np.float64 and r == 15.0
    r = run("define(f, x, sum(x)) f", x.astype(np.float32))
    assert type(r) is np.float32
    r = run("define(f, x, sum(x)) f", x.astype(np.int64))
    assert type(r) is np.int64
    r = run("define(f, x, all(x > -1)) f", x)
    assert type(r) is np.bool_ and r


def test_lists_and_dicts_of_arrays_come_back_as_python_containers():
    x = np.arange(3.0)
    r = run('define(f, x, [x * 2, dict("a", x + 1), 3]) f', x)
    assert isinstance(r, list) and len(r) == 3
    assert_same(r[0], x * 2)
    assert_same(r[1]["a"], x + 1)
    assert r[2] == 3


def test_computed_results_are_writable_and_not_shared():
    x = np.arange(4.0)
    r = run(TWICE, x)
    assert r.flags.writeable and not np.shares_memory(r, x)
    r[0] = 100.0
    assert x[0] == 0.0


def test_writing_into_a_result_cannot_change_the_program():
    p = _core.Program("[1.5, 2.5, 3.5]")
    r = p.run([])
    r[0] = -1.0
    assert_same(p.run([]), np.array([1.5, 2.5, 3.5]))


def test_functions_come_back_callable_and_can_be_passed_back():
    g = run("define(g, a, b=2, a * b) [g]")[0]
    assert repr(g) == "<tessera function g>"
    assert g(3) == 6 and g(3, b=5) == 15
    assert_same(g(np.arange(3)), np.arange(3) * 2)
    assert run("define(apply, h, v, h(v)) apply", g, 4) == 8
    with pytest.raises(ValueError, match=r"\[g\]"):
        g()


# ------------------------------------------------------------------- lifetimes


def test_input_buffer_is_kept_alive_by_the_result_and_then_released():
    x = np.arange(1000.0)
    ref = weakref.ref(x)
    r = run(IDENTITY, x)
    del x
    gc.collect()
    assert ref() is not None  # the result views the input's buffer
    np.testing.assert_array_equal(r, np.arange(1000.0))
    del r
    settle()
    assert ref() is None


def test_runs_do_not_keep_their_arguments():
    settle()
    x = np.arange(10.0)
    ref = weakref.ref(x)
    for text in [TWICE, "define(f, x, block(define(y, x * 2), y)) f", "argv", "lambda(x, x + 1)"]:
        p = _core.Program(text)
        for _ in range(20):
            p.run([x])
    del x
    settle()
    assert ref() is None
    assert _core._wrapped_buffer_count() == 0


def test_output_outlives_the_program():
    p = _core.Program(TWICE)
    r = p.run([np.arange(5.0)])
    del p
    gc.collect()
    np.testing.assert_array_equal(r, np.arange(5.0) * 2)
    r2 = r.copy()
    del r
    gc.collect()
    np.testing.assert_array_equal(r2, np.arange(5.0) * 2)


# ------------------------------------------------------------------ exceptions


def test_compile_error_is_a_value_error_with_position():
    assert tessera.CompileError is _core.CompileError
    assert issubclass(_core.CompileError, ValueError)
    with pytest.raises(_core.CompileError, match=r"\[parse\] .* \(at model\.tsl:2:\d+\)"):
        _core.Program("define(x, 1)\ndefine(", "model.tsl")
    with pytest.raises(_core.CompileError, match=r"unknown function 'nosuch' \(at <jit>:1:1\)"):
        _core.Program("nosuch(1)")
    with pytest.raises(_core.CompileError, match="unknown primitive 'nosuch'"):
        _core.call_primitive("nosuch", [], {})


def test_line_directive_names_the_python_file():
    text = '#line 12 "model.py"\ndefine(f, x, block(\n#line 14 "model.py"\nx + [1, 2])) f'
    with pytest.raises(
        ValueError, match=r"\[add\] operands could not be broadcast.*\(at model\.py:14\)"
    ):
        _core.Program(text).run([np.ones(3)])


@pytest.mark.parametrize(
    "text, args, exc, message",
    [
        (
            'add("a", 1)',
            [],
            TypeError,
            r'\[add\] can only concatenate str \(not "int"\) to str \(at t\.tsl:1:1\)',
        ),
        (
            "define(f, x, x + [1, 2]) f",
            [np.ones(3)],
            ValueError,
            r"\[add\] operands could not be broadcast together: shapes \(3,\) and \(2,\) \(at t\.tsl:1:16\)",
        ),
        (
            "define(f, x, reshape(x, [4])) f",
            [np.zeros(6)],
            ValueError,
            r"\[reshape\] cannot reshape array of size 6 into shape \(4,\)",
        ),
        (
            "define(f, x,\n  x[7]) f",
            [np.zeros((2, 2))],
            IndexError,
            r"\[getitem\] index 7 is out of bounds for axis 0 with size 2 \(at t\.tsl:2:\d+\)",
        ),
        (
            "zeros([100000, 100000, 100000])",
            [],
            MemoryError,
            r"\[zeros\] cannot allocate an array of shape \(100000, 100000, 100000\)",
        ),
        ("zeros([2 ** 40, 2 ** 40])", [], MemoryError, r"\[zeros\] array is too big"),
        (
            "define(f, n, f(n + 1)) f(0)",
            [],
            RecursionError,
            r"\[f\] maximum call depth of 4000 exceeded",
        ),
        ("define(f, x, x) f", [1, 2], ValueError, r"\[f\] takes 1 argument but 2 were given"),
    ],
)
def test_errors_map_to_python_exceptions_with_their_messages(text, args, exc, message):
    with pytest.raises(exc, match=message) as info:
        _core.Program(text, "t.tsl").run(args)
    assert type(info.value) is exc


def test_call_primitive_errors():
    with pytest.raises(TypeError, match=r"\[sum\]"):
        _core.call_primitive("sum", ["abc"], {})
    with pytest.raises(IndexError, match=r"axis 3 is out of bounds"):
        _core.call_primitive("sum", [np.ones((2, 2))], {"axis": 3})
    with pytest.raises(MemoryError):
        _core.call_primitive("ones", [[2**31, 2**31, 2**31]], {})
    with pytest.raises(ValueError, match="unexpected named argument|no parameter"):
        _core.call_primitive("sum", [np.ones(2)], {"nosuch": 1})


def test_huge_shapes_are_memory_errors_not_crashes():
    for shape in ([2**62], [2**32, 2**32], [10**6, 10**6, 10**6]):
        with pytest.raises(MemoryError):
            _core.call_primitive("zeros", [shape], {})
    with pytest.raises(MemoryError):
        run("define(f, n, ones([n, n])) f", 10**7)


def test_no_crash_on_odd_arguments_to_any_primitive():
    """Every primitive (but I/O and print) with odd arguments raises a Python
    exception or returns; none crashes the process."""
    odd = [
        [],
        [None],
        ["text"],
        [np.zeros((0,))],
        [np.zeros((0, 3))],
        [np.array(1.0)],
        [np.ones((2, 3)), np.ones((4,))],
        [np.array([True, False]), -1],
        [np.ones((2, 2), np.float32), [1, 2, 3]],
        [np.arange(4), np.arange(4), np.arange(4)],
        [2**62, 2**62],
    ]
    skipped = {"io", "control"}
    names = [name for name, _, family, _ in _core.primitives() if family not in skipped]
    assert len(names) > 100
    for name in names:
        for args in odd:
            try:
                _core.call_primitive(name, args, {})
            except (ValueError, TypeError, IndexError, MemoryError, RuntimeError, OverflowError):
                pass


# ---------------------------------------------------------- primitives, threads


def test_primitives_list_every_primitive_with_signature_family_help():
    prims = _core.primitives()
    assert prims == tessera.ops()
    names = [p[0] for p in prims]
    assert names == sorted(names) and len(set(names)) == len(names)
    table = {p[0]: p for p in prims}
    assert table["add"][1] == "add(x, y)" and table["add"][2] == "arithmetic"
    assert table["sum"][1].startswith("sum(x, axis=")
    families = {p[2] for p in prims}
    assert {"arithmetic", "statistics", "matrix", "shape", "indexing", "creation"} <= families
    assert all(isinstance(s, str) and s for p in prims for s in p)


def test_num_threads_can_be_changed(threads):
    assert _core.num_threads() == threads
    assert tessera.num_threads() == threads
    x = np.arange(100000.0)
    assert_same(run(TWICE, x), x * 2)
    with pytest.raises(ValueError, match="at least 1"):
        _core.set_num_threads(0)


def test_program_counters_and_tree():
    p = _core.Program("define(f, x, sum(x * 2)) f", "c.tsl")
    p.run([np.ones(4)])
    dot = p.tree_dot()
    assert dot.startswith("digraph tessera") and "multiply" in dot
    csv = p.counters_csv().splitlines()
    assert csv[0] == "name,position,evaluations,total_ns,mean_ns,execution"
    rows = {line.split(",")[0]: line.split(",") for line in csv[1:]}
    assert rows["sum"][2] == "1"
    p.reset_counters()
    rows = {line.split(",")[0]: line.split(",") for line in p.counters_csv().splitlines()[1:]}
    assert rows["sum"][2] == "0"


def test_two_python_threads_get_correct_answers(threads):
    shared = _core.Program("define(f, x, k, sum(x * k, axis=0)) f")
    errors = []
    start = threading.Barrier(2)

    def worker(seed, own_text):
        try:
            own = _core.Program(own_text)
            rng = np.random.default_rng(seed)
            start.wait()
            for i in range(200):
                x = rng.standard_normal((50, 8))
                r = shared.run([x, i])
                np.testing.assert_allclose(r, (x * i).sum(axis=0), rtol=1e-12, atol=1e-12)
                r = own.run([x])
                np.testing.assert_allclose(r, x @ x.T, rtol=1e-12, atol=1e-12)
                m = _core.call_primitive("max", [x], {"axis": 1})
                np.testing.assert_array_equal(m, x.max(axis=1))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    ts = [
        threading.Thread(target=worker, args=(1, "define(g, x, x @ transpose(x)) g")),
        threading.Thread(target=worker, args=(2, "define(h, x, matmul(x, transpose(x))) h")),
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_gil_is_released_while_a_program_runs():
    """A Python thread keeps running while another waits for a long program."""
    p = _core.Program("define(f, n, block(define(i, 0), while(i < n, store(i, i + 1)), i)) f")
    done = threading.Event()
    ticks = []

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    t0 = time.perf_counter()
    # 200 million turns: about 0.2 s compiled to native code (1 ns a turn),
    # more on the interpreter.
    assert p.run([200000000]) == 200000000
    elapsed = time.perf_counter() - t0
    done.set()
    t.join()
    assert elapsed > 0.02  # long enough to measure
    assert len(ticks) >= 5


def test_changing_threads_while_other_threads_run_programs():
    before = _core.num_threads()
    p = _core.Program("define(f, x, sum(x * 2)) f")
    x = np.arange(1000.0)
    errors = []

    def runner():
        try:
            for _ in range(1000):
                assert p.run([x]) == x.sum() * 2
                assert _core.call_primitive("sum", [x], {}) == x.sum()
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    def switcher():
        try:
            for i in range(200):
                _core.set_num_threads(1 + i % 2)
        except BaseException as e:
            errors.append(e)

    ts = [threading.Thread(target=f) for f in (runner, runner, switcher)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    _core.set_num_threads(before)
    assert not errors, errors


@pytest.mark.parametrize("arch", [None, "3"])
def test_blas_survives_threadpoolctl_queries(arch):
    # BLIS 0.9 aborts when its architecture is queried before it is
    # initialised with BLIS_ARCH_TYPE set (tessera sets it on CPUs BLIS does
    # not know); threadpoolctl, which scikit-learn imports, queries it.
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("BLIS_ARCH_TYPE", None)
    if arch is not None:
        env["BLIS_ARCH_TYPE"] = arch
    code = (
        "import tessera, numpy as np, threadpoolctl\n"
        "info = threadpoolctl.threadpool_info()\n"
        "assert any(i['internal_api'] == 'blis' for i in info), info\n"
        "a = np.arange(16.0).reshape(4, 4)\n"
        "f = tessera.Program('define(f, a, a @ a) f')\n"
        "assert np.allclose(f.run([a]), a @ a)\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
