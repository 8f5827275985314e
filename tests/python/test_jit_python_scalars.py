"""int(), float() and bool() of NumPy scalars under @tessera.jit give Python's
int, float and bool, as Python does (int(np.int64(3)) is the int 3, not
np.int64(3)): the type and the value, in straight code and in loops, on the
native code, the loop interpreter and the general evaluation alike."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tessera

KERNELS = textwrap.dedent("""
    import numpy as np

    def element(a, i):
        x = a[i]
        return int(x), float(x), bool(x)

    def summed(a):
        s = 0
        for i in range(len(a)):
            s += int(a[i] * 3)
        return s

    def binned(x, n):
        counts = np.zeros(n, dtype=np.int64)
        for i in range(x.shape[0]):
            counts[int(x[i] * n)] += 1
        return counts

    def floats(a):
        t = 0.0
        for v in a:
            t = t + float(v)
        return t
""")


_MODULE = {}


def _kernels():
    """The kernels as a module of a file of their own (tessera.jit reads a
    function's source from its file)."""
    if not _MODULE:
        import importlib.util
        import tempfile
        folder = tempfile.mkdtemp(prefix="tessera-scalars-")
        path = os.path.join(folder, "kernels.py")
        with open(path, "w") as f:
            f.write(KERNELS)
        spec = importlib.util.spec_from_file_location("tessera_scalar_kernels", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULE.update(vars(module))
    return _MODULE


def _same(got, want):
    """Equal values and the same Python types, item by item."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    else:
        assert type(got) is type(want), (got, type(got), want, type(want))
        assert got == want, (got, want)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float64", "float32", "bool"])
def test_int_float_bool_of_an_element_are_python_numbers(dtype):
    ns = _kernels()
    a = np.array([0, 1, 2, 3, 5], dtype=dtype)
    for i in range(len(a)):
        _same(tessera.jit(ns["element"])(a, i), ns["element"](a, i))


def test_loops_give_python_numbers():
    ns = _kernels()
    a = np.arange(40, dtype=np.int64)
    x = np.random.default_rng(0).random(500)
    _same(tessera.jit(ns["summed"])(a), ns["summed"](a))
    _same(tessera.jit(ns["summed"])(x), ns["summed"](x))
    _same(tessera.jit(ns["binned"])(x, 7), ns["binned"](x, 7))
    _same(tessera.jit(ns["floats"])(np.float32([0.5, 1.25, 3])), ns["floats"](np.float32([0.5, 1.25, 3])))


def test_int_of_an_array_is_numpys_type_error():
    ns = _kernels()
    with pytest.raises(TypeError, match="only 0-dimensional arrays can be converted"):
        tessera.jit(ns["element"])(np.ones((3, 2)), 0)


SCRIPT = KERNELS + textwrap.dedent("""
    import tessera
    x = np.random.default_rng(1).random(300)
    a = np.arange(30)
    for name, args in (("summed", (a,)), ("summed", (x,)), ("binned", (x, 5)), ("floats", (x,)),
                       ("element", (a, 4))):
        r = tessera.jit(globals()[name])(*args)
        print(name, repr(r.tolist() if isinstance(r, np.ndarray) else r),
              type(r).__name__)
""")


def test_every_path_prints_the_same(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(SCRIPT)
    outs = {}
    for label, extra in (("default", {"TESSERA_FAST_LOOPS": "debug"}), ("interpreter", {"TESSERA_NATIVE": "0"}),
                         ("general", {"TESSERA_FAST_LOOPS": "0"})):
        env = dict(os.environ, TESSERA_CACHE_DIR=str(tmp_path / "cache"), **extra)
        p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env,
                           timeout=300)
        assert p.returncode == 0, p.stderr
        outs[label] = (p.stdout, p.stderr)
    python = subprocess.run([sys.executable, "-c", SCRIPT.replace(
        "tessera.jit(globals()[name])", "globals()[name]")], capture_output=True, text=True,
        timeout=300, env=dict(os.environ))
    assert python.returncode == 0, python.stderr
    for label, (out, _) in outs.items():
        assert out == python.stdout, (label, out, python.stdout)
    # int(x[i] * n) as an index keeps the loop on native code
    assert "kernels.py:22: native code compiled" in outs["default"][1], outs["default"][1]
