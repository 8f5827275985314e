"""The shared helper of the jit tests: run a function through ``tessera.jit``
and as plain NumPy, and compare type, shape, dtype and values."""

import copy
import hashlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import tessera

_GEN_DIR = tempfile.mkdtemp(prefix="tessera_jit_gen_")
_generated: dict = {}


def numpy_fn(expr: str, params: str = "x"):
    """A plain function ``def f(params): return expr`` written to a real file
    (the translator reads sources), so tables of expressions can be tested."""
    return numpy_body(f"return {expr}", params)


def numpy_body(body: str, params: str = "x"):
    """A plain function ``def f(params): body``; lines of ``body`` are
    separated by newlines (indentation is added)."""
    key = (body, params)
    if key not in _generated:
        lines = "".join("    " + line + "\n" for line in body.split("\n"))
        src = f"import numpy as np\n\n\ndef f({params}):\n{lines}"
        name = "gen_" + hashlib.sha1(src.encode()).hexdigest()[:12]
        path = os.path.join(_GEN_DIR, name + ".py")
        with open(path, "w") as fh:
            fh.write(src)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _generated[key] = mod.f
    return _generated[key]


def _kind(v):
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    if isinstance(v, (complex, np.complexfloating)):
        return "complex"
    return type(v).__name__


# Half precision carries 11 significant bits (bfloat16 8): a tolerance tighter
# than one rounding of the result would compare NumPy's rounding order, not
# tessera's values.
_MIN_RTOL = {np.dtype(np.float16): 1e-3, np.dtype(np.complex64): 1e-6}


# The dtypes tessera stores but does not compute in (tessera/core/dtype.hpp);
# not int32: np.linalg.lstsq's rank (np.int32) is a Python int in tessera.
_STORAGE_DTYPES = {"int8", "int16", "uint8", "uint16", "uint32", "uint64", "float16",
                   "complex64", "complex128"}


def _rtol_for(dtype, rtol):
    return max(rtol, _MIN_RTOL.get(np.dtype(dtype), 0.0))


# The exception kinds tessera must mirror when NumPy raises one of them or a
# subclass of exactly one (NumPy's casting errors are TypeErrors); others,
# and AxisError (an IndexError and a ValueError), need only be some exception.
_MIRRORED = (OverflowError, IndexError, TypeError, ValueError)


def _mirrored_kind(e):
    kinds = [kind for kind in _MIRRORED if isinstance(e, kind)]
    return kinds[0] if len(kinds) == 1 else Exception


def assert_identical(got, expected, path="result"):
    """Asserts ``got`` equals ``expected`` exactly, with the same type at every
    level (int, float, bool, np.float64, ... items of lists and tuples; arrays
    of the same dtype): what the native list tests compare with Python."""
    assert type(got) is type(expected), (path, got, expected)
    if isinstance(expected, np.ndarray):
        assert got.dtype == expected.dtype and np.array_equal(got, expected), (path, got, expected)
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), (path, got, expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert_identical(g, e, f"{path}[{k}]")
    else:
        assert got == expected, (path, got, expected)


def assert_same(got, expected, rtol=1e-6, atol=1e-12, path="result"):
    """Asserts ``got`` (from tessera) matches ``expected`` (from NumPy)."""
    if isinstance(expected, np.ndarray) and expected.ndim == 0 and isinstance(got, np.generic):
        # tessera returns every 0-d result as a NumPy scalar (as NumPy's ufuncs
        # and reductions do); NumPy keeps some 0-d arrays (x.T, astype, where).
        assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != {expected.dtype}"
        expected = expected[()]
    if isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray), f"{path}: expected an ndarray, got {type(got)}"
        assert got.shape == expected.shape, f"{path}: shape {got.shape} != {expected.shape}"
        assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != {expected.dtype}"
        if expected.dtype.kind in "fc":
            np.testing.assert_allclose(got, expected, rtol=_rtol_for(expected.dtype, rtol),
                                       atol=atol, equal_nan=True, err_msg=path)
        else:
            np.testing.assert_array_equal(got, expected, err_msg=path)
        return
    if isinstance(expected, (tuple, list)):
        assert type(got) is type(expected), f"{path}: {type(got)} != {type(expected)}"
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, rtol, atol, f"{path}[{i}]")
        return
    if expected is None:
        assert got is None, f"{path}: expected None, got {got!r}"
        return
    if isinstance(expected, str):
        assert got == expected, f"{path}: {got!r} != {expected!r}"
        return
    # Scalars: the same kind (bool/int/float/complex); NumPy scalars also the
    # same dtype, and one of a storage dtype (np.int8, np.float16, complex)
    # must come back as a NumPy scalar (a Python int would lose its dtype).
    assert _kind(got) == _kind(expected), f"{path}: {got!r} ({type(got)}) vs {expected!r}"
    if isinstance(expected, np.generic) and expected.dtype.name in _STORAGE_DTYPES:
        assert isinstance(got, np.generic), f"{path}: {got!r} ({type(got)}) is no NumPy scalar"
    if isinstance(expected, np.generic) and isinstance(got, np.generic):
        assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != {expected.dtype}"
    if _kind(expected) in ("float", "complex"):
        dt = expected.dtype if isinstance(expected, np.generic) else np.float64
        np.testing.assert_allclose(got, expected, rtol=_rtol_for(dt, rtol), atol=atol,
                                   equal_nan=True, err_msg=path)
    else:
        assert got == expected, f"{path}: {got!r} != {expected!r}"


def check(f, *args, rtol=1e-6, atol=1e-12, **kwargs):
    """Runs ``f`` through ``tessera.jit`` and as plain Python/NumPy, each on
    its own copies of the arguments, and compares the results *and every
    argument afterwards* (what the function wrote into its arrays, through
    views too, must be what NumPy leaves there).  When NumPy raises, tessera
    must raise the same kind of exception.  Returns the jit result."""
    np_args, np_kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    jit_args, jit_kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    try:
        expected = f(*np_args, **np_kwargs)
    except Exception as e:  # noqa: BLE001 - any NumPy error must be mirrored
        kind = _mirrored_kind(e)
        with pytest.raises(kind):
            tessera.jit(f)(*jit_args, **jit_kwargs)
        return None
    got = tessera.jit(f)(*jit_args, **jit_kwargs)
    assert_same(got, expected, rtol=rtol, atol=atol)
    for i, (g, e) in enumerate(zip(jit_args, np_args)):
        if _holds_array(e):
            assert_same(g, e, rtol=rtol, atol=atol, path=f"argument {i} after the call")
    for k in np_kwargs:
        if _holds_array(np_kwargs[k]):
            assert_same(jit_kwargs[k], np_kwargs[k], rtol=rtol, atol=atol,
                        path=f"argument {k!r} after the call")
    return got


def _holds_array(v) -> bool:
    if isinstance(v, np.ndarray):
        return True
    if isinstance(v, (list, tuple)):
        return any(_holds_array(x) for x in v)
    return False


def run_script(template: str, **env):
    """Runs a test's script in a fresh Python (``template`` with ``{here}``, this
    folder, to import the test module from) with ``env`` added to the
    environment; returns (stdout, stderr). The native-loop tests run the same
    script with the generator on, off and with the general evaluation."""
    code = template.format(here=os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


def cases_script(module: str, cases: str = "t.CASES") -> str:
    """A run_script template printing, at 1 and 2 threads, each case's result
    (or exception) and its arguments afterwards: ``cases`` is a list of
    (function, args) pairs of the test module ``module`` (imported as t)."""
    return f"""
import copy, sys, numpy as np, tessera, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {{here!r}})
import {module} as t
for threads in (1, 2):
    for f, args in {cases}:
        a = copy.deepcopy(args)
        g = tessera.jit(f, threads=threads)
        try:
            print(f.__name__, repr(g(*a)), repr(a))
        except Exception as e:
            print(f.__name__, type(e).__name__, str(e), repr(a))
"""


# The environments of the three paths a jit function's loops can take.
PATHS = {"native": {"TESSERA_FAST_LOOPS": "debug", "TESSERA_NATIVE": "1"},
         "interpreter": {"TESSERA_FAST_LOOPS": "1", "TESSERA_NATIVE": "0"},
         "general": {"TESSERA_FAST_LOOPS": "0"}}


def run_json_on_every_path(template: str) -> dict:
    """{path: (the JSON the script printed, its stderr)} for run_script(template) with
    native code, the loop interpreter and the general evaluation (PATHS)."""
    out = {}
    for mode, env in PATHS.items():
        stdout, stderr = run_script(template, **env)
        out[mode] = (json.loads(stdout), stderr)
    return out


def run_on_every_path(template: str, **env) -> dict:
    """{path: (stdout, stderr)} of run_script(template) on each of the three PATHS,
    with ``env`` added (``TESSERA_CACHE_DIR="0"``: loops compiled, not loaded)."""
    return {mode: run_script(template, **{**penv, **env}) for mode, penv in PATHS.items()}


def every_path_prints_the_same(module: str) -> tuple:
    """Runs cases_script(module)'s cases with native code, the loop interpreter and the
    general evaluation (loops compiled, not loaded from the cache), asserts the three print
    the same, and returns what they printed and the native run's debug log."""
    out = run_on_every_path(cases_script(module), TESSERA_CACHE_DIR="0")
    native, log = out["native"]
    assert native == out["interpreter"][0] == out["general"][0]
    return native, log


def loop_log_lines(log: str, f, text: str) -> list:
    """The lines of a ``TESSERA_FAST_LOOPS=debug`` log that say ``text`` of a loop
    written in function ``f`` (by its file and the lines of its source)."""
    body, first = inspect.getsourcelines(f)
    where = os.path.basename(f.__code__.co_filename)
    own = {f"{where}:{first + k}:" for k in range(len(body))}
    return [ln for ln in log.splitlines() if text in ln and any(w in ln for w in own)]


def assert_loops_end_natively(log: str, funcs, some=()) -> None:
    """Each loop of the functions in ``funcs`` ran native code that ended natively on
    every call (status 0; 5: a partial code's loop completed, then 0), never back to
    the interpreter (4: at a call's start, 2: mid-turn), per the ``TESSERA_FAST_LOOPS=
    debug`` ``log``; each loop of the functions in ``some`` did at least once (its
    other calls bail where NumPy wraps or raises)."""
    for f in funcs:
        ran = loop_log_lines(log, f, "native code returned")
        assert ran, (f.__name__, log)
        assert all("returned 0 " in line or "returned 5 " in line for line in ran), \
            (f.__name__, ran)
    for f in some:
        ran = loop_log_lines(log, f, "native code returned")
        assert any("returned 0 " in line for line in ran), (f.__name__, ran)


def same_as_python(f, *args):
    """f under tessera.jit and as plain Python on copies of args: the results and
    every argument afterwards (lists and dicts included) must be equal."""
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    expected = f(*theirs)
    got = tessera.jit(f)(*mine)
    assert got == expected and type(got) is type(expected), (got, expected)
    assert mine == theirs, (mine, theirs)
    return got
